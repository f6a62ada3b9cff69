"""The retry economy of a run: what its retry requests ask for, what they must
never show, and how many producer retries endpoint canonicalization saves.

Pure computations over a run's rows (evaluations, retry requests), the
simulated producer's ground truth and the archive's candidates; no Beam, no
I/O. ``pipelines/retry_economy.py`` reads the files and prints the figures;
``pipelines/report.py`` shows them.

The ground truth and its vocabulary are read by ``analysis.ground_truth``; the
retries endpoint canonicalization saves are counted by ``analysis.savings``
(this module sums them up in :class:`RetryEconomy`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from analysis.ground_truth import (DefectVocabulary, TruthDefect, TruthRow, judge_failed, judged_registry_sources,
                                   passes_in_the_run)
from analysis.savings import saved_by_truth, without_endpoint_ordering
from analysis.slots import Slot, slot_of
from domain.families import FAMILIES
from domain.issues import quote_name, render_range
from domain.revision import KIND_JUDGE, KIND_RETRY
from domain.rows import PASSING_VERDICTS, VERDICT_DEFERRED


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
