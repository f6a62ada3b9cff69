"""The slot decision is a value (issue 30, item 3): ``decide_slot`` returns what a slot comes to
(verdicts per attempt, outcome, the request to write, counter increments) and writes nothing;
the per-source orchestration turns it into rows and counts."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from domain import counters
from domain.assets import current_fingerprints
from domain.families import FAMILIES
from domain.families.base import EvaluationContext
from domain.intake import parse_candidate
from domain.reprocess import RunConfig, process_source
from domain.revision import KIND_REFRESH, KIND_RETRY
from domain.rows import VERDICT_ACCEPTED, VERDICT_DEFERRED, VERDICT_REJECTED, VERDICT_SUPERSEDED
from domain.slot_decision import SlotDecision, decide_slot
from domain.source import parse_transcript
from test_intake import COMPACT, PASSING, SOURCE, candidate

SPELLS = FAMILIES["spells"]
FAILING = orjson.dumps({"spells": [{"spell_name": "Fireball", "caster_name": "Grog",
                                    "cast": {"level": 99, "as_ritual": False, "target_names": []},
                                    "evidence": [{"start_unit_id": 7, "end_unit_id": 9}]}]}).decode()
STALE_FP = "sha256:" + "0" * 64


def attempt(cid: str, n: int, raw: str, *, stale: bool = False):
    changes = {"attempt": n}
    if stale:
        changes["prompt_fingerprint"] = STALE_FP
    return parse_candidate(candidate(cid, "2026-10-01T12:00:00Z", raw, **changes))


def context() -> EvaluationContext:
    transcript = parse_transcript(COMPACT)
    return EvaluationContext(transcript, transcript.chunk("x-1"))


def decide(attempts, ctx=None, *, max_attempts=3, refresh_stale=False) -> SlotDecision:
    return decide_slot(SPELLS, "x-1", attempts, context() if ctx is None else ctx,
                       max_attempts=max_attempts, refresh_stale=refresh_stale)


def test_a_decision_is_a_frozen_value_and_deciding_twice_gives_the_same():
    attempts = [attempt("c-2", 2, PASSING), attempt("c-1", 1, FAILING)]
    first, second = decide(attempts), decide(list(reversed(attempts)))
    assert first == second
    with pytest.raises(AttributeError):  # a frozen value (domain.frozen.Value): assignment raises
        first.outcome = "retry"  # type: ignore[misc]
    assert first.outcome == counters.OUTCOME_ACCEPTED


def test_accepted_slot():
    decision = decide([attempt("c-2", 2, PASSING), attempt("c-1", 1, FAILING), attempt("c-3", 3, PASSING)])
    assert decision.outcome == counters.OUTCOME_ACCEPTED and decision.request is None
    assert [(c.candidate_id, v) for c, v, _, _ in decision.verdicts] == [
        ("c-1", VERDICT_REJECTED), ("c-2", VERDICT_ACCEPTED), ("c-3", VERDICT_SUPERSEDED)]
    assert decision.accepted == 1 and decision.adapted is not None and decision.survives
    keys = counters.family_keys("spells")
    assert Counter(dict(decision.counts)) == Counter({keys.accepted: 1, keys.superseded: 1, keys.accepted_current: 1})


def test_failing_slot_gets_one_retry_request_until_the_budget_is_spent():
    decision = decide([attempt("c-1", 1, FAILING)])
    assert decision.outcome == counters.OUTCOME_RETRY and decision.accepted == -1 and decision.adapted is None
    assert decision.request["kind"] == KIND_RETRY and decision.request["attempt"] == 2
    assert decision.request["candidate_id"] == "c-1" and decision.request["correction_guidance"]
    spent = decide([attempt("c-1", 1, FAILING)], max_attempts=1)
    assert spent.outcome == counters.OUTCOME_EXHAUSTED and spent.request is None


def test_a_slot_resting_on_stale_attempts_gets_a_refresh_request_with_the_flag():
    stale = [attempt("c-1", 1, PASSING, stale=True)]
    assert decide(stale).request is None
    decision = decide(stale, refresh_stale=True)
    assert decision.outcome == counters.OUTCOME_ACCEPTED
    assert decision.request["kind"] == KIND_REFRESH and decision.request["attempt"] == 2
    assert decision.request["prompt_fingerprint"] == current_fingerprints("spells")[0]
    keys = counters.family_keys("spells")
    assert {key for key, _ in decision.counts} >= {keys.stale, keys.accepted_stale, keys.refresh_due, keys.refresh,
                                                   keys.refresh_excerpt_chars}


def test_a_slot_without_its_prerequisite_is_deferred_unevaluated():
    decision = decide_slot(FAMILIES["npc-occurrences"], "x-1", [attempt("c-1", 1, "not even json")], None,
                           max_attempts=3, refresh_stale=True)
    assert decision.outcome == counters.OUTCOME_DEFERRED and decision.request is None
    assert [(v, issues) for _, v, issues, _ in decision.verdicts] == [(VERDICT_DEFERRED, ())]


def test_the_orchestration_writes_what_the_decisions_say():
    lines = [candidate("c-1", "2026-10-01T12:00:00Z", FAILING),
             candidate("c-2", "2026-10-01T12:00:00Z", PASSING, attempt=2)]
    result = process_source(SOURCE, [COMPACT], lines, RunConfig())
    decision = decide([parse_candidate(line) for line in lines])
    assert [(r["candidate_id"], r["verdict"]) for r in result.evaluations] == [
        (c.candidate_id, v) for c, v, _, _ in decision.verdicts]
    assert [a["provenance"]["candidate_id"] for a in result.artifacts] == ["c-2"]
    for key, n in decision.counts:
        assert result.counts[key] == n
    assert result.counts[counters.EVALUATIONS] == len(decision.verdicts) == len(result.evaluations)
