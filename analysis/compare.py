"""Comparing two runs (contract §6.3): each slot's outcome in run A and in run B, what changed, and the counts.

Pure: rows in (as the readers give them back: evaluations, retry requests,
artifacts, any output format), facts and counts out. The pipeline
(``pipelines.compare``) reads both run folders, gathers the facts of each slot
from both runs and calls :func:`compare_slot` once per slot; the slot's
:meth:`SlotComparison.tally` is summed over every slot and
:func:`comparison_document` folds the sums into ``compare.json``.

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
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import orjson

from analysis.record_diff import RecordsDiff, diff_records
from domain import counters
from domain.families import FAMILIES
from domain.families.reconciliation import ENTRY_LIST_CHANGED
from domain.judges import AWAITING_JUDGMENT
from domain.revision import KIND_JUDGE, KIND_REFRESH, KIND_RETRY, REQUEST_KINDS
from domain.rows import VERDICT_ACCEPTED, VERDICT_DEFERRED, VERDICT_REJECTED, VERDICT_SUPERSEDED
from domain.run_integrity import ARTIFACTS, ManifestError, ManifestReader, listed_files, output_of, shown

# --- names (normative: contract §6.3; assets/outputs/slot_change.v1.* spell them too) -------------------

OUTCOME_ACCEPTED = "accepted"
OUTCOME_RETRY = KIND_RETRY
OUTCOME_REFRESH = KIND_REFRESH
OUTCOME_EXHAUSTED = "exhausted"
OUTCOME_DEFERRED = "deferred"
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
# read with only these, so an artifact's raw response is never carried along).
_SLOT_FIELDS = {"family": None, "source_id": None, "chunk_id": None}
READ_FIELDS = {
    OUTPUT_EVALUATIONS: {**_SLOT_FIELDS, "candidate_id": None, "attempt": None, "verdict": None,
                         "issues": {"validator": None, "reason_code": None}},
    OUTPUT_REQUESTS: {**_SLOT_FIELDS, "kind": None, "candidate_id": None, "attempt": None},
    OUTPUT_ARTIFACTS: {**_SLOT_FIELDS, "records": None, "provenance": {"candidate_id": None, "attempt": None}},
}

PASSING_VERDICTS = (VERDICT_ACCEPTED, VERDICT_SUPERSEDED)

# The membership validator's reason code: a name the occurrence's registry does not hold.
NOT_IN_REGISTRY = "not_in_registry"
# The evaluations' "and N more issues" row (domain.issues) is a bound, not a defect.
BOUND_VALIDATOR = "bound"
# Families whose attempts are checked against a registry of their kind.
OCCURRENCE_FAMILIES = frozenset(key for key, spec in FAMILIES.items() if spec.needs_registry)

# What compare writes under --output.
SLOTS_OUTPUT = "slots"
COMPARE_JSON = "compare.json"
COMPARE_HTML = "compare.html"
COMPARE_KIND = "compare"  # the manifest's "kind": a comparison's folder, not a run's
# compare.html lists the changed slots on one page per source (a source's slots are what the job holds at
# once): pages/<name>.html, each a document of the folder's manifest.
PAGES_FOLDER = "pages"
_PAGE_NAME = re.compile(r"pages/[A-Za-z0-9._-]+\.html")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def page_name(source_id: str) -> str:
    """The page of a source's changed slots, relative to the comparison folder: its id made safe for a file
    name, and a hash of it (two ids made alike stay apart)."""
    digest = hashlib.sha256(source_id.encode("utf-8")).hexdigest()[:12]
    return f"{PAGES_FOLDER}/{_UNSAFE.sub('_', source_id)[:60]}-{digest}.html"


def is_page_name(name: Any) -> bool:
    """A name :func:`page_name` can give (so reading it stays inside the folder's pages/)."""
    return isinstance(name, str) and _PAGE_NAME.fullmatch(name) is not None


# --- one run's facts about one slot -----------------------------------------------------------------

@dataclass(frozen=True, order=True)
class Slot:
    family: str
    source_id: str
    chunk_id: str

    @property
    def key(self) -> tuple[str, str, str]:
        """The slot as a plain tuple (what a runner groups by)."""
        return (self.family, self.source_id, self.chunk_id)


@dataclass(frozen=True, order=True)
class Attempt:
    """One evaluation row: a candidate and its verdict under the run's policy. Ordered as the job
    orders a slot's attempts: attempt number, then candidate id."""

    attempt: int
    candidate_id: str
    verdict: str
    reason_codes: tuple[str, ...] = ()  # in issue order, with repeats; the bound's row left out

    @property
    def passed(self) -> bool:
        return self.verdict in PASSING_VERDICTS


@dataclass(frozen=True, order=True)
class Request:
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

    def __add__(self, other: "SlotInRun") -> "SlotInRun":
        return SlotInRun(tuple(sorted(self.attempts + other.attempts)), tuple(sorted(self.requests + other.requests)),
                         tuple(sorted(self.artifacts + other.artifacts)))

    @property
    def present(self) -> bool:
        return bool(self.attempts or self.requests or self.artifacts)

    def attempt_of(self, candidate_id: str) -> Attempt | None:
        return next((a for a in self.attempts if a.candidate_id == candidate_id), None)


NOTHING = SlotInRun()


def merged(parts: Iterable[SlotInRun]) -> SlotInRun:
    """One run's facts of a slot from the pieces read in different files."""
    total = NOTHING
    for part in parts:
        total = total + part
    return total


# --- rows -> facts ----------------------------------------------------------------------------------

class RowError(ValueError):
    """A row that is not what the run's output contract says (a verified run never has one)."""


_KIND_NAMES = {int: "an integer", str: "a string"}


def _is_mapping(value: Any) -> bool:
    # A dict first: isinstance against typing.Mapping goes through the ABC machinery, and this runs several
    # times per row read (a sixth of compare's time at 10k, before).
    return type(value) is dict or isinstance(value, Mapping)


def _field(row: Mapping[str, Any], name: str, kind: type) -> Any:
    if not _is_mapping(row):
        raise RowError(f"a row that is {shown(row)}, not an object")
    if name not in row:
        raise RowError(f"a row without {name!r}")
    value = row[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise RowError(f"{name!r} is {shown(value)}, not {_KIND_NAMES[kind]}")
    return value


def slot_of(row: Mapping[str, Any]) -> Slot:
    return Slot(_field(row, "family", str), _field(row, "source_id", str), _field(row, "chunk_id", str))


def records_sha256(records: Sequence[Any]) -> str:
    """The content hash of an artifact's records: canonical JSON (keys sorted), so equal records hash
    equally whichever format they were read from."""
    return hashlib.sha256(orjson.dumps(list(records), option=orjson.OPT_SORT_KEYS)).hexdigest()


def attempt_of(row: Mapping[str, Any]) -> Attempt:
    """An evaluation row as an attempt."""
    issues = row.get("issues") if _is_mapping(row) else None
    if issues is None:
        issues = ()
    elif not isinstance(issues, list):
        raise RowError(f"'issues' is {shown(issues)}, not a list")
    codes = tuple(str(issue.get("reason_code", "")) for issue in issues
                  if _is_mapping(issue) and issue.get("validator") != BOUND_VALIDATOR)
    return Attempt(_field(row, "attempt", int), _field(row, "candidate_id", str), _field(row, "verdict", str), codes)


def request_of(row: Mapping[str, Any]) -> Request:
    """A request row (``kind`` retry, refresh or judge)."""
    kind = _field(row, "kind", str)
    if kind not in REQUEST_KINDS:
        raise RowError(f"a request of kind {shown(kind)}, not one of {', '.join(REQUEST_KINDS)}")
    return Request(_field(row, "attempt", int), _field(row, "candidate_id", str), kind)


def artifact_of(row: Mapping[str, Any]) -> Artifact:
    """An artifact row: its provenance's attempt and the hash of its records."""
    provenance = row.get("provenance")
    records = row.get("records")
    if not _is_mapping(provenance) or not isinstance(records, list):
        raise RowError("an artifact row without provenance or records")
    return Artifact(_field(provenance, "attempt", int), _field(provenance, "candidate_id", str),
                    records_sha256(records), orjson.dumps(records))


def facts_by_slot(output: str, rows: Iterable[Mapping[str, Any]]) -> dict[Slot, SlotInRun]:
    """Rows of one output of one run (``evaluations``, ``retry_requests`` or ``artifacts``) gathered per slot."""
    gathered: dict[Slot, list] = {}
    if output == OUTPUT_EVALUATIONS:
        fact = attempt_of
    elif output == OUTPUT_REQUESTS:
        fact = request_of
    elif output == OUTPUT_ARTIFACTS:
        fact = artifact_of
    else:
        raise ValueError(f"compare reads {', '.join(COMPARED_OUTPUTS)}, not {output!r}")
    for row in rows:
        gathered.setdefault(slot_of(row), []).append(fact(row))
    part = {OUTPUT_EVALUATIONS: "attempts", OUTPUT_REQUESTS: "requests", OUTPUT_ARTIFACTS: "artifacts"}[output]
    return {slot: SlotInRun(**{part: tuple(sorted(facts))}) for slot, facts in gathered.items()}


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
        family = self.slot.family
        counts: Counter[tuple] = Counter()
        counts[("transition", family, *self.transition)] += 1
        for run, decision in ((RUN_A, self.a), (RUN_B, self.b)):
            if decision.outcome != OUTCOME_ABSENT:
                counts[("slots", family, run)] += 1
        if OUTCOME_ABSENT not in self.transition:
            counts[("slots", family, "both")] += 1
        if self.change is not None:
            counts[("change", family, self.change)] += 1
            counts[("situation", family, self.situation)] += 1
        if self.artifact is not None:
            counts[("artifact", family, self.artifact)] += 1
        if self.answer is not None:
            counts[("answer", family, *self.answer)] += 1
        if self.registry_failures:
            counts[("registry_failure", family)] += len(self.registry_failures)
        for run, codes in ((RUN_A, self.reason_codes_a), (RUN_B, self.reason_codes_b)):
            for code, n in codes:
                counts[("reason_code", family, run, code)] += n
        return dict(counts)


def _code_counts(run: SlotInRun) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(Counter(code for attempt in run.attempts for code in attempt.reason_codes).items()))


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


def compare_source(parts: Iterable[tuple[str, Mapping[Slot, SlotInRun]]]) -> list[SlotComparison]:
    """Every slot of one source compared, in slot order, from its facts as read (``(run, facts of one file's
    rows of the source)``): a slot names its source, so all that either run wrote of it is here."""
    gathered: dict[Slot, tuple[list[SlotInRun], list[SlotInRun]]] = {}
    for run, facts in parts:
        side = 0 if run == RUN_A else 1
        for slot, fact in facts.items():
            gathered.setdefault(slot, ([], []))[side].append(fact)
    return [compare_slot(slot, merged(a), merged(b)) for slot, (a, b) in sorted(gathered.items())]


def compare_runs(a: Mapping[Slot, SlotInRun], b: Mapping[Slot, SlotInRun]) -> list[SlotComparison]:
    """Every slot of A or B compared (in slot order): the whole comparison in memory, for small runs and tests."""
    return [compare_slot(slot, a.get(slot, NOTHING), b.get(slot, NOTHING)) for slot in sorted(set(a) | set(b))]


def sum_tallies(tallies: Iterable[Mapping[tuple, int]]) -> dict[tuple, int]:
    total: Counter[tuple] = Counter()
    for tally in tallies:
        total.update(tally)
    return dict(total)


# --- rows read against rows listed ------------------------------------------------------------------

def input_name(run: str, output: str) -> str:
    """The name one output of one run is read under (``a.evaluations``)."""
    return f"{run}.{output}"


def listed_rows(manifest: Mapping[str, Any]) -> dict[str, int]:
    """Rows of each compared output as a (verified) run's manifest lists them; artifacts of every family together."""
    try:
        listed = listed_files(manifest)
    except ManifestError as exc:
        raise RowError(str(exc)) from None
    rows = dict.fromkeys(COMPARED_OUTPUTS, 0)
    for f in listed.values():
        output = compared_output(f.path)
        if output is not None:
            rows[output] += f.rows
    return rows


def compared_output(path: str) -> str | None:
    """The output compare reads a run's file as (``artifacts`` for every family's); None: one it does not read."""
    output = output_of(path)
    output = OUTPUT_ARTIFACTS if output.startswith(OUTPUT_ARTIFACTS + "/") else output
    return output if output in COMPARED_OUTPUTS else None


def rows_block(listed: Mapping[str, Mapping[str, int]], read_counts: Mapping[str, int]) -> dict:
    """Per run and output: the rows its manifest lists and the rows compare read (``{input}_in`` of the
    reading step, less the records it could not read: ``dead_letters/{input}``); holds when they agree."""
    block: dict[str, Any] = {}
    holds = True
    for run in RUNS:
        block[run] = {}
        for output in COMPARED_OUTPUTS:
            name = input_name(run, output)
            unreadable = int(read_counts.get(counters.dead_letters(name), 0))
            read = int(read_counts.get(counters.records_in(name), 0)) - unreadable
            want = int(listed[run][output])
            block[run][output] = {"listed": want, "read": read, "unreadable": unreadable}
            holds = holds and read == want and not unreadable
    block["holds"] = holds
    return block


# --- the document: compare.json ---------------------------------------------------------------------

def _family_block(tallies: Mapping[tuple, int], family: str | None) -> dict:
    """The counts of one family (None: every family) from the summed tallies."""
    def n(kind: str, *rest: str) -> int:
        if family is not None:
            return int(tallies.get((kind, family, *rest), 0))
        return sum(int(v) for k, v in tallies.items() if k[0] == kind and k[2:] == rest)

    transitions: dict[str, dict[str, int]] = {}
    reason_codes: dict[str, dict[str, int]] = {run: {} for run in RUNS}
    for key, value in sorted(tallies.items()):
        if family is not None and key[1] != family:
            continue
        if key[0] == "transition":
            row = transitions.setdefault(key[2], {})
            row[key[3]] = row.get(key[3], 0) + value
        elif key[0] == "reason_code":
            codes = reason_codes[key[2]]
            codes[key[3]] = codes.get(key[3], 0) + value
    in_a, in_b, both = n("slots", RUN_A), n("slots", RUN_B), n("slots", "both")
    counted = sum(sum(row.values()) for row in transitions.values())
    answered = {kind: {status: n("answer", kind, status) for status in ANSWER_STATUSES} for kind in REQUEST_KINDS}
    requests = {status: sum(answered[kind][status] for kind in REQUEST_KINDS) for status in ANSWER_STATUSES}
    block = {
        "slots": {"in_a": in_a, "in_b": in_b, "in_both": both, "in_a_or_b": in_a + in_b - both},
        "transitions": {src: dict(sorted(dst.items(), key=_outcome_order)) for src, dst in
                        sorted(transitions.items(), key=_outcome_order)},
        "conservation": {"slots_in_a_or_b": in_a + in_b - both, "counted_in_transitions": counted,
                         "holds": counted == in_a + in_b - both},
        "changes": {change: n("change", change) for change in SLOT_CHANGES},
        "changed_slots": sum(n("change", change) for change in SLOT_CHANGES),
        "situations": {name: n("situation", name) for name in SITUATIONS},
        "artifacts": {what: n("artifact", what) for what in ARTIFACT_CHANGES},
        "reason_codes": {run: dict(sorted(codes.items(), key=lambda kv: (-kv[1], kv[0])))
                         for run, codes in reason_codes.items()},
        "requests_answered": {
            "requests": sum(requests.values()),
            "answered": sum(requests[s] for s in ANSWER_STATUSES if s != ANSWER_UNANSWERED),
            **requests,
            "by_kind": answered,
        },
    }
    if family is None or family in OCCURRENCE_FAMILIES:
        block["failed_after_registry_change"] = n("registry_failure")
    return block


def _outcome_order(item: tuple[str, Any]) -> int:
    return SLOT_OUTCOMES.index(item[0]) if item[0] in SLOT_OUTCOMES else len(SLOT_OUTCOMES)


def comparison_document(tallies: Mapping[tuple, int], *, families: Iterable[str], runs: Mapping[str, Mapping],
                        rows: Mapping[str, Any], examples: Mapping[str, Sequence[dict]] = {}) -> dict:
    """``compare.json``: per family and in total, the transitions (every slot of A or B in exactly one:
    recorded as ``conservation``), changes, accepted artifacts, reason codes, requests of A answered in B
    and, for occurrence families, attempts that failed after their registry changed.

    ``tallies``: the slots' tallies summed; ``families``: every family either run counts; ``runs``: what
    to say of each run (its folder, format); ``rows``: :func:`rows_block`; ``examples``: a few slot rows
    per change (listed in slot order)."""
    names = sorted(set(families) | {key[1] for key in tallies})
    by_family = {family: _family_block(tallies, family) for family in names}
    total = _family_block(tallies, None)
    slots_hold = total["conservation"]["holds"] and all(b["conservation"]["holds"] for b in by_family.values())
    return {
        "runs": {run: dict(runs[run]) for run in RUNS},
        "total": total,
        "by_family": by_family,
        "conservation": {"slots": {**total["conservation"], "holds": slots_hold}, "rows": dict(rows),
                         "holds": slots_hold and bool(rows.get("holds"))},
        "examples": {change: sorted(examples.get(change, ()), key=slot_row_order) for change in SLOT_CHANGES},
    }


def slot_row_order(row: Mapping[str, Any]) -> tuple[str, str, str]:
    """How slot rows are listed (examples): by family, source, chunk."""
    return row["family"], row["source_id"], row["chunk_id"]


# --- the comparison folder's own manifest ---------------------------------------------------------

def document_facts(data: bytes) -> dict:
    """A document the folder holds beside its part files (compare.json, compare.html): size and hash."""
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def comparison_manifest(document: Mapping[str, Any], *, files: Mapping[str, list], documents: Mapping[str, dict],
                        options: Mapping[str, Any], runner: str) -> dict:
    """The comparison folder's commit record: what was compared, the counts that must agree with the files,
    ``documents`` (compare.json and compare.html: bytes, sha256) and ``files``
    (``domain.run_integrity.files_block``)."""
    return {
        "kind": COMPARE_KIND,
        "runs": document["runs"],
        "options": dict(options),
        "runner": runner,
        "outputs": {SLOTS_OUTPUT: document["total"]["changed_slots"]},
        "conservation": {"holds": document["conservation"]["holds"]},
        "documents": dict(documents),
        "files": dict(files),
    }


def comparison_folder_problems(manifest: Any, found: Mapping[str, Any], part_files: Iterable[str],
                               documents: Mapping[str, dict | str | None], page_files: Iterable[str] = ()) -> list[str]:
    """A comparison folder against its manifest (one line per problem; none: the folder is as committed).
    A manifest of any shape gives problems, never an exception (a value of the wrong type is one).

    ``found``: for each listed path, the file's facts now (``OutputFile``), why they cannot be had (a str) or
    None (no file); ``part_files``: every ``part-*`` file in the folder; ``documents``: each document's facts
    now, why they cannot be had (a str) or None (missing); ``page_files``: every file under ``pages/``."""
    try:
        listed = listed_files(manifest)
    except ManifestError as exc:
        return [str(exc)]
    problems = []
    if manifest.get("kind") != COMPARE_KIND:
        problems.append(f"the manifest's kind is {shown(manifest.get('kind'))}, not {COMPARE_KIND!r}")
    for path, want in sorted(listed.items()):
        have = found.get(path)
        if have is None:
            problems.append(f"missing: {path}")
        elif isinstance(have, str):
            problems.append(f"altered: {path}: {have}")
        elif (have.bytes, have.sha256, have.rows) != (want.bytes, want.sha256, want.rows):
            problems.append(f"altered: {path}")
    problems += [f"unlisted: {path}" for path in sorted(set(part_files) - listed.keys())]
    read = ManifestReader(manifest)
    rows = sum(f.rows for f in listed.values() if output_of(f.path) == SLOTS_OUTPUT)
    claimed = read.count("outputs", SLOTS_OUTPUT)
    checks = []
    if claimed is not None and rows != claimed:
        checks.append(f"{SLOTS_OUTPUT}: the files hold {rows} rows, the manifest counts {claimed}")
    listed_documents = read.block("documents") or {}
    pages = [name for name in listed_documents if is_page_name(name)]
    checks += [f"manifest: documents lists {shown(name)}, not a document compare writes"
               for name in listed_documents if name not in (COMPARE_JSON, COMPARE_HTML) and not is_page_name(name)]
    for name in (COMPARE_JSON, COMPARE_HTML, *pages):
        want_doc = read.block("documents", name)
        have_doc = documents.get(name)
        if want_doc is None:
            continue  # missing or not an object: noted by the reader
        if have_doc is None:
            checks.append(f"missing: {name}")
        elif isinstance(have_doc, str):
            checks.append(f"altered: {name}: {have_doc}")
        elif have_doc != want_doc:
            checks.append(f"altered: {name}")
    checks += [f"unlisted: {name}" for name in sorted(set(page_files) - set(pages))]
    if read.flag("conservation", "holds") is False:
        checks.append("the comparison's conservation does not hold")
    return problems + list(read.problems) + checks
