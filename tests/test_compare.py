"""Comparing two runs (contract §6.3): the pure rules of ``analysis.compare`` and the command end to end.

The command runs in a process of its own (``python -m pipelines.cli compare``): Beam parses every
loaded job's PipelineOptions together, and this test process runs the main job in-process.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import fastavro
import jsonschema
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.compare import (ANSWER_FAILED_AGAIN, ANSWER_PASSED, ANSWER_UNANSWERED, CHANGE_FIX, CHANGE_OTHER,
                              CHANGE_RECORDS, CHANGE_REGRESSION, NOTHING, SITUATION_ABSENT,
                              SITUATION_ENTRY_LIST, SITUATION_EXHAUSTED, SITUATION_JUDGES, SITUATION_NEWLY_ACCEPTED,
                              SITUATION_RECORDS_CHANGED, SITUATION_REFRESH, SITUATION_REGISTRY, SITUATION_RETRY,
                              SITUATIONS, SLOT_CHANGES, SLOT_OUTCOMES, Artifact, Attempt, Decision, Request,
                              SlotInRun, answer_in_b, artifact_of, attempt_of, classify_change, compare_source,
                              compare_slot, decide, facts_by_slot, failed_after_registry_change, records_sha256,
                              situation, sum_tallies)
from analysis.compare_folder import (COMPARE_HTML, COMPARE_JSON, comparison_document, comparison_folder_problems,
                                     is_page_name, listed_rows, page_name, rows_block)
from analysis.slots import RowError, Slot
from domain.assets import load_json_asset, read_asset
from domain.run_integrity import OutputFile
from domain import schemas as schemagen
from fixture_archive import candidate, ev, good_records, spell, write_archive
from output_reader import read_rows

S1 = "crd3:S1"
SHA_X, SHA_Y = "1" * 64, "2" * 64


def compare_runs(a, b):
    """Every slot of A or B compared, in slot order: the whole comparison in memory, what the job's
    source-by-source comparison (``compare_source``) is held to."""
    return [compare_slot(slot, a.get(slot, NOTHING), b.get(slot, NOTHING)) for slot in sorted(set(a) | set(b))]


def rejected(n, cid, *codes):
    return Attempt(n, cid, "rejected", codes)


def accepted(n, cid):
    return Attempt(n, cid, "accepted")


# --- a slot's outcome in one run -----------------------------------------------------------------------

@pytest.mark.parametrize("run, outcome, candidate_id, codes", [
    # an artifact: accepted, whatever else the run wrote (a stale accepted slot also gets a refresh request)
    (SlotInRun((rejected(1, "c1", "x"), accepted(2, "c2")), (Request(3, "c2", "refresh"),),
               (Artifact(2, "c2", SHA_X),)), "accepted", "c2", ()),
    # a request: its kind; the deciding attempt is the one it replaces, with that attempt's codes
    (SlotInRun((rejected(1, "c1", "b", "a", "b"),), (Request(2, "c1", "retry"),)), "retry", "c1", ("a", "b")),
    (SlotInRun((rejected(3, "c3", "x"),), (Request(4, "c3", "refresh"),)), "refresh", "c3", ("x",)),
    # a reconciliation waiting for its entry list: deferred, as the job counts it, refresh request or not
    (SlotInRun((Attempt(1, "c1", "deferred", ("entry_list_changed",)),), (Request(2, "c1", "refresh"),)),
     "deferred", "c1", ("entry_list_changed",)),
    (SlotInRun((Attempt(1, "c1", "deferred", ("entry_list_changed",)),)), "deferred", "c1", ("entry_list_changed",)),
    # evaluated, nothing decided: deferred; evaluated and rejected without a request: exhausted (the latest)
    (SlotInRun((Attempt(1, "c1", "deferred"), Attempt(2, "c2", "deferred"))), "deferred", "c2", ()),
    (SlotInRun((rejected(1, "c1", "x"), rejected(3, "c3", "y"), rejected(3, "c2", "z"))), "exhausted", "c3", ("y",)),
    (NOTHING, "absent", None, ()),
])
def test_decide_reads_each_outcome_off_what_the_run_wrote(run, outcome, candidate_id, codes):
    decision = decide(run)
    assert (decision.outcome, decision.candidate_id, decision.reason_codes) == (outcome, candidate_id, codes)
    assert (decision.records_sha256 is not None) == (outcome == "accepted")


@pytest.mark.parametrize("a, b, change", [
    (Decision("accepted", "c", 1, (), SHA_X), Decision("retry", "c", 1), CHANGE_REGRESSION),
    (Decision("accepted", "c", 1, (), SHA_X), Decision("absent"), CHANGE_REGRESSION),
    (Decision("retry", "c", 1), Decision("accepted", "d", 2, (), SHA_X), CHANGE_FIX),
    (Decision("absent"), Decision("accepted", "d", 1, (), SHA_X), CHANGE_FIX),
    (Decision("accepted", "c", 1, (), SHA_X), Decision("accepted", "d", 2, (), SHA_Y), CHANGE_RECORDS),
    # another attempt accepted, the same records: no change
    (Decision("accepted", "c", 1, (), SHA_X), Decision("accepted", "d", 2, (), SHA_X), None),
    (Decision("retry", "c", 1), Decision("exhausted", "d", 3), CHANGE_OTHER),
    (Decision("deferred", "c", 1), Decision("absent"), CHANGE_OTHER),
    (Decision("retry", "c", 1), Decision("retry", "d", 2), None),  # the same outcome: not a change
])
def test_classify_change(a, b, change):
    assert classify_change(a, b) == change


def test_records_are_compared_by_content_not_provenance_or_key_order():
    records = [{"spell_name": "Shield", "cast": {"level": 1, "as_ritual": False}, "evidence": [{"end_unit_id": 4}]}]
    row = {"family": "spells", "source_id": S1, "chunk_id": "x-1", "records": records,
           "provenance": {"candidate_id": "c1", "attempt": 1, "raw_response": "{...}"}, "artifact_id": "a-1"}
    reordered = [{"evidence": [{"end_unit_id": 4}], "cast": {"as_ritual": False, "level": 1}, "spell_name": "Shield"}]
    other_provenance = {**row, "records": reordered, "artifact_id": "a-2",
                        "provenance": {"candidate_id": "c9", "attempt": 3, "raw_response": "{ ... }"}}
    other_records = {**row, "records": [{**records[0], "cast": {"level": 2, "as_ritual": False}}]}
    assert artifact_of(row).records_sha256 == artifact_of(other_provenance).records_sha256
    assert artifact_of(row).records_sha256 != artifact_of(other_records).records_sha256


def test_evaluation_rows_keep_their_reason_codes_without_the_bound_row():
    row = {"candidate_id": "c1", "family": "spells", "source_id": S1, "chunk_id": "x-1", "attempt": 2,
           "verdict": "rejected", "issues": [
               {"validator": "spells.catalog", "reason_code": "cantrip_level"},
               {"validator": "spells.catalog", "reason_code": "cantrip_level"},
               {"validator": "bound", "reason_code": "more_issues"}]}
    assert attempt_of(row) == Attempt(2, "c1", "rejected", ("cantrip_level", "cantrip_level"))
    slots = facts_by_slot("evaluations", [row, {**row, "candidate_id": "c0", "attempt": 1, "issues": []}])
    assert slots == {Slot("spells", S1, "x-1"): SlotInRun((Attempt(1, "c0", "rejected"), attempt_of(row)))}


def test_requests_of_a_answered_in_b():
    asked = SlotInRun((rejected(1, "c1", "x"),), (Request(2, "c1", "retry"),))
    assert answer_in_b(asked, SlotInRun((rejected(1, "c1", "x"), accepted(2, "c2")))) == ("retry", ANSWER_PASSED)
    assert answer_in_b(asked, SlotInRun((rejected(2, "c2", "y"),))) == ("retry", ANSWER_FAILED_AGAIN)
    # an attempt with another number is not the answer to this request
    assert answer_in_b(asked, SlotInRun((accepted(3, "c3"),))) == ("retry", ANSWER_UNANSWERED)
    assert answer_in_b(SlotInRun((accepted(1, "c1"),)), NOTHING) is None  # A asked nothing


def test_failed_after_its_registry_changed_is_the_same_attempt_failing_membership():
    a = SlotInRun((accepted(1, "c1"), Attempt(2, "c2", "superseded"), rejected(3, "c3", "x")))
    b = SlotInRun((rejected(1, "c1", "not_in_registry", "other"), rejected(2, "c2", "span_outside_chunk"),
                   rejected(3, "c3", "not_in_registry"), rejected(4, "c4", "not_in_registry")))
    # c2 fails for another reason; c3 did not pass in A; c4 is not in A
    assert failed_after_registry_change(a, b) == ("c1",)


GROG = {"npc_name": "Grog", "kind": "speaking", "evidence": [{"source_id": S1, "start_unit_id": 3, "end_unit_id": 7}]}


def test_a_slot_row_names_the_deciding_attempts_and_the_records_that_changed():
    slot = Slot("npc-occurrences", S1, "x-1")
    a = SlotInRun((accepted(1, "c11"),), artifacts=(Artifact(1, "c11", SHA_X, orjson.dumps([GROG])),))
    b = SlotInRun((rejected(1, "c11", "not_in_registry"),), (Request(2, "c11", "retry"),))
    comparison = compare_slot(slot, a, b)
    assert comparison.row() == {
        "family": "npc-occurrences", "source_id": S1, "chunk_id": "x-1",
        "transition": {"from": "accepted", "to": "retry"}, "change": "regression",
        "deciding_a": {"candidate_id": "c11", "attempt": 1, "reason_codes": [], "records_sha256": SHA_X},
        "deciding_b": {"candidate_id": "c11", "attempt": 1, "reason_codes": ["not_in_registry"],
                       "records_sha256": None},
        "records": {"added": 0, "removed": 1, "changed": 0, "unchanged": 0, "more": 0, "listed": [
            {"change": "removed", "record": 'The "speaking" occurrence of the NPC "Grog"', "fields": []}]}}
    assert comparison.registry_failures == ("c11",) and comparison.situation == SITUATION_RETRY
    assert compare_slot(slot, a, a).row() is None
    # neither run accepted it: nothing to say of records
    assert compare_slot(slot, b, NOTHING).row()["records"] is None


def test_records_changed_names_the_fields_that_differ():
    slot = Slot("npc-occurrences", S1, "x-1")
    other = {**GROG, "kind": "present"}
    a = SlotInRun((accepted(1, "c1"),), artifacts=(Artifact(1, "c1", SHA_X, orjson.dumps([GROG])),))
    b = SlotInRun((accepted(2, "c2"),), artifacts=(Artifact(2, "c2", SHA_Y, orjson.dumps([other])),))
    row = compare_slot(slot, a, b).row()
    assert row["change"] == "records_changed" and row["records"]["listed"] == [  # another name: added, removed
        {"change": "added", "record": 'The "present" occurrence of the NPC "Grog"', "fields": []},
        {"change": "removed", "record": 'The "speaking" occurrence of the NPC "Grog"', "fields": []}]
    moved = {**GROG, "evidence": [{"source_id": S1, "start_unit_id": 3, "end_unit_id": 10}]}
    b = SlotInRun((accepted(2, "c2"),), artifacts=(Artifact(2, "c2", SHA_Y, orjson.dumps([moved])),))
    assert compare_slot(slot, a, b).row()["records"]["listed"] == [
        {"change": "changed", "record": 'The "speaking" occurrence of the NPC "Grog"',
         "fields": [{"field": "evidence", "a": "units 3–7", "b": "units 3–10"}]}]


@pytest.mark.parametrize("change, to, codes, expected", [
    (None, "accepted", (), None),
    ("records_changed", "accepted", (), SITUATION_RECORDS_CHANGED),
    ("fix", "accepted", (), SITUATION_NEWLY_ACCEPTED),
    ("regression", "deferred", ("entry_list_changed",), SITUATION_ENTRY_LIST),
    ("other", "deferred", ("entry_list_changed",), SITUATION_ENTRY_LIST),
    ("regression", "deferred", ("awaiting_judgment", "judge_unusable"), SITUATION_JUDGES),
    ("regression", "deferred", (), SITUATION_REGISTRY),
    ("regression", "retry", ("judge_fail",), SITUATION_RETRY),
    ("other", "refresh", (), SITUATION_REFRESH),
    ("regression", "exhausted", ("x",), SITUATION_EXHAUSTED),
    ("regression", "absent", (), SITUATION_ABSENT),
])
def test_a_changed_slot_is_in_one_situation_read_off_where_it_stands_in_b(change, to, codes, expected):
    assert situation(change, to, codes) == expected


# --- properties: every slot in exactly one transition; a run against itself --------------------------------

FAMILY_KEYS = ("spells", "npc-occurrences", "npc-registry")
VERDICTS = ("accepted", "superseded", "rejected", "deferred")
CODES = ("not_in_registry", "span_outside_chunk", "cantrip_level")


@st.composite
def slot_in_run(draw):
    attempts = draw(st.lists(st.builds(Attempt, st.integers(1, 4), st.sampled_from(["c1", "c2", "c3", "c4"]),
                                       st.sampled_from(VERDICTS), st.lists(st.sampled_from(CODES), max_size=3)
                                       .map(tuple)), max_size=4, unique_by=lambda a: a.candidate_id))
    requests = draw(st.lists(st.builds(Request, st.integers(2, 5), st.sampled_from(["c1", "c2"]),
                                       st.sampled_from(["retry", "refresh"])), max_size=1))
    artifacts = draw(st.lists(st.builds(artifact_with, st.integers(1, 4), st.sampled_from(["c1", "c2"]),
                                        st.sampled_from(RECORD_SETS)), max_size=1))
    return SlotInRun(tuple(sorted(attempts)), tuple(requests), tuple(artifacts))


RECORD_SETS = ([], [GROG], [GROG, {**GROG, "kind": "present"}], [{**GROG, "evidence": []}], [{"name": "Grog"}])


def artifact_with(attempt, candidate_id, records):
    return Artifact(attempt, candidate_id, records_sha256(records), orjson.dumps(records))


slots = st.builds(Slot, st.sampled_from(FAMILY_KEYS), st.sampled_from([S1, "crd3:S2"]),
                  st.sampled_from(["x-1", "x-2", "*"]))
runs = st.dictionaries(slots, slot_in_run().filter(lambda s: s.present), max_size=12)


def document_of(comparisons):
    listed = {run: {"evaluations": 0, "retry_requests": 0, "artifacts": 0} for run in ("a", "b")}
    return comparison_document(sum_tallies(c.tally() for c in comparisons), families=FAMILY_KEYS,
                               runs={"a": {"folder": "A"}, "b": {"folder": "B"}}, rows=rows_block(listed, {}))


@settings(max_examples=150, deadline=None)
@given(a=runs, b=runs)
def test_every_slot_of_a_or_b_is_counted_in_exactly_one_transition(a, b):
    comparisons = compare_runs(a, b)
    document = document_of(comparisons)
    for family in FAMILY_KEYS:
        block = document["by_family"][family]
        in_family = {s for s in set(a) | set(b) if s.family == family}
        transitions = block["transitions"]
        assert sum(n for row in transitions.values() for n in row.values()) == len(in_family)
        # the marginals: every slot of A once by its outcome in A, every slot of B once by its outcome in B
        assert sum(n for src, row in transitions.items() if src != "absent" for n in row.values()) == \
            len([s for s in a if s.family == family])
        assert sum(n for row in transitions.values() for dst, n in row.items() if dst != "absent") == \
            len([s for s in b if s.family == family])
        assert block["conservation"]["holds"]
    assert document["conservation"]["holds"]
    assert document["total"]["slots"]["in_a_or_b"] == len(set(a) | set(b))
    assert document["total"]["changed_slots"] == sum(c.row() is not None for c in comparisons)
    assert sum(document["total"]["changes"].values()) == document["total"]["changed_slots"]
    # every changed slot in exactly one situation; records said for a changed slot accepted in A or B, only
    assert sum(document["total"]["situations"].values()) == document["total"]["changed_slots"]
    for c in comparisons:
        row = c.row()
        if row is not None:
            assert (row["records"] is not None) == ("accepted" in c.transition) == (row["change"] != "other")


@settings(max_examples=150, deadline=None)
@given(a=runs)
def test_a_run_compared_with_itself_changes_nothing(a):
    comparisons = compare_runs(a, a)
    document = document_of(comparisons)
    total = document["total"]
    assert [c.row() for c in comparisons if c.row() is not None] == []
    assert total["changed_slots"] == 0 and set(total["changes"].values()) == {0}
    assert all(src == dst for src, row in total["transitions"].items() for dst in row)
    accepted_slots = sum(decide(run).outcome == "accepted" for run in a.values())
    assert total["artifacts"] == {"unchanged": accepted_slots, "changed": 0, "appeared": 0, "disappeared": 0}
    assert total["reason_codes"]["a"] == total["reason_codes"]["b"]
    assert total["failed_after_registry_change"] == 0


def _pieces(run: str, facts: dict) -> list:
    """One run's facts as the reading step gives them: attempts, requests and artifacts from separate files,
    each file's part of a slot on its own."""
    return [(run, output, {slot.key: list(part)}) for slot, f in facts.items()
            for output, part in (("evaluations", f.attempts), ("retry_requests", f.requests), ("artifacts", f.artifacts))
            if part]


@settings(max_examples=150, deadline=None)
@given(a=runs, b=runs, order=st.randoms(use_true_random=False))
def test_comparing_source_by_source_is_comparing_the_runs(a, b, order):
    """compare groups a run's rows by source (issue 43): each source's pieces, in any order, give exactly
    the comparisons of its slots that the whole runs give, in slot order."""
    whole = compare_runs(a, b)
    by_source = []
    for source in sorted({slot.source_id for slot in set(a) | set(b)}):
        pieces = [p for run, facts in (("a", a), ("b", b)) for p in _pieces(run, facts)
                  if next(iter(p[2]))[1] == source]
        order.shuffle(pieces)
        found = compare_source(pieces)
        assert [c.slot for c in found] == sorted(c.slot for c in found) and {c.slot.source_id for c in found} == {source}
        by_source += found
    assert sorted(by_source, key=lambda c: c.slot) == sorted(whole, key=lambda c: c.slot)


def test_a_source_compares_its_readable_blocks_and_counts_the_refused_ones():
    from transforms.compare import REFUSED_TALLY, compare_source_blocks
    from transforms.raw_records import encode_block

    evaluation = {"family": "spells", "source_id": S1, "chunk_id": "x-1", "candidate_id": "c1", "attempt": 1,
                  "verdict": "rejected", "issues": [{"validator": "v", "reason_code": "x"}]}
    request = {"family": "spells", "source_id": S1, "chunk_id": "x-1", "kind": "retry", "candidate_id": "c1",
               "attempt": 2}
    blocks = [("a.evaluations", encode_block([orjson.dumps(evaluation)])),
              ("a.retry_requests", encode_block([orjson.dumps(request)])),
              ("b.evaluations", encode_block([orjson.dumps({**evaluation, "attempt": "one"})]))]  # refused
    found = compare_source_blocks((S1, blocks))
    assert found.source_id == S1 and found.tally[REFUSED_TALLY] == 1
    assert found.tally[("transition", "spells", "retry", "absent")] == 1
    assert [(row["chunk_id"], row["change"]) for row in found.rows] == [("x-1", "other")]


SLOT_JSON_SCHEMA = load_json_asset(schemagen.SLOT_CHANGE_SCHEMA_JSON)
SLOT_AVRO_SCHEMA = fastavro.parse_schema(load_json_asset(schemagen.SLOT_CHANGE_SCHEMA_AVRO))


@settings(max_examples=100, deadline=None)
@given(a=runs, b=runs)
def test_slot_rows_fit_their_json_and_avro_schemas(a, b):
    for comparison in compare_runs(a, b):
        row = comparison.row()
        if row is not None:
            jsonschema.validate(row, SLOT_JSON_SCHEMA)
            assert fastavro.validate(row, SLOT_AVRO_SCHEMA, raise_errors=True)


def test_slot_schemas_are_generated_current_and_spell_the_domain_names():
    for path, data in {**schemagen.generated_slot_change_schemas(), **schemagen.generated_output_schemas()}.items():
        assert read_asset(path) == data, f"assets/{path} is stale: run python -m domain.schemagen"
    assert schemagen.SLOT_OUTCOMES == SLOT_OUTCOMES and schemagen.SLOT_CHANGES == SLOT_CHANGES


def test_rows_read_must_be_the_rows_listed():
    listed = {"a": {"evaluations": 3, "retry_requests": 1, "artifacts": 2},
              "b": {"evaluations": 2, "retry_requests": 0, "artifacts": 1}}
    read = {"a.evaluations_in": 3, "a.retry_requests_in": 1, "a.artifacts_in": 2,
            "b.evaluations_in": 2, "b.retry_requests_in": 0, "b.artifacts_in": 1}
    assert rows_block(listed, read)["holds"]
    assert not rows_block(listed, {**read, "b.evaluations_in": 1})["holds"]  # a row lost
    unreadable = rows_block(listed, {**read, "b.evaluations_in": 3, "dead_letters/b.evaluations": 1})
    assert not unreadable["holds"] and unreadable["b"]["evaluations"] == {"listed": 2, "read": 2, "unreadable": 1}
    manifest = {"files": {"evaluations": [{"path": "evaluations/part-0.avro", "format": "avro", "bytes": 1,
                                           "sha256": "0" * 64, "rows": 4}],
                          "artifacts/spells": [{"path": "artifacts/spells/part-0.avro", "format": "avro", "bytes": 1,
                                                "sha256": "0" * 64, "rows": 2}],
                          "artifacts/npc-registry": [{"path": "artifacts/npc-registry/part-0.avro", "format": "avro",
                                                      "bytes": 1, "sha256": "0" * 64, "rows": 1}]}}
    assert listed_rows(manifest) == {"evaluations": 4, "retry_requests": 0, "artifacts": 3}


def test_a_comparison_folder_is_checked_against_its_manifest():
    part = OutputFile("slots/part-00000-of-00001.jsonl", "jsonl", 10, "a" * 64, 2)
    docs = {COMPARE_JSON: {"bytes": 5, "sha256": "b" * 64}, COMPARE_HTML: {"bytes": 6, "sha256": "c" * 64}}
    manifest = {"kind": "compare", "files": {"slots": [part.as_row()]}, "outputs": {"slots": 2},
                "documents": docs, "conservation": {"holds": True}}
    assert comparison_folder_problems(manifest, {part.path: part}, [part.path], docs) == []
    altered = OutputFile(part.path, "jsonl", 10, "d" * 64, 2)
    problems = comparison_folder_problems(manifest, {part.path: altered}, [part.path, "slots/part-x.jsonl"],
                                          {COMPARE_JSON: docs[COMPARE_JSON]})
    assert problems == [f"altered: {part.path}", "unlisted: slots/part-x.jsonl", f"missing: {COMPARE_HTML}"]
    assert comparison_folder_problems({**manifest, "outputs": {"slots": 3}}, {part.path: part}, [part.path], docs) == \
        ["slots: the files hold 2 rows, the manifest counts 3"]


def test_the_pages_escape_every_value():
    from pipelines.pages.compare import render_comparison, render_source_page

    slot = Slot("spells", "<script>alert(1)</script>", "x-1")
    hostile = [{"spell_name": "<b>Shield</b>", "caster_name": '"><img src=y>', "evidence": []}]
    a = SlotInRun((accepted(1, '"><img src=x>'),), artifacts=(artifact_with(1, '"><img src=x>', hostile),))
    comparisons = compare_runs({slot: a}, {})
    document = document_of(comparisons)
    row = comparisons[0].row()
    pages = [{"source_id": slot.source_id, "page": page_name(slot.source_id), "slots": 1,
              "changes": {"regression": 1}}]
    for page in (render_comparison(document, pages), render_source_page(slot.source_id, [row], document["runs"])):
        assert "<script>" not in page and "<img" not in page and "<b>Shield" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x&gt;" in render_source_page(slot.source_id, [row], document["runs"])


def test_a_page_name_is_safe_and_its_own():
    names = {page_name(s) for s in ("crd3:C1E001", "crd3/C1E001", "../../etc", "é", "")}
    assert len(names) == 5 and all(is_page_name(n) for n in names)
    assert not any(is_page_name(n) for n in ("pages/../x.html", "x.html", "pages/a/b.html", None, 3, "pages/.html/"))


# --- the command, end to end ---------------------------------------------------------------------------

def run_job(archive: dict, out: Path, *extra: str) -> None:
    from pipelines import reprocess

    argv = ["--transcripts", archive["transcripts"], "--candidates", archive["candidates"], "--output", str(out),
            *extra]
    assert reprocess.main(argv) == 0


def compare(*args: str, expect: int = 0) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "compare", *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == expect, done.stderr[-3000:]
    return done


def changed_archive(directory: Path) -> dict:
    """The fixture archive with a changed candidate set: c-30 passes spells x-3 (a retry in A); c-31 answers
    npc-occurrences x-2's retry and fails again; c-18 (location-registry x-2's only attempt) is gone; c-15,
    the reconciled NPC registry, is replaced by c-15b without the alias "Grog Strongjaw", which c-11 names."""
    archive = write_archive(directory)
    kept = [r for r in good_records()[10:] if r["candidate_id"] not in ("c-15", "c-18")]
    kept += [
        candidate("c-15b", "npc-reconciliation", S1, "*", 1,
                  {"entities": [{"name": "Grog", "aliases": ["Big G"], "description": "a goliath",
                                 "member_labels": ["E1"]}]}),
        candidate("c-30", "spells", S1, "x-3", 2, {"spells": [spell("Shield", "LIAM", 1, 50, 30)]}),
        candidate("c-31", "npc-occurrences", S1, "x-2", 2,
                  {"occurrences": [{"npc_name": "Vex", "kind": "present", "evidence": [ev(20, 1)]}]}),
    ]
    (directory / "candidates-3.avro").unlink()  # good[10:], rewritten as JSON Lines
    (directory / "candidates-3.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in kept))
    return archive


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    run_job(write_archive(root / "archive-a"), root / "run-a")  # Avro
    run_job(changed_archive(root / "archive-b"), root / "run-b", "--output-format", "parquet")
    done = compare(str(root / "run-a"), str(root / "run-b"), "--output", str(root / "cmp"), "--output-format", "jsonl")
    return {"root": root, "out": root / "cmp", "stdout": done.stdout,
            "document": orjson.loads((root / "cmp" / COMPARE_JSON).read_bytes()),
            "rows": read_rows(root / "cmp" / "slots"),
            "manifest": orjson.loads((root / "cmp" / "manifest.json").read_bytes())}


def test_compare_counts_every_transition(compared):
    total = compared["document"]["total"]
    assert total["transitions"] == {
        "accepted": {"accepted": 6, "retry": 1, "absent": 1},  # npc-occurrences x-1; location-registry x-2
        "retry": {"accepted": 1, "retry": 1, "deferred": 1},  # spells x-3; npc-occ x-2; location-reconciliation
        "exhausted": {"exhausted": 1},
        "deferred": {"deferred": 2},
    }
    assert total["slots"] == {"in_a": 14, "in_b": 13, "in_both": 13, "in_a_or_b": 14}
    assert compared["document"]["conservation"]["holds"]
    rows = compared["document"]["conservation"]["rows"]
    assert rows["holds"] and rows["a"]["evaluations"] == {"listed": 19, "read": 19, "unreadable": 0}
    assert "14 slots, 5 changed" in compared["stdout"]


def test_compare_writes_one_row_per_changed_slot(compared):
    def summary(row):
        a, b = row["deciding_a"], row["deciding_b"]
        return (row["family"], row["chunk_id"], row["transition"]["from"], row["transition"]["to"], row["change"],
                a and (a["candidate_id"], tuple(a["reason_codes"])),
                b and (b["candidate_id"], tuple(b["reason_codes"])))

    assert sorted(map(summary, compared["rows"])) == sorted([
        ("spells", "x-3", "retry", "accepted", "fix", ("c-05", ("span_outside_chunk",)), ("c-30", ())),
        ("npc-occurrences", "x-1", "accepted", "retry", "regression", ("c-11", ()), ("c-11", ("not_in_registry",))),
        ("location-registry", "x-2", "accepted", "absent", "regression", ("c-18", ()), None),
        ("npc-reconciliation", "*", "accepted", "accepted", "records_changed", ("c-15", ()), ("c-15b", ())),
        ("location-reconciliation", "*", "retry", "deferred", "other",
         ("c-19", ("unassigned_entry", "unknown_label")), ("c-19", ())),
    ])
    for row in compared["rows"]:
        jsonschema.validate(row, SLOT_JSON_SCHEMA)
    fix = next(row for row in compared["rows"] if row["change"] == "fix")
    assert compared["document"]["examples"]["fix"] == [fix]


def test_compare_counts_artifacts_requests_and_registry_failures(compared):
    total, by_family = compared["document"]["total"], compared["document"]["by_family"]
    # five artifacts read from Avro in A and from Parquet in B hash alike
    assert total["artifacts"] == {"unchanged": 5, "changed": 1, "appeared": 1, "disappeared": 2}
    answered = total["requests_answered"]
    assert (answered["requests"], answered["answered"], answered["passed"], answered["failed_again"],
            answered["unanswered"]) == (3, 2, 1, 1, 1)
    assert by_family["spells"]["requests_answered"]["passed"] == 1
    assert by_family["npc-occurrences"]["requests_answered"]["failed_again"] == 1
    assert by_family["npc-occurrences"]["failed_after_registry_change"] == 1
    assert "failed_after_registry_change" not in by_family["spells"]  # occurrence families only
    codes = by_family["npc-occurrences"]["reason_codes"]
    assert codes == {"a": {"not_in_registry": 1}, "b": {"not_in_registry": 3}}  # c-12; c-11, c-12, c-31


def test_the_comparison_folder_lists_its_files_and_can_be_checked(compared):
    from pipelines.verify import comparison_problems

    out, manifest = compared["out"], compared["manifest"]
    parts = sorted(str(p.relative_to(out)) for p in (out / "slots").glob("part-*"))
    assert [f["path"] for f in manifest["files"]["slots"]] == parts
    assert sum(f["rows"] for f in manifest["files"]["slots"]) == manifest["outputs"]["slots"] == 5
    page = page_name(S1)
    assert set(manifest["documents"]) == {COMPARE_JSON, COMPARE_HTML, page}
    assert comparison_problems(str(out)) == []
    html = (out / COMPARE_HTML).read_text()
    assert "<script" not in html and f'<a href="{page}">crd3:S1</a>' in html
    copy = compared["root"] / "cmp-altered"
    shutil.copytree(out, copy)
    edited = (copy / COMPARE_JSON).read_bytes().replace(b'"regression": 2', b'"regression": 0')
    (copy / COMPARE_JSON).write_bytes(edited)
    (copy / page).write_text((copy / page).read_text().replace("x-2", "x-9"))
    (copy / "pages" / "extra.html").write_text("<p>not written by compare</p>")
    assert comparison_problems(str(copy)) == [f"altered: {COMPARE_JSON}", f"altered: {page}", "unlisted: pages/extra.html"]
    (copy / page).unlink()
    assert f"missing: {page}" in comparison_problems(str(copy))
    manifest_path = copy / "manifest.json"
    forged = orjson.loads(manifest_path.read_bytes())
    forged["documents"]["../run-a/manifest.json"] = forged["documents"][COMPARE_JSON]
    manifest_path.write_bytes(orjson.dumps(forged))
    assert 'manifest: documents lists "../run-a/manifest.json", not a document compare writes' in \
        comparison_problems(str(copy))


def test_the_pages_list_every_changed_slot_with_its_records_and_what_to_do(compared):
    """Issue 42 item 3: no cap; each row's records by name; each situation explained, with its next step."""
    out, rows = compared["out"], compared["rows"]
    html = (out / COMPARE_HTML).read_text()
    page = (out / page_name(S1)).read_text()
    assert "the first" not in html and "<script" not in page
    for row in rows:
        assert f"<td>{row['chunk_id']}</td><td>{row['transition']['from']} → {row['transition']['to']}</td>" in page
    assert page.count("<tr><td>") == len(rows) == 5
    # the records of the reconciliation that changed, by name
    reconciled = next(r for r in rows if r["family"] == "npc-reconciliation")["records"]
    assert reconciled["changed"] == 1 and reconciled["listed"][0]["record"] == 'The NPC "Grog"'
    assert [f["field"] for f in reconciled["listed"][0]["fields"]] == ["aliases"]
    assert "~ The NPC &quot;Grog&quot;: <code>aliases</code>" in page
    # situations: every changed slot in one, each with what it means and what to do next
    situations = compared["document"]["total"]["situations"]
    assert sum(situations.values()) == 5 and situations["absent_from_b"] == situations["retry_requested"] == 1
    for name, n in situations.items():
        if n:
            assert f'id="situation-{name}"' in html and f'compare.html#situation-{name}' in page
    assert "export-batch --retry-requests" in html and str(compared["root"] / "run-b") in html
    assert "where they stand in B: " in compared["stdout"]


def test_a_run_compared_with_itself_writes_no_slot(compared):
    root = compared["root"]
    compare(str(root / "run-b"), str(root / "run-b"), "--output", str(root / "same"), "--output-format", "parquet")
    document = orjson.loads((root / "same" / COMPARE_JSON).read_bytes())
    assert document["total"]["changed_slots"] == 0 and read_rows(root / "same" / "slots") == []
    assert document["total"]["artifacts"]["unchanged"] == 7
    assert orjson.loads((root / "same" / "manifest.json").read_bytes())["files"]["slots"][0]["rows"] == 0


def test_compare_refuses_an_output_in_a_run_and_a_run_that_does_not_verify(compared):
    root = compared["root"]
    inside = compare(str(root / "run-a"), str(root / "run-b"), "--output", str(root / "run-a" / "cmp"), expect=1)
    assert "within reach of RUN_A" in inside.stderr and not (root / "run-a" / "cmp").exists()
    broken = root / "run-b-broken"
    shutil.copytree(root / "run-b", broken)
    next(broken.glob("evaluations/part-*")).unlink()
    refused = compare(str(root / "run-a"), str(broken), "--output", str(root / "cmp-broken"), expect=1)
    assert "run B:" in refused.stderr and "does not verify" in refused.stderr
    used = compare(str(root / "run-a"), str(root / "run-b"), "--output", str(compared["out"]), expect=1)
    assert "--overwrite" in used.stderr


# --- a comparison folder's verify: whatever the folder holds, one line per problem (issue 38) ----------

def comparison_verify(folder: Path) -> subprocess.CompletedProcess:
    """``verify`` in a process of its own, bounded: a read that never ends fails the test, never hangs it."""
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "verify", str(folder)], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.timeout(300)
def test_verify_of_a_comparison_folder_reads_no_pipe_or_device(compared, tmp_path):
    """A listed slots/part-* that is a FIFO and a compare.json that leads to /dev/zero: each one problem line
    (the rule a run folder's verify applies), exit 1; reading either would never end."""
    copy = tmp_path / "cmp"
    shutil.copytree(compared["out"], copy)
    part = next((copy / "slots").glob("part-*"))
    part.unlink()
    os.mkfifo(part)
    (copy / COMPARE_JSON).unlink()
    (copy / COMPARE_JSON).symlink_to("/dev/zero")
    done = comparison_verify(copy)
    assert done.returncode == 1, done.stderr[-2000:]
    problems = [line.strip() for line in done.stdout.splitlines()[:-1]]
    plain = "not a regular file (a link, a pipe or a device): the job writes plain files"
    assert sorted(problems) == sorted([f"altered: {part.relative_to(copy)}: {plain}", f"altered: {COMPARE_JSON}: {plain}"])
    assert "NOT VERIFIED: 2 problem(s)" in done.stdout and "Traceback" not in done.stderr


@pytest.mark.timeout(300)
def test_a_manifest_that_is_a_pipe_is_one_problem_line(compared, tmp_path):
    """The commit record itself obeys the same rule: a manifest.json that is a FIFO is refused, not read."""
    copy = tmp_path / "cmp"
    shutil.copytree(compared["out"], copy)
    (copy / "manifest.json").unlink()
    os.mkfifo(copy / "manifest.json")
    done = comparison_verify(copy)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stdout.splitlines()[0].strip() == \
        "manifest.json is not a regular file (a link, a pipe or a device): the job writes plain files"


@pytest.fixture(scope="module")
def comparison_facts(compared):
    """The committed comparison's manifest and what its folder holds now (as verify reads it)."""
    from pipelines.verify import comparison_folder_facts

    return compared["manifest"], comparison_folder_facts(str(compared["out"]), compared["manifest"])


# What verify of a comparison folder checks: every value under these keys matters.
COMPARISON_CHECKED = (("kind",), ("files",), ("outputs",), ("documents",), ("conservation",))
WRONG_TYPES = st.sampled_from([None, True, 0, -1, 1.5, "x", "", [], [1], {}, {"x": 1}])


def _set_at(manifest: dict, path: tuple, value) -> dict:
    copy = orjson.loads(orjson.dumps(manifest))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return copy


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*prefix, index)
            yield from _paths(value, (*prefix, index))


def test_the_committed_comparison_has_no_problem(comparison_facts):
    manifest, facts = comparison_facts
    assert comparison_folder_problems(manifest, *facts) == []


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_wrong_typed_value_anywhere_in_a_comparison_manifest_is_a_problem_line(comparison_facts, data):
    """Any key of a real comparison manifest given a value of another type: problems (one line each), never an
    exception; under a key verify checks, at least one problem."""
    manifest, facts = comparison_facts
    path = data.draw(st.sampled_from(list(_paths(manifest))))
    old = manifest
    for key in path:
        old = old[key]
    value = data.draw(WRONG_TYPES.filter(lambda v: type(v) is not type(old)))
    problems = comparison_folder_problems(_set_at(manifest, path, value), *facts)
    assert all(isinstance(p, str) and "\n" not in p for p in problems)
    if path[:1] in COMPARISON_CHECKED:
        assert problems, path


@pytest.mark.parametrize("key", ["documents", "outputs", "conservation"])
@pytest.mark.parametrize("value", [[], "x", 3, None])
def test_a_comparison_manifest_block_of_the_wrong_type_is_one_line_exit_1(compared, tmp_path, capsys, key, value):
    from pipelines import verify

    copy = tmp_path / "cmp"
    shutil.copytree(compared["out"], copy)
    manifest = orjson.loads((copy / "manifest.json").read_bytes())
    (copy / "manifest.json").write_bytes(orjson.dumps({**manifest, key: value}))
    assert verify.main([str(copy)]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert any(line.strip().startswith(f"manifest: {key} is") for line in printed), printed
    assert printed[-1].endswith("problem(s)")


# --- a run that verifies but holds a row of the wrong type (issue 38, item 5) --------------------------

GOOD_ROWS = {
    "evaluations": {"family": "spells", "source_id": S1, "chunk_id": "x-1", "candidate_id": "c1", "attempt": 1,
                    "verdict": "rejected", "issues": [{"validator": "v", "reason_code": "r"}]},
    "retry_requests": {"family": "spells", "source_id": S1, "chunk_id": "x-1", "kind": "retry", "candidate_id": "c1",
                       "attempt": 2},
    "artifacts": {"family": "spells", "source_id": S1, "chunk_id": "x-1", "records": [{"name": "Shield"}],
                  "provenance": {"candidate_id": "c2", "attempt": 2}},
}
# Values a row read back can hold (orjson reads integers of 64 bits; JSON has no NaN).
ANY_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1)
                        | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                   max_size=3), max_leaves=6)


@pytest.mark.parametrize("output,path,value", [
    ("evaluations", ("attempt",), "1"), ("evaluations", ("issues",), 5), ("evaluations", ("issues",), True),
    ("evaluations", ("verdict",), 3), ("evaluations", ("candidate_id",), None), ("evaluations", ("family",), []),
    ("retry_requests", ("kind",), 1), ("retry_requests", ("attempt",), 1.5), ("retry_requests", ("kind",), "later"),
    ("artifacts", ("provenance",), []), ("artifacts", ("records",), {}), ("artifacts", ("provenance", "attempt"), "2"),
])
def test_a_row_of_the_wrong_type_is_a_row_error(output, path, value):
    row = orjson.loads(orjson.dumps(GOOD_ROWS[output]))
    target = row
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(RowError) as refused:
        facts_by_slot(output, [row])
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 200


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_a_row_of_any_shape_is_facts_or_a_row_error(data):
    """Any field of an evaluation, request or artifact row (a nested one too) given any JSON value: the row
    is read as facts or refused with a RowError (one line), never another exception."""
    output = data.draw(st.sampled_from(sorted(GOOD_ROWS)))
    row = orjson.loads(orjson.dumps(GOOD_ROWS[output]))
    assert facts_by_slot(output, [row])
    target = row
    while isinstance(target, dict) and data.draw(st.booleans()):
        nested = [key for key, value in target.items() if isinstance(value, (dict, list)) and value]
        if not nested:
            break
        value = target[data.draw(st.sampled_from(nested))]
        target = value[0] if isinstance(value, list) else value
    if isinstance(target, dict):
        target[data.draw(st.sampled_from([*sorted(target), "extra"]))] = data.draw(ANY_JSON)
    try:
        facts_by_slot(output, [row])
    except RowError as exc:
        assert "\n" not in str(exc)


def _rewrite_output(run: Path, output: str, rows: list[dict]) -> Path:
    """One output of a run rewritten as one JSON Lines file, listed with its size and hash: the run verifies."""
    for old in (run / output).glob("part-*"):
        old.unlink()
    path = run / output / "part-00000-of-00001.jsonl"
    data = b"".join(orjson.dumps(row) + b"\n" for row in rows)
    path.write_bytes(data)
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    manifest["files"][output] = [{"path": f"{output}/{path.name}", "format": "jsonl", "bytes": len(data),
                                  "sha256": hashlib.sha256(data).hexdigest(), "rows": len(rows)}]
    (run / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return path


@pytest.mark.parametrize("field,value", [("attempt", "1"), ("issues", 5)])
def test_compare_refuses_a_verified_run_with_a_row_of_the_wrong_type_and_commits_nothing(compared, tmp_path,
                                                                                         field, value):
    """An evaluation's ``attempt`` as "1" (or its issues a number), its file listed with its new hash so the
    run verifies: compare ends with one line naming the file and the row, exit 1, and leaves no manifest and
    no slots/ (the folder it claimed holds nothing)."""
    from pipelines import verify

    root = compared["root"]
    run = tmp_path / "run-b"
    shutil.copytree(root / "run-b", run)
    evaluations = read_rows(run / "evaluations")
    evaluations[2][field] = value
    path = _rewrite_output(run, "evaluations", evaluations)
    assert verify.verify_folder(str(run)).ok
    out = tmp_path / "cmp"
    done = compare(str(root / "run-a"), str(run), "--output", str(out), expect=1)
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr[-3000:]
    assert f"run B: {path} row 3: " in done.stderr and repr(field) in done.stderr, done.stderr
    assert not out.exists() or [p.name for p in out.iterdir()] == []
