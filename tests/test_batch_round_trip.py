"""The loop closed for every provider: the job's retry and refresh requests -> export-batch ->
a fake provider (files only) -> import-batch -> the job again, which accepts the
corrected slots; the ledger accounts for every request exported.

The fixture archive gets a few more failing slots so that one batch holds every
fate: corrected answers, a refusal, a truncation, a failure, an expired, a
cancelled and a missing request. The job runs with ``--refresh-stale``: the
fixture's spells slot x-1 rests only on attempts under an earlier prompt, so its
refresh request travels the same loop, and its current answer wins in run 2.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import fake_provider as fake
from domain.assets import current_fingerprints
from domain.batch.providers import PROVIDERS
from domain.families import FAMILIES
from fixture_archive import GOOD_FIREBALL, candidate, write_archive
from output_reader import read_outputs
from pipelines import batch_import, reprocess
from test_batch_provider_shapes import check_request_line

S1, S2 = "crd3:S1", "crd3:S2"
PROVIDER_NAMES = sorted(PROVIDERS)
GOOGLE = ("gemini", "vertex")  # their batch files carry no line for requests a batch never ran


def ev(start, end):
    return [{"start_unit_id": start, "end_unit_id": end}]


def turn(actor, start, end):
    return orjson.dumps({"turns": [{"round": 1, "actor_name": actor, "turn_kind": "attack", "target_names": ["goblin"],
                                    "evidence": ev(start, end)}]}).decode()


# The model's exact text per slot: whitespace, a line break and a curly apostrophe on purpose.
ANSWERS = {
    ("spells", S1, "x-3"): '{\n  "spells": [{"spell_name": "Shield", "caster_name": "Vex\u2019ahlia", "cast": {"level": 1, '
                           '"as_ritual": false, "target_names": []}, "evidence": [{"start_unit_id": 40, "end_unit_id": 30}]}]\n}',
    ("npc-occurrences", S1, "x-2"): orjson.dumps({"occurrences": [{"npc_name": "Grog", "kind": "present",
                                                                    "evidence": ev(20, 2)}]}).decode(),
    ("combat-turns", S1, "x-1"): turn("Grog", 10, 3),
    ("combat-turns", S1, "x-2"): turn("Grog", 20, 1),
    ("combat-turns", S1, "x-3"): turn("Vex", 50, 30),
    # The refresh of a slot whose attempts are all stale (contract §6.1): a new extraction, no guidance.
    ("spells", S1, "x-1"): orjson.dumps(GOOD_FIREBALL).decode(),
}
REFRESHED = ("spells", S1, "x-1")
FATES = {
    REFRESHED: fake.ANSWER,
    ("spells", S1, "x-3"): fake.ANSWER,
    ("npc-occurrences", S1, "x-2"): fake.ANSWER,
    ("combat-turns", S1, "x-1"): fake.ANSWER,
    ("combat-turns", S1, "x-2"): fake.REFUSE,
    ("combat-turns", S1, "x-3"): fake.TRUNCATE,
    ("combat-turns", S1, "x-4"): fake.FAIL,
    ("enemy-events", S1, "x-1"): fake.EXPIRE,
    ("enemy-events", S1, "x-2"): fake.CANCEL,
    ("spells", S2, "x-1"): fake.MISSING,
}
CORRECTED = [slot for slot, fate in FATES.items() if fate == fake.ANSWER]
EXPECTED_CLASS = {fake.ANSWER: "imported", fake.REFUSE: "imported", fake.TRUNCATE: "imported", fake.FAIL: "errored",
                  fake.EXPIRE: "expired", fake.CANCEL: "canceled", fake.MISSING: "missing"}
MODEL = {"openai-chat": "gpt-4.1-mini", "openai-responses": "gpt-4.1-mini", "anthropic": "claude-sonnet-4-5",
         "gemini": "gemini-2.5-flash", "vertex": "gemini-2.5-flash"}


def expected_class(provider: str, fate: str) -> str:
    if provider in GOOGLE and fate in (fake.EXPIRE, fake.CANCEL):
        return "missing"
    return EXPECTED_CLASS[fate]


def extra_failing_candidates() -> list[dict]:
    """Attempt-1 candidates that fail (not JSON), one per extra slot: each earns a retry request."""
    slots = [slot for slot in FATES if slot[:3] not in (("spells", S1, "x-3"), ("npc-occurrences", S1, "x-2"), REFRESHED)]
    return [candidate(f"c-batch-{n}", family, source, chunk, 1, None, raw="not json")
            for n, (family, source, chunk) in enumerate(slots)]


def run_job(archive_dir: Path, out: Path) -> dict:
    argv = ["--transcripts", str(archive_dir / "transcripts-*"), "--candidates", str(archive_dir / "candidates-*"),
            "--output", str(out), "--output-format", "jsonl", "--refresh-stale"]
    assert reprocess.main(argv) == 0
    return read_outputs(out)


def export(provider: str, retry_glob: str, transcripts: str, out: Path, *extra: str) -> dict:
    # A process of its own: Beam parses every loaded job's options together, and this
    # test process has loaded the main job's.
    cmd = [sys.executable, "-m", "pipelines.cli", "export-batch", "--retry-requests", retry_glob,
           "--transcripts", transcripts, "--provider", provider, "--model", MODEL[provider], "--output", str(out), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return orjson.loads((out / "export_manifest.json").read_bytes())


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    archive = root / "archive"
    write_archive(archive)
    (archive / "candidates-8-extra.jsonl").write_bytes(b"".join(orjson.dumps(c) + b"\n" for c in extra_failing_candidates()))
    first = run_job(archive, root / "run1")
    retry = {(r["family"], r["source_id"], r["chunk_id"]): r for r in first["retry_requests"]}
    exportable = dict(retry)  # every kind of every family, reconciliations included (their registries from run1)
    fates = {r["request_id"]: FATES.get(slot, fake.MISSING) for slot, r in exportable.items()}
    answers = {exportable[slot]["request_id"]: text for slot, text in ANSWERS.items()}
    return {"root": root, "archive": archive, "first": first, "retry": retry, "exportable": exportable,
            "fates": fates, "answers": answers}


@pytest.fixture(scope="module")
def exports(world):
    root = world["root"]
    return {p: (root / f"export-{p}", export(p, str(root / "run1" / "retry_requests" / "part-*"),
                                            str(world["archive"] / "transcripts-*"), root / f"export-{p}"))
            for p in PROVIDER_NAMES}


def fake_results(world, provider: str, folder: Path, out_dir: Path | None = None) -> list[Path]:
    request_files = sorted(folder.glob("requests-*[0-9].jsonl"))
    extra = None
    drop = frozenset()
    if provider == "openai-chat":  # a second answer to an answered request, and a stranger
        spells = world["exportable"][("spells", S1, "x-3")]["request_id"]
        extra = {"output": [orjson.dumps(fake.openai_chat(90, spells, {"model": "m"}, fake.ANSWER, '{"spells": []}')[1]),
                            orjson.dumps(fake.openai_chat(91, "r-nobody", {"model": "m"}, fake.ANSWER, "{}")[1])]}
    if provider == "vertex":  # the echo lost its labels: matched by the request's texts
        drop = frozenset({world["exportable"][("combat-turns", S1, "x-1")]["request_id"]})
    out_dir = out_dir or world["root"] / f"results-{provider}"
    return fake.play(provider, request_files, out_dir, world["fates"], world["answers"],
                     model=MODEL[provider], drop_vertex_labels=drop, extra_lines=extra)


def import_results(provider: str, results: list[Path], export_dir: Path, out: Path, *extra: str) -> dict:
    argv = ["--provider", provider, "--results", *map(str, results),
            "--requests", str(export_dir / "requests-*"), "--output", str(out), *extra]
    assert batch_import.main(argv) == 0
    return orjson.loads((out / batch_import.MANIFEST).read_bytes())


@pytest.fixture(scope="module")
def imports(world, exports):
    done = {}
    for provider, (folder, _) in exports.items():
        results = fake_results(world, provider, folder)
        out = world["root"] / f"import-{provider}"
        done[provider] = (out, import_results(provider, results, folder, out), results)
    return done


@pytest.fixture(scope="module")
def second_run(world, imports):
    for provider, (out, _, _) in imports.items():
        shutil.copy(out / batch_import.CANDIDATES, world["archive"] / f"candidates-9-{provider}.jsonl")
    return run_job(world["archive"], world["root"] / "run2")


def rows_of(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


# --- export -----------------------------------------------------------------------------

def test_the_archive_yields_a_retry_request_for_every_planned_slot(world):
    assert set(FATES) <= set(world["exportable"])
    kinds = {slot: r["kind"] for slot, r in world["retry"].items()}
    assert kinds[REFRESHED] == "refresh" and sum(k == "refresh" for k in kinds.values()) == 1


@pytest.mark.parametrize("provider", PROVIDER_NAMES)
def test_export_writes_one_valid_line_per_exportable_request(world, exports, provider):
    folder, manifest = exports[provider]
    c = manifest["conservation"]
    assert c["holds"] and c["exported"] == len(world["exportable"]) and c["retry_requests_in"] == len(world["retry"])
    dead = [row for part in (folder / "dead_letters").glob("part-*") for row in rows_of(part)]
    assert len(dead) == c["dead_letters"] == 0
    assert any(FAMILIES[family].chunk_kind == "source" for family, _, _ in world["exportable"])
    assert manifest["inputs"]["registry_artifacts_used"] > 0  # found beside run1's retry_requests/
    assert manifest["exported_by_kind"] == {"retry": len(world["retry"]) - 1, "refresh": 1, "judge": 0}
    lines = [orjson.loads(raw) for raw in (folder / "requests-00000-of-00001.jsonl").read_bytes().splitlines()]
    index = rows_of(folder / "requests-00000-of-00001.index.jsonl")
    assert [row["line"] for row in index] == list(range(1, len(lines) + 1))
    assert {row["request_id"] for row in index} == {r["request_id"] for r in world["exportable"].values()}
    for line, row in zip(lines, index):
        assert check_request_line(provider, line) == [], row["request_id"]
        request = next(r for r in world["exportable"].values() if r["request_id"] == row["request_id"])
        assert (row["family"], row["source_id"], row["chunk_id"], row["attempt"]) == (
            request["family"], request["source_id"], request["chunk_id"], request["attempt"])
        text = orjson.dumps(line).decode()
        assert orjson.dumps(request["correction_guidance"]).decode()[1:-1] in text  # the guidance, verbatim
        assert row["kind"] == request["kind"] and ("validator_feedback" in text) == (request["kind"] == "retry")


# --- import -----------------------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDER_NAMES)
def test_the_ledger_accounts_for_every_exported_request(world, imports, provider):
    out, manifest, _ = imports[provider]
    expected = {}
    for rid, fate in world["fates"].items():
        expected.setdefault(expected_class(provider, fate), []).append(rid)
    assert manifest["conservation"]["holds"]
    assert manifest["exported"] == len(world["fates"])
    assert manifest["requests"] == {cls: len(expected.get(cls, [])) for cls in manifest["requests"]}
    for cls, ids in manifest["not_imported"].items():
        assert ids == sorted(expected.get(cls, [])), cls
    rid = {slot: world["exportable"][slot]["request_id"] for slot in FATES}
    assert manifest["refused"] == [rid[("combat-turns", S1, "x-2")]]
    assert manifest["truncated"] == [rid[("combat-turns", S1, "x-3")]]
    resubmit = (out / batch_import.NOT_IMPORTED).read_text().split()
    assert resubmit == sorted(r for cls, ids in expected.items() if cls != "imported" for r in ids)


@pytest.mark.parametrize("provider", PROVIDER_NAMES)
def test_the_ledger_keeps_every_result_line_byte_for_byte(imports, provider):
    out, manifest, results = imports[provider]
    ledger = rows_of(out / batch_import.LEDGER)
    originals = {(str(p), n): raw for p in results for n, raw in enumerate(p.read_bytes().split(b"\n")[:-1], start=1)}
    assert len(ledger) == len(originals) == manifest["ledger_rows"]
    for row in ledger:
        assert row["line_encoding"] == "utf-8"
        assert row["line"].encode("utf-8") == originals[(row["file"], row["line_number"])]


@pytest.mark.parametrize("provider", PROVIDER_NAMES)
def test_candidates_are_the_next_attempts_with_the_models_exact_text(world, imports, provider):
    out, manifest, _ = imports[provider]
    candidates = rows_of(out / batch_import.CANDIDATES)
    assert len(candidates) == manifest["requests"]["imported"] == manifest["candidates_written"]
    by_id = {r["request_id"]: (slot, r) for slot, r in world["exportable"].items()}
    ledger = {row["candidate_id"]: row["request_id"] for row in rows_of(out / batch_import.LEDGER) if row["candidate_id"]}
    for cand in candidates:
        slot, request = by_id[ledger[cand["candidate_id"]]]
        assert (cand["family"], cand["source_id"], cand["chunk_id"]) == slot
        assert cand["attempt"] == request["attempt"] == 2
        assert cand["producer"] == {"provider": PROVIDERS[provider].producer, "model": MODEL[provider]}
        assert (cand["prompt_fingerprint"], cand["schema_fingerprint"]) == current_fingerprints(slot[0])
        fate, text = FATES[slot], ANSWERS[slot]
        expected_text = {fake.ANSWER: text, fake.TRUNCATE: fake.truncated(text),
                         fake.REFUSE: fake.REFUSAL_TEXT if provider.startswith("openai") else ""}[fate]
        assert cand["raw_response"] == expected_text
        assert cand["received_at"] != "" and cand["candidate_id"].startswith("c-")


def test_stray_and_repeated_result_lines_are_ledgered_not_imported(imports):
    out, manifest, _ = imports["openai-chat"]
    ledger = rows_of(out / batch_import.LEDGER)
    assert [row["outcome"] for row in ledger].count("duplicate") == 1
    assert [row["outcome"] for row in ledger].count("unmatched") == 1
    assert manifest["result_lines"]["duplicate"] == manifest["result_lines"]["unmatched"] == 1


def test_vertex_results_without_their_label_are_matched_by_the_request_texts(world, imports):
    out, _, _ = imports["vertex"]
    request_id = world["exportable"][("combat-turns", S1, "x-1")]["request_id"]
    row = next(r for r in rows_of(out / batch_import.LEDGER) if r["request_id"] == request_id)
    assert row["outcome"] == "imported" and "notarius_request" not in row["line"]


def test_import_is_deterministic(world, exports, imports, tmp_path):
    folder, _ = exports["anthropic"]
    first_out, first, results = imports["anthropic"]
    again = import_results("anthropic", list(reversed(results)), folder, tmp_path / "again")
    for name in (batch_import.CANDIDATES, batch_import.LEDGER, batch_import.NOT_IMPORTED):
        assert (tmp_path / "again" / name).read_bytes() == (first_out / name).read_bytes(), name
    assert {k: v for k, v in again.items() if k != "options"} == {k: v for k, v in first.items() if k != "options"}


def test_unanswered_requests_can_count_as_expired(world, exports, imports, tmp_path):
    folder, _ = exports["gemini"]
    _, before, results = imports["gemini"]
    after = import_results("gemini", results, folder, tmp_path / "expired", "--unanswered", "expired")
    assert after["requests"]["expired"] == before["requests"]["missing"] and after["requests"]["missing"] == 0
    assert after["conservation"]["holds"]


def test_resubmitting_exactly_what_was_not_imported(world, imports, tmp_path):
    out, manifest, _ = imports["openai-chat"]
    again = export("openai-chat", str(world["root"] / "run1" / "retry_requests" / "part-*"),
                   str(world["archive"] / "transcripts-*"), tmp_path / "resubmit",
                   "--only-request-ids", str(out / batch_import.NOT_IMPORTED))
    index = rows_of(tmp_path / "resubmit" / "requests-00000-of-00001.index.jsonl")
    wanted = (out / batch_import.NOT_IMPORTED).read_text().split()
    assert sorted(row["request_id"] for row in index) == wanted
    assert again["conservation"]["filtered"] == len(world["retry"]) - len(wanted)  # the source-level one too
    assert again["conservation"]["holds"]


# --- the job again ----------------------------------------------------------------------

def test_the_job_accepts_the_corrected_slots(world, imports, second_run):
    imported = {}
    for out, _, _ in imports.values():
        for cand in rows_of(out / batch_import.CANDIDATES):
            imported[cand["candidate_id"]] = cand
    verdicts = {e["candidate_id"]: e["verdict"] for e in second_run["evaluations"]}
    artifacts = [a for name, rows in second_run.items() if name.startswith("artifacts/") for a in rows]
    for slot in CORRECTED:
        family, source, chunk = slot
        [artifact] = [a for a in artifacts if (a["family"], a["source_id"], a["chunk_id"]) == slot]
        provenance = artifact["provenance"]
        assert provenance["candidate_id"] in imported and provenance["attempt"] == 2
        assert provenance["raw_response"] == ANSWERS[slot]
        from_batch = [c for c in imported.values() if (c["family"], c["source_id"], c["chunk_id"]) == slot]
        assert len(from_batch) == len(PROVIDER_NAMES)
        assert all(verdicts[c["candidate_id"]] in ("accepted", "superseded") for c in from_batch)
    for cid, cand in imported.items():
        if FATES[(cand["family"], cand["source_id"], cand["chunk_id"])] in (fake.REFUSE, fake.TRUNCATE):
            assert verdicts[cid] == "rejected"  # kept, and failed honestly
    # The refreshed slot: the current answer replaced the stale attempt that had been accepted.
    stale = [e for e in second_run["evaluations"]
             if (e["family"], e["source_id"], e["chunk_id"]) == REFRESHED and e["candidate_id"] not in imported]
    assert stale and all(e["verdict"] == "superseded" for e in stale)


def test_slots_without_an_answer_get_their_retry_request_again(world, second_run):
    retry = {(r["family"], r["source_id"], r["chunk_id"]): r for r in second_run["retry_requests"]}
    for slot, fate in FATES.items():
        if fate == fake.ANSWER:
            assert slot not in retry
        elif fate in (fake.REFUSE, fake.TRUNCATE):
            assert retry[slot]["attempt"] == 3  # attempt 2 came back and failed validation
        else:
            assert retry[slot]["request_id"] == world["retry"][slot]["request_id"]  # the same request, resubmittable


def test_files_split_at_the_line_limit_and_import_as_one_batch(world, imports, tmp_path):
    folder = tmp_path / "split"
    manifest = export("openai-responses", str(world["root"] / "run1" / "retry_requests" / "part-*"),
                      str(world["archive"] / "transcripts-*"), folder, "--max-lines-per-file", "4")
    names = sorted(p.name for p in folder.glob("requests-*"))
    assert names == [f"requests-0000{n}-of-00003{suffix}" for n in range(3) for suffix in (".index.jsonl", ".jsonl")]
    assert [f["lines"] for f in manifest["files"]] == [4, 4, len(world["exportable"]) - 8]
    ids = [row["request_id"] for n in range(3) for row in rows_of(folder / f"requests-0000{n}-of-00003.index.jsonl")]
    assert ids == sorted(ids) and len(ids) == len(world["exportable"])
    results = fake_results(world, "openai-responses", folder, tmp_path / "results")
    split = import_results("openai-responses", results, folder, tmp_path / "import")
    assert split["requests"] == imports["openai-responses"][1]["requests"]
    assert len(split["requests_files"]) == 3
