"""Retry-economy figures on a small hand-made archive whose answers are known by construction.

The archive is decided by the real per-source entry point (``process_source``,
no Beam), so evaluations and retry requests are the job's own; the ground
truth is written by hand next to each candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.ground_truth import DefectVocabulary, TruthDefect, TruthRow, parse_truth_row
from analysis.retry_economy import (defect_recall, find_leaks, internal_tokens, names_defect, request_coverage,
                                    retry_economy)
from analysis.savings import ArchivedCandidate, canonicalization_savings, without_endpoint_ordering
from analysis.slots import Slot
from domain.assets import current_fingerprints
from domain.evaluate import evaluate_response
from domain.evidence import SourceRef, canonical_evidence, evidence_as_written
from domain.families import FAMILIES
from domain.families.base import EvaluationContext, Evidence
from domain.issues import render_range
from domain.reprocess import RunConfig, process_source
from domain.source import parse_transcript
from sample.sim_vocabulary import SIMULATED_VOCABULARY

MAX_ATTEMPTS = 3
# Document order falls and rises: 5..8 come after 15.
IDS = [10, 11, 12, 13, 14, 15, 5, 6, 7, 8]
CHUNKS = [
    {"chunk_id": "x-1", "kind": "extraction", "unit_ids": [10, 11, 12, 13, 14]},
    {"chunk_id": "x-2", "kind": "extraction", "unit_ids": [15, 5, 6, 7, 8]},
]
VOCABULARY = DefectVocabulary(
    benign=frozenset({"reversed_endpoints", "reversed_endpoints_renumbered", "utf8_bom"}),
    canonicalized=frozenset({"reversed_endpoints", "reversed_endpoints_renumbered"}),
    unparseable=frozenset({"truncated_json"}),
    schema=frozenset({"unsupported_enum"}),
)


def transcript_record(source_id: str) -> dict:
    return {"source_id": source_id,
            "units": [{"unit_id": u, "speaker": "MATT", "text": f"line {u}"} for u in IDS],
            "chunks": CHUNKS}


def ev(start, end):
    return {"start_unit_id": start, "end_unit_id": end}


def spells(start, end):
    return {"spells": [{"spell_name": "Shield", "caster_name": "SAM",
                        "cast": {"level": None, "as_ritual": False, "target_names": []},
                        "evidence": [ev(start, end)]}]}


def npcs(start, end, name="Grog"):
    return {"npcs": [{"name": name, "aliases": [], "description": "a goliath", "evidence": [ev(start, end)]}]}


def defect(kind, name=None, rng=None):
    return {"kind": kind, "record_name": name, "range": rng}


@dataclass(frozen=True)
class Planned:
    source_id: str
    chunk_id: str
    family: str
    attempt: int
    raw: str
    defects: tuple = ()

    @property
    def candidate_id(self):
        return f"c-{self.source_id}-{self.chunk_id}-{self.family}-{self.attempt}"

    @property
    def expected_pass(self):
        return all(d["kind"] in VOCABULARY.benign for d in self.defects)

    def line(self) -> bytes:
        prompt, schema = current_fingerprints(self.family)
        return orjson.dumps({
            "candidate_id": self.candidate_id, "family": self.family, "source_id": self.source_id,
            "chunk_id": self.chunk_id, "attempt": self.attempt,
            "producer": {"provider": "hand", "model": "hand-1"},
            "prompt_fingerprint": prompt, "schema_fingerprint": schema,
            "raw_response": self.raw, "received_at": "2026-10-01T12:00:00Z"})

    def truth(self) -> dict:
        return {"candidate_id": self.candidate_id, "family": self.family, "source_id": self.source_id,
                "chunk_id": self.chunk_id, "attempt": self.attempt, "defects": list(self.defects),
                "expected_pass": self.expected_pass}


def js(value) -> str:
    return orjson.dumps(value).decode()


blank_item = js({"items": [{"name": " ", "aliases": [], "description": "d", "evidence": [ev(15, 5)]}]})
PLAN = (
    # S1 spells x-1: written backwards (12 after 10), passes only thanks to ordering -> saved.
    Planned("S1", "x-1", "spells", 1, js(spells(12, 10)), (defect("reversed_endpoints", "Shield", [12, 10]),)),
    # S1 combat-turns x-2: ids fall (15 -> 6) but the range runs forward in the document -> not saved.
    Planned("S1", "x-2", "combat-turns", 1, js({"turns": [{"round": 1, "actor_name": "SAM", "turn_kind": "dodge",
                                                        "target_names": [], "evidence": [ev(15, 6)]}]})),
    # S1 npc-registry x-1: backwards, then a forward retry that passes too (superseded) -> not saved.
    Planned("S1", "x-1", "npc-registry", 1, js(npcs(13, 11)), (defect("reversed_endpoints", "Grog", [13, 11]),)),
    Planned("S1", "x-1", "npc-registry", 2, js(npcs(11, 13))),
    # S1 npc-registry x-2: 8 is written first but comes after 6 in the document -> saved.
    Planned("S1", "x-2", "npc-registry", 1, js(npcs(8, 6, "Pike")),
            (defect("reversed_endpoints_renumbered", "Pike", [8, 6]),)),
    # S1 npc-occurrences x-1: forward; the npc kind keeps x-1's registry -> not saved, not deferred.
    Planned("S1", "x-1", "npc-occurrences", 1,
            js({"occurrences": [{"npc_name": "Grog", "kind": "present", "evidence": [ev(10, 11)]}]})),
    # S1 enemy-events x-1: two blocking defects on two records -> one retry request naming both.
    Planned("S1", "x-1", "enemy-events", 1, js({"events": [
        {"enemy_name": "Goblin", "kind": "engaged", "evidence": [ev(10, 10)]},
        {"enemy_name": "Goblin", "kind": "engaged", "evidence": [ev(12, 12)]},
        {"enemy_name": "Orc", "kind": "appeared", "evidence": [ev(14, 15)]}]}),
        (defect("duplicate_engaged", "Goblin", [12, 12]), defect("span_outside_chunk", "Orc", [14, 15]))),
    # S1 location-registry x-1: truncated JSON hides the blank name -> request; 1 named, 1 hidden.
    Planned("S1", "x-1", "location-registry", 1, '{"locations": [{"name": " ", "aliases": [], "desc',
            (defect("truncated_json"), defect("blank_name", None, [10, 10]))),
    # S1 item-registry x-2: fails three times -> exhausted, no request.
    *(Planned("S1", "x-2", "item-registry", n, blank_item, (defect("blank_name", None, [15, 5]),))
      for n in (1, 2, 3)),
    # S2 npc-registry x-1: backwards, only attempt -> saved; S2's npc kind is then lost, so
    # S2's (forward, passing) npc-occurrences slot would be deferred.
    Planned("S2", "x-1", "npc-registry", 1, js(npcs(14, 10)), (defect("reversed_endpoints", "Grog", [14, 10]),)),
    Planned("S2", "x-1", "npc-occurrences", 1,
            js({"occurrences": [{"npc_name": "Grog", "kind": "acting", "evidence": [ev(13, 13)]}]})),
)


@dataclass(frozen=True)
class HandRun:
    evaluations: tuple
    requests: tuple
    counts: dict
    transcripts: dict
    candidates: dict
    truth: tuple


def hand_run() -> HandRun:
    """The archive decided by the real per-source entry point."""
    evaluations, requests, counts = [], [], {}
    for source_id in ("S1", "S2"):
        lines = [p.line() for p in PLAN if p.source_id == source_id]
        result = process_source(source_id, [orjson.dumps(transcript_record(source_id))], lines,
                                RunConfig(max_attempts=MAX_ATTEMPTS))
        evaluations += result.evaluations
        requests += result.retry_requests
        for key, value in result.counts.items():
            counts[key] = counts.get(key, 0) + value
        counts["candidates_in"] = counts.get("candidates_in", 0) + len(lines)
        counts["transcripts_in"] = counts.get("transcripts_in", 0) + 1
    transcripts = {s: parse_transcript(orjson.dumps(transcript_record(s))) for s in ("S1", "S2")}
    candidates = {p.candidate_id: ArchivedCandidate(p.candidate_id, Slot(p.family, p.source_id, p.chunk_id),
                                                    p.attempt, p.raw) for p in PLAN}
    truth = tuple(parse_truth_row(p.truth()) for p in PLAN)
    return HandRun(tuple(evaluations), tuple(requests), counts, transcripts, candidates, truth)


@pytest.fixture(scope="module")
def run() -> HandRun:
    return hand_run()


def test_the_archive_decides_as_planned(run):
    verdicts = {row["candidate_id"]: row["verdict"] for row in run.evaluations}
    for planned in PLAN:
        assert (verdicts[planned.candidate_id] in ("accepted", "superseded")) == planned.expected_pass, planned
    assert sorted((r["family"], r["chunk_id"]) for r in run.requests) == [
        ("enemy-events", "x-1"), ("location-registry", "x-1")]


def test_savings_by_re_evaluation_without_endpoint_ordering(run):
    saved = canonicalization_savings(run.evaluations, run.transcripts, run.candidates)
    assert saved.would_retry == {"npc-registry": 2, "spells": 1}
    assert saved.would_defer == {"npc-occurrences": 1}
    assert (saved.retries_saved, saved.deferrals_saved, saved.unavailable) == (3, 1, 0)
    assert saved.accepted_slots == 7


def test_savings_count_what_cannot_be_re_evaluated(run):
    missing = {cid: c for cid, c in run.candidates.items() if not cid.startswith("c-S2")}
    saved = canonicalization_savings(run.evaluations, {"S1": run.transcripts["S1"]}, missing)
    assert saved.unavailable == 2 and saved.would_retry == {"npc-registry": 1, "spells": 1}


def test_ground_truth_agrees_on_savings(run):
    economy = retry_economy(run.truth, run.evaluations, run.requests, MAX_ATTEMPTS, VOCABULARY)
    assert economy.saved_by_truth == {"npc-registry": 2, "spells": 1}


def test_recall_coverage_agreement_and_no_leaks(run):
    economy = retry_economy(run.truth, run.evaluations, run.requests, MAX_ATTEMPTS, VOCABULARY)
    recall = economy.recall
    assert (recall.named, recall.total, recall.hidden, recall.missed) == (3, 3, 1, ())
    assert (recall.first_attempt_named, recall.first_attempt_total) == (3, 3)
    # enemy-events and location-registry fail with budget left; item-registry is exhausted.
    assert economy.coverage.failing_slots == 2
    assert economy.coverage.requests_per_failing_slot == {1: 2}
    assert economy.coverage.ok
    assert economy.leaks == ()
    assert (economy.agreement.agreeing, economy.agreement.compared) == (len(PLAN), len(PLAN))
    assert economy.ok


def test_a_missing_or_doubled_request_breaks_coverage(run):
    truth = {row.candidate_id: row for row in run.truth}
    first, second = run.requests
    doubled = request_coverage(truth, run.evaluations, (first, first, second), MAX_ATTEMPTS)
    assert doubled.requests_per_failing_slot == {1: 1, 2: 1} and not doubled.ok
    missing = request_coverage(truth, run.evaluations, (first,), MAX_ATTEMPTS)
    assert missing.requests_per_failing_slot == {0: 1, 1: 1} and not missing.ok
    stray = dict(first, family="spells")  # a request for the accepted spells slot
    extra = request_coverage(truth, run.evaluations, (first, second, stray), MAX_ATTEMPTS)
    assert extra.unexpected_requests == (Slot("spells", "S1", "x-1"),) and not extra.ok


def test_a_guidance_that_drops_a_defect_is_a_miss(run):
    truth = {row.candidate_id: row for row in run.truth}
    request = next(r for r in run.requests if r["family"] == "enemy-events")
    lines = request["correction_guidance"].splitlines()
    cut = dict(request, correction_guidance="\n".join(line for line in lines if '"Orc"' not in line))
    recall = defect_recall((cut,), truth, VOCABULARY)
    assert (recall.named, recall.total) == (1, 2)
    assert [m.defect.record_name for m in recall.missed] == ["Orc"]


@pytest.mark.parametrize("planted, what", [
    ("c-S1-x-1-enemy-events-1", "candidate id"),
    ("chunk x-1.", "chunk id"),
    ("source S1", "source id"),
    ("reason duplicate_engaged", "reason code"),
    ("`enemy_events.engagement`", "validator key"),
    ("see events[1].kind", "code path"),
    ("at /events/1 now", "JSON pointer"),
    ("sha256:0123", "hash or fingerprint"),
    ("0123456789abcdef0123", "hash or fingerprint"),
    ("KeyError: 'kind'", "exception text"),
])
def test_leaks_are_found(run, planted, what):
    tokens = internal_tokens(run.evaluations, run.requests)
    request = dict(run.requests[0], correction_guidance=f"- The event: fix it ({planted}).")
    assert what in {leak.what for leak in find_leaks(request, tokens)}


@settings(max_examples=200, deadline=None)
@given(ids=st.dictionaries(st.text("ab :.-_é", min_size=1, max_size=6), st.sampled_from(["candidate id", "source id"]),
                           max_size=8),
       guidance=st.text("ab :.-_é()", max_size=30))
def test_an_id_no_word_can_hold_is_found_as_text(ids, guidance):
    """The ids a word cannot hold are listed once per run (issue 43), and each is still searched for in
    every request's guidance as text."""
    from analysis.retry_economy import InternalTokens, _TOKEN

    tokens = InternalTokens(ids)
    assert tokens.untokenizable == tuple((t, w) for t, w in sorted(ids.items()) if _TOKEN.fullmatch(t) is None)
    found = {(leak.what, leak.text) for leak in find_leaks({"request_id": "r", "correction_guidance": guidance}, tokens)}
    for token, what in tokens.untokenizable:
        assert ((what, token) in found) == (token in guidance)


def test_plain_guidance_prose_is_not_a_leak(run):
    tokens = internal_tokens(run.evaluations, run.requests)
    prose = ('- The engaged event of the enemy "Goblin" (units 10–12): cite units 1–30 and set `kind`; '
             "the structure is one JSON object.")
    assert find_leaks(dict(run.requests[0], correction_guidance=prose), tokens) == ()


# --- naming ---------------------------------------------------------------------------------

def test_names_defect_by_quoted_name_or_range():
    guidance = '- The NPC "Grog" (units 40–44): Its name is blank.'
    assert names_defect(guidance, TruthDefect("blank_name", "Grog", None))
    assert names_defect(guidance, TruthDefect("blank_name", None, (44, 40)))  # canonicalized order
    assert not names_defect(guidance, TruthDefect("blank_name", None, (44, 40)), reorders_endpoints=False)
    assert not names_defect(guidance, TruthDefect("blank_name", "Gro", (4, 4)))  # no partial name or unit
    assert not names_defect('- unit 40 and units 4–444', TruthDefect("x", None, (4, 44)))
    assert names_defect('- The response: It stops.', TruthDefect("truncated_json", None, None))
    assert not names_defect('- The NPC "Grog": x', TruthDefect("truncated_json", None, None))


def test_detectable_defects_hide_behind_structure():
    d = {kind: TruthDefect(kind, None, None) for kind in ("truncated_json", "unsupported_enum", "blank_name",
                                                           "reversed_endpoints")}
    assert VOCABULARY.detectable(d.values()) == (d["truncated_json"],)
    assert VOCABULARY.detectable([d["unsupported_enum"], d["blank_name"]]) == (d["unsupported_enum"],)
    assert VOCABULARY.detectable([d["blank_name"], d["reversed_endpoints"]]) == (d["blank_name"],)


def test_simulated_vocabulary_matches_the_producer():
    from sample.sim_defects import BENIGN_KINDS, BLOCKING_KINDS, STRUCTURAL_KINDS

    assert SIMULATED_VOCABULARY.benign == BENIGN_KINDS
    assert SIMULATED_VOCABULARY.canonicalized <= BENIGN_KINDS
    assert SIMULATED_VOCABULARY.unparseable | SIMULATED_VOCABULARY.schema == STRUCTURAL_KINDS
    assert STRUCTURAL_KINDS <= BLOCKING_KINDS


# --- the adapter variant ---------------------------------------------------------------------

def test_variant_exists_only_for_families_that_order_endpoints():
    for key, spec in FAMILIES.items():
        variant = without_endpoint_ordering(spec)
        assert (variant is not spec) == (spec.chunk_kind == "extraction"), key
        assert without_endpoint_ordering(spec) is variant  # built once


@st.composite
def document_and_ranges(draw):
    ids = draw(st.lists(st.integers(1, 10_000), min_size=2, max_size=12, unique=True))
    pairs = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)), min_size=1, max_size=5))
    return ids, pairs


@settings(max_examples=60, deadline=None)
@given(document_and_ranges())
def test_without_ordering_only_reversed_ranges_fail(case):
    """Invariant: with one chunk over the whole document, the job passes any
    resolvable range, and the variant fails exactly when a written range
    runs backwards in document order (never by id order)."""
    ids, pairs = case
    record = {"source_id": "S", "units": [{"unit_id": u, "speaker": "A", "text": "t"} for u in ids],
              "chunks": [{"chunk_id": "x", "kind": "extraction", "unit_ids": ids}]}
    transcript = parse_transcript(orjson.dumps(record))
    raw = js({"spells": [{"spell_name": "Shield", "caster_name": "SAM",
                          "cast": {"level": None, "as_ritual": False, "target_names": []},
                          "evidence": [ev(a, b) for a, b in pairs]}]})
    ctx = EvaluationContext(transcript, transcript.chunk("x"))
    spec = FAMILIES["spells"]
    backwards = any(ids.index(a) > ids.index(b) for a, b in pairs)
    assert evaluate_response(spec, raw, ctx).passed
    assert evaluate_response(without_endpoint_ordering(spec), raw, ctx).passed == (not backwards)


@settings(max_examples=60, deadline=None)
@given(document_and_ranges())
def test_evidence_as_written_is_canonical_evidence_minus_the_swap(case):
    ids, pairs = case
    transcript = parse_transcript(orjson.dumps({
        "source_id": "S", "units": [{"unit_id": u, "speaker": "A", "text": "t"} for u in ids],
        "chunks": [{"chunk_id": "x", "kind": "extraction", "unit_ids": ids}]}))
    written = evidence_as_written(transcript.index, "S", [Evidence(start_unit_id=a, end_unit_id=b) for a, b in pairs])
    assert set(written) == {SourceRef("S", a, b) for a, b in pairs}  # as written, each once
    positions = [(ids.index(ref.start_unit_id), ids.index(ref.end_unit_id)) for ref in written]
    assert positions == sorted(positions)  # by document position, a backwards range by its written start
    forward = [(a, b) if ids.index(a) <= ids.index(b) else (b, a) for a, b in pairs]
    assert evidence_as_written(transcript.index, "S", [Evidence(start_unit_id=a, end_unit_id=b) for a, b in forward]) == \
        canonical_evidence(transcript.index, "S", (SourceRef("S", a, b) for a, b in pairs))


def test_truth_rows_parse():
    row = parse_truth_row({"candidate_id": "c", "family": "spells", "source_id": "S", "chunk_id": "x",
                           "attempt": 2, "defects": [{"kind": "k", "record_name": "n", "range": [3, 1]}],
                           "expected_pass": False})
    assert row == TruthRow("c", Slot("spells", "S", "x"), 2, (TruthDefect("k", "n", (3, 1)),), False)
    assert render_range(3, 1) == "units 3–1"  # the wording names_defect looks for
