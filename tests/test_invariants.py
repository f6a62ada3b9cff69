"""Normalization invariants (contract §4.2): checked on every artifact, shown to operators only."""

from __future__ import annotations

import dataclasses
from collections import Counter

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import domain.rows as rows
from domain.assets import current_fingerprints
from domain.evaluate import duplicate_artifact_ids, is_invariant_issue, normalization_invariants
from domain.evidence import SourceRef, resolve
from domain.families import FAMILIES
from domain.families.base import Adapted, EvaluationContext
from domain.families.spells import SpellRecord
from domain.frozen import replaced
from domain.manifest import build_manifest
from domain.reprocess import RunConfig, process_source
from domain.source import transcript_from_record
from leak_check import assert_model_safe

SOURCE = "crd3:T-INV"
UNIT_IDS = [10, 3, 7, 20, 1, 2]  # document order
TRANSCRIPT_RECORD = {
    "source_id": SOURCE,
    "units": [{"unit_id": u, "speaker": "SAM", "text": f"line {u}"} for u in UNIT_IDS],
    "chunks": [{"chunk_id": "x-1", "kind": "extraction", "unit_ids": [10, 3, 7]},
               {"chunk_id": "x-2", "kind": "extraction", "unit_ids": [20, 1, 2]}],
}
TRANSCRIPT = transcript_from_record(TRANSCRIPT_RECORD)
CTX = EvaluationContext(TRANSCRIPT, TRANSCRIPT.chunk("x-1"))
FIREBALL = {"spells": [{"spell_name": "Fireball", "caster_name": "SAM",
                        "cast": {"level": 3, "as_ritual": False, "target_names": []},
                        "evidence": [{"start_unit_id": 10, "end_unit_id": 10}, {"start_unit_id": 3, "end_unit_id": 7}]}]}


def ref(start: int, end: int) -> SourceRef:
    return SourceRef(SOURCE, start, end)


def spell(*refs: SourceRef) -> SpellRecord:
    return SpellRecord("Fireball", "SAM", 3, False, (), tuple(refs))


def line(cid: str, chunk: str, attempt: int = 1, response=FIREBALL) -> bytes:
    prompt_fp, schema_fp = current_fingerprints("spells")
    return orjson.dumps({
        "candidate_id": cid, "family": "spells", "source_id": SOURCE, "chunk_id": chunk, "attempt": attempt,
        "producer": {"provider": "p", "model": "m"}, "prompt_fingerprint": prompt_fp, "schema_fingerprint": schema_fp,
        "raw_response": orjson.dumps(response).decode(), "received_at": "2026-10-01T12:00:00Z",
    })


# --- the checks themselves ------------------------------------------------------------------------

def test_canonical_state_has_no_invariant_issue():
    assert normalization_invariants(Adapted((spell(ref(10, 10), ref(3, 7)),), 10), CTX) == ()


@pytest.mark.parametrize("refs,earliest,expected", [
    ((ref(3, 7), ref(10, 10)), 10, {"evidence_not_canonical"}),  # not sorted by document position
    ((ref(10, 10), ref(10, 10)), 10, {"evidence_not_canonical"}),  # a duplicate
    ((ref(7, 3),), 7, {"evidence_not_canonical"}),  # reversed
    ((ref(10, 10), ref(3, 7)), 3, {"earliest_evidence_inconsistent"}),
    ((ref(3, 7), ref(10, 10)), 3, {"evidence_not_canonical", "earliest_evidence_inconsistent"}),
])
def test_broken_derived_state_is_an_operator_only_issue(refs, earliest, expected):
    issues = normalization_invariants(Adapted((spell(*refs),), earliest), CTX)
    assert {issue.reason_code for issue in issues} == expected
    assert all(issue.correction is None and is_invariant_issue(issue) for issue in issues)


def reference_invariant_codes(records, earliest):
    """The two evidence invariants as contract §4.2 states them, unit by unit through the index."""
    index = TRANSCRIPT.index

    def positions(r):
        first, last = index.position(r.start_unit_id), index.position(r.end_unit_id)
        return None if r.source_id != SOURCE or first is None or last is None else (first, last)

    def key(r):
        p = positions(r)
        return (1, 0, 0, repr((r.source_id, r.start_unit_id, r.end_unit_id))) if p is None else (0, *p, "")

    codes, starts, cited = [], [], False
    for n, record in enumerate(records):
        if record.evidence is None:
            continue
        keys = [key(r) for r in record.evidence]
        if not (all(k[0] == 1 or k[1] <= k[2] for k in keys) and keys == sorted(keys)
                and len(set(record.evidence)) == len(record.evidence)):
            codes.append(("evidence_not_canonical", f"records[{n}].evidence"))
        starts += [p[0] for p in map(positions, record.evidence) if p is not None]
        cited = cited or bool(record.evidence)
    if cited and (index.unit_ids_in_order[min(starts)] if starts else None) != earliest:
        codes.append(("earliest_evidence_inconsistent", "earliest_evidence_unit_id"))
    return codes


plain_invariant_refs = st.builds(SourceRef, st.sampled_from([SOURCE, SOURCE, "other"]),
                                 st.one_of(st.sampled_from(UNIT_IDS), st.sampled_from([99, None, True])),
                                 st.one_of(st.sampled_from(UNIT_IDS), st.sampled_from([99, None, True])))
# As adapters store them too: resolved through the transcript's index (the invariants' one-range fast path).
invariant_refs = st.one_of(plain_invariant_refs,
                           plain_invariant_refs.map(lambda ref: resolve(TRANSCRIPT.index, ref) or ref))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.lists(invariant_refs, max_size=4).map(tuple)), max_size=4),
       st.one_of(st.none(), st.sampled_from(UNIT_IDS)))
def test_normalization_invariants_equal_their_definition(evidence_lists, earliest):
    from types import SimpleNamespace

    records = tuple(SimpleNamespace(evidence=evidence) for evidence in evidence_lists)
    issues = normalization_invariants(Adapted(records, earliest), CTX)
    assert [(i.reason_code, i.location) for i in issues] == reference_invariant_codes(records, earliest)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a-1", "a-2", "a-3", "a-4", "a-5"]), max_size=8))
def test_duplicate_artifact_ids_flags_exactly_the_shared_ids(ids):
    found = duplicate_artifact_ids(ids)
    counts = Counter(ids)
    assert [n for n, _ in found] == [n for n, artifact_id in enumerate(ids) if counts[artifact_id] > 1]
    assert all(issue.correction is None and is_invariant_issue(issue) for _, issue in found)


# --- forced failures through the job: operators see them, producers never do ------------------------

def broken_spells(monkeypatch, break_adapted):
    """Replace the spells family by one whose adapter returns deliberately broken derived state."""
    spec = FAMILIES["spells"]

    def adapt(response, transcript):
        return break_adapted(spec.adapt(response, transcript))

    monkeypatch.setitem(FAMILIES, "spells", dataclasses.replace(spec, adapt=adapt))


def unsort_evidence(adapted: Adapted) -> Adapted:
    return Adapted(tuple(replaced(r, evidence=tuple(reversed(r.evidence))) for r in adapted.records),
                   adapted.earliest_evidence_unit_id)


def wrong_earliest(adapted: Adapted) -> Adapted:
    return Adapted(adapted.records, 7)


@pytest.mark.parametrize("break_adapted,codes", [
    (unsort_evidence, ["evidence_not_canonical"]),
    (wrong_earliest, ["earliest_evidence_inconsistent"]),
])
def test_an_invariant_failure_reaches_operators_and_never_the_producer(monkeypatch, break_adapted, codes):
    broken_spells(monkeypatch, break_adapted)
    result = process_source(SOURCE, [orjson.dumps(TRANSCRIPT_RECORD)], [line("c-1", "x-1")], RunConfig())
    (row,) = result.evaluations
    assert row["verdict"] == "rejected"
    assert [i["reason_code"] for i in row["issues"]] == codes
    assert all(i["validator"].startswith("invariant.") for i in row["issues"])
    assert result.counts["invariant_failures/spells"] == 1
    manifest = build_manifest(result.counts, options={}, runner="test")
    assert manifest["invariant_failures"]["by_family"]["spells"] == 1 and manifest["invariant_failures"]["total"] == 1
    # the producer only hears about the response it controls
    (request,) = result.retry_requests
    guidance = request["correction_guidance"]
    problems = [text for text in guidance.split("\n") if text.startswith("- ")]
    assert problems == ["- The response: It could not be turned into a valid result. Produce it again from the "
                        "excerpt, following the response shape and citing evidence inside the excerpt."]
    for word in ("canonical", "earliest", "sorted", "invariant", "evidence_not", "derived"):
        assert word not in guidance
    assert_model_safe(guidance, row["issues"], "c-1", SOURCE, "x-1")


def test_an_invariant_failure_on_the_last_attempt_is_counted_and_asks_nothing(monkeypatch):
    broken_spells(monkeypatch, unsort_evidence)
    result = process_source(SOURCE, [orjson.dumps(TRANSCRIPT_RECORD)],
                            [line("c-1", "x-1", 1), line("c-2", "x-1", 2)], RunConfig(max_attempts=2))
    assert result.counts["invariant_failures/spells"] == 2
    assert result.counts["outcome/spells/exhausted"] == 1 and not result.retry_requests


def test_shared_artifact_ids_are_reported_to_operators_only(monkeypatch):
    monkeypatch.setattr(rows, "artifact_id", lambda *parts: "a-" + "0" * 32)
    result = process_source(SOURCE, [orjson.dumps(TRANSCRIPT_RECORD)],
                            [line("c-1", "x-1"), line("c-2", "x-2", response={"spells": []})], RunConfig())
    assert [a["artifact_id"] for a in result.artifacts] == ["a-" + "0" * 32] * 2
    for row in result.evaluations:
        assert row["verdict"] == "accepted"  # a bug of ours does not change the producer's outcome
        assert [(i["validator"], i["reason_code"]) for i in row["issues"]] == [
            ("invariant.artifact_id", "duplicate_artifact_id")]
    assert result.counts["invariant_failures/spells"] == 2 and not result.retry_requests
    assert build_manifest(result.counts, options={}, runner="test")["invariant_failures"]["total"] == 2


def test_a_healthy_source_reports_no_invariant_failure():
    result = process_source(SOURCE, [orjson.dumps(TRANSCRIPT_RECORD)],
                            [line("c-1", "x-1"), line("c-2", "x-2", response={"spells": []})], RunConfig())
    assert len({a["artifact_id"] for a in result.artifacts}) == 2
    assert not any(key.startswith("invariant_failures/") for key in result.counts)
    assert build_manifest(result.counts, options={}, runner="test")["invariant_failures"]["total"] == 0
