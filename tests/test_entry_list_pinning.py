"""A reconciliation is pinned to the entry list it was shown (issue 31; contract §3.2, §4.1, §6.1).

Labels E1, E2, ... name positions in one list. When a source's accepted chunk
registries change between runs, the list changes and the same labels name
other entries: an attempt made for another list (its ``input_fingerprint``)
is never accepted, never corrected, never the basis of a request; it waits
(verdict ``deferred``, one operator-only ``entry_list_changed`` issue), and a
slot with nothing else waits too, refreshed once with ``--refresh-stale``.
export-batch sends only the list a request was built with; import-batch
copies the fingerprint back onto the answer.
"""

from __future__ import annotations

import fastavro
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from domain.assets import (CANDIDATE_INPUT_SCHEMA, current_fingerprints, input_field_shape, load_json_asset)
from domain.batch.export import ExportConfig, export_source
from domain.batch.ledger import ExportIndexError, ImportLedger, candidate_record, parse_index_row
from domain.batch.prompts import parse_retry_request
from domain.batch.providers import PROVIDERS, RequestSettings
from domain.evidence import SourceRef, canonical_evidence
from domain.families.base import ListedEntry
from domain.families.reconciliation import entry_list_fingerprint, listed_entries, render_entry_list
from domain.families.registry_family import RegistryRecord
from domain.manifest import build_manifest, refresh_reasons
from domain.registry_artifacts import chunk_registry_records
from domain.intake import EnvelopeError, _parse_candidate_record, parse_candidate
from domain.reprocess import RunConfig, process_source
from domain.revision import MAX_ATTEMPT_NUMBER
from domain.source import transcript_from_record
from leak_check import assert_model_safe
from pipelines.pages.report import entry_list_note
from sample.simulated_batch import result_line
from sample.sim_reconciliation import Entry, clean_proposal

SOURCE = "crd3:T-PIN"
UNIT_IDS = [10, 3, 7, 20, 1, 2, 50, 40, 30]  # document order: ids fall and rise
CHUNK_UNITS = {"x-1": [10, 3, 7], "x-2": [20, 1, 2], "x-3": [50, 40, 30]}
TRANSCRIPT_RECORD = {
    "source_id": SOURCE,
    "units": [{"unit_id": u, "speaker": "MATT", "text": f"line {u}"} for u in UNIT_IDS],
    "chunks": [{"chunk_id": c, "kind": "extraction", "unit_ids": u} for c, u in CHUNK_UNITS.items()],
}
TRANSCRIPT_LINE = orjson.dumps(TRANSCRIPT_RECORD)
TRANSCRIPT = transcript_from_record(TRANSCRIPT_RECORD)
OLD_PROMPT = "sha256:" + "e" * 64
REC = "npc-reconciliation"
REGISTRY = "npc-registry"
PROVIDER = PROVIDERS["openai-chat"]


def ev(start: int, end: int) -> dict:
    return {"start_unit_id": start, "end_unit_id": end}


def npc(name: str, start: int, end: int | None = None, aliases=()) -> dict:
    return {"name": name, "aliases": list(aliases), "description": f"about {name}",
            "evidence": [ev(start, start if end is None else end)]}


def entity(name: str, *labels: str) -> dict:
    return {"name": name, "aliases": [], "description": f"{name}, merged", "member_labels": list(labels)}


def cand(cid: str, family: str, chunk: str, response, attempt: int = 1, *, stale: bool = False,
         fingerprint: str | None = None, **extra) -> bytes:
    prompt, schema = current_fingerprints(family)
    record = {"candidate_id": cid, "family": family, "source_id": SOURCE, "chunk_id": chunk, "attempt": attempt,
              "producer": {"provider": "openai", "model": "m"},
              "prompt_fingerprint": OLD_PROMPT if stale else prompt, "schema_fingerprint": schema,
              "raw_response": response if isinstance(response, str) else orjson.dumps(response).decode(),
              "received_at": "2026-10-01T12:00:00Z", **extra}
    if fingerprint is not None:
        record["input_fingerprint"] = fingerprint
    return orjson.dumps(record)


def registry(cid: str, chunk: str, *npcs: dict, attempt: int = 1, stale: bool = False) -> bytes:
    return cand(cid, REGISTRY, chunk, {"npcs": list(npcs)}, attempt, stale=stale)


def reconciliation(cid: str, *entities: dict, attempt: int = 1, fingerprint: str | None = None) -> bytes:
    return cand(cid, REC, "*", {"entities": list(entities)}, attempt, fingerprint=fingerprint)


def the_list(*registries: tuple[str, list[dict]]) -> tuple[ListedEntry, ...]:
    """The entry list a prompt shows for these accepted chunk registries (as the job builds it)."""
    def canonical(npc_record: dict) -> tuple[SourceRef, ...]:  # endpoints ordered, sorted, each once
        return canonical_evidence(TRANSCRIPT.index, SOURCE, (SourceRef(SOURCE, e["start_unit_id"], e["end_unit_id"])
                                                             for e in npc_record["evidence"]))

    return listed_entries(TRANSCRIPT, [
        (chunk, tuple(RegistryRecord(n["name"], tuple(n["aliases"]), n["description"], canonical(n)) for n in npcs))
        for chunk, npcs in registries])


def run(lines, **config):
    return process_source(SOURCE, [TRANSCRIPT_LINE], list(lines), RunConfig(**config))


def rows(result, cid: str) -> dict:
    (row,) = [e for e in result.evaluations if e["candidate_id"] == cid]
    return row


def codes(row: dict) -> list[str]:
    return [issue["reason_code"] for issue in row["issues"]]


def family_rows(result, family: str = REC, key: str = "retry_requests") -> list[dict]:
    return [r for r in getattr(result, key) if r["family"] == family]


def registry_artifact_lines(result) -> list[bytes]:
    return [orjson.dumps(a) for a in result.artifacts if a["family"] == REGISTRY]


def export(result, requests=None, registries=None, **config):
    cfg = ExportConfig(provider_name="openai-chat", settings=RequestSettings("m", 100), max_bytes_per_file=10**8,
                       **config)
    requests = result.retry_requests if requests is None else requests
    return export_source(SOURCE, [TRANSCRIPT_LINE], [orjson.dumps(r) for r in requests], cfg,
                         registry_artifact_lines(result) if registries is None else registries)


def import_answers(exported_rows, answer) -> list[bytes]:
    """import-batch's ledger over a provider's answers (``answer(index row) -> model text``)."""
    requests = [parse_index_row(orjson.dumps({"line": n, **row["index"]}), f"index:{n}")
                for n, row in enumerate(exported_rows, start=1)]
    ledger = ImportLedger(PROVIDER, requests)
    out = []
    for n, row in enumerate(exported_rows, start=1):
        raw = orjson.dumps(result_line(n, row["index"]["wire_id"], "m", answer(row)))
        _, candidate = ledger.add("results.jsonl", n, raw)
        assert candidate is not None
        out.append(orjson.dumps(candidate))
    return out


def shown_entries(row) -> list[Entry]:
    """The entries an exported reconciliation line shows the model."""
    from sample.simulated_batch import shown_entries as parse

    entries = parse(orjson.loads(row["line"]))
    assert entries is not None
    return entries


# --- the fingerprint ---------------------------------------------------------------------------

GROG, PIKE, VAX = npc("Grog", 7, 3), npc("Pike", 1, 2), npc("Vax", 40)


def test_the_fingerprint_is_the_sha256_of_the_list_as_the_prompt_shows_it():
    import hashlib

    entries = the_list(("x-1", [GROG]), ("x-2", [PIKE]))
    assert entry_list_fingerprint(entries) == "sha256:" + hashlib.sha256(render_entry_list(entries).encode()).hexdigest()
    # Everything the model sees moves it; what it never sees (chunk ids) does not.
    changed = [the_list(("x-1", [GROG])), the_list(("x-1", [GROG]), ("x-2", [npc("Pike", 1, 2, aliases=["P"])])),
               the_list(("x-1", [GROG]), ("x-2", [{**PIKE, "description": "another"}])),
               the_list(("x-1", [GROG]), ("x-2", [npc("Pike", 1, 1)])),
               the_list(("x-1", [GROG]), ("x-2", [npc("Pyke", 1, 2)]))]
    assert len({entry_list_fingerprint(e) for e in [entries, *changed]}) == 1 + len(changed)
    relabelled = tuple(ListedEntry(e.label, "elsewhere", e.name, e.aliases, e.description, e.evidence) for e in entries)
    assert entry_list_fingerprint(relabelled) == entry_list_fingerprint(entries)


def test_the_simulated_producer_fingerprints_the_list_as_the_job_does():
    from sample.sim_reconciliation import entry_list_fingerprint as producer_fingerprint
    from sample.sim_reconciliation import listed_entries as producer_entries

    position = {u: n for n, u in enumerate(UNIT_IDS)}
    registries = [("x-1", [npc("Grog", 7, 3), {**npc("Kima", 3), "evidence": [ev(10, 3), ev(3, 10), ev(7, 7)]}]),
                  ("x-2", [npc("Pike", 2, 20, aliases=["Pike Trickfoot"])])]
    assert producer_fingerprint(position, producer_entries(position, registries)) == \
        entry_list_fingerprint(the_list(*registries))


# --- the job: an attempt made for another list -----------------------------------------------

L1 = the_list(("x-1", [GROG]), ("x-2", [PIKE]), ("x-3", [VAX]))
FP1 = entry_list_fingerprint(L1)
# Run 1: Pike at x-2 was a stale attempt; run 2 adds the current attempt naming Keyleth there: it
# replaces Pike, and the list keeps its length: E2 now names Keyleth.
KEYLETH = npc("Keyleth", 1, 2)
L2 = the_list(("x-1", [GROG]), ("x-2", [KEYLETH]), ("x-3", [VAX]))
FP2 = entry_list_fingerprint(L2)
RUN1_REGISTRIES = [registry("c-r1", "x-1", GROG), registry("c-r2", "x-2", PIKE, stale=True),
                   registry("c-r3", "x-3", VAX)]
RUN2_REGISTRIES = [*RUN1_REGISTRIES, registry("c-r2b", "x-2", KEYLETH, attempt=2)]
PROPOSAL_L1 = (entity("Grog", "E1"), entity("Pike", "E2"), entity("Vax", "E3"))


def test_run1_accepts_the_reconciliation_made_for_its_list():
    result = run([*RUN1_REGISTRIES, reconciliation("c-k1", *PROPOSAL_L1, fingerprint=FP1)])
    assert rows(result, "c-k1")["verdict"] == "accepted"
    (artifact,) = family_rows(result, key="artifacts")
    assert [[m["name"] for m in r["members"]] for r in artifact["records"]] == [["Grog"], ["Pike"], ["Vax"]]


@pytest.mark.parametrize("refresh_stale", [False, True])
def test_a_same_count_label_shift_is_never_accepted(refresh_stale):
    """E2 named Pike when the attempt was made and names Keyleth now: the proposal still fits the
    list's length, and would group Keyleth under "Pike" if its labels were read against it."""
    result = run([*RUN2_REGISTRIES, reconciliation("c-k1", *PROPOSAL_L1, fingerprint=FP1)],
                 refresh_stale=refresh_stale)
    row = rows(result, "c-k1")
    assert row["verdict"] == "deferred" and codes(row) == ["entry_list_changed"]
    (issue,) = row["issues"]
    assert FP1[:19] in issue["message"] and FP2[:19] in issue["message"]
    assert not family_rows(result, key="artifacts")
    assert result.counts[f"outcome/{REC}/deferred"] == 1
    assert not result.counts.get(f"outcome/{REC}/retry") and not result.counts.get(f"outcome/{REC}/exhausted")
    manifest = build_manifest(result.counts, options={"refresh_stale": refresh_stale}, runner="test")
    assert manifest["refresh"]["by_family"][REC]["entry_list_changed"] == 1
    assert manifest["refresh"]["by_family"][REC]["entry_list_slots_waiting"] == 1
    assert manifest["refresh"]["by_family"][REC]["slots_to_refresh"] == 1
    # Issue 42 item 4: its one reason is its entry list (no prompt changed), and the summary says so.
    from pipelines.reprocess import refresh_summary

    assert manifest["refresh"]["slots_on_earlier_prompt"] == 0
    assert refresh_reasons(manifest["refresh"]) == refresh_reasons(manifest["refresh"]["by_family"][REC]) == (0, 1)
    summary = "\n".join(refresh_summary(manifest["refresh"]))
    assert "earlier prompt:" not in summary and "rest only on" not in summary
    requests = family_rows(result)
    if not refresh_stale:
        assert "1 reconciliation slot(s) deferred, waiting for their entry list: --refresh-stale writes" in summary
        assert requests == []
        return
    assert ("1 refresh request(s) in retry_requests/ (kind refresh): 1 for reconciliation slots deferred, waiting "
            "for their entry list") in summary
    # The one deferral that is refreshed: the plain current prompt over the CURRENT list.
    (refresh,) = requests
    assert refresh["kind"] == "refresh" and refresh["correction_guidance"] == ""
    assert refresh["input_fingerprint"] == FP2 and refresh["attempt"] == 2 and refresh["candidate_id"] == "c-k1"
    assert manifest["refresh"]["refresh_requests"] == manifest["outputs"]["refresh_requests"] == 1


def test_an_attempt_made_for_the_current_list_is_judged_as_before():
    proposal_l2 = (entity("Grog", "E1"), entity("Keyleth", "E2"), entity("Vax", "E3"))
    result = run([*RUN2_REGISTRIES, reconciliation("c-k1", *PROPOSAL_L1, fingerprint=FP1),
                  reconciliation("c-k2", *proposal_l2, attempt=2, fingerprint=FP2)], refresh_stale=True)
    assert rows(result, "c-k1")["verdict"] == "deferred" and rows(result, "c-k2")["verdict"] == "accepted"
    (artifact,) = family_rows(result, key="artifacts")
    assert artifact["provenance"]["candidate_id"] == "c-k2"
    assert [m["name"] for r in artifact["records"] for m in r["members"]] == ["Grog", "Keyleth", "Vax"]
    assert family_rows(result) == [] and result.counts[f"revision/{REC}/entry_list_changed"] == 1
    assert not result.counts.get(f"revision/{REC}/entry_list_waiting")


def test_only_attempts_on_the_current_list_count_for_a_retry():
    """Attempt 2 (current list) fails: the retry corrects it, numbered above attempt 3 (made for
    another list); attempt 3 is never told it erred, and neither is attempt 1: it recorded no list,
    but attempt 3, after it, was made for another one, so attempt 1 was too (contract §4.1, amended)."""
    result = run([*RUN2_REGISTRIES,
                  reconciliation("c-k1", entity("Grog", "E1", "E2", "E3")),  # would pass against L2
                  reconciliation("c-k2", entity("Grog", "E1"), attempt=2, fingerprint=FP2),
                  reconciliation("c-k3", *PROPOSAL_L1, attempt=3, fingerprint=FP1)], max_attempts=5)
    assert rows(result, "c-k1")["verdict"] == "deferred" and codes(rows(result, "c-k1")) == ["entry_list_changed"]
    assert rows(result, "c-k2")["verdict"] == "rejected" and rows(result, "c-k3")["verdict"] == "deferred"
    assert not family_rows(result, key="artifacts")
    (retry,) = family_rows(result)
    assert retry["candidate_id"] == "c-k2" and retry["attempt"] == 4
    # An unpinned attempt AFTER the one made for another list is judged against the current list.
    later = run([*RUN2_REGISTRIES, reconciliation("c-k3", *PROPOSAL_L1, attempt=1, fingerprint=FP1),
                 reconciliation("c-k4", entity("Grog", "E1", "E2", "E3"), attempt=2)], max_attempts=5)
    assert rows(later, "c-k4")["verdict"] == "accepted" and rows(later, "c-k3")["verdict"] == "deferred"

    failing = run([*RUN2_REGISTRIES, reconciliation("c-k2", entity("Grog", "E1"), attempt=2, fingerprint=FP2),
                   reconciliation("c-k3", *PROPOSAL_L1, attempt=3, fingerprint=FP1)], max_attempts=5)
    (retry,) = family_rows(failing)
    assert retry["kind"] == "retry" and retry["candidate_id"] == "c-k2" and retry["attempt"] == 4
    assert retry["input_fingerprint"] == FP2
    assert "E2" in retry["correction_guidance"] and "Keyleth" in retry["correction_guidance"]
    assert "Pike" not in retry["correction_guidance"]  # nothing of the other list's attempt
    assert_model_safe(retry["correction_guidance"], (), SOURCE, "x-1", "x-2", "x-3", "c-k3", FP1, FP2)
    # The budget counts attempt numbers, the other list's included: at 3 of 3 the slot is exhausted.
    spent = run([*RUN2_REGISTRIES, reconciliation("c-k2", entity("Grog", "E1"), attempt=2, fingerprint=FP2),
                 reconciliation("c-k3", *PROPOSAL_L1, attempt=3, fingerprint=FP1)])
    assert family_rows(spent) == [] and spent.counts[f"outcome/{REC}/exhausted"] == 1


@pytest.mark.parametrize("refresh_stale", [False, True])
def test_an_unpinned_attempt_older_than_one_for_another_list_is_never_told_it_erred(refresh_stale):
    """Issue 38 item 8: attempt 1 recorded no list; attempt 2 was made for L1; the list is L2 now.
    Judged against L2, attempt 1 would be told it left out "Keyleth" (an entry it never saw)."""
    result = run([*RUN2_REGISTRIES, reconciliation("c-k1", entity("Grog", "E1"), entity("Pike", "E3")),
                  reconciliation("c-k2", *PROPOSAL_L1, attempt=2, fingerprint=FP1)], refresh_stale=refresh_stale)
    for cid in ("c-k1", "c-k2"):
        assert rows(result, cid)["verdict"] == "deferred" and codes(rows(result, cid)) == ["entry_list_changed"]
    assert "without a recorded entry list" in rows(result, "c-k1")["issues"][0]["message"]
    assert result.counts[f"outcome/{REC}/deferred"] == 1
    assert result.counts[f"revision/{REC}/entry_list_changed"] == 2
    assert result.counts[f"revision/{REC}/entry_list_waiting"] == 1
    requests = family_rows(result)
    if not refresh_stale:
        assert requests == []
        return
    (refresh,) = requests  # the one deferral that is refreshed, over the current list, never a retry
    assert refresh["kind"] == "refresh" and refresh["correction_guidance"] == ""
    assert refresh["input_fingerprint"] == FP2 and refresh["attempt"] == 3


@given(st.lists(st.tuples(st.integers(1, 6), st.sampled_from([None, "cur", "old1", "old2"])), min_size=1,
                max_size=8))
def test_made_for_other_lists_is_the_amended_rule(attempts):
    from types import SimpleNamespace
    from domain.families.reconciliation import made_for_other_lists

    cands = [SimpleNamespace(attempt=n, input_fingerprint=fp) for n, fp in attempts]
    flags = made_for_other_lists(cands, "cur")
    for cand, other in zip(cands, flags):
        if cand.input_fingerprint is not None:
            assert other == (cand.input_fingerprint != "cur")
        else:  # unpinned: another list only when a LATER attempt was pinned to another list
            assert other == any(c.attempt > cand.attempt and c.input_fingerprint not in (None, "cur") for c in cands)


def test_a_slot_waiting_at_the_attempt_bound_gets_no_refresh():
    result = run([*RUN2_REGISTRIES, reconciliation("c-k1", *PROPOSAL_L1, attempt=MAX_ATTEMPT_NUMBER, fingerprint=FP1)],
                 refresh_stale=True)
    assert rows(result, "c-k1")["verdict"] == "deferred" and family_rows(result) == []
    assert not result.counts.get(f"revision/{REC}/refresh_due")
    assert result.counts[f"revision/{REC}/entry_list_waiting"] == 1


def test_request_rows_carry_the_list_they_were_built_with_and_fit_their_schemas():
    result = run([*RUN1_REGISTRIES, registry("c-bad", "x-1", npc(" ", 3), attempt=1),
                  reconciliation("c-k1", entity("Grog", "E1")),
                  cand("c-s1", "spells", "x-1", {"spells": []}, stale=True)], refresh_stale=True)
    by_family = {r["family"]: r for r in result.retry_requests}
    assert by_family[REC]["input_fingerprint"] == FP1
    assert by_family["spells"]["input_fingerprint"] is None
    validator = Draft202012Validator(load_json_asset("outputs/retry_request.v1.json"))
    schema = fastavro.parse_schema(load_json_asset("outputs/retry_request.v1.avsc"))
    for request in result.retry_requests:
        validator.validate(request)
        assert fastavro.validate(request, schema)
        assert parse_retry_request(orjson.dumps(request)).input_fingerprint == request["input_fingerprint"]
    older = {k: v for k, v in by_family[REC].items() if k != "input_fingerprint"}  # a row of an earlier run
    assert parse_retry_request(orjson.dumps(older)).input_fingerprint is None


def test_the_report_names_attempts_made_for_another_list_only_when_there_are_some():
    result = run([*RUN2_REGISTRIES, reconciliation("c-k1", *PROPOSAL_L1, fingerprint=FP1)], refresh_stale=True)
    note = entry_list_note(build_manifest(result.counts, options={"refresh_stale": True}, runner="test"))
    assert "1 reconciliation attempt(s)" in note and "entry_list_changed" in note
    assert "1 reconciliation slot(s) are deferred, waiting for their entry list" in note
    clean = run([*RUN1_REGISTRIES, reconciliation("c-k1", *PROPOSAL_L1, fingerprint=FP1)])
    assert entry_list_note(build_manifest(clean.counts, options={}, runner="test")) == ""


# --- the batch loop: run 1 -> a chunk registry retry answered and imported -> run 2 ---------------

# Run 1: x-2's registry fails (a blank name) and gets a retry; the reconciliation, made for the
# list of x-1 and x-3 (E1 Grog, E2 Vax), is accepted. The retry's answer (Pike at x-2) is accepted
# in run 2, and the list becomes E1 Grog, E2 Pike, E3 Vax.
LOOP_ARCHIVE = [registry("c-r1", "x-1", GROG), registry("c-r2", "x-2", npc("", 1, 2)),
                registry("c-r3", "x-3", VAX)]
LOOP_L1 = the_list(("x-1", [GROG]), ("x-3", [VAX]))


def answer_registry(row) -> str:
    assert row["index"]["family"] == REGISTRY and row["index"]["chunk_id"] == "x-2"
    return orjson.dumps({"npcs": [PIKE]}).decode()


def answer_from_the_list(row) -> str:
    """A careful model: a clean proposal over exactly the entries the line shows."""
    return orjson.dumps({"entities": clean_proposal(shown_entries(row))}).decode()


def test_the_batch_loop_no_longer_turns_an_accepted_reconciliation_into_a_retry():
    archive = [*LOOP_ARCHIVE, reconciliation("c-k1", entity("Grog", "E1"), entity("Vax", "E2"),
                                             fingerprint=entry_list_fingerprint(LOOP_L1))]
    run1 = run(archive, refresh_stale=True)
    assert rows(run1, "c-k1")["verdict"] == "accepted"
    assert [(r["family"], r["chunk_id"], r["kind"]) for r in run1.retry_requests] == [(REGISTRY, "x-2", "retry")]

    exported, dead, _ = export(run1)
    assert dead == [] and [r["index"]["input_fingerprint"] for r in exported] == [None]
    answers = import_answers(exported, answer_registry)
    assert "input_fingerprint" not in orjson.loads(answers[0])  # a chunk family's answer has none
    archive += answers

    run2 = run(archive, refresh_stale=True)
    assert rows(run2, answers and orjson.loads(answers[0])["candidate_id"])["verdict"] == "accepted"
    row = rows(run2, "c-k1")
    assert row["verdict"] == "deferred" and codes(row) == ["entry_list_changed"]  # not unassigned_entry
    assert run2.counts.get(f"outcome/{REC}/retry", 0) == 0 and run2.counts[f"outcome/{REC}/deferred"] == 1
    (refresh,) = family_rows(run2)
    current = the_list(("x-1", [GROG]), ("x-2", [PIKE]), ("x-3", [VAX]))
    assert refresh["kind"] == "refresh" and refresh["input_fingerprint"] == entry_list_fingerprint(current)

    # The refresh goes out with exactly the current list, and its answer comes back pinned to it.
    exported, dead, _ = export(run2, family_rows(run2))
    assert dead == [] and exported[0]["index"]["input_fingerprint"] == refresh["input_fingerprint"]
    assert [e.record["name"] for e in shown_entries(exported[0])] == ["Grog", "Pike", "Vax"]
    answers = import_answers(exported, answer_from_the_list)
    assert orjson.loads(answers[0])["input_fingerprint"] == refresh["input_fingerprint"]
    run3 = run(archive + answers, refresh_stale=True)
    (artifact,) = family_rows(run3, key="artifacts")
    assert [m["name"] for r in artifact["records"] for m in r["members"]] == ["Grog", "Pike", "Vax"]
    assert family_rows(run3) == [] and rows(run3, "c-k1")["verdict"] == "deferred"


# --- export-batch: only the list a request was built with ------------------------------------------

def test_export_dead_letters_a_request_whose_list_changed():
    run1 = run([*RUN1_REGISTRIES, reconciliation("c-k1", entity("Grog", "E1"), fingerprint=FP1)])
    (request,) = family_rows(run1)
    assert request["input_fingerprint"] == FP1
    run2 = run(RUN2_REGISTRIES)  # the same source's registries after Keyleth replaced Pike
    exported, dead, counts = export(run1, [request], registry_artifact_lines(run2))
    assert exported == [] and counts["dead_letters/retry_requests"] == 1
    (letter,) = dead
    assert "entry list" in letter["reason"] and FP1[:19] in letter["reason"] and FP2[:19] in letter["reason"]
    assert orjson.loads(letter["payload"]) == request  # the original row, untouched

    # With its own run's artifacts it goes out, and the index says which list the line shows.
    exported, dead, _ = export(run1, [request])
    assert dead == [] and exported[0]["index"]["input_fingerprint"] == FP1
    assert [e.record["name"] for e in shown_entries(exported[0])] == ["Grog", "Pike", "Vax"]

    # A row of a run made before fingerprints: exported as before; the index names the list shown.
    older = {k: v for k, v in request.items() if k != "input_fingerprint"}
    exported, dead, _ = export(run2, [older])
    assert dead == [] and exported[0]["index"]["input_fingerprint"] == FP2


def test_export_reads_the_list_back_from_the_artifacts_as_the_job_built_it():
    result = run(RUN2_REGISTRIES)
    registries = [chunk_registry_records(SOURCE, line)[1:] for line in registry_artifact_lines(result)]
    assert entry_list_fingerprint(listed_entries(TRANSCRIPT, registries)) == FP2


# --- import-batch: the fingerprint travels from the index to the candidate -----------------------

def index_row(**changes) -> bytes:
    row = {"line": 1, "request_id": "r-1", "kind": "refresh", "wire_id": "r-1", "family": REC, "source_id": SOURCE,
           "chunk_id": "*", "attempt": 2, "provider": "openai-chat", "model": "m",
           "prompt_fingerprint": FP1, "schema_fingerprint": FP1, "line_sha256": "0" * 64, "content_key": None,
           "input_fingerprint": FP2, **changes}
    return orjson.dumps({k: v for k, v in row.items() if v is not ...})


def test_import_copies_the_fingerprint_from_the_index():
    request = parse_index_row(index_row(), "i:1")
    assert request.input_fingerprint == FP2
    ledger = ImportLedger(PROVIDER, [request])
    _, candidate = ledger.add("r.jsonl", 1, orjson.dumps(result_line(1, "r-1", "m", '{"entities": []}')))
    assert candidate["input_fingerprint"] == FP2
    assert parse_candidate(orjson.dumps(candidate)).input_fingerprint == FP2
    # An index without it (a chunk family, or written before it existed): the candidate has none.
    for row in (index_row(input_fingerprint=None), index_row(input_fingerprint=...)):
        request = parse_index_row(row, "i:1")
        assert request.input_fingerprint is None
        outcome = PROVIDER.parse_result(result_line(1, "r-1", "m", "{}"))
        assert "input_fingerprint" not in candidate_record(PROVIDER, request, outcome, b"x", "t")


@pytest.mark.parametrize("value", [5, True, ["sha256:x"], {"a": 1}])
def test_a_mistyped_index_fingerprint_stops_the_import(value):
    with pytest.raises(ExportIndexError, match="input_fingerprint"):
        parse_index_row(index_row(input_fingerprint=value), "i:1")


# --- the envelope: absent, null, a string, the wrong type ------------------------------------------

def envelope(**fields) -> bytes:
    record = orjson.loads(cand("c-1", REC, "*", {"entities": []}))
    record.update(fields)
    return orjson.dumps({k: v for k, v in record.items() if v is not ...})


@pytest.mark.parametrize("line, expected", [
    (envelope(), None),
    (envelope(input_fingerprint=None), None),
    (envelope(input_fingerprint=FP1), FP1),
    (envelope(input_fingerprint=""), ""),  # a string: for another list than any real one
    (b'{"input_fingerprint": "sha256:1", ' + envelope(input_fingerprint=FP1)[1:], FP1),  # the last one wins
])
def test_the_envelope_reads_the_optional_fingerprint(line, expected):
    assert parse_candidate(line).input_fingerprint == expected
    assert _parse_candidate_record(line).input_fingerprint == expected
    assert parse_candidate(line) == _parse_candidate_record(line)


@pytest.mark.parametrize("value", [b"1", b"true", b"[]", b"{}", b'["sha256:x"]', b"1.5"])
def test_a_mistyped_fingerprint_is_a_dead_letter(value):
    line = envelope(input_fingerprint=...)[:-1] + b', "input_fingerprint": ' + value + b"}"
    for parse in (parse_candidate, _parse_candidate_record):
        with pytest.raises(EnvelopeError, match="'input_fingerprint' must be a string or null"):
            parse(line)
    result = run([*RUN1_REGISTRIES, line])
    (letter,) = result.dead_letters
    assert letter["reason"] == "candidate field 'input_fingerprint' must be a string or null"
    assert letter["payload"] == line.decode()


def test_the_input_avro_schema_names_the_field_nullable():
    schema = load_json_asset(CANDIDATE_INPUT_SCHEMA)
    (field,) = [f for f in schema["fields"] if f["name"] == "input_fingerprint"]
    assert field["type"] == ["null", "string"] and field["default"] is None
    assert "input_fingerprint" in input_field_shape(CANDIDATE_INPUT_SCHEMA)  # reading keeps it


# --- the property: no accepted reconciliation groups an entry its attempt was not shown ------------

NAMES = ["Grog", "Pike", "Vax", "Keyleth", "Scanlan", "Percy", "Vex", "Kima", "Tary", "Allura"]


@st.composite
def registries_of_a_run(draw, names):
    """Accepted chunk registries: per chunk (maybe none), a few entries with names from ``names``
    (unique across the source) citing a unit of that chunk."""
    pool = list(names)
    draw(st.randoms(use_true_random=False)).shuffle(pool)
    out = []
    for chunk, units in CHUNK_UNITS.items():
        count = draw(st.integers(0, 2))
        if count == 0 and draw(st.booleans()):
            continue  # no registry for this chunk
        npcs = [npc(pool.pop(), draw(st.sampled_from(units))) for _ in range(min(count, len(pool)))]
        out.append((chunk, npcs))
    return out


def proposals(entries) -> st.SearchStrategy:
    """A proposal a model could make for this list: entries grouped (an entity per group, named
    after its first entry), maybe with a label dropped or repeated."""
    labels = [e.label for e in entries]

    @st.composite
    def build(draw):
        groups: dict[int, list[str]] = {}
        for label in labels:
            groups.setdefault(draw(st.integers(0, max(0, len(labels) - 1))), []).append(label)
        entities = [entity(next(e.name for e in entries if e.label == members[0]), *members)
                    for _, members in sorted(groups.items())]
        if entities and draw(st.booleans()):
            draw(st.sampled_from(entities))["member_labels"].append(draw(st.sampled_from(labels)))
        return entities

    return build()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_accepted_reconciliation_groups_an_entry_its_attempt_was_not_shown(data):
    run1_registries = data.draw(registries_of_a_run(NAMES), "run 1")
    # Between the runs the registries change at random: the same names re-dealt, others, fewer, more.
    run2_registries = data.draw(registries_of_a_run(data.draw(st.sampled_from([NAMES, NAMES[:4], NAMES[3:]]))),
                                "run 2")
    lists = {"run1": the_list(*run1_registries), "run2": the_list(*run2_registries)}
    attempts, shown = [], {}
    for n in range(1, data.draw(st.integers(1, 3)) + 1):
        made_for = data.draw(st.sampled_from(["run1", "run2"]))
        entries = lists[made_for]
        proposal = data.draw(proposals(entries))
        cid = f"c-k{n}"
        attempts.append(reconciliation(cid, *proposal, attempt=n, fingerprint=entry_list_fingerprint(entries)))
        shown[cid] = entries
    lines = [registry(f"c-{chunk}", chunk, *npcs) for chunk, npcs in run2_registries] + attempts
    result = run(lines, refresh_stale=data.draw(st.booleans()))
    if not run2_registries:
        return
    for artifact in family_rows(result, key="artifacts"):
        entries = shown[artifact["provenance"]["candidate_id"]]
        by_label = {e.label: (e.chunk_id, e.name) for e in entries}
        proposal = {e["name"]: e["member_labels"]
                    for e in orjson.loads(artifact["provenance"]["raw_response"])["entities"]}
        for record in artifact["records"]:
            members = [(m["chunk_id"], m["name"]) for m in record["members"]]
            meant = [by_label[label] for label in dict.fromkeys(proposal[record["name"]]) if label in by_label]
            assert sorted(members) == sorted(meant), (record, entries)
    current = entry_list_fingerprint(lists["run2"])
    for request in family_rows(result):
        assert request["input_fingerprint"] == current
        replaced = orjson.loads(next(line for line in attempts if orjson.loads(line)["candidate_id"] ==
                                     request["candidate_id"]))
        if request["kind"] == "retry":  # never corrects an attempt made for another list
            assert replaced["input_fingerprint"] == current


def test_requests_for_two_entry_lists_never_share_an_id():
    """An independent check imported one batch's answers against another export: the refresh of one slot and
    attempt for two lists had one id, so an answer made for one list was stamped with the other's."""
    from types import SimpleNamespace

    from domain import rows
    from domain.rows import sha256_hex

    cand = SimpleNamespace(source_id="crd3:S1", candidate_id="c-1")
    args = ("item-reconciliation", "*", cand, 2, "sha256:p", "sha256:s", "sha256:v")
    one, other = (rows.refresh_request_row(*args, fingerprint) for fingerprint in ("sha256:list-a", "sha256:list-b"))
    assert one["request_id"] != other["request_id"]
    retry_a, retry_b = (rows.retry_request_row("item-reconciliation", "*", cand, 2, "fix it", "sha256:p", "sha256:s",
                                               "sha256:v", fingerprint) for fingerprint in ("sha256:a", "sha256:b"))
    assert retry_a["request_id"] != retry_b["request_id"]
    # Requests without a list keep the ids they always had (outputs of other families byte-identical).
    plain = rows.retry_request_row("spells", "x-1", cand, 2, "fix it", "sha256:p", "sha256:s", "sha256:v", None)
    assert plain["request_id"] == "r-" + sha256_hex("spells", "crd3:S1", "x-1", "c-1", "2")[:32]
