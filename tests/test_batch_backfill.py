"""export-batch for every request kind (contract §6.1) and for the source-level
reconciliations, on the domain alone: the job's own rows go in, and the answers
built from the exported prompt come back as the slot's next, current attempt."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.assets import current_fingerprints
from domain.batch.export import ExportConfig, build_export_manifest, export_source
from domain.batch.providers import PROVIDERS, RequestSettings
from domain.reprocess import RunConfig, process_source

SOURCE = "crd3:B"
TRANSCRIPT = orjson.dumps({
    "source_id": SOURCE,
    "units": [{"unit_id": u, "speaker": "MATT", "text": f"line {u}: Pike meets Kima."} for u in (8, 2, 5, 1, 9, 4)],
    "chunks": [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [8, 2, 5]},
               {"chunk_id": "x-2", "kind": "extraction", "unit_ids": [1, 9, 4]}],
})
OLD_PROMPT = "sha256:" + "e" * 64


def cand(cid, family, chunk, attempt, response, *, stale=False):
    prompt, schema = current_fingerprints(family)
    return orjson.dumps({
        "candidate_id": cid, "family": family, "source_id": SOURCE, "chunk_id": chunk, "attempt": attempt,
        "producer": {"provider": "simulated", "model": "m"}, "prompt_fingerprint": OLD_PROMPT if stale else prompt,
        "schema_fingerprint": schema, "received_at": "2026-10-01T12:00:00Z",
        "raw_response": response if isinstance(response, str) else orjson.dumps(response).decode()})


def npc(name, start, end, aliases=()):
    return {"name": name, "aliases": list(aliases), "description": f"{name}, met on the road.",
            "evidence": [{"start_unit_id": start, "end_unit_id": end}]}


ARCHIVE = [
    cand("c-r1", "npc-registry", "x-1", 1, {"npcs": [npc("Kima", 5, 5), npc("Pike", 8, 2)]}),
    cand("c-r2", "npc-registry", "x-2", 1, {"npcs": [npc("Kima of Vord", 1, 9)]}),
    cand("c-k1", "npc-reconciliation", "*", 1, "not json"),  # fails: a retry request
    cand("c-s1", "spells", "x-1", 1, {"spells": []}, stale=True),  # passes, stale: a refresh request
]


def config(**changes) -> ExportConfig:
    return ExportConfig(**{"provider_name": "openai-chat", "settings": RequestSettings("m", 100),
                           "max_bytes_per_file": 10**8, **changes})


@pytest.fixture(scope="module")
def run1():
    return process_source(SOURCE, [TRANSCRIPT], ARCHIVE, RunConfig(refresh_stale=True))


def registry_lines(result):
    return [orjson.dumps(a) for a in result.artifacts if a["family"] == "npc-registry"]


def user_texts(row) -> list[str]:
    line = orjson.loads(row["line"])
    return [part["text"] for part in line["body"]["messages"][1]["content"]]


def test_run1_plans_a_retry_for_the_reconciliation_and_a_refresh_for_the_stale_slot(run1):
    assert sorted((r["family"], r["kind"]) for r in run1.retry_requests) == [
        ("npc-reconciliation", "retry"), ("spells", "refresh")]


def test_every_request_kind_and_the_reconciliation_become_lines(run1):
    requests = [orjson.dumps(r) for r in run1.retry_requests]
    rows, dead, counts = export_source(SOURCE, [TRANSCRIPT], requests, config(), registry_lines(run1))
    assert dead == [] and len(rows) == 2
    assert counts["shaped/retry"] == counts["shaped/refresh"] == 1 and counts["registries_used"] == 2
    by_family = {row["index"]["family"]: row for row in rows}
    refresh = by_family["spells"]
    assert refresh["index"]["kind"] == "refresh" and len(user_texts(refresh)) == 1  # no feedback part
    assert "validator_feedback" not in refresh["line"].decode()
    reconciliation = by_family["npc-reconciliation"]
    texts = user_texts(reconciliation)
    assert len(texts) == 2 and "<validator_feedback>" in texts[1]
    listed = [orjson.loads(line) for line in texts[0].splitlines()[2:]]
    assert [e["label"] for e in listed] == ["E1", "E2", "E3"]
    assert [e["name"] for e in listed] == ["Pike", "Kima", "Kima of Vord"]  # earliest evidence first (8, 5, 1)
    assert "x-1" not in texts[0] and SOURCE not in texts[0]


def test_an_answer_to_the_exported_entry_list_is_accepted_by_the_next_run(run1):
    """The labels the export shows are the labels the job checks: the loop closes."""
    requests = [orjson.dumps(r) for r in run1.retry_requests]
    rows, _, _ = export_source(SOURCE, [TRANSCRIPT], requests, config(), registry_lines(run1))
    by_family = {row["index"]["family"]: row for row in rows}
    listed = [orjson.loads(line) for line in user_texts(by_family["npc-reconciliation"])[0].splitlines()[2:]]
    kima = [e["label"] for e in listed if e["name"].startswith("Kima")]
    pike = [e["label"] for e in listed if e["name"] == "Pike"]
    answer = {"entities": [
        {"name": "Kima", "aliases": ["Kima of Vord"], "description": "A halfling paladin.", "member_labels": kima},
        {"name": "Pike", "aliases": [], "description": "A gnome cleric.", "member_labels": pike}]}
    index = by_family["npc-reconciliation"]["index"]
    refresh_index = by_family["spells"]["index"]
    answers = [cand("c-k2", "npc-reconciliation", "*", index["attempt"], answer),
               cand("c-s2", "spells", "x-1", refresh_index["attempt"], {"spells": []})]
    run2 = process_source(SOURCE, [TRANSCRIPT], ARCHIVE + answers, RunConfig(refresh_stale=True))
    accepted = {a["family"]: a["provenance"]["candidate_id"] for a in run2.artifacts}
    assert accepted["npc-reconciliation"] == "c-k2"
    assert accepted["spells"] == "c-s2"  # the current attempt wins over the earlier stale one
    assert run2.retry_requests == ()  # nothing left to retry or refresh


def test_without_registry_artifacts_a_reconciliation_request_is_a_dead_letter_with_a_reason(run1):
    requests = [orjson.dumps(r) for r in run1.retry_requests]
    rows, dead, counts = export_source(SOURCE, [TRANSCRIPT], requests, config())
    assert [row["index"]["family"] for row in rows] == ["spells"]
    assert len(dead) == 1 and "none were found" in dead[0]["reason"] and "--registries" in dead[0]["reason"]
    assert counts["dead_letters/retry_requests"] == 1


def test_bad_registry_artifacts_are_dead_letters_of_their_own_input(run1):
    requests = [orjson.dumps(r) for r in run1.retry_requests]
    spells = next(orjson.dumps(a) for a in run1.artifacts if a["family"] == "spells")
    lines = registry_lines(run1) + [b"{oops", spells]
    rows, dead, counts = export_source(SOURCE, [TRANSCRIPT], requests, config(), lines)
    assert len(rows) == 2 and counts["dead_letters/registries"] == 2
    assert {d["input"] for d in dead} == {"registries"}
    assert any("not a chunk registry" in d["reason"] for d in dead)


def test_kinds_filter_and_rows_of_older_runs_without_kind(run1):
    requests = [orjson.dumps(r) for r in run1.retry_requests]
    rows, _, counts = export_source(SOURCE, [TRANSCRIPT], requests, config(kinds=frozenset({"refresh"})),
                                    registry_lines(run1))
    assert [row["index"]["kind"] for row in rows] == ["refresh"] and counts["filtered"] == 1
    retry = next(r for r in run1.retry_requests if r["kind"] == "retry")
    old = {k: v for k, v in retry.items() if k != "kind"}
    rows, dead, _ = export_source(SOURCE, [TRANSCRIPT], [orjson.dumps(old)], config(), registry_lines(run1))
    assert dead == [] and rows[0]["index"]["kind"] == "retry"


def test_the_export_manifest_counts_lines_per_kind(run1):
    requests = [orjson.dumps(r) for r in run1.retry_requests]
    _, _, counts = export_source(SOURCE, [TRANSCRIPT], requests, config(), registry_lines(run1))
    manifest = build_export_manifest({**counts, "retry_requests_in": 2}, [{"requests_file": "f", "lines": 2}],
                                     options={"provider": "openai-chat", "model": "m", "max_output_tokens": 100}, runner="test")
    assert manifest["exported_by_kind"] == {"retry": 1, "refresh": 1, "judge": 0}
    assert manifest["conservation"]["holds"] and manifest["inputs"]["registry_artifacts_used"] == 2


def test_the_import_ledger_counts_imported_requests_per_kind():
    from domain.batch.ledger import ImportLedger, parse_index_row
    from domain.batch.providers import PROVIDERS

    fp = "sha256:" + "a" * 64
    rows = [orjson.dumps({"line": n, "request_id": f"r-{n}", "kind": kind, "wire_id": f"r-{n}", "family": "spells",
                          "source_id": SOURCE, "chunk_id": "x-1", "attempt": 2, "provider": "anthropic", "model": "m",
                          "prompt_fingerprint": fp, "schema_fingerprint": fp, "line_sha256": "0" * 64})
            for n, kind in ((1, "refresh"), (2, "refresh"), (3, "retry"))]
    exported = [parse_index_row(raw, "index") for raw in rows]
    legacy = orjson.loads(rows[2])
    del legacy["kind"]
    assert parse_index_row(orjson.dumps(legacy), "index").kind == "retry"
    ledger = ImportLedger(PROVIDERS["anthropic"], exported)
    for rid in ("r-1", "r-3"):
        message = {"id": "msg", "type": "message", "role": "assistant", "model": "m", "content": [{"type": "text", "text": "{}"}],
                   "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
        _, candidate = ledger.add("f", 1, orjson.dumps({"custom_id": rid, "result": {"type": "succeeded", "message": message}}))
        assert candidate["prompt_fingerprint"] == fp  # what was sent: current when exported
    assert ledger.summary()["imported_by_kind"] == {"refresh": 1, "retry": 1}


def test_export_finds_the_runs_registry_artifacts_beside_its_retry_requests():
    from pipelines.batch_export import parser, parse_kinds, registries_glob

    base = ["--transcripts", "t", "--provider", "openai-chat", "--model", "m", "--output", "o"]
    args = parser().parse_args(["--retry-requests", "gs://b/out/run1/retry_requests/part-*", *base])
    assert registries_glob(args) == "gs://b/out/run1/artifacts/*-registry/part-*"
    args = parser().parse_args(["--retry-requests", "rows/*.jsonl", *base])
    assert registries_glob(args) is None
    args = parser().parse_args(["--retry-requests", "out/retry_requests/part-*", "--registries", "reg/*", *base])
    assert registries_glob(args) == "reg/*"
    assert parse_kinds("refresh, retry") == {"retry", "refresh"} and parse_kinds(None) is None
    from pipelines.options import OptionsError

    with pytest.raises(OptionsError, match="unknown kind"):
        parse_kinds("retry,fix")


# --- every request the job writes becomes a line, for every provider -------------------------

FAMILY_RESPONSES = {  # family -> (chunk, a passing response)
    "npc-registry": ("x-1", {"npcs": [npc("Kima", 5, 5), npc("Pike", 8, 2)]}),
    "spells": ("x-2", {"spells": []}),
    "combat-turns": ("x-1", {"turns": []}),
    "enemy-events": ("x-2", {"events": []}),
    "npc-occurrences": ("x-1", {"occurrences": [{"npc_name": "Kima", "kind": "present",
                                                 "evidence": [{"start_unit_id": 5, "end_unit_id": 5}]}]}),
    "npc-reconciliation": ("*", {"entities": [{"name": "Kima", "aliases": [], "description": "A paladin.",
                                               "member_labels": ["E2"]},
                                              {"name": "Pike", "aliases": [], "description": "A cleric.",
                                               "member_labels": ["E1"]}]}),
}


@settings(max_examples=40, deadline=None)
@given(plan=st.dictionaries(st.sampled_from(sorted(FAMILY_RESPONSES)),
                            st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=3), min_size=1),
       provider=st.sampled_from(sorted(PROVIDERS)))
def test_every_request_the_job_writes_is_exported_for_every_provider(plan, provider):
    """Generated slots (each attempt passing or not, current or stale), decided with --refresh-stale: each
    retry and refresh request, reconciliations included, becomes one line the provider's own types accept."""
    from test_batch_provider_shapes import check_request_line

    lines = []
    for family, attempts in sorted(plan.items()):
        chunk, response = FAMILY_RESPONSES[family]
        for n, (passes, stale) in enumerate(attempts, start=1):
            lines.append(cand(f"c-{family}-{n}", family, chunk, n, response if passes else "not json", stale=stale))
    result = process_source(SOURCE, [TRANSCRIPT], lines, RunConfig(refresh_stale=True))
    requests = [orjson.dumps(r) for r in result.retry_requests]
    settings_ = RequestSettings("m", 100)
    rows, dead, counts = export_source(SOURCE, [TRANSCRIPT], requests,
                                       config(provider_name=provider, settings=settings_), registry_lines(result))
    assert dead == [] and len(rows) == len(requests)
    assert {r["index"]["request_id"]: r["index"]["kind"] for r in rows} == {
        r["request_id"]: r["kind"] for r in result.retry_requests}
    for row in rows:
        assert check_request_line(provider, orjson.loads(row["line"])) == [], row["index"]


def test_the_default_registry_glob_names_every_chunk_registry_family_and_nothing_else():
    import fnmatch

    from domain.batch.export import REGISTRY_ARTIFACTS
    from domain.families import FAMILIES
    from domain.families.base import ROLE_REGISTRY

    matched = {key for key in FAMILIES if fnmatch.fnmatch(f"artifacts/{key}/part-00000-of-00001.avro", REGISTRY_ARTIFACTS)}
    assert matched == {key for key, spec in FAMILIES.items() if spec.role == ROLE_REGISTRY}
