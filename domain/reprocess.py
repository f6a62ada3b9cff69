"""The per-source entry point: everything the job decides about one source.

``process_source`` takes the raw transcript record(s) and raw candidate
records that share a ``source_id`` and returns every output row for them:
artifacts, retry requests, evaluations, dead letters, and counts for the
manifest. It is pure (same input -> same output, whatever the order the
records arrived in), so any runner may call it, retry it, or call it in a
plain loop.

Order within a source: chunk registries, then reconciliations (they merge the
chunk registries accepted in this run), then occurrences (membership sees the
reconciled registry when one was accepted, else the union of the chunk
registries), then the rest (SPEC §4, §4.1, §6).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Iterable, Mapping, Sequence

from domain import counters
from domain.assets import current_fingerprints
from domain.batch.prompts import chunk_excerpt, entries_text
from domain.evaluate import CandidateResult, duplicate_artifact_ids, evaluate_response, is_invariant_issue
from domain.families import FAMILIES
from domain.families.base import (
    ROLE_ORDER,
    ROLE_RECONCILIATION,
    ROLE_REGISTRY,
    EvaluationContext,
    FamilySpec,
    RegistryView,
    fold_name,
)
from domain.families.reconciliation import entry_list_changed_issue, entry_list_fingerprint, listed_entries
from domain.intake import (
    INPUT_CANDIDATES,
    INPUT_PRIOR_REGISTRIES,
    INPUT_TRANSCRIPTS,
    Candidate,
    admit_candidates,
    resolve_transcript,
)
from domain.registry_artifacts import RegistryArtifactError, prior_registry_names
from domain.issues import Correction, Issue, render_guidance
from domain.rows import (
    VERDICT_ACCEPTED,
    VERDICT_DEFERRED,
    VERDICT_REJECTED,
    VERDICT_SUPERSEDED,
    artifact_row,
    dead_letter_row,
    evaluation_row,
    refresh_request_row,
    retry_request_row,
)
from domain.revision import (
    MAX_ATTEMPT_NUMBER,
    choose_accepted,
    is_current,
    next_attempt,
    refresh_due,
)
from domain.source import Transcript


@dataclass(frozen=True)
class RunConfig:
    # A slot is retried while its latest attempt is below this; whatever its value, no request
    # asks for an attempt beyond MAX_ATTEMPT_NUMBER (a failing slot at the bound is exhausted).
    max_attempts: int = 3
    # None: every family. Candidates of known families outside the set are counted as filtered.
    families: frozenset[str] | None = None
    # SPEC §6.1: one refresh request per slot that rests only on stale attempts.
    refresh_stale: bool = False


@dataclass(frozen=True)
class SourceResult:
    artifacts: tuple[dict, ...] = ()
    retry_requests: tuple[dict, ...] = ()
    evaluations: tuple[dict, ...] = ()
    dead_letters: tuple[dict, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)


OUTPUT_TAGS = ("artifacts", "retry_requests", "evaluations", "dead_letters")


def process_source_groups(
    config: RunConfig, source_id: str, grouped: Mapping[str, Sequence[bytes]]
) -> tuple[dict[str, tuple[dict, ...]], Mapping[str, int]]:
    """``process_source`` in the shape a per-key runner step wants: rows by output, counts."""
    result = process_source(
        source_id, grouped.get(INPUT_TRANSCRIPTS, ()), grouped.get(INPUT_CANDIDATES, ()), config,
        prior_registry_lines=grouped.get(INPUT_PRIOR_REGISTRIES, ()),
    )
    outputs = {tag: getattr(result, tag) for tag in OUTPUT_TAGS}
    return outputs, result.counts


# --- the entry point --------------------------------------------------------------------

def process_source(
    source_id: str,
    transcript_lines: Sequence[bytes],
    candidate_lines: Sequence[bytes],
    config: RunConfig = RunConfig(),
    prior_registry_lines: Sequence[bytes] = (),
) -> SourceResult:
    """Every output row for one source.

    ``prior_registry_lines`` are canonical registry artifacts of an earlier run
    (the optional prior-registry input): their names count for occurrence
    membership together with the registries accepted in this run.
    """
    counts: Counter[str] = Counter()
    dead: list[dict] = []

    resolution = resolve_transcript(source_id, transcript_lines)
    for reason, line in resolution.rejected:
        _dead(dead, counts, INPUT_TRANSCRIPTS, reason, line)
    transcript = resolution.transcript
    if transcript is not None:
        counts[counters.TRANSCRIPTS_OK] += 1
    prior_names = _prior_registry_names(source_id, prior_registry_lines, dead, counts)
    admission = admit_candidates(source_id, resolution, candidate_lines, config.families)
    for reason, line in admission.rejected:
        _dead(dead, counts, INPUT_CANDIDATES, reason, line)
    if admission.filtered:
        counts[counters.FILTERED] += admission.filtered
    if transcript is None:
        return SourceResult(dead_letters=tuple(dead), counts=dict(counts))

    slots: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for cand in admission.admitted:
        slots[(cand.family, cand.chunk_id)].append(cand)

    decider = _SlotDecider(transcript, config, counts, prior_names)
    for family_key, chunk_id in sorted(slots, key=lambda s: (ROLE_ORDER.index(FAMILIES[s[0]].role), s[0], s[1])):
        decider.decide(FAMILIES[family_key], chunk_id, slots[(family_key, chunk_id)])
    decider.check_artifact_ids()
    decider.count_reordering_savings()

    return SourceResult(
        artifacts=tuple(decider.artifacts),
        retry_requests=tuple(decider.retry_requests),
        evaluations=tuple(decider.evaluations),
        dead_letters=tuple(dead),
        counts=dict(counts),
    )


def _prior_registry_names(
    source_id: str, lines: Sequence[bytes], dead: list[dict], counts: Counter
) -> dict[str, frozenset[str]]:
    """Folded names per registry kind from prior canonical registry artifacts of this source."""
    names: dict[str, set[str]] = defaultdict(set)
    for line in lines:
        problem, kind, found = _read_prior_registry(source_id, line)
        if problem is not None:
            _dead(dead, counts, INPUT_PRIOR_REGISTRIES, problem, line)
            continue
        names[kind].update(found)
        counts[counters.PRIOR_REGISTRIES_VALID] += 1
    return {kind: frozenset(found) for kind, found in names.items()}


def _read_prior_registry(source_id: str, line: bytes) -> tuple[str | None, str, set[str]]:
    try:
        kind, names = prior_registry_names(source_id, line)
    except RegistryArtifactError as exc:
        return str(exc), "", set()
    return None, kind, set(names)


def _dead(dead: list[dict], counts: Counter, input_name: str, reason: str, line: bytes) -> None:
    dead.append(dead_letter_row(input_name, reason, line))
    counts[counters.dead_letters(input_name)] += 1


# --- slot decisions ------------------------------------------------------------------------

# Attempts of a slot, earliest first: attempt number, then candidate id.
_attempt_order = attrgetter("attempt", "candidate_id")


class _SlotDecider:
    """Decides slots of one source in role order, remembering accepted registries."""

    def __init__(
        self, transcript: Transcript, config: RunConfig, counts: Counter, prior_names: Mapping[str, frozenset[str]] = {}
    ) -> None:
        self.transcript = transcript
        # Per registry kind: folded names from the prior-registry input; they join this run's registry.
        self.prior_names = prior_names
        self.config = config
        self.counts = counts
        # Per registry kind: every accepted chunk registry as (chunk_id, adapted records),
        # and the folded names and aliases of their union.
        self.chunk_registries: dict[str, list[tuple[str, tuple[Any, ...]]]] = defaultdict(list)
        self.chunk_registry_names: dict[str, set[str]] = defaultdict(set)
        # Per registry kind: the accepted reconciled registry's folded names; it replaces the union.
        self.reconciled_names: dict[str, frozenset[str]] = {}
        # Per registry kind: the view occurrence slots see, built once until that kind's registry changes.
        self.registry_views: dict[str, RegistryView] = {}
        self.artifacts: list[dict] = []
        # Per artifact, in the same order: (family, index of its accepted evaluation row).
        self.artifact_rows: list[tuple[str, int]] = []
        self.retry_requests: list[dict] = []
        self.evaluations: list[dict] = []
        # Per accepted slot: (family, whether an attempt passes without endpoint ordering).
        self.accepted_survival: list[tuple[FamilySpec, bool]] = []

    def decide(self, spec: FamilySpec, chunk_id: str, attempts: list[Candidate]) -> None:
        attempts = sorted(attempts, key=_attempt_order)
        prompt_fp, schema_fp = current_fingerprints(spec.key)
        current = [is_current(c.prompt_fingerprint, c.schema_fingerprint, (prompt_fp, schema_fp)) for c in attempts]
        self.counts[counters.EVALUATIONS] += len(attempts)
        stale = current.count(False)
        if stale:
            self.counts[counters.outcome(spec.key, "stale")] += stale

        ctx = self._context(spec, chunk_id)
        if ctx is None:  # a prerequisite registry is missing: nothing can be checked yet
            for cand in attempts:
                self._evaluation(cand, VERDICT_DEFERRED, ())
            self.counts[counters.outcome(spec.key, "deferred")] += 1
            return

        # A reconciliation is pinned to the entry list it was shown (SPEC §4.1): an attempt made for
        # another list is not evaluated (its labels name other entries); the others decide the slot.
        list_fp = None
        judged = attempts
        if spec.role == ROLE_RECONCILIATION:
            list_fp = entry_list_fingerprint(ctx.registry_entries or ())
            judged = [c for c in attempts if c.input_fingerprint is None or c.input_fingerprint == list_fp]
            if len(judged) < len(attempts):
                self.counts[counters.revision(spec.key, "entry_list_changed")] += len(attempts) - len(judged)
                if not judged:
                    self._wait_for_current_list(spec, chunk_id, ctx, attempts, list_fp, prompt_fp, schema_fp)
                    return
                current = [fresh for cand, fresh in zip(attempts, current)
                           if cand.input_fingerprint is None or cand.input_fingerprint == list_fp]
                first_row = len(self.evaluations)
            else:
                judged = attempts

        results = [(cand, evaluate_response(spec, cand.raw_response, ctx)) for cand in judged]
        chosen = choose_accepted([r.passed for _, r in results], current)
        accepted = None if chosen is None else results[chosen]
        accepted_row = -1
        for cand, result in results:
            # Invariant failures are our bugs: counted for operators, never shown to a producer.
            invariant_failures = sum(map(is_invariant_issue, result.issues))
            if invariant_failures:
                self.counts[counters.invariant_failures(spec.key)] += invariant_failures
            if accepted is not None and cand is accepted[0]:
                verdict = VERDICT_ACCEPTED
                accepted_row = len(self.evaluations)
            elif result.passed:
                verdict = VERDICT_SUPERSEDED
                self.counts[counters.outcome(spec.key, "superseded")] += 1
            else:
                verdict = VERDICT_REJECTED
            self._evaluation(cand, verdict, result.issues, result.endpoints_reordered)
        if judged is not attempts:  # the attempts made for another list wait; rows stay in attempt order
            accepted_row = self._add_waiting_rows(spec, attempts, list_fp, first_row, accepted)

        # Attempts are sorted by number, so the last is the slot's highest: at the bound no
        # request can be numbered (the envelope would refuse its answer), whatever the budget.
        # A request is numbered above every attempt, those made for another list included.
        attempts_spent = attempts[-1].attempt >= MAX_ATTEMPT_NUMBER
        retried = False
        if accepted is not None:
            self.counts[counters.outcome(spec.key, "accepted")] += 1
            # A passing attempt with no reordered range passes without endpoint ordering too.
            survives = any(r.passed and not r.endpoints_reordered for _, r in results)
            self.accepted_survival.append((spec, survives))
            self.counts[counters.revision(spec.key, "accepted_current" if current[chosen] else "accepted_stale")] += 1
            if chosen and current[chosen] and any(r.passed and not fresh for (_, r), fresh in zip(results[:chosen], current)):
                # An earlier passing stale attempt would have won before SPEC §6.1.
                self.counts[counters.revision(spec.key, "current_over_stale")] += 1
            self._accept(spec, chunk_id, *accepted)
            self.artifact_rows.append((spec.key, accepted_row))
        else:
            # The latest attempt judged (made for the current list) is the one corrected.
            latest, latest_result = results[-1]
            if attempts[-1].attempt < self.config.max_attempts and not attempts_spent:
                retried = True
                self.counts[counters.outcome(spec.key, "retry")] += 1
                self.retry_requests.append(self._retry_request(spec, chunk_id, latest, latest_result,
                                                               attempts[-1].attempt + 1, prompt_fp, schema_fp, list_fp))
            else:
                self.counts[counters.outcome(spec.key, "exhausted")] += 1
        if refresh_due(has_current=any(current), deferred=False, retried=retried,
                       attempts_spent=attempts_spent):
            self.counts[counters.revision(spec.key, "refresh_due")] += 1
            if self.config.refresh_stale:
                replaced = accepted[0] if accepted is not None else results[-1][0]
                self._refresh(spec, chunk_id, ctx, replaced, attempts, prompt_fp, schema_fp, list_fp)

    def _add_waiting_rows(self, spec: FamilySpec, attempts: list[Candidate], list_fp: str, first_row: int,
                          accepted: tuple[Candidate, CandidateResult] | None) -> int:
        """The evaluation rows of a slot's attempts made for another entry list (verdict deferred, one
        operator-only issue), put among the slot's other rows in attempt order; returns the accepted
        row's new index (-1 when none)."""
        for cand in attempts:
            if cand.input_fingerprint is not None and cand.input_fingerprint != list_fp:
                self._evaluation(cand, VERDICT_DEFERRED,
                                 (entry_list_changed_issue(spec.key, cand.input_fingerprint, list_fp),))
        place = {cand.candidate_id: n for n, cand in enumerate(attempts)}
        self.evaluations[first_row:] = sorted(self.evaluations[first_row:], key=lambda row: place[row["candidate_id"]])
        return -1 if accepted is None else first_row + place[accepted[0].candidate_id]

    def _wait_for_current_list(self, spec: FamilySpec, chunk_id: str, ctx: EvaluationContext,
                               attempts: list[Candidate], list_fp: str, prompt_fp: str, schema_fp: str) -> None:
        """A reconciliation slot whose every attempt was made for another entry list (SPEC §4.1):
        deferred until an attempt on the current list comes; no attempt is evaluated or corrected.
        With --refresh-stale it gets one refresh request carrying the current list (the one
        deferral that is refreshed), numbered above every attempt, when a number is left."""
        for cand in attempts:
            assert cand.input_fingerprint is not None
            self._evaluation(cand, VERDICT_DEFERRED,
                             (entry_list_changed_issue(spec.key, cand.input_fingerprint, list_fp),))
        self.counts[counters.outcome(spec.key, "deferred")] += 1
        self.counts[counters.revision(spec.key, "entry_list_waiting")] += 1
        if attempts[-1].attempt >= MAX_ATTEMPT_NUMBER:
            return
        self.counts[counters.revision(spec.key, "refresh_due")] += 1
        if self.config.refresh_stale:
            self._refresh(spec, chunk_id, ctx, attempts[-1], attempts, prompt_fp, schema_fp, list_fp)

    def _refresh(self, spec: FamilySpec, chunk_id: str, ctx: EvaluationContext, replaced: Candidate,
                 attempts: list[Candidate], prompt_fp: str, schema_fp: str, list_fp: str | None) -> None:
        excerpt_chars = len(self._excerpt(spec, chunk_id, ctx))
        self.counts[counters.revision(spec.key, "refresh")] += 1
        self.counts[counters.revision(spec.key, "refresh_excerpt_chars")] += excerpt_chars
        self.retry_requests.append(self._refresh_request(
            spec, chunk_id, replaced, next_attempt([c.attempt for c in attempts]), prompt_fp, schema_fp, list_fp))

    def _context(self, spec: FamilySpec, chunk_id: str) -> EvaluationContext | None:
        """What the slot's validators see; None when a prerequisite is missing (deferred)."""
        kind = spec.registry_kind
        if spec.role == ROLE_RECONCILIATION:
            registries = self.chunk_registries.get(kind)
            if not registries:
                return None
            return EvaluationContext(self.transcript, None, registry_entries=listed_entries(self.transcript, registries))
        if spec.needs_registry:
            view = self.registry_views.get(kind)
            if view is None:
                view = self._registry_view(kind)
                if view is None:
                    return None
                self.registry_views[kind] = view
            return EvaluationContext(self.transcript, self.transcript.chunk(chunk_id), view)
        return EvaluationContext(self.transcript, self.transcript.chunk(chunk_id))

    def _registry_view(self, kind: str) -> RegistryView | None:
        """The names an occurrence of ``kind`` may use; None when no registry of it exists yet."""
        prior = self.prior_names.get(kind)
        if kind in self.reconciled_names:
            names = self.reconciled_names[kind]
        elif self.chunk_registries.get(kind):
            names = frozenset(self.chunk_registry_names[kind])
        elif prior is not None:
            names = frozenset()
        else:
            return None
        return RegistryView(kind, names | (prior or frozenset()))

    def check_artifact_ids(self) -> None:
        """Per-source invariant: artifact ids are unique. A failure is an operator diagnostic only."""
        for position, issue in duplicate_artifact_ids([a["artifact_id"] for a in self.artifacts]):
            family, row = self.artifact_rows[position]
            self.evaluations[row]["issues"].append(issue.as_record())
            self.counts[counters.invariant_failures(family)] += 1

    def count_reordering_savings(self) -> None:
        """What endpoint ordering saved in this source, for the manifest (SPEC §5 step 3).

        An accepted slot none of whose passing attempts passes without ordering
        (each cites a reversed range, which the strict validator would reject)
        would have needed a producer retry. Knock-on effect, counted apart: an
        occurrence or reconciliation slot that still passes, but whose kind
        would have no surviving accepted chunk registry in the source, would
        have been deferred.
        """
        surviving_kinds = {spec.registry_kind for spec, survives in self.accepted_survival
                           if survives and spec.role == ROLE_REGISTRY}
        for spec, survives in self.accepted_survival:
            if not survives:
                self.counts[counters.reordering_saved_retries(spec.key)] += 1
            elif ((spec.needs_registry or spec.role == ROLE_RECONCILIATION)
                  and spec.registry_kind not in surviving_kinds):
                self.counts[counters.reordering_saved_deferrals(spec.key)] += 1

    def _evaluation(self, cand: Candidate, verdict: str, issues: Iterable[Issue], endpoints_reordered: int = 0) -> None:
        self.evaluations.append(evaluation_row(cand, verdict, tuple(issues), endpoints_reordered))

    def _accept(self, spec: FamilySpec, chunk_id: str, cand: Candidate, result: CandidateResult) -> None:
        adapted = result.adapted
        assert adapted is not None  # a passing result always has its typed candidate
        if spec.registry_names is not None:
            self._remember_registry(spec, chunk_id, adapted.records)
        self.artifacts.append(artifact_row(spec.key, chunk_id, cand, [spec.durable_record(record) for record in adapted.records],
                                           adapted.earliest_evidence_unit_id, spec.validator_policy_fingerprint()))

    def _remember_registry(self, spec: FamilySpec, chunk_id: str, records: tuple[Any, ...]) -> None:
        assert spec.registry_names is not None and spec.registry_kind is not None
        names = {fold_name(n) for record in records for n in spec.registry_names(record) if n.strip()}
        self.registry_views.pop(spec.registry_kind, None)
        if spec.role == ROLE_REGISTRY:
            self.chunk_registries[spec.registry_kind].append((chunk_id, records))
            self.chunk_registry_names[spec.registry_kind].update(names)
        elif spec.role == ROLE_RECONCILIATION:
            self.reconciled_names[spec.registry_kind] = frozenset(names)

    def _retry_request(
        self, spec: FamilySpec, chunk_id: str, latest: Candidate, result: CandidateResult, attempt: int,
        prompt_fp: str, schema_fp: str, input_fp: str | None,
    ) -> dict:
        issues = result.issues
        if not any(issue.correction is not None for issue in issues):
            # Only operator-side findings: speak of the response the producer controls, nothing else.
            issues = issues + (Issue("fallback", "resubmit", "", "", Correction(
                "The response", "", "It could not be turned into a valid result.",
                "Produce it again from the excerpt, following the response shape and citing evidence inside the excerpt.")),)
        return retry_request_row(spec.key, chunk_id, latest, attempt, render_guidance(issues), prompt_fp, schema_fp,
                                 spec.validator_policy_fingerprint(), input_fp)

    def _refresh_request(
        self, spec: FamilySpec, chunk_id: str, replaced: Candidate, attempt: int, prompt_fp: str, schema_fp: str,
        input_fp: str | None,
    ) -> dict:
        """A new extraction under the current prompt (SPEC §6.1): no guidance; its id names
        the revision, so a later revision's refresh of the same slot is another request."""
        return refresh_request_row(spec.key, chunk_id, replaced, attempt, prompt_fp, schema_fp,
                                   spec.validator_policy_fingerprint(), input_fp)

    def _excerpt(self, spec: FamilySpec, chunk_id: str, ctx: EvaluationContext) -> str:
        """What a request for this slot shows the model besides the prompt (its size is the backfill's)."""
        if spec.role == ROLE_RECONCILIATION:
            return entries_text(ctx.registry_entries or ())
        chunk = self.transcript.chunk(chunk_id)
        assert chunk is not None  # admitted candidates name a known chunk
        return chunk_excerpt(self.transcript, chunk)
