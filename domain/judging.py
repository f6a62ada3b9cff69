"""The judges' walk over one slot's attempts (contract §4.3), returned as a value.

``domain.slot_decision`` evaluates a slot's attempts under the rules; when the
run has judges for the family, it asks :func:`walk_judges` what their verdicts
change. Only attempts that pass every rule are judged. In the order the slot
decision would accept them (current before stale, then earliest), each passing
attempt is looked at with its judges' verdicts (``domain.judges.judgment``):

- a ``fail`` of any judge rejects it (its problems join its issues) and the
  walk goes on;
- a judge without a usable current verdict stops the walk: the slot waits
  (*deferred*, ``awaiting_judgment``) and the attempt gets one judge request
  per such judge - unless that judge was asked ``max_judge_attempts`` times
  without a usable answer: then it is left out (``unjudged``);
- otherwise (every verdict ``pass`` or ``unsure``) the attempt is accepted.

Every verdict that names an attempt of the slot is classified once, for the
manifest's verdict conservation: applied (pass, fail, unsure), superseded,
unusable, stale; verdicts of attempts that are not judged this run (a rule
rejects them, or a refresh replaces them) count as unmatched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Container, Mapping, Sequence

from domain import counters
from domain.evaluate import CandidateResult
from domain.families.base import FamilySpec
from domain.families.common import evidence_ranges
from domain.frozen import quick_init
from domain.intake import Candidate
from domain.issues import Issue
from domain.judges import (AWAITING_JUDGMENT, JUDGE_UNSURE, JUDGE_UNUSABLE, UNJUDGED, VERDICT_FAIL, VERDICT_UNSURE,
                           JudgeSpec, Judgment, VerdictRecord, fail_issues, judgment, operator_issue)
from domain.rows import JudgedByRow, RequestRow, judge_request_row

# One (counter key, increment) of the slot's counts.
Count = tuple[str, int]


@quick_init
@dataclass(frozen=True, slots=True)
class SlotJudging:
    """What the run's judges bring to one slot: the judges of the family chosen with ``--judges``,
    the verdicts naming its attempts (by candidate id; id and raw-response hash already matched),
    the ask limit, and the ids a judge's explanation must never carry into guidance."""

    judges: tuple[JudgeSpec, ...]
    verdicts: Mapping[str, tuple[VerdictRecord, ...]]
    max_judge_attempts: int = 2
    forbidden: tuple[str, ...] = ()


@dataclass
class JudgeWalk:
    """What the judges decided for a slot: attempts they rejected (with the issues they add),
    operator-only issues per attempt, the accepted attempt (index, or None), the attempt the slot
    waits on (or None), the judge requests, and the accepted attempt's ``judged_by``."""

    rejected: dict[int, tuple[Issue, ...]] = field(default_factory=dict)
    notes: dict[int, tuple[Issue, ...]] = field(default_factory=dict)
    chosen: int | None = None
    awaiting: int | None = None
    requests: list[RequestRow] = field(default_factory=list)
    judged_by: list[JudgedByRow] = field(default_factory=list)


def count_unjudged(judging: SlotJudging | None, attempts: Sequence[Candidate], counts: list[Count]) -> None:
    """Verdicts naming attempts the judges do not look at this run (the slot waits for a registry or
    an entry list, or the attempt was made for another list): unmatched, each counted once."""
    if judging is None:
        return
    for cand in attempts:
        for verdict in judging.verdicts.get(cand.candidate_id, ()):
            counts.append((counters.judge(verdict.judge, counters.JUDGE_UNMATCHED), 1))


def walk_order(results: Sequence[CandidateResult], current: Sequence[bool]) -> list[int]:
    """Passing attempts in the order the slot accepts them (contract §6, §6.1): current ones first, then
    stale ones, each earliest first - ``domain.revision.choose_accepted`` picks the first of it."""
    passing = [n for n, result in enumerate(results) if result.passed]
    return [n for n in passing if current[n]] + [n for n in passing if not current[n]]


def walk_judges(spec: FamilySpec, chunk_id: str, attempts: Sequence[Candidate], results: Sequence[CandidateResult],
                current: Sequence[bool], judging: SlotJudging, *, rules_only: bool, fingerprints: tuple[str, str],
                input_fingerprint: str | None, known: Container, counts: list[Count]) -> JudgeWalk:
    """The judges' decision over ``attempts`` (earliest first, with their rule ``results``).
    ``rules_only``: a refresh replaces the slot's attempts this run, so nobody is judged and the
    accepted attempt is flagged ``unjudged``. ``known``: the transcript's unit ids (written exactly)."""
    walk = JudgeWalk()
    judgments: dict[int, list[Judgment]] = {}
    for n, (cand, result) in enumerate(zip(attempts, results)):
        named = judging.verdicts.get(cand.candidate_id, ())
        if not result.passed or result.adapted is None:
            for judge in judging.judges:  # a rule rejects it: no verdict of it is applied
                unmatched = sum(v.judge == judge.name for v in named)
                if unmatched:
                    counts.append((counters.judge(judge.name, counters.JUDGE_UNMATCHED), unmatched))
            continue
        shown = len(result.adapted.records)
        judgments[n] = [judgment(judge, [v for v in named if v.judge == judge.name], shown) for judge in judging.judges]
        for one in judgments[n]:
            _count(one, counts)
    order = walk_order(results, current)
    if rules_only:
        if order:
            walk.chosen = order[0]
            walk.notes[order[0]] = tuple(
                operator_issue(j, UNJUDGED, f"not judged by {j.name}: a refresh request replaces the slot's "
                                            "attempts in this run, so it was decided by the rules alone")
                for j in judging.judges)
            for j in judging.judges:
                counts.append((counters.judge(j.name, counters.JUDGE_UNJUDGED), 1))
        return walk
    for n in order:
        notes: list[Issue] = []
        failing: list[Issue] = []
        missing: list[Judgment] = []
        passed: list[Judgment] = []
        for one in judgments[n]:
            judge = one.judge
            for verdict, why in one.unusable:
                notes.append(operator_issue(judge, JUDGE_UNUSABLE, f"verdict {verdict.verdict_id} of {judge.name} "
                                                                   f"is unusable: {why}"))
            if one.answer is None:
                if len(one.unusable) >= judging.max_judge_attempts:
                    notes.append(operator_issue(judge, UNJUDGED, f"not judged by {judge.name}: asked "
                                                                 f"{len(one.unusable)} time(s) without a usable answer, "
                                                                 "so decided by the rules alone"))
                    counts.append((counters.judge(judge.name, counters.JUDGE_UNJUDGED), 1))
                else:
                    missing.append(one)
            elif one.answer.verdict == VERDICT_FAIL:
                adapted = results[n].adapted
                assert adapted is not None  # a passing attempt has its typed records
                failing.extend(fail_issues(judge, one.answer, adapted.records, spec.list_field, spec.subject_of,
                                           lambda record: evidence_ranges(record, known), judging.forbidden))
            else:
                passed.append(one)
                if one.answer.verdict == VERDICT_UNSURE:
                    notes.append(operator_issue(judge, JUDGE_UNSURE, f"{judge.name} was unsure (verdict "
                                                                     f"{one.applied.verdict_id}): passed"))
        if failing:
            walk.rejected[n] = tuple(failing)
            walk.notes[n] = tuple(notes)
            continue
        if missing:
            walk.awaiting = n
            notes.extend(operator_issue(one.judge, AWAITING_JUDGMENT,
                                        f"awaits a verdict of {one.judge.name} (judge request written)")
                         for one in missing)
            walk.notes[n] = tuple(notes)
            for one in missing:
                walk.requests.append(judge_request_row(
                    spec.key, chunk_id, attempts[n], one.judge.name, one.judge.fingerprint(), len(one.unusable),
                    *fingerprints, spec.validator_policy_fingerprint(), input_fingerprint))
                counts.append((counters.judge(one.judge.name, counters.JUDGE_REQUESTS), 1))
                counts.append((counters.judge(one.judge.name, counters.JUDGE_AWAITING), 1))
            return walk
        walk.chosen = n
        walk.notes[n] = tuple(notes)
        walk.judged_by = [{"judge": one.judge.name, "judge_fingerprint": one.judge.fingerprint(),
                           "verdict_id": one.applied.verdict_id, "verdict": one.answer.verdict}  # type: ignore[union-attr,typeddict-item]
                          for one in passed]
        return walk
    return walk


def _count(one: Judgment, counts: list[Count]) -> None:
    name = one.judge.name
    if one.answer is not None:
        counts.append((counters.judge(name, one.answer.verdict), 1))
    if one.superseded:
        counts.append((counters.judge(name, counters.JUDGE_SUPERSEDED), one.superseded))
    if one.unusable:
        counts.append((counters.judge(name, counters.JUDGE_UNUSABLE), len(one.unusable)))
    if one.stale:
        counts.append((counters.judge(name, counters.JUDGE_STALE), one.stale))
