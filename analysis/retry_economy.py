"""The retry economy of a run: what its retry requests ask for, what they must
never show, and how many producer retries endpoint canonicalization saves.

Pure computations over a run's rows (evaluations, retry requests), the
simulated producer's ground truth and the archive's candidates; no Beam, no
I/O. ``pipelines/retry_economy.py`` reads the files and prints the figures;
``pipelines/report.py`` shows them.

Ground truth (one row per candidate, see ``sample/simulated_producer.py``)
names every injected defect by kind, record name and cited range. What a
defect kind *means* (benign, fixed by endpoint ordering, hiding the others)
is the producer's vocabulary, written on the truth file's first line
(``vocabulary_record``) and passed in (:class:`DefectVocabulary`) rather than
imported: ``analysis`` knows nothing of ``sample``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from domain.evaluate import evaluate_response
from domain.evidence import evidence_as_written
from domain.families import FAMILIES
from domain.families.base import (
    ROLE_RECONCILIATION,
    ROLE_REGISTRY,
    Adapted,
    EvaluationContext,
    FamilySpec,
)
from domain.families.common import order_records
from domain.families.response_structs import with_items
from domain.issues import quote_name, render_range
from domain.judges import JUDGE_FAIL
from domain.revision import KIND_JUDGE, KIND_RETRY
from domain.rows import PASSING_VERDICTS, VERDICT_ACCEPTED, VERDICT_DEFERRED
from domain.source import Transcript


class Slot(NamedTuple):
    source_id: str
    chunk_id: str
    family: str


def slot_of(row: Mapping[str, Any]) -> Slot:
    """The slot of an evaluation, retry request or ground-truth row."""
    return Slot(row["source_id"], row["chunk_id"], row["family"])


# --- ground truth -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TruthDefect:
    kind: str
    record_name: str | None  # None (or blank) when the defect has no named record
    range: tuple[Any, Any] | None  # as the model wrote it, possibly reversed


@dataclass(frozen=True, slots=True)
class TruthRow:
    candidate_id: str
    slot: Slot
    attempt: int
    defects: tuple[TruthDefect, ...]
    expected_pass: bool
    # Semantic defects no rule sees, planted for the judges (contract §4.3): how many (0 without them).
    judge_defects: int = 0


def parse_truth_row(row: Mapping[str, Any]) -> TruthRow:
    defects = tuple(
        TruthDefect(d["kind"], d.get("record_name"), tuple(d["range"]) if d.get("range") is not None else None)
        for d in row["defects"]
    )
    return TruthRow(row["candidate_id"], slot_of(row), int(row["attempt"]), defects, bool(row["expected_pass"]),
                    len(row.get("judge_defects") or ()))


def judge_failed(evaluation: Mapping[str, Any]) -> bool:
    """An attempt a judge's fail rejected (contract §4.3): the rules passed it, the run's verdicts did not."""
    return any(isinstance(issue, Mapping) and issue.get("reason_code") == JUDGE_FAIL
               for issue in evaluation.get("issues") or ())


MEMBERSHIP_MISS = "not_in_registry"


def judged_registry_sources(evaluations: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Sources with a chunk registry attempt a judge's fail rejected: their occurrences may name an entry the
    truth assumed accepted."""
    return frozenset(row["source_id"] for row in evaluations
                     if _role_of(row.get("family")) == ROLE_REGISTRY and judge_failed(row))


def _role_of(family: Any) -> str | None:
    spec = FAMILIES.get(family) if isinstance(family, str) else None
    return spec.role if spec is not None else None


def passes_in_the_run(known: "TruthRow", evaluation: Mapping[str, Any], judged_sources: frozenset[str] = frozenset()
                      ) -> bool:
    """Whether the run should pass the attempt: the truth's rules, and no judge's fail - neither on it nor,
    for an occurrence that misses only registry names, on a registry of its source. A judge's verdict is
    an input of the run like the attempt itself; whether it was right is ``judge_figures``' business."""
    if not known.expected_pass or judge_failed(evaluation):
        return False
    issues = [i for i in evaluation.get("issues") or () if isinstance(i, Mapping)]
    return not (evaluation.get("source_id") in judged_sources and issues
                and all(i.get("reason_code") == MEMBERSHIP_MISS for i in issues))


@dataclass(frozen=True, slots=True)
class DefectVocabulary:
    """What the ground truth's defect kinds mean."""

    benign: frozenset[str]  # the candidate still passes
    canonicalized: frozenset[str]  # benign only because endpoint ordering repairs them
    unparseable: frozenset[str]  # the response is not JSON: nothing else can be seen
    schema: frozenset[str]  # the response fails its schema: record rules cannot run

    def detectable(self, defects: Iterable[TruthDefect]) -> tuple[TruthDefect, ...]:
        """The blocking defects a validator can see in one pass.

        A response that is not JSON hides every other defect, and one that
        fails its schema has no typed records for the semantic rules (contract
        §5, step 1): those hidden defects are not expected in the guidance.
        """
        blocking = [d for d in defects if d.kind not in self.benign]
        for layer in (self.unparseable, self.schema):
            seen = [d for d in blocking if d.kind in layer]
            if seen:
                return tuple(seen)
        return tuple(blocking)

    def passes_without_canonicalization(self, row: TruthRow) -> bool:
        return row.expected_pass and not any(d.kind in self.canonicalized for d in row.defects)


# The first line of a ground-truth file: what its producer's defect kinds mean, and the evaluations'
# reason codes each blocking kind is reported under (the truth counts defects by kind, the evaluations
# issues by code; benign kinds have none). The producer writes it, the commands given --truth read it.
VOCABULARY_KEY = "defect_vocabulary"
_VOCABULARY_SETS = ("benign", "canonicalized", "unparseable", "schema")
ReasonCodes = Mapping[str, tuple[str, ...]]


def vocabulary_record(vocabulary: DefectVocabulary, reason_codes: ReasonCodes) -> dict:
    """The vocabulary line of a ground-truth file, as JSON (sets sorted)."""
    return {VOCABULARY_KEY: {**{name: sorted(map(str, getattr(vocabulary, name))) for name in _VOCABULARY_SETS},
                             "reason_codes": {str(kind): list(codes) for kind, codes in reason_codes.items()}}}


def is_vocabulary_record(record: Mapping[str, Any]) -> bool:
    return VOCABULARY_KEY in record


def parse_vocabulary_record(record: Mapping[str, Any]) -> tuple[DefectVocabulary, dict[str, tuple[str, ...]]]:
    """The vocabulary and reason codes of a vocabulary line; ValueError saying what is missing."""
    words = record.get(VOCABULARY_KEY) if isinstance(record, Mapping) else None
    if not isinstance(words, Mapping):
        raise ValueError(f"no {VOCABULARY_KEY!r} object")

    def strings(value: Any, what: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"{VOCABULARY_KEY}.{what} is not a list of strings")
        return tuple(value)

    codes = words.get("reason_codes")
    if not isinstance(codes, Mapping):
        raise ValueError(f"{VOCABULARY_KEY}.reason_codes is not an object")
    vocabulary = DefectVocabulary(**{name: frozenset(strings(words.get(name), name)) for name in _VOCABULARY_SETS})
    return vocabulary, {kind: strings(value, f"reason_codes.{kind}") for kind, value in codes.items()}


# --- defect recall ----------------------------------------------------------------------

# A line about the response as a whole (not JSON, wrong shape, one-scene rule).
WHOLE_RESPONSE_SUBJECT = "- The response"


def _mentions_range(guidance: str, start: Any, end: Any, either_order: bool) -> bool:
    orders = ((start, end), (end, start)) if either_order else ((start, end),)
    return any(re.search(r"(?<![\w–])" + re.escape(render_range(a, b)) + r"(?![\d–])", guidance)
               for a, b in orders)


def names_defect(guidance: str, defect: TruthDefect, reorders_endpoints: bool = True) -> bool:
    """Whether a retry request's guidance names an injected defect.

    Named means: the record's name, quoted exactly as guidance quotes
    model-supplied text (``quote_name``), appears, or its cited range does
    ("unit 40" / "units 40–44"). Structural guidance has no ranges and a
    blank-name record has no name, so either one is enough. Guidance cites
    canonical ranges, so for a family that orders endpoints the range may
    appear in either order; otherwise only as written. A defect with neither
    name nor range (truncated JSON) is named by a line about the response as
    a whole.
    """
    name = defect.record_name if isinstance(defect.record_name, str) and defect.record_name.strip() else None
    if name is None and defect.range is None:
        return any(line.startswith(WHOLE_RESPONSE_SUBJECT) for line in guidance.splitlines())
    if name is not None and quote_name(name) in guidance:
        return True
    return defect.range is not None and _mentions_range(guidance, *defect.range, either_order=reorders_endpoints)


def reorders_endpoints(family: str) -> bool:
    spec = FAMILIES.get(family)
    return spec is not None and without_endpoint_ordering(spec) is not spec


@dataclass(frozen=True, slots=True)
class MissedDefect:
    request_id: str
    family: str
    replaced_attempt: int
    defect: TruthDefect
    guidance: str


@dataclass(frozen=True, slots=True)
class DefectRecall:
    named: int
    total: int  # detectable blocking defects of the attempts the requests replace
    hidden: int  # blocking defects behind a response that is not JSON or fails its schema
    first_attempt_named: int
    first_attempt_total: int
    requests_without_truth: int
    missed: tuple[MissedDefect, ...]

    @property
    def rate(self) -> float | None:
        return self.named / self.total if self.total else None


def defect_recall(
    requests: Iterable[Mapping[str, Any]], truth: Mapping[str, TruthRow], vocabulary: DefectVocabulary
) -> DefectRecall:
    """Every retry request against the ground truth of the attempt it replaces."""
    named = total = hidden = first_named = first_total = unmatched = 0
    missed: list[MissedDefect] = []
    for request in sorted(requests, key=lambda r: r["request_id"]):
        row = truth.get(request["candidate_id"])
        if row is None:
            unmatched += 1
            continue
        blocking = [d for d in row.defects if d.kind not in vocabulary.benign]
        detectable = vocabulary.detectable(row.defects)
        hidden += len(blocking) - len(detectable)
        for defect in detectable:
            ok = names_defect(request["correction_guidance"], defect, reorders_endpoints(request["family"]))
            named, total = named + ok, total + 1
            if row.attempt == 1:
                first_named, first_total = first_named + ok, first_total + 1
            if not ok:
                missed.append(MissedDefect(request["request_id"], request["family"], row.attempt, defect,
                                           request["correction_guidance"]))
    return DefectRecall(named, total, hidden, first_named, first_total, unmatched, tuple(missed))


# --- leaks -----------------------------------------------------------------------------------

# Patterns of internal text that no guidance may contain (contract §7).
LEAK_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("code path", re.compile(r"\w\[\d+\]|\[\d+\]\.")),  # spells[3], [0].cast
    ("JSON pointer", re.compile(r"(?:^|[\s(])/[A-Za-z_][\w-]*/\d+")),  # /spells/3
    ("hash or fingerprint", re.compile(r"sha256|\b(?=[0-9a-f]*[a-f])[0-9a-f]{16,}\b", re.IGNORECASE)),
    ("exception text", re.compile(r"Traceback|\b[A-Z]\w*(?:Error|Exception)\b|\bError:")),
)
# Identifier-like text: ids and codes are looked up among these tokens.
_TOKEN = re.compile(r"[\w.:\-]+")
_TOKEN_EDGE = ".:-"


@dataclass(frozen=True, slots=True)
class InternalTokens:
    """Exact strings that are internal to the run: ids, reason codes, validator keys."""

    by_token: Mapping[str, str]  # token -> what it is ("candidate id", "reason code", ...)
    # The ids a word cannot hold (searched for as text), sorted: found once, not per request (issue 43: at
    # 101k candidates the per-request pass was a quarter of the report's run summary).
    untokenizable: tuple[tuple[str, str], ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "untokenizable", tuple(
            (token, what) for token, what in sorted(self.by_token.items()) if _TOKEN.fullmatch(token) is None))

    def kind_of(self, token: str) -> str | None:
        return self.by_token.get(token)


def _identifier_like(code: str) -> bool:
    # A plain word ("structure") cannot be told from prose; snake_case,
    # dotted and dashed keys can.
    return any(ch in code for ch in "_.-") and _TOKEN.fullmatch(code) is not None


def internal_tokens(
    evaluations: Iterable[Mapping[str, Any]], requests: Iterable[Mapping[str, Any]]
) -> InternalTokens:
    """Every id, reason code and validator key the run knows of."""
    found: dict[str, str] = {}
    for row in evaluations:
        for issue in row.get("issues", ()):
            for key, what in (("reason_code", "reason code"), ("validator", "validator key")):
                if _identifier_like(issue[key]):
                    found.setdefault(issue[key], what)
        for key, what in (("candidate_id", "candidate id"), ("source_id", "source id"), ("chunk_id", "chunk id")):
            found.setdefault(row[key], what)
    for row in requests:
        for key, what in (("request_id", "request id"), ("candidate_id", "candidate id"),
                          ("source_id", "source id"), ("chunk_id", "chunk id")):
            found.setdefault(row[key], what)
    found.pop("*", None)  # the source-level chunk id is punctuation in prose
    return InternalTokens(found)


@dataclass(frozen=True, slots=True)
class Leak:
    request_id: str
    what: str
    text: str


def find_leaks(request: Mapping[str, Any], tokens: InternalTokens) -> tuple[Leak, ...]:
    """Internal text in one request's guidance: patterns first, then exact ids and codes."""
    guidance = request["correction_guidance"]
    leaks = [Leak(request["request_id"], what, match.group(0).strip())
             for what, pattern in LEAK_PATTERNS for match in pattern.finditer(guidance)]
    words = {word for raw in _TOKEN.findall(guidance) for word in (raw, raw.strip(_TOKEN_EDGE))}
    leaks += [Leak(request["request_id"], what, word)
              for word in sorted(words) if (what := tokens.kind_of(word)) is not None]
    # Ids with characters a token cannot hold are searched for as text.
    leaks += [Leak(request["request_id"], what, token) for token, what in tokens.untokenizable if token in guidance]
    return tuple(dict.fromkeys(leaks))


def leaks_in(requests: Iterable[Mapping[str, Any]], tokens: InternalTokens) -> tuple[Leak, ...]:
    return tuple(leak for request in sorted(requests, key=lambda r: r["request_id"])
                 for leak in find_leaks(request, tokens))


# --- one request per failing slot ----------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RequestCoverage:
    failing_slots: int  # no attempt passes (truth), not deferred, budget left
    requests_per_failing_slot: Mapping[int, int]  # number of requests -> number of slots
    unexpected_requests: tuple[Slot, ...]  # requests for slots that are not failing slots

    @property
    def ok(self) -> bool:
        return set(self.requests_per_failing_slot) <= {1} and not self.unexpected_requests


def request_coverage(
    truth: Mapping[str, TruthRow],
    evaluations: Iterable[Mapping[str, Any]],
    requests: Iterable[Mapping[str, Any]],
    max_attempts: int,
) -> RequestCoverage:
    """Requests per slot that the ground truth says still fails.

    Only candidates the job evaluated count (dead letters and filtered
    families never reach a slot); deferred slots wait for a registry and
    slots whose latest attempt used the budget are exhausted: neither gets a
    request.
    """
    latest: dict[Slot, int] = {}
    passing: set[Slot] = set()
    deferred: set[Slot] = set()
    evaluations = list(evaluations)
    judged_sources = judged_registry_sources(evaluations)
    for row in evaluations:
        slot = slot_of(row)
        latest[slot] = max(latest.get(slot, 0), int(row["attempt"]))
        if row["verdict"] == VERDICT_DEFERRED:
            deferred.add(slot)
        known = truth.get(row["candidate_id"])
        if known is None or passes_in_the_run(known, row, judged_sources):
            passing.add(slot)  # without truth a slot is never counted as failing
    failing = {slot for slot, attempt in latest.items()
               if slot not in passing and slot not in deferred and attempt < max_attempts}
    per_slot = Counter(slot_of(request) for request in requests)
    histogram = Counter(per_slot.get(slot, 0) for slot in failing)
    unexpected = tuple(sorted(slot for slot in per_slot if slot not in failing))
    return RequestCoverage(len(failing), dict(sorted(histogram.items())), unexpected)


# --- the job's verdicts against the truth -------------------------------------------------

@dataclass(frozen=True, slots=True)
class Disagreement:
    candidate_id: str
    family: str
    expected_pass: bool
    verdict: str


@dataclass(frozen=True, slots=True)
class VerdictAgreement:
    agreeing: int
    compared: int  # evaluated (not deferred) candidates with a truth row
    disagreements: tuple[Disagreement, ...]


def verdict_agreement(truth: Mapping[str, TruthRow], evaluations: Iterable[Mapping[str, Any]]) -> VerdictAgreement:
    agreeing = compared = 0
    disagreements: list[Disagreement] = []
    evaluations = list(evaluations)
    judged_sources = judged_registry_sources(evaluations)
    for row in sorted(evaluations, key=lambda r: r["candidate_id"]):
        known = truth.get(row["candidate_id"])
        if known is None or row["verdict"] == VERDICT_DEFERRED:
            continue
        compared += 1
        if (row["verdict"] in PASSING_VERDICTS) == passes_in_the_run(known, row, judged_sources):
            agreeing += 1
        else:
            disagreements.append(Disagreement(row["candidate_id"], row["family"], known.expected_pass, row["verdict"]))
    return VerdictAgreement(agreeing, compared, tuple(disagreements))


# --- the judges against the truth (contract §4.3) -------------------------------------------------

@dataclass(frozen=True, slots=True)
class JudgeFigures:
    """What the run's judges said against the planted semantic defects of the ground truth."""

    judge_requests: int  # judge request rows of the run
    judged_fail: int  # attempts a judge's fail rejected
    judged_pass: int  # accepted attempts whose every judge passed them (artifacts' judged_by)
    true_fail: int  # judged fail and planted
    false_fail: int  # judged fail, nothing planted
    missed: int  # judged pass, planted
    retries_caused: int  # retry requests built from an attempt a judge failed
    accepted: int  # accepted artifacts

    @property
    def precision(self) -> float | None:
        return self.true_fail / self.judged_fail if self.judged_fail else None

    @property
    def recall(self) -> float | None:
        found = self.true_fail + self.missed
        return self.true_fail / found if found else None

    @property
    def requests_per_artifact(self) -> float | None:
        return self.judge_requests / self.accepted if self.accepted else None


def judge_figures(truth: Mapping[str, TruthRow], evaluations: Iterable[Mapping[str, Any]],
                  requests: Iterable[Mapping[str, Any]], judged_passes: Iterable[str], accepted: int) -> JudgeFigures:
    """The judges' precision and recall against the planted defects (attempts with truth only), the retries
    their fails caused, and judge requests per accepted artifact. ``judged_passes``: candidate ids of
    accepted attempts a judge passed."""
    failed = {row["candidate_id"] for row in evaluations if judge_failed(row)}
    passed = set(judged_passes)
    planted = {cid for cid, row in truth.items() if row.judge_defects}
    requests = list(requests)
    return JudgeFigures(
        judge_requests=sum(1 for r in requests if r.get("kind") == KIND_JUDGE),
        judged_fail=len(failed & set(truth)), judged_pass=len(passed & set(truth)),
        true_fail=len(failed & planted), false_fail=len((failed - planted) & set(truth)),
        missed=len(passed & planted),
        retries_caused=sum(1 for r in requests if r.get("kind", KIND_RETRY) == KIND_RETRY and r["candidate_id"] in failed),
        accepted=accepted)


# --- retries saved by endpoint canonicalization --------------------------------------------

@dataclass(frozen=True, slots=True)
class _AdapterWithoutOrdering:
    """The family's own adapter, record by record, with evidence kept as written.

    Each response item is adapted on its own by the family (so every other
    field is mapped exactly as in the job), then its evidence is replaced by
    the written ranges, and records are ordered as usual.
    """

    spec: FamilySpec

    def __call__(self, response: Any, transcript: Transcript) -> Adapted:
        field_name = self.spec.list_field
        records = []
        for item in getattr(response, field_name):
            single = with_items(response, field_name, (item,))
            (record,) = self.spec.adapt(single, transcript).records
            evidence = evidence_as_written(transcript.index, transcript.source_id, item.evidence)
            records.append(dataclasses.replace(record, evidence=evidence))
        return order_records(transcript.index, records)


@lru_cache(maxsize=None)
def without_endpoint_ordering(spec: FamilySpec) -> FamilySpec:
    """The family as it would be without lossless endpoint ordering (contract §5.3).

    Only the nine extraction families order endpoints; any other family is
    returned as it is. Reversed ranges then reach the strict source-reference
    validator, which rejects them.
    """
    if spec.chunk_kind != "extraction":
        return spec
    return dataclasses.replace(spec, adapt=_AdapterWithoutOrdering(spec))


class _AnyName:
    """A registry that knows every name: membership is left to the job's own verdict."""

    def __init__(self, kind: str | None) -> None:
        self.kind = kind

    def knows(self, name: str) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class ArchivedCandidate:
    """What the re-evaluation needs of one archived candidate."""

    candidate_id: str
    slot: Slot
    attempt: int
    raw_response: str


def passes_without_ordering(spec: FamilySpec, transcript: Transcript, candidate: ArchivedCandidate) -> bool:
    """Re-evaluate a candidate the job passed, with endpoint ordering disabled."""
    if spec.chunk_kind != "extraction":
        return True  # scenes are never reordered; reconciliations cite no endpoints of their own
    variant = without_endpoint_ordering(spec)
    registry = _AnyName(spec.registry_kind) if spec.needs_registry else None
    ctx = EvaluationContext(transcript, transcript.chunk(candidate.slot.chunk_id), registry)  # type: ignore[arg-type]
    return evaluate_response(variant, candidate.raw_response, ctx).passed


@dataclass(frozen=True, slots=True)
class CanonicalizationSavings:
    accepted_slots: int  # accepted slots considered (every one but the unavailable)
    would_retry: Mapping[str, int]  # family -> accepted slots with no attempt passing without ordering
    would_defer: Mapping[str, int]  # family -> accepted slots whose registry kind would be lost
    unavailable: int  # accepted slots whose transcript or candidates were not at hand

    @property
    def retries_saved(self) -> int:
        return sum(self.would_retry.values())

    @property
    def deferrals_saved(self) -> int:
        return sum(self.would_defer.values())


def canonicalization_savings(
    evaluations: Iterable[Mapping[str, Any]],
    transcripts: Mapping[str, Transcript],
    candidates: Mapping[str, ArchivedCandidate],
) -> CanonicalizationSavings:
    """Accepted slots that would have needed a producer retry without endpoint ordering.

    Every candidate the job passed (accepted or superseded) is evaluated
    again with the family's adapter variant that keeps ranges as written
    (:func:`without_endpoint_ordering`). A slot is saved when none of its
    attempts passes that way. Membership in a registry is the job's own
    verdict (the variant asks only about everything else). One knock-on effect
    is counted apart: an occurrence (or reconciliation) slot whose kind would
    have no accepted chunk registry in its source would be deferred. Slots
    the job did not accept are not affected: the variant only adds issues.
    """
    passed_by_slot: dict[Slot, list[str]] = defaultdict(list)
    accepted: set[Slot] = set()
    for row in evaluations:
        if row["verdict"] in PASSING_VERDICTS:
            passed_by_slot[slot_of(row)].append(row["candidate_id"])
        if row["verdict"] == VERDICT_ACCEPTED:
            accepted.add(slot_of(row))

    survives: dict[Slot, bool] = {}
    unavailable = 0
    for slot in sorted(accepted):
        spec, transcript = FAMILIES.get(slot.family), transcripts.get(slot.source_id)
        ids = passed_by_slot[slot]
        if spec is not None and without_endpoint_ordering(spec) is spec:
            survives[slot] = True  # the family never orders endpoints: the job's verdict stands
            continue
        if spec is None or transcript is None or any(cid not in candidates for cid in ids):
            unavailable += 1
            continue
        survives[slot] = any(passes_without_ordering(spec, transcript, candidates[cid]) for cid in sorted(ids))

    registry_kinds = {(slot.source_id, FAMILIES[slot.family].registry_kind)
                      for slot, ok in survives.items() if ok and FAMILIES[slot.family].role == ROLE_REGISTRY}
    would_retry: Counter[str] = Counter()
    would_defer: Counter[str] = Counter()
    for slot, ok in survives.items():
        spec = FAMILIES[slot.family]
        if not ok:
            would_retry[slot.family] += 1
        elif ((spec.needs_registry or spec.role == ROLE_RECONCILIATION)
              and (slot.source_id, spec.registry_kind) not in registry_kinds):
            would_defer[slot.family] += 1
    return CanonicalizationSavings(len(survives), dict(sorted(would_retry.items())),
                                   dict(sorted(would_defer.items())), unavailable)


def recorded_savings(manifest: Mapping[str, Any]) -> CanonicalizationSavings:
    """The same figures as :func:`canonicalization_savings`, as the job recorded them.

    The job counts, per family, the accepted slots none of whose passing
    attempts passes without endpoint ordering (each cited a reversed range the
    strict validator would reject) and the knock-on deferrals, in the
    manifest's ``endpoint_ordering`` block. Nothing is re-evaluated, so nothing
    is unavailable. ``canonicalization_savings`` stays as the slow reference.
    """
    block = manifest.get("endpoint_ordering", {})
    retries = block.get("retries_saved", {}).get("by_family", {})
    deferrals = block.get("deferrals_saved", {}).get("by_family", {})
    accepted = int(manifest.get("totals", {}).get("accepted", 0))
    return CanonicalizationSavings(accepted, {f: int(n) for f, n in sorted(retries.items()) if n},
                                   {f: int(n) for f, n in sorted(deferrals.items()) if n}, 0)


def saved_by_truth(
    truth: Mapping[str, TruthRow], evaluations: Iterable[Mapping[str, Any]], vocabulary: DefectVocabulary
) -> Mapping[str, int]:
    """The ground truth's count of the same thing: accepted slots none of whose
    evaluated attempts passes without endpoint ordering (family -> slots)."""
    rows_by_slot: dict[Slot, list[TruthRow]] = defaultdict(list)
    accepted: set[Slot] = set()
    for row in evaluations:
        if row["verdict"] == VERDICT_ACCEPTED:
            accepted.add(slot_of(row))
        known = truth.get(row["candidate_id"])
        if known is not None:
            rows_by_slot[slot_of(row)].append(known)
    saved = Counter(slot.family for slot in accepted
                    if rows_by_slot[slot] and not any(vocabulary.passes_without_canonicalization(r)
                                                      for r in rows_by_slot[slot]))
    return dict(sorted(saved.items()))


# --- everything at once -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RetryEconomy:
    recall: DefectRecall
    leaks: tuple[Leak, ...]
    coverage: RequestCoverage
    agreement: VerdictAgreement
    saved_by_truth: Mapping[str, int]
    judges: JudgeFigures | None = None  # when the run had judges

    @property
    def ok(self) -> bool:
        """The two hard rules: nothing internal leaks, one request per failing slot."""
        return not self.leaks and self.coverage.ok


def retry_requests_only(requests: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The retries among the request rows: a refresh request (contract §6.1) re-extracts a slot after a
    prompt revision and corrects nothing, so recall and one-request-per-failing-slot ignore it.
    Rows written before ``kind`` existed are retries."""
    return [row for row in requests if row.get("kind", KIND_RETRY) == KIND_RETRY]


def retry_economy(
    truth_rows: Iterable[TruthRow],
    evaluations: Sequence[Mapping[str, Any]],
    requests: Sequence[Mapping[str, Any]],
    max_attempts: int,
    vocabulary: DefectVocabulary,
    judged_passes: Iterable[str] | None = None,
    accepted: int = 0,
) -> RetryEconomy:
    """``judged_passes`` (candidate ids of accepted attempts a judge passed; None: the run had no judges)
    and ``accepted`` (its artifacts) give the judges' figures."""
    truth = {row.candidate_id: row for row in truth_rows}
    judges = (judge_figures(truth, evaluations, requests, judged_passes, accepted)
              if judged_passes is not None else None)
    requests = retry_requests_only(requests)
    return RetryEconomy(
        recall=defect_recall(requests, truth, vocabulary),
        leaks=leaks_in(requests, internal_tokens(evaluations, requests)),
        coverage=request_coverage(truth, evaluations, requests, max_attempts),
        agreement=verdict_agreement(truth, evaluations),
        saved_by_truth=saved_by_truth(truth, evaluations, vocabulary),
        judges=judges,
    )
