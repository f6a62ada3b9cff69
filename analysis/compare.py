"""Comparing two runs (contract §6.3): each slot's outcome in run A and in run B, what changed, and the counts.

Pure: rows in (as the readers give them back: evaluations, retry requests,
artifacts, any output format), facts and counts out. The pipeline
(``pipelines.compare``) reads both run folders, gathers the facts of each slot
from both runs and calls :func:`compare_slot` once per slot; the slot's
:meth:`SlotComparison.tally` is summed over every slot and
``analysis.compare_folder.comparison_document`` folds the sums into ``compare.json``.

A slot's outcome in a run is read off what the run wrote for it:

- ``accepted``: an artifact (whatever else: an accepted slot resting on a stale
  attempt also gets a refresh request);
- ``retry`` / ``refresh``: a request of that kind;
- ``deferred``: evaluated, but no attempt decided (every evaluation deferred), also when a refresh request
  waits on it (a reconciliation waiting for its entry list, contract §4.1: the job counts it deferred) and when
  it waits on its judges (a judge request);
- ``exhausted``: evaluated, no attempt passed, no request;
- ``absent``: the run holds nothing of the slot.

The *deciding attempt* is the attempt the outcome rests on: the accepted one;
the one a request replaces; else the latest (highest attempt number, then
candidate id: the job's order). Accepted records are compared by a hash of
their content (``records`` only: never provenance, ids or fingerprints), the
same whichever format either run was written in; a changed slot's row says
which records changed (``analysis.record_diff``) and its *situation* says where
the slot stands in B (:func:`situation`), which is what an operator acts on.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import orjson

from analysis.record_diff import RecordsDiff, diff_records
from analysis.slots import RowError, Slot, is_mapping, row_field, slot_of
from domain.counters import OUTCOME_ACCEPTED, OUTCOME_DEFERRED, OUTCOME_EXHAUSTED, OUTCOME_RETRY
from domain.families import FAMILIES
from domain.families.reconciliation import ENTRY_LIST_CHANGED
from domain.judges import AWAITING_JUDGMENT
from domain.revision import KIND_JUDGE, KIND_REFRESH, REQUEST_KINDS
from domain.rows import PASSING_VERDICTS, VERDICT_DEFERRED, VERDICT_REJECTED
from domain.run_integrity import ARTIFACTS, shown

# --- names (normative: contract §6.3; assets/outputs/slot_change.v1.* spell them too) -------------------

# accepted, retry, exhausted and deferred are the manifest's outcomes (domain.counters); a comparison adds
# the refresh a run may write instead of a retry, and a slot a run holds nothing of.
OUTCOME_REFRESH = KIND_REFRESH
OUTCOME_ABSENT = "absent"
SLOT_OUTCOMES = (OUTCOME_ACCEPTED, OUTCOME_RETRY, OUTCOME_REFRESH, OUTCOME_EXHAUSTED, OUTCOME_DEFERRED,
                 OUTCOME_ABSENT)

CHANGE_REGRESSION = "regression"  # accepted in A, not in B
CHANGE_FIX = "fix"  # accepted in B, not in A
CHANGE_RECORDS = "records_changed"  # accepted in both, other records
CHANGE_OTHER = "other"  # neither accepted, another outcome
SLOT_CHANGES = (CHANGE_REGRESSION, CHANGE_FIX, CHANGE_RECORDS, CHANGE_OTHER)

# Where a changed slot stands in B: what it means and what to do next (the page says both, per situation).
SITUATION_RECORDS_CHANGED = "records_changed"  # accepted in both, other records
SITUATION_NEWLY_ACCEPTED = "newly_accepted"  # accepted in B, not in A
SITUATION_ENTRY_LIST = "waiting_for_entry_list"  # deferred in B: a reconciliation whose entry list changed
SITUATION_JUDGES = "waiting_for_judges"  # deferred in B: its attempt waits on a judge's verdict
SITUATION_REGISTRY = "waiting_for_registry"  # deferred in B: no accepted registry of its kind
SITUATION_RETRY = "retry_requested"  # B wrote a retry request
SITUATION_REFRESH = "refresh_requested"  # B wrote a refresh request (no attempt passes, budget spent)
SITUATION_EXHAUSTED = "exhausted"  # no attempt passes in B and the budget is spent
SITUATION_ABSENT = "absent_from_b"  # B holds nothing of the slot
SITUATIONS = (SITUATION_RECORDS_CHANGED, SITUATION_NEWLY_ACCEPTED, SITUATION_ENTRY_LIST, SITUATION_JUDGES,
              SITUATION_REGISTRY, SITUATION_RETRY, SITUATION_REFRESH, SITUATION_EXHAUSTED, SITUATION_ABSENT)

# Accepted artifacts, by the content hash of their records.
ARTIFACT_UNCHANGED = "unchanged"
ARTIFACT_CHANGED = "changed"
ARTIFACT_APPEARED = "appeared"
ARTIFACT_DISAPPEARED = "disappeared"
ARTIFACT_CHANGES = (ARTIFACT_UNCHANGED, ARTIFACT_CHANGED, ARTIFACT_APPEARED, ARTIFACT_DISAPPEARED)

# A request of A, looked for in B: an attempt of the slot with the attempt number it asked for.
ANSWER_PASSED = "passed"
ANSWER_FAILED_AGAIN = "failed_again"
ANSWER_DEFERRED = "deferred"
ANSWER_UNANSWERED = "unanswered"
ANSWER_STATUSES = (ANSWER_PASSED, ANSWER_FAILED_AGAIN, ANSWER_DEFERRED, ANSWER_UNANSWERED)

RUN_A, RUN_B = "a", "b"
RUNS = (RUN_A, RUN_B)

# The outputs of a run that compare reads (folders of the run).
OUTPUT_EVALUATIONS = "evaluations"
OUTPUT_REQUESTS = "retry_requests"
OUTPUT_ARTIFACTS = ARTIFACTS
COMPARED_OUTPUTS = (OUTPUT_EVALUATIONS, OUTPUT_REQUESTS, OUTPUT_ARTIFACTS)
# The fields compare reads of each output's rows ({name: sub-shape or None}; Avro and Parquet rows are
# read with only these, so an artifact's raw response is never carried along). An evaluation's producer
# and usage are what the runs cost (``analysis.cost.comparison_counts``, from the same rows).
_SLOT_FIELDS = {"family": None, "source_id": None, "chunk_id": None}
READ_FIELDS = {
    OUTPUT_EVALUATIONS: {**_SLOT_FIELDS, "candidate_id": None, "attempt": None, "verdict": None,
                         "issues": {"validator": None, "reason_code": None}, "producer": None, "usage": None},
    OUTPUT_REQUESTS: {**_SLOT_FIELDS, "kind": None, "candidate_id": None, "attempt": None},
    OUTPUT_ARTIFACTS: {**_SLOT_FIELDS, "records": None, "provenance": {"candidate_id": None, "attempt": None}},
}

# The membership validator's reason code: a name the occurrence's registry does not hold.
NOT_IN_REGISTRY = "not_in_registry"
# The evaluations' "and N more issues" row (domain.issues) is a bound, not a defect.
BOUND_VALIDATOR = "bound"
_REQUEST_KINDS = frozenset(REQUEST_KINDS)
# Families whose attempts are checked against a registry of their kind.
OCCURRENCE_FAMILIES = frozenset(key for key, spec in FAMILIES.items() if spec.needs_registry)

# --- one run's facts about one slot -----------------------------------------------------------------

class Attempt(NamedTuple):
    """One evaluation row: a candidate and its verdict under the run's policy. Ordered as the job
    orders a slot's attempts: attempt number, then candidate id. A tuple (as ``Request``): made per row
    read and sorted per slot, and a tuple is built and compared by the interpreter itself, where a
    dataclass's ``__init__`` and ``__lt__`` are Python calls."""

    attempt: int
    candidate_id: str
    verdict: str
    reason_codes: tuple[str, ...] = ()  # in issue order, with repeats; the bound's row left out

    @property
    def passed(self) -> bool:
        return self.verdict in PASSING_VERDICTS


class Request(NamedTuple):
    """One retry or refresh request: the attempt number it asks for, the candidate it replaces."""

    attempt: int
    candidate_id: str
    kind: str


@dataclass(frozen=True, order=True)
class Artifact:
    """One accepted artifact: the attempt it came from, the content hash of its records and the records
    themselves (JSON, read only when the slot changed: one artifact per slot and run is held at a time)."""

    attempt: int
    candidate_id: str
    records_sha256: str
    records_json: bytes = field(default=b"[]", compare=False, repr=False)

    @property
    def records(self) -> list:
        return orjson.loads(self.records_json)


@dataclass(frozen=True)
class SlotInRun:
    """Everything one run wrote about one slot (each part sorted)."""

    attempts: tuple[Attempt, ...] = ()
    requests: tuple[Request, ...] = ()
    artifacts: tuple[Artifact, ...] = ()

    @property
    def present(self) -> bool:
        return bool(self.attempts or self.requests or self.artifacts)

    def attempt_of(self, candidate_id: str) -> Attempt | None:
        return next((a for a in self.attempts if a.candidate_id == candidate_id), None)


NOTHING = SlotInRun()


# --- rows -> facts ----------------------------------------------------------------------------------

def records_sha256(records: Sequence[Any]) -> str:
    """The content hash of an artifact's records: canonical JSON (keys sorted), so equal records hash
    equally whichever format they were read from."""
    return hashlib.sha256(orjson.dumps(list(records), option=orjson.OPT_SORT_KEYS)).hexdigest()


def attempt_of(row: Mapping[str, Any]) -> Attempt:
    """An evaluation row as an attempt."""
    if type(row) is dict:  # the rows as read: each field checked once, inline (a row that fails is named below)
        attempt, candidate_id, verdict, issues = row.get("attempt"), row.get("candidate_id"), row.get("verdict"), \
            row.get("issues")
        if type(attempt) is int and type(candidate_id) is str and type(verdict) is str and (
                issues is None or type(issues) is list):
            return Attempt(attempt, candidate_id, verdict, tuple(
                str(issue.get("reason_code", "")) for issue in issues
                if is_mapping(issue) and issue.get("validator") != BOUND_VALIDATOR) if issues else ())
    issues = row.get("issues") if is_mapping(row) else None
    if issues is None:
        issues = ()
    elif not isinstance(issues, list):
        raise RowError(f"'issues' is {shown(issues)}, not a list")
    codes = tuple(str(issue.get("reason_code", "")) for issue in issues
                  if is_mapping(issue) and issue.get("validator") != BOUND_VALIDATOR)
    return Attempt(row_field(row, "attempt", int), row_field(row, "candidate_id", str), row_field(row, "verdict", str),
                   codes)


def request_of(row: Mapping[str, Any]) -> Request:
    """A request row (``kind`` retry, refresh or judge)."""
    if type(row) is dict:
        attempt, candidate_id, kind = row.get("attempt"), row.get("candidate_id"), row.get("kind")
        if type(attempt) is int and type(candidate_id) is str and type(kind) is str and kind in _REQUEST_KINDS:
            return Request(attempt, candidate_id, kind)
    kind = row_field(row, "kind", str)
    if kind not in REQUEST_KINDS:
        raise RowError(f"a request of kind {shown(kind)}, not one of {', '.join(REQUEST_KINDS)}")
    return Request(row_field(row, "attempt", int), row_field(row, "candidate_id", str), kind)


def artifact_of(row: Mapping[str, Any]) -> Artifact:
    """An artifact row: its provenance's attempt and the hash of its records."""
    provenance = row.get("provenance")
    records = row.get("records")
    if not is_mapping(provenance) or not isinstance(records, list):
        raise RowError("an artifact row without provenance or records")
    attempt, candidate_id = provenance.get("attempt"), provenance.get("candidate_id")
    if not (type(attempt) is int and type(candidate_id) is str):
        attempt, candidate_id = row_field(provenance, "attempt", int), row_field(provenance, "candidate_id", str)
    return Artifact(attempt, candidate_id, records_sha256(records), orjson.dumps(records))


def facts_by_slot(output: str, rows: Iterable[Mapping[str, Any]]) -> dict[Slot, SlotInRun]:
    """Rows of one output of one run (``evaluations``, ``retry_requests`` or ``artifacts``) gathered per slot."""
    part = {OUTPUT_EVALUATIONS: "attempts", OUTPUT_REQUESTS: "requests", OUTPUT_ARTIFACTS: "artifacts"}.get(output)
    return {Slot(*key): SlotInRun(**{part: tuple(sorted(facts))}) for key, facts in facts_of(output, rows).items()}


def facts_of(output: str, rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], list]:
    """Rows of one output of one run, each slot's facts (its attempts, requests or artifacts) in row order, by
    the slot's key; a row that is not what the output's contract says raises ``RowError``."""
    if output == OUTPUT_EVALUATIONS:
        fact = attempt_of
    elif output == OUTPUT_REQUESTS:
        fact = request_of
    elif output == OUTPUT_ARTIFACTS:
        fact = artifact_of
    else:
        raise ValueError(f"compare reads {', '.join(COMPARED_OUTPUTS)}, not {output!r}")
    gathered: dict[tuple[str, str, str], list] = {}
    for row in rows:
        key = _slot_key(row)
        facts = gathered.get(key)
        if facts is None:
            gathered[key] = [fact(row)]
        else:
            facts.append(fact(row))
    return gathered


def _slot_key(row: Mapping[str, Any]) -> tuple[str, str, str]:
    """``slot_of(row).key``: the three fields checked inline for a row as read (one Slot per slot, not per row);
    any other row through ``slot_of``, which names what is wrong."""
    if type(row) is dict:
        key = row.get("family"), row.get("source_id"), row.get("chunk_id")
        if type(key[0]) is str and type(key[1]) is str and type(key[2]) is str:
            return key
    return slot_of(row).key


# --- one slot in one run: its outcome ---------------------------------------------------------------

@dataclass(frozen=True)
class Decision:
    """A slot's outcome in one run and the attempt it rests on (None: the slot is absent)."""

    outcome: str
    candidate_id: str | None = None
    attempt: int | None = None
    reason_codes: tuple[str, ...] = ()  # the deciding attempt's, distinct, sorted
    records_sha256: str | None = None  # accepted only

    def as_row(self) -> dict | None:
        if self.candidate_id is None:
            return None
        return {"candidate_id": self.candidate_id, "attempt": self.attempt, "reason_codes": list(self.reason_codes),
                "records_sha256": self.records_sha256}


ABSENT = Decision(OUTCOME_ABSENT)


def _deciding(outcome: str, run: SlotInRun, candidate_id: str, attempt: int, records: str | None = None) -> Decision:
    evaluated = run.attempt_of(candidate_id)
    codes = tuple(sorted(set(evaluated.reason_codes))) if evaluated is not None else ()
    return Decision(outcome, candidate_id, evaluated.attempt if evaluated is not None else attempt, codes, records)


def decide(run: SlotInRun) -> Decision:
    """The slot's outcome in a run, from what the run wrote for it (see the module's docstring)."""
    if run.artifacts:
        artifact = min(run.artifacts)  # one per slot; the earliest, should a run hold two
        return _deciding(OUTCOME_ACCEPTED, run, artifact.candidate_id, artifact.attempt, artifact.records_sha256)
    if run.requests:
        request = min(run.requests)  # a slot never gets two requests in one run (judges: one per judge)
        if request.kind == KIND_JUDGE:  # contract §4.3: the slot waits on its judges; the request names the attempt
            return _deciding(OUTCOME_DEFERRED, run, request.candidate_id, request.attempt)
        if request.kind == KIND_REFRESH and run.attempts and all(a.verdict == VERDICT_DEFERRED for a in run.attempts):
            # contract §4.1: a reconciliation waiting for its entry list; the job counts it deferred, and so does
            # the comparison (its refresh request carries the current list).
            return _deciding(OUTCOME_DEFERRED, run, request.candidate_id, request.attempt - 1)
        return _deciding(request.kind, run, request.candidate_id, request.attempt - 1)
    if not run.attempts:
        return ABSENT
    latest = max(run.attempts)  # the job's order: attempt number, then candidate id
    undecided = all(a.verdict == VERDICT_DEFERRED for a in run.attempts)
    return _deciding(OUTCOME_DEFERRED if undecided else OUTCOME_EXHAUSTED, run, latest.candidate_id, latest.attempt)


# --- one slot, two runs -------------------------------------------------------------------------------

def classify_change(a: Decision, b: Decision) -> str | None:
    """What changed for a slot from A to B; None when neither its outcome nor its accepted records did."""
    accepted_a, accepted_b = a.outcome == OUTCOME_ACCEPTED, b.outcome == OUTCOME_ACCEPTED
    if accepted_a and not accepted_b:
        return CHANGE_REGRESSION
    if accepted_b and not accepted_a:
        return CHANGE_FIX
    if accepted_a and accepted_b:
        return CHANGE_RECORDS if a.records_sha256 != b.records_sha256 else None
    return CHANGE_OTHER if a.outcome != b.outcome else None


def situation(change: str | None, b_outcome: str, b_reason_codes: Iterable[str] = ()) -> str | None:
    """Where a changed slot stands in B (one of :data:`SITUATIONS`), from its change, its outcome in B and
    the reason codes of B's deciding attempt; None for a slot that did not change."""
    if change is None:
        return None
    if change == CHANGE_RECORDS:
        return SITUATION_RECORDS_CHANGED
    if change == CHANGE_FIX:
        return SITUATION_NEWLY_ACCEPTED
    if b_outcome == OUTCOME_DEFERRED:
        codes = set(b_reason_codes)
        if ENTRY_LIST_CHANGED in codes:
            return SITUATION_ENTRY_LIST
        return SITUATION_JUDGES if AWAITING_JUDGMENT in codes else SITUATION_REGISTRY
    return {OUTCOME_RETRY: SITUATION_RETRY, OUTCOME_REFRESH: SITUATION_REFRESH, OUTCOME_EXHAUSTED: SITUATION_EXHAUSTED,
            OUTCOME_ABSENT: SITUATION_ABSENT}[b_outcome]


def situation_of_row(row: Mapping[str, Any]) -> str | None:
    """:func:`situation` of a ``slots/`` row."""
    b = row.get("deciding_b") or {}
    return situation(row["change"], row["transition"]["to"], b.get("reason_codes") or ())


def artifact_change(a: Decision, b: Decision) -> str | None:
    """The slot's accepted artifact from A to B, by its records' hash; None when neither run accepted it."""
    accepted_a, accepted_b = a.outcome == OUTCOME_ACCEPTED, b.outcome == OUTCOME_ACCEPTED
    if accepted_a and accepted_b:
        return ARTIFACT_UNCHANGED if a.records_sha256 == b.records_sha256 else ARTIFACT_CHANGED
    if accepted_a:
        return ARTIFACT_DISAPPEARED
    if accepted_b:
        return ARTIFACT_APPEARED
    return None


def answer_in_b(a: SlotInRun, b: SlotInRun) -> tuple[str, str] | None:
    """(kind, status) of A's request for the slot, as B answered it; None when A made none.

    Answered: B evaluated an attempt with the number the request asked for; it passed, failed again
    or was deferred (any passing answer counts as passed, then any rejected one as failed again)."""
    if not a.requests:
        return None
    request = min(a.requests)
    if request.kind == KIND_JUDGE:  # answered when B decided the judged attempt itself
        judged = b.attempt_of(request.candidate_id)
        if judged is None or judged.verdict == VERDICT_DEFERRED:
            return request.kind, ANSWER_UNANSWERED
        return request.kind, ANSWER_PASSED if judged.passed else ANSWER_FAILED_AGAIN
    answers = [attempt for attempt in b.attempts if attempt.attempt == request.attempt]
    if not answers:
        return request.kind, ANSWER_UNANSWERED
    if any(answer.passed for answer in answers):
        return request.kind, ANSWER_PASSED
    if any(answer.verdict == VERDICT_REJECTED for answer in answers):
        return request.kind, ANSWER_FAILED_AGAIN
    return request.kind, ANSWER_DEFERRED


def failed_after_registry_change(a: SlotInRun, b: SlotInRun) -> tuple[str, ...]:
    """Candidate ids that passed in A and fail in B because a name is not in the registry (the registry the
    occurrence is checked against changed between the runs: the attempt itself is the same)."""
    passed_in_a = {attempt.candidate_id for attempt in a.attempts if attempt.passed}
    return tuple(sorted({attempt.candidate_id for attempt in b.attempts
                         if attempt.candidate_id in passed_in_a and attempt.verdict == VERDICT_REJECTED
                         and NOT_IN_REGISTRY in attempt.reason_codes}))


@dataclass(frozen=True)
class SlotComparison:
    slot: Slot
    a: Decision
    b: Decision
    change: str | None
    artifact: str | None
    answer: tuple[str, str] | None
    registry_failures: tuple[str, ...]
    reason_codes_a: tuple[tuple[str, int], ...] = field(default=())  # every attempt's issues, counted
    reason_codes_b: tuple[tuple[str, int], ...] = field(default=())
    records: RecordsDiff | None = None  # a changed slot accepted in A or B: what changed in its records

    @property
    def transition(self) -> tuple[str, str]:
        return self.a.outcome, self.b.outcome

    @property
    def situation(self) -> str | None:
        return situation(self.change, self.b.outcome, self.b.reason_codes)

    def row(self) -> dict | None:
        """The slot's row of ``slots/`` (``assets/outputs/slot_change.v1``); None when nothing changed."""
        if self.change is None:
            return None
        return {"family": self.slot.family, "source_id": self.slot.source_id, "chunk_id": self.slot.chunk_id,
                "transition": {"from": self.a.outcome, "to": self.b.outcome}, "change": self.change,
                "deciding_a": self.a.as_row(), "deciding_b": self.b.as_row(),
                "records": None if self.records is None else self.records.as_row()}

    def tally(self) -> dict[tuple, int]:
        """This slot's part of every count of ``compare.json`` (summed over all slots: ``comparison_document``)."""
        return self.tally_into({})

    def tally_into(self, counts: dict[tuple, int]) -> dict[tuple, int]:
        """:meth:`tally` added to ``counts`` (a source's slots summed in one dict, not one dict per slot)."""
        family = self.slot.family
        found = [("transition", family, self.a.outcome, self.b.outcome)]
        for run, decision in ((RUN_A, self.a), (RUN_B, self.b)):
            if decision.outcome != OUTCOME_ABSENT:
                found.append(("slots", family, run))
        if OUTCOME_ABSENT != self.a.outcome and OUTCOME_ABSENT != self.b.outcome:
            found.append(("slots", family, "both"))
        if self.change is not None:
            found.append(("change", family, self.change))
            found.append(("situation", family, self.situation))
        if self.artifact is not None:
            found.append(("artifact", family, self.artifact))
        if self.answer is not None:
            found.append(("answer", family, *self.answer))
        for key in found:
            counts[key] = counts.get(key, 0) + 1
        if self.registry_failures:
            key = ("registry_failure", family)
            counts[key] = counts.get(key, 0) + len(self.registry_failures)
        for run, codes in ((RUN_A, self.reason_codes_a), (RUN_B, self.reason_codes_b)):
            for code, n in codes:
                key = ("reason_code", family, run, code)
                counts[key] = counts.get(key, 0) + n
        return counts


def _code_counts(run: SlotInRun) -> tuple[tuple[str, int], ...]:
    codes = [code for attempt in run.attempts for code in attempt.reason_codes]
    return tuple(sorted(Counter(codes).items())) if codes else ()  # most slots: none (no Counter made)


def compare_slot(slot: Slot, a: SlotInRun, b: SlotInRun) -> SlotComparison:
    """One slot of run A against the same slot of run B (either may hold nothing of it)."""
    in_a, in_b = decide(a), decide(b)
    change = classify_change(in_a, in_b)
    return SlotComparison(slot, in_a, in_b, change, artifact_change(in_a, in_b), answer_in_b(a, b),
                          failed_after_registry_change(a, b), _code_counts(a), _code_counts(b),
                          records_changed(slot, change, a, b))


def records_changed(slot: Slot, change: str | None, a: SlotInRun, b: SlotInRun) -> RecordsDiff | None:
    """What changed in the slot's accepted records (nothing accepted in a run: no records there); None
    when the slot did not change or neither run accepted it."""
    if change is None or not (a.artifacts or b.artifacts):
        return None
    return diff_records(slot.family, _accepted_records(a), _accepted_records(b))


def _accepted_records(run: SlotInRun) -> list:
    return min(run.artifacts).records if run.artifacts else []  # the artifact decide() reads


# Where an output's facts go among a slot's: A's attempts, requests, artifacts, then B's.
_PART_INDEX = {OUTPUT_EVALUATIONS: 0, OUTPUT_REQUESTS: 1, OUTPUT_ARTIFACTS: 2}


def compare_source(pieces: Iterable[tuple[str, str, Mapping[tuple[str, str, str], Sequence]]]
                   ) -> list[SlotComparison]:
    """Every slot of one source compared, in slot order, from its facts as read (``(run, output, facts_of
    one file's rows of the source)``): a slot names its source, so all that either run wrote of it is here.
    A slot's facts of a run are sorted once, as they came (sorting each piece and then all of them would
    give the same: the sort is stable)."""
    gathered: dict[tuple[str, str, str], list[list]] = {}
    for run, output, facts in pieces:
        index = (0 if run == RUN_A else 3) + _PART_INDEX[output]
        for key, found in facts.items():
            lists = gathered.get(key)
            if lists is None:
                lists = gathered[key] = [[], [], [], [], [], []]
            lists[index] += found
    return [compare_slot(Slot(*key), _in_run(*lists[:3]), _in_run(*lists[3:]))
            for key, lists in sorted(gathered.items())]


def _in_run(attempts: list, requests: list, artifacts: list) -> SlotInRun:
    if not (attempts or requests or artifacts):
        return NOTHING
    return SlotInRun(tuple(sorted(attempts)), tuple(sorted(requests)), tuple(sorted(artifacts)))


def sum_tallies(tallies: Iterable[Mapping[tuple, int]]) -> dict[tuple, int]:
    total: Counter[tuple] = Counter()
    for tally in tallies:
        total.update(tally)
    return dict(total)
