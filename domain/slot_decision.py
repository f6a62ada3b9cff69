"""One slot's decision (contract §6, §6.1, §4.1), returned as a value.

A *slot* is one family's attempts at one chunk of one source (a source-level
family's chunk is ``*``). :func:`decide_slot` evaluates each attempt under
the current policy and decides, in one place:

- the verdict of every attempt (accepted, superseded, rejected, deferred);
- the slot's one outcome (accepted, retry, exhausted, deferred);
- the request to write, if any: a retry built from the latest attempt judged,
  or a refresh (``--refresh-stale``) for a slot resting only on stale attempts
  or, for a reconciliation, only on attempts made for another entry list;
- the counter increments the manifest reads (``domain.counters``).

It writes nothing and remembers nothing: the per-source orchestration
(``domain.reprocess``) gives it the slot's :class:`EvaluationContext` (None
when a prerequisite registry is missing), turns the :class:`SlotDecision` into
rows and counts, and remembers accepted registries for the slots after it.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Sequence

from domain.assets import current_fingerprints
from domain.batch.prompts import chunk_excerpt, entries_text
from domain.counters import (
    OUTCOME_ACCEPTED,
    OUTCOME_DEFERRED,
    OUTCOME_EXHAUSTED,
    OUTCOME_RETRY,
    FamilyKeys,
    family_keys,
)
from domain.evaluate import CandidateResult, evaluate_response, is_invariant_issue
from domain.families.base import ROLE_RECONCILIATION, Adapted, EvaluationContext, FamilySpec
from domain.families.reconciliation import entry_list_changed_issue, entry_list_fingerprint, made_for_other_lists
from domain.frozen import Value
from domain.intake import Candidate
from domain.issues import Correction, Issue, render_guidance
from domain.revision import MAX_ATTEMPT_NUMBER, choose_accepted, current_flags, next_attempt, refresh_due
from domain.judging import SlotJudging, count_unjudged, walk_judges
from domain.rows import (
    PASSING_VERDICTS,
    JudgedByRow,
    VERDICT_ACCEPTED,
    VERDICT_DEFERRED,
    VERDICT_REJECTED,
    VERDICT_SUPERSEDED,
    RequestRow,
    refresh_request_row,
    retry_request_row,
)

# Attempts of a slot, earliest first: attempt number, then candidate id.
attempt_order = attrgetter("attempt", "candidate_id")

# One attempt's verdict: (the attempt, its verdict, its issues, how many of its ranges endpoint
# ordering swapped). A plain tuple: one is built per candidate.
AttemptVerdict = tuple[Candidate, str, tuple[Issue, ...], int]

# When every issue of the attempt a retry corrects is operator-only: the one correction that
# speaks only of the response the producer controls (dnd.md §2).
FALLBACK_ISSUE = Issue("fallback", "resubmit", "", "", Correction(
    "The response", "", "It could not be turned into a valid result.",
    "Produce it again from the excerpt, following the response shape and citing evidence inside the excerpt."))


class SlotDecision(Value):
    """What one slot comes to. ``verdicts`` holds one entry per attempt, in attempt order (one
    evaluation row each; the orchestration counts them); ``accepted`` is the index of the accepted
    one among them (-1 when none) and ``adapted`` its typed records; ``request`` the retry or
    refresh request to write; ``counts`` the slot's other counter increments, in the order they
    were decided."""

    outcome: str
    verdicts: tuple[AttemptVerdict, ...]
    counts: tuple[tuple[str, int], ...]
    accepted: int = -1
    adapted: Adapted | None = None
    request: RequestRow | None = None
    # contract §4.3: the judge requests of a slot waiting on its judges (never with ``request``), and the
    # verdicts the accepted attempt passed (its artifact's ``judged_by``).
    judge_requests: tuple[RequestRow, ...] = ()
    judged_by: tuple[JudgedByRow, ...] = ()

    @property
    def survives(self) -> bool:
        """An accepted slot one of whose passing attempts passes without endpoint ordering: no
        retry was saved by it (contract §5 step 3)."""
        for _, verdict, _, reordered in self.verdicts:  # a loop, not any(generator): one per accepted slot
            if not reordered and verdict in PASSING_VERDICTS:
                return True
        return False


def decide_slot(spec: FamilySpec, chunk_id: str, attempts: Sequence[Candidate], ctx: EvaluationContext | None, *,
                max_attempts: int, refresh_stale: bool, judging: SlotJudging | None = None) -> SlotDecision:
    """The decision of the slot ``(spec, chunk_id)`` of ``ctx``'s source over ``attempts``
    (any order; each attempt's candidate id is unique in the source)."""
    attempts = sorted(attempts, key=attempt_order)
    keys = family_keys(spec.key)
    prompt_fp, schema_fp = assets = current_fingerprints(spec.key)
    current = current_flags(attempts, assets)
    counts: list[tuple[str, int]] = []
    stale = current.count(False)
    if stale:
        counts.append((keys.stale, stale))

    if ctx is None:  # a prerequisite registry is missing: nothing can be checked yet
        counts.append((keys.deferred, 1))
        count_unjudged(judging, attempts, counts)
        return SlotDecision(OUTCOME_DEFERRED, tuple((cand, VERDICT_DEFERRED, (), 0) for cand in attempts),
                            tuple(counts))

    # A reconciliation is pinned to the entry list it was shown (contract §4.1): an attempt made for
    # another list is not evaluated (its labels name other entries); the others decide the slot.
    list_fp = None
    judged = attempts
    if spec.role == ROLE_RECONCILIATION:
        list_fp = entry_list_fingerprint(ctx.registry_entries or ())
        other_list = made_for_other_lists(attempts, list_fp)
        if any(other_list):
            judged = [c for c, other in zip(attempts, other_list) if not other]
            counts.append((keys.entry_list_changed, len(attempts) - len(judged)))
            count_unjudged(judging, [c for c, other in zip(attempts, other_list) if other], counts)
            if not judged:
                return _wait_for_current_list(spec, chunk_id, ctx, attempts, list_fp, prompt_fp, schema_fp, keys,
                                              counts, refresh_stale)
            current = [fresh for fresh, other in zip(current, other_list) if not other]

    results = [evaluate_response(spec, cand.raw_response, ctx) for cand in judged]
    # Attempts are sorted by number, so the last is the slot's highest: at the bound no
    # request can be numbered (the envelope would refuse its answer), whatever the budget.
    # A request is numbered above every attempt, those made for another list included.
    attempts_spent = attempts[-1].attempt >= MAX_ATTEMPT_NUMBER
    walk = None
    if judging is not None and judging.judges:
        # contract §4.3: a slot that a refresh request will replace is decided by the rules alone.
        rules_only = refresh_stale and not any(current) and not attempts_spent
        walk = walk_judges(spec, chunk_id, judged, results, current, judging, rules_only=rules_only,
                           fingerprints=assets, input_fingerprint=list_fp, known=ctx.transcript.index, counts=counts)
        chosen = walk.chosen
    else:
        chosen = choose_accepted([r.passed for r in results], current)
    verdicts: list[AttemptVerdict] = []
    for n, result in enumerate(results):
        # Invariant failures are our bugs: counted for operators, never shown to a producer.
        issues = result.issues
        if issues and (invariant_failures := sum(map(is_invariant_issue, issues))):
            counts.append((keys.invariant_failures, invariant_failures))
        if walk is not None:
            issues = issues + walk.rejected.get(n, ()) + walk.notes.get(n, ())
        if n == chosen:
            verdict = VERDICT_ACCEPTED
        elif walk is not None and n in walk.rejected:
            verdict = VERDICT_REJECTED
        elif walk is not None and walk.awaiting is not None and result.passed:
            verdict = VERDICT_DEFERRED  # the attempt the slot waits on, and those after it in the walk
        elif result.passed:
            verdict = VERDICT_SUPERSEDED
            counts.append((keys.superseded, 1))
        else:
            verdict = VERDICT_REJECTED
        verdicts.append((judged[n], verdict, issues, result.endpoints_reordered))
    accepted = -1 if chosen is None else chosen
    if judged is not attempts:  # the attempts made for another list wait; verdicts stay in attempt order
        verdicts, accepted = _with_waiting_attempts(spec, attempts, verdicts, accepted, list_fp)

    if walk is not None and walk.awaiting is not None:
        # contract §4.3: the slot waits for its judges; never a judge request and a retry or refresh together.
        counts.append((keys.deferred, 1))
        return SlotDecision(OUTCOME_DEFERRED, tuple(verdicts), tuple(counts), judge_requests=tuple(walk.requests))
    request: RequestRow | None = None
    adapted: Adapted | None = None
    if chosen is not None:
        outcome = OUTCOME_ACCEPTED
        counts.append((keys.accepted, 1))
        counts.append((keys.accepted_current if current[chosen] else keys.accepted_stale, 1))
        if chosen and current[chosen] and any(r.passed and not fresh for r, fresh in zip(results[:chosen], current)):
            # An earlier passing stale attempt would have won before contract §6.1.
            counts.append((keys.current_over_stale, 1))
        adapted = results[chosen].adapted
        assert adapted is not None  # a passing result always has its typed candidate
    elif attempts[-1].attempt < max_attempts and not attempts_spent:
        # The latest attempt judged (made for the current list) is the one corrected; a judge's fail
        # is among its issues.
        outcome = OUTCOME_RETRY
        counts.append((keys.retry, 1))
        latest_issues = results[-1].issues
        if walk is not None:  # a judge's fail is among the latest attempt's issues
            latest_issues += walk.rejected.get(len(results) - 1, ())
        request = _retry_request(spec, chunk_id, judged[-1], latest_issues, attempts[-1].attempt + 1, prompt_fp,
                                 schema_fp, list_fp)
    else:
        outcome = OUTCOME_EXHAUSTED
        counts.append((keys.exhausted, 1))
    if refresh_due(has_current=any(current), retried=outcome == OUTCOME_RETRY, attempts_spent=attempts_spent):
        counts.append((keys.refresh_due, 1))
        counts.append((keys.refresh_due_stale, 1))  # no current attempt: its prompt (or schema) changed
        if refresh_stale:
            replaced = judged[-1] if chosen is None else judged[chosen]
            request = _refresh_request(spec, chunk_id, ctx, replaced, attempts, prompt_fp, schema_fp, list_fp, keys,
                                       counts)
    return SlotDecision(outcome, tuple(verdicts), tuple(counts), accepted, adapted, request,
                        judged_by=tuple(walk.judged_by) if walk is not None else ())


def _with_waiting_attempts(spec: FamilySpec, attempts: Sequence[Candidate], judged: list[AttemptVerdict],
                           accepted: int, list_fp: str) -> tuple[list[AttemptVerdict], int]:
    """The verdicts of every attempt in attempt order: those judged, and those made for another
    entry list (deferred, one operator-only issue); the accepted attempt's new index."""
    verdicts: list[AttemptVerdict] = []
    judged_verdicts = iter(judged)
    accepted_cand = judged[accepted][0] if accepted >= 0 else None
    new_accepted = -1
    for cand, other in zip(attempts, made_for_other_lists(attempts, list_fp)):
        if other:
            verdicts.append((cand, VERDICT_DEFERRED,
                             (entry_list_changed_issue(spec.key, cand.input_fingerprint, list_fp),), 0))
        else:
            if cand is accepted_cand:
                new_accepted = len(verdicts)
            verdicts.append(next(judged_verdicts))
    return verdicts, new_accepted


def _wait_for_current_list(spec: FamilySpec, chunk_id: str, ctx: EvaluationContext, attempts: Sequence[Candidate],
                           list_fp: str, prompt_fp: str, schema_fp: str, keys: FamilyKeys,
                           counts: list[tuple[str, int]], refresh_stale: bool) -> SlotDecision:
    """A reconciliation slot whose every attempt was made for another entry list (contract §4.1):
    deferred until an attempt on the current list comes; no attempt is evaluated or corrected.
    With --refresh-stale it gets one refresh request carrying the current list (the one
    deferral that is refreshed), numbered above every attempt, when a number is left."""
    verdicts = tuple((cand, VERDICT_DEFERRED, (entry_list_changed_issue(spec.key, cand.input_fingerprint, list_fp),), 0)
                     for cand in attempts)
    counts.append((keys.deferred, 1))
    counts.append((keys.entry_list_waiting, 1))
    request = None
    if attempts[-1].attempt < MAX_ATTEMPT_NUMBER:
        counts.append((keys.refresh_due, 1))
        if refresh_stale:
            request = _refresh_request(spec, chunk_id, ctx, attempts[-1], attempts, prompt_fp, schema_fp, list_fp,
                                       keys, counts)
    return SlotDecision(OUTCOME_DEFERRED, verdicts, tuple(counts), request=request)


def _retry_request(spec: FamilySpec, chunk_id: str, latest: Candidate, issues: tuple[Issue, ...], attempt: int,
                   prompt_fp: str, schema_fp: str, input_fp: str | None) -> RequestRow:
    if not any(issue.correction is not None for issue in issues):
        # Only operator-side findings: speak of the response the producer controls, nothing else.
        issues = issues + (FALLBACK_ISSUE,)
    return retry_request_row(spec.key, chunk_id, latest, attempt, render_guidance(issues), prompt_fp, schema_fp,
                             spec.validator_policy_fingerprint(), input_fp)


def _refresh_request(spec: FamilySpec, chunk_id: str, ctx: EvaluationContext, replaced: Candidate,
                     attempts: Sequence[Candidate], prompt_fp: str, schema_fp: str, input_fp: str | None,
                     keys: FamilyKeys, counts: list[tuple[str, int]]) -> RequestRow:
    counts.append((keys.refresh, 1))
    counts.append((keys.refresh_excerpt_chars, len(excerpt(spec, ctx))))
    return refresh_request_row(spec.key, chunk_id, replaced, next_attempt([c.attempt for c in attempts]),
                               prompt_fp, schema_fp, spec.validator_policy_fingerprint(), input_fp)


def excerpt(spec: FamilySpec, ctx: EvaluationContext) -> str:
    """What a request for the slot shows the model besides the prompt: exactly what export-batch
    sends (the chunk's units; a reconciliation's entry list). Its size is the backfill's."""
    if spec.role == ROLE_RECONCILIATION:
        return entries_text(ctx.registry_entries or ())
    assert ctx.chunk is not None  # admitted candidates name a known chunk
    return chunk_excerpt(ctx.transcript, ctx.chunk)
