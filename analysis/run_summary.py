"""The report's tables over a run's rows, as streaming aggregates (bounded memory).

``summarize_run`` reads the retry requests three times (words in guidance,
ids, then leaks and examples) and the evaluations once,
row by row, and keeps only what the report shows: issues by reason code, the
number of retry requests, a few example requests, and the leaks found in
guidance. Nothing is held per candidate: the internal tokens a leak check
looks for (ids, reason codes, validator keys, see
``analysis.retry_economy.internal_tokens``) are kept only when some guidance
contains them as a word, or when they cannot be a word at all (then they are
searched for as text, as ``find_leaks`` does). The result equals the
whole-table functions of ``analysis.retry_economy`` on the same rows; a test
holds them to each other.

Pure: the caller passes callables that return fresh iterables over the rows
(a file reader in ``pipelines.retry_economy``, lists in tests).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from analysis.retry_economy import _TOKEN, _TOKEN_EDGE, InternalTokens, Leak, _identifier_like, find_leaks
from domain.revision import KIND_RETRY

Rows = Callable[[], Iterable[Mapping[str, Any]]]

EXAMPLE_COUNT = 3
SOURCE_CHUNK = "*"


@dataclass(frozen=True, slots=True)
class RunSummary:
    reason_codes: Mapping[str, int]  # issues by reason code (the bound's "and N more" row excluded)
    requests: int  # retry requests in the run (refresh requests are not retries)
    examples: tuple[Mapping[str, Any], ...]  # the most informative request of a few families
    leaks: tuple[Leak, ...]  # internal text in guidance, by request id


def example_key(request: Mapping[str, Any]) -> tuple:
    """Most correction lines first, then family and id (a total order)."""
    return (-request["correction_guidance"].count("\n- "), request["family"], request["request_id"])


def guidance_words(guidance: str) -> set[str]:
    """The identifier-like words of a guidance text, as ``find_leaks`` looks them up."""
    return {word for raw in _TOKEN.findall(guidance) for word in (raw, raw.strip(_TOKEN_EDGE))}


class _Tokens:
    """Internal tokens, first label wins, kept only where a leak could show them."""

    def __init__(self, words: set[str]) -> None:
        self.words = words
        self.found: dict[str, str] = {}

    def note(self, token: str, what: str) -> None:
        if token in self.words or _TOKEN.fullmatch(token) is None:
            self.found.setdefault(token, what)

    def result(self) -> InternalTokens:
        found = dict(self.found)
        found.pop(SOURCE_CHUNK, None)  # the source-level chunk id is punctuation in prose
        return InternalTokens(found)


def summarize_run(evaluations: Rows, requests: Rows, examples: int = EXAMPLE_COUNT) -> RunSummary:
    words: set[str] = set()
    for request in requests():
        words |= guidance_words(request["correction_guidance"])

    tokens = _Tokens(words)
    codes: Counter[str] = Counter()
    for row in evaluations():
        for issue in row.get("issues", ()):
            if issue.get("validator") != "bound":
                codes[issue["reason_code"]] += 1
            for key, what in (("reason_code", "reason code"), ("validator", "validator key")):
                if _identifier_like(issue[key]):
                    tokens.note(issue[key], what)
        for key, what in (("candidate_id", "candidate id"), ("source_id", "source id"), ("chunk_id", "chunk id")):
            tokens.note(row[key], what)
    for request in requests():
        for key, what in (("request_id", "request id"), ("candidate_id", "candidate id"),
                          ("source_id", "source id"), ("chunk_id", "chunk id")):
            tokens.note(request[key], what)
    internal = tokens.result()

    count = 0
    leaks: list[Leak] = []
    best: dict[str, tuple[tuple, Mapping[str, Any]]] = {}  # family -> its most informative request
    for request in requests():
        leaks.extend(find_leaks(request, internal))
        if request.get("kind", KIND_RETRY) != KIND_RETRY:
            continue  # a refresh request (contract §6.1) corrects nothing: neither counted nor shown
        count += 1
        key = example_key(request)
        if request["family"] not in best or key < best[request["family"]][0]:
            best[request["family"]] = (key, request)
    chosen = tuple(request for _, request in sorted(best.values(), key=lambda kv: kv[0])[:examples])
    ordered = tuple(sorted(leaks, key=lambda leak: leak.request_id))  # stable: per request, find_leaks' order
    reason_codes = dict(sorted(codes.items(), key=lambda kv: (-kv[1], kv[0])))
    return RunSummary(reason_codes, count, chosen, ordered)
