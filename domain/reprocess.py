"""The per-source entry point: everything the job decides about one source.

``process_source`` takes the raw transcript record(s) and raw candidate
records that share a ``source_id`` and returns every output row for them:
artifacts, retry requests, evaluations, dead letters, and counts for the
manifest. It is pure (same input -> same output, whatever the order the
records arrived in), so any runner may call it, retry it, or call it in a
plain loop.

This module is the orchestration; the rules are elsewhere, each once:
``domain.intake`` (which transcript, which candidates), ``domain.slot_decision``
(what one slot comes to, as a value), ``domain.rows`` (the output rows) and
``domain.counters`` (the counter keys).

Order within a source: chunk registries, then reconciliations (they merge the
chunk registries accepted in this run), then occurrences (membership sees the
reconciled registry when one was accepted, else the union of the chunk
registries), then the rest (contract §4, §4.1, §6).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping, Sequence

from domain import counters
from domain.evaluate import duplicate_artifact_ids
from domain.families import FAMILIES
from domain.families.base import ROLE_ORDER, ROLE_RECONCILIATION, ROLE_REGISTRY, EvaluationContext, FamilySpec, RegistryView, fold_name
from domain.families.reconciliation import listed_entries
from domain.intake import (
    INPUT_CANDIDATES,
    INPUT_PRIOR_REGISTRIES,
    INPUT_TRANSCRIPTS,
    INPUT_VERDICTS,
    Candidate,
    admit_candidates,
    resolve_transcript,
)
from domain.registry_artifacts import RegistryArtifactError, prior_registry_names
from domain.judges import JudgeSpec, VerdictEnvelopeError, VerdictRecord, parse_verdict
from domain.judging import SlotJudging
from domain.rows import artifact_row, dead_letter_row, evaluation_row, raw_response_sha256
from domain.run_integrity import NON_ARTIFACT_OUTPUTS, artifact_output
from domain.slot_decision import SlotDecision, decide_slot
from domain.source import Transcript

@dataclass(frozen=True)
class RunConfig:
    # A slot is retried while its latest attempt is below this; whatever its value, no request
    # asks for an attempt beyond MAX_ATTEMPT_NUMBER (a failing slot at the bound is exhausted).
    max_attempts: int = 3
    # None: every family. Candidates of known families outside the set are counted as filtered.
    families: frozenset[str] | None = None
    # contract §6.1: one refresh request per slot that rests only on stale attempts.
    refresh_stale: bool = False
    # contract §4.3: the judges of this run, by name (empty: none, the rules alone), and how often an
    # attempt's judge is asked before the attempt is decided by the rules alone.
    judges: frozenset[str] = frozenset()
    max_judge_attempts: int = 2


@dataclass(frozen=True)
class SourceResult:
    artifacts: tuple[dict, ...] = ()
    retry_requests: tuple[dict, ...] = ()
    evaluations: tuple[dict, ...] = ()
    dead_letters: tuple[dict, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)


OUTPUT_TAGS = ("artifacts", "retry_requests", "evaluations", "dead_letters")
# The output folders a source's rows go to (domain.run_integrity): one per family, and the others.
OUTPUT_LABELS = (*(artifact_output(key) for key in FAMILIES), *NON_ARTIFACT_OUTPUTS)


def process_source_groups(
    config: RunConfig, source_id: str, grouped: Mapping[str, Sequence[bytes]]
) -> tuple[dict[str, Sequence[dict]], Mapping[str, int]]:
    """``process_source`` in the shape a per-key runner step wants: rows by output folder (one of
    ``OUTPUT_LABELS``; artifacts by family, in their order), counts."""
    result = process_source(
        source_id, grouped.get(INPUT_TRANSCRIPTS, ()), grouped.get(INPUT_CANDIDATES, ()), config,
        prior_registry_lines=grouped.get(INPUT_PRIOR_REGISTRIES, ()), verdict_lines=grouped.get(INPUT_VERDICTS, ()),
    )
    outputs: dict[str, Sequence[dict]] = {}
    for row in result.artifacts:
        outputs.setdefault(artifact_output(row["family"]), []).append(row)
    for tag in NON_ARTIFACT_OUTPUTS:
        outputs[tag] = getattr(result, tag)
    return outputs, result.counts


# --- the entry point --------------------------------------------------------------------

def process_source(
    source_id: str,
    transcript_lines: Sequence[bytes],
    candidate_lines: Sequence[bytes],
    config: RunConfig = RunConfig(),
    prior_registry_lines: Sequence[bytes] = (),
    verdict_lines: Sequence[bytes] = (),
) -> SourceResult:
    """Every output row for one source.

    ``prior_registry_lines`` are canonical registry artifacts of an earlier run
    (the optional prior-registry input): their names count for occurrence
    membership together with the registries accepted in this run.
    ``verdict_lines`` are verdict records (contract §3.3) naming this source's candidates.
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
    verdicts = _verdicts_by_candidate(verdict_lines, admission.admitted if transcript is not None else (), config,
                                      dead, counts)
    if transcript is None:
        return SourceResult(dead_letters=tuple(dead), counts=dict(counts))

    slots: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for cand in admission.admitted:
        slots[(cand.family, cand.chunk_id)].append(cand)

    run = _SourceRun(transcript, config, counts, prior_names, verdicts)
    for family_key, chunk_id in sorted(slots, key=lambda s: (ROLE_ORDER.index(FAMILIES[s[0]].role), s[0], s[1])):
        run.decide(FAMILIES[family_key], chunk_id, slots[(family_key, chunk_id)])
    run.check_artifact_ids()
    run.count_reordering_savings()

    return SourceResult(
        artifacts=tuple(run.artifacts),
        retry_requests=tuple(run.retry_requests),
        evaluations=tuple(run.evaluations),
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


def _verdicts_by_candidate(lines: Sequence[bytes], admitted: Sequence[Candidate], config: RunConfig,
                           dead: list[dict], counts: Counter) -> dict[str, tuple[VerdictRecord, ...]]:
    """The verdict records that name an admitted candidate of this source, by candidate id (contract §4.3):
    the envelope read (a bad one is a dead letter), the judge one of this run's for the candidate's
    family (else counted as another judge's), the candidate id and raw-response hash matched (else
    unmatched). Whether each is usable is decided with its attempt (``domain.judging``)."""
    if not lines:
        return {}
    by_id = {cand.candidate_id: cand for cand in admitted}
    found: dict[str, list[VerdictRecord]] = defaultdict(list)
    for line in lines:
        try:
            verdict = parse_verdict(line)
        except VerdictEnvelopeError as exc:
            _dead(dead, counts, INPUT_VERDICTS, str(exc), line)
            continue
        cand = by_id.get(verdict.candidate_id)
        if verdict.judge not in config.judges or (
                cand is not None and all(j.name != verdict.judge for j in FAMILIES[cand.family].judges)):
            counts[counters.VERDICTS_OTHER_JUDGE] += 1
            continue
        if verdict.usage is not None:  # contract §6.4: what the judge's answer cost, whatever becomes of it
            _count_verdict_usage(counts, verdict)
        if cand is None or verdict.judged_sha256 != raw_response_sha256(cand.raw_response):
            counts[counters.judge(verdict.judge, counters.JUDGE_UNMATCHED)] += 1
        else:
            found[verdict.candidate_id].append(verdict)
    return {cid: tuple(found_verdicts) for cid, found_verdicts in found.items()}


def _count_verdict_usage(counts: Counter, verdict: VerdictRecord) -> None:
    """One verdict's billed tokens, under its judge and producer (the manifest's ``verdict_usage``)."""
    usage = verdict.usage
    assert usage is not None

    def key(measure: str) -> str:
        return counters.verdict_usage(verdict.judge, verdict.provider, verdict.model, usage.batch, measure)

    counts[key(counters.USAGE_WITH)] += 1
    counts[key("input_tokens")] += usage.input_tokens
    counts[key("output_tokens")] += usage.output_tokens
    if usage.cached_input_tokens is None:
        counts[key(counters.USAGE_CACHED_UNKNOWN)] += 1
    else:
        counts[key("cached_input_tokens")] += usage.cached_input_tokens


@lru_cache(maxsize=None)
def judges_by_family(names: frozenset[str]) -> Mapping[str, tuple[JudgeSpec, ...]]:
    """The run's judges (``--judges``) per family that declares any: built once per run, not per source."""
    return {key: tuple(j for j in spec.judges if j.name in names) for key, spec in FAMILIES.items() if spec.judges}


def _dead(dead: list[dict], counts: Counter, input_name: str, reason: str, line: bytes) -> None:
    dead.append(dead_letter_row(input_name, reason, line))
    counts[counters.dead_letters(input_name)] += 1


# --- the source's slots, in role order ----------------------------------------------------------

class _SourceRun:
    """One source's slots, decided in role order (``domain.slot_decision``), turned into rows and
    counts; remembers each accepted registry for the slots decided after it."""

    def __init__(
        self, transcript: Transcript, config: RunConfig, counts: Counter, prior_names: Mapping[str, frozenset[str]] = {},
        verdicts: Mapping[str, tuple[VerdictRecord, ...]] = {},
    ) -> None:
        self.transcript = transcript
        # contract §4.3: the run's judges per family (only families with one of them), and the verdicts.
        self.judges = {key: judges for key, judges in judges_by_family(config.judges).items() if judges}
        self.verdicts = verdicts
        self.max_judge_attempts = config.max_judge_attempts
        # Per registry kind: folded names from the prior-registry input; they join this run's registry.
        self.prior_names = prior_names
        self.max_attempts = config.max_attempts
        self.refresh_stale = config.refresh_stale
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

    def decide(self, spec: FamilySpec, chunk_id: str, attempts: list[Candidate]) -> SlotDecision:
        """Decide the slot and write what the decision says: one evaluation row per verdict, the
        artifact of the accepted attempt (its registry remembered), the request, the counts."""
        decision = decide_slot(spec, chunk_id, attempts, self._context(spec, chunk_id),
                               max_attempts=self.max_attempts, refresh_stale=self.refresh_stale,
                               judging=self._judging(spec, chunk_id, attempts) if spec.key in self.judges else None)
        counts = self.counts
        for key, n in decision.counts:
            counts[key] += n
        verdicts = decision.verdicts
        counts[counters.EVALUATIONS] += len(verdicts)
        evaluations = self.evaluations
        first_row = len(evaluations)
        for cand, verdict, issues, endpoints_reordered in verdicts:
            evaluations.append(evaluation_row(cand, verdict, issues, endpoints_reordered))
        accepted = decision.accepted
        if accepted >= 0:
            adapted = decision.adapted
            assert adapted is not None  # an accepted slot has its typed records
            if spec.registry_names is not None:
                self._remember_registry(spec, chunk_id, adapted.records)
            self.artifacts.append(artifact_row(
                spec.key, chunk_id, verdicts[accepted][0], [spec.durable_record(record) for record in adapted.records],
                adapted.earliest_evidence_unit_id, spec.validator_policy_fingerprint(), list(decision.judged_by)))
            self.artifact_rows.append((spec.key, first_row + accepted))
            self.accepted_survival.append((spec, decision.survives))
        if decision.request is not None:
            self.retry_requests.append(decision.request)
        self.retry_requests.extend(decision.judge_requests)
        return decision

    def _judging(self, spec: FamilySpec, chunk_id: str, attempts: list[Candidate]) -> SlotJudging | None:
        """What the run's judges bring to the slot; None when none of them judges its family."""
        judges = self.judges.get(spec.key)
        if not judges:
            return None
        verdicts = {c.candidate_id: self.verdicts[c.candidate_id] for c in attempts if c.candidate_id in self.verdicts}
        forbidden = (self.transcript.source_id, chunk_id, *(c.candidate_id for c in attempts))
        return SlotJudging(judges, verdicts, self.max_judge_attempts, forbidden)

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
            return EvaluationContext(self.transcript, self.transcript.chunks.get(chunk_id), view)
        return EvaluationContext(self.transcript, self.transcript.chunks.get(chunk_id))  # Transcript.chunk, one call less

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

    def _remember_registry(self, spec: FamilySpec, chunk_id: str, records: tuple[Any, ...]) -> None:
        assert spec.registry_names is not None and spec.registry_kind is not None
        names = {fold_name(n) for record in records for n in spec.registry_names(record) if n.strip()}
        self.registry_views.pop(spec.registry_kind, None)
        if spec.role == ROLE_REGISTRY:
            self.chunk_registries[spec.registry_kind].append((chunk_id, records))
            self.chunk_registry_names[spec.registry_kind].update(names)
        elif spec.role == ROLE_RECONCILIATION:
            self.reconciled_names[spec.registry_kind] = frozenset(names)

    def check_artifact_ids(self) -> None:
        """Per-source invariant: artifact ids are unique. A failure is an operator diagnostic only."""
        for position, issue in duplicate_artifact_ids([a["artifact_id"] for a in self.artifacts]):
            family, row = self.artifact_rows[position]
            self.evaluations[row]["issues"].append(issue.as_record())
            self.counts[counters.invariant_failures(family)] += 1

    def count_reordering_savings(self) -> None:
        """What endpoint ordering saved in this source, for the manifest (contract §5 step 3).

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
