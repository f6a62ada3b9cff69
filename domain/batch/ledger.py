"""The import's accounting: provider result lines -> raw model candidates (contract §3.2)
for the next attempt, every line kept byte for byte, every exported request
classified exactly once.

Requests are matched by id (or, for Vertex, by the request's own texts), never
by line order. A request is ``imported`` when some line answered it (refusals
and truncations included: they become candidates that fail validation
honestly, and their stop reason is recorded), else ``errored``, ``expired`` or
``canceled`` by its first result line, else ``missing``. So

    exported = imported + errored + expired + canceled + missing.

Hostile result files are read, never fatal: any line that is not a result the
provider's parser recognises is a ledger row with the reason (``unreadable`` when
it names no request, ``errored`` when its request's result has an unknown shape);
a provider time that is not one leaves the candidate's ``received_at`` to the
fallback and the row says why; the unreadable rest of a file (cut or corrupt
compression) is one ``unreadable`` row, and the summary then does not claim
conservation, since the lines it held are unknown.

Each imported answer carries what the provider billed for it (``usage``, contract §6.4;
null when the line says nothing, or nothing readable: never zeros), and the summary
totals it per request kind and family, beside the export's estimate of the same
requests' input tokens (``estimated_input_tokens`` in the export index).

The ledger and the candidates are deterministic: they follow the result files
in the order given (the caller sorts paths) and the lines in file order, and
candidate ids are digests of what was read.
"""

from __future__ import annotations

import base64
import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import orjson

from domain.batch.providers import (
    ANSWERED, CANCELED, COMPLETE, ERRORED, EXPIRED, REFUSED, TRUNCATED, Provider, ResultLineError, ResultOutcome)
from domain.errors import NotariusError
from domain.records import shown_value
from domain.revision import KIND_JUDGE, KIND_RETRY, MAX_ATTEMPT_NUMBER, REQUEST_KINDS
from domain.usage import Usage, is_token_count

IMPORTED = "imported"
MISSING = "missing"
REQUEST_CLASSES = (IMPORTED, ERRORED, EXPIRED, CANCELED, MISSING)
NOT_IMPORTED = REQUEST_CLASSES[1:]
# What one result line was.
DUPLICATE, UNMATCHED, UNREADABLE = "duplicate", "unmatched", "unreadable"
LINE_OUTCOMES = (IMPORTED, REFUSED, TRUNCATED, ERRORED, EXPIRED, CANCELED, DUPLICATE, UNMATCHED, UNREADABLE)
_ENDING_OUTCOME = {COMPLETE: IMPORTED, REFUSED: REFUSED, TRUNCATED: TRUNCATED}

# received_at when neither the provider nor --received-at says when: the epoch, plainly not a real time.
UNKNOWN_TIME = "1970-01-01T00:00:00Z"

_INDEX_FIELDS = ("request_id", "wire_id", "family", "source_id", "chunk_id", "attempt", "provider", "model",
                 "prompt_fingerprint", "schema_fingerprint", "line_sha256", "line")
_INDEX_STRINGS = tuple(name for name in _INDEX_FIELDS if name not in ("attempt", "line"))


class ExportIndexError(NotariusError, ValueError):
    """The export's index is unusable or does not match its request file."""


@dataclass(frozen=True, slots=True)
class ExportedRequest:
    """One line of an export, as its index records it."""

    request_id: str
    wire_id: str
    family: str
    source_id: str
    chunk_id: str
    attempt: int
    provider: str
    model: str
    prompt_fingerprint: str
    schema_fingerprint: str
    line_sha256: str
    line: int
    content_key: str | None = None
    kind: str = KIND_RETRY  # retry or refresh (contract §6.1); indexes written before kinds existed hold retries
    # Reconciliations: the fingerprint of the entry list the line showed (contract §4.1), copied onto
    # the answer's candidate; None for chunk families and in indexes written before it existed.
    input_fingerprint: str | None = None
    # Judge requests (contract §4.3): the judged attempt and the judge, copied onto the verdict record.
    judged_candidate_id: str | None = None
    candidate_sha256: str | None = None
    judge: str | None = None
    judge_fingerprint: str | None = None
    # The export's estimate of the line's input tokens (docs/batch.md, "The estimate"); None in
    # indexes written before estimates existed.
    estimated_input_tokens: int | None = None


def parse_index_row(raw: bytes, where: str) -> ExportedRequest:
    """One index row, checked: its values become candidate fields the job checks in turn
    (an attempt out of the job's range would make every imported answer a dead letter)."""
    try:
        row = orjson.loads(raw)
        values = {name: row[name] for name in _INDEX_FIELDS}
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise ExportIndexError(f"{where}: not an export index row ({type(exc).__name__}: {exc})") from None
    content_key, kind = row.get("content_key"), row.get("kind", KIND_RETRY)
    for name in _INDEX_STRINGS:
        if not isinstance(values[name], str):
            raise ExportIndexError(f"{where}: index {name} {shown_value(values[name])} is not a string")
    attempt, line = values["attempt"], values["line"]
    if type(attempt) is not int or not 1 <= attempt <= MAX_ATTEMPT_NUMBER:
        raise ExportIndexError(f"{where}: index attempt {shown_value(attempt)} is not an integer from 1 to "
                               f"{MAX_ATTEMPT_NUMBER}")
    if type(line) is not int or line < 1:
        raise ExportIndexError(f"{where}: index line {shown_value(line)} is not a line number")
    if content_key is not None and not isinstance(content_key, str):
        raise ExportIndexError(f"{where}: index content_key {shown_value(content_key)} is not a string")
    if kind not in REQUEST_KINDS:
        raise ExportIndexError(f"{where}: index kind {shown_value(kind)} is not one of {', '.join(REQUEST_KINDS)}")
    input_fingerprint = row.get("input_fingerprint")
    if input_fingerprint is not None and not isinstance(input_fingerprint, str):
        raise ExportIndexError(f"{where}: index input_fingerprint {shown_value(input_fingerprint)} is not a string")
    estimated = row.get("estimated_input_tokens")
    if estimated is not None and not is_token_count(estimated):
        raise ExportIndexError(f"{where}: index estimated_input_tokens {shown_value(estimated)} is not a token count")
    judging: dict[str, str | None] = {}
    if kind == KIND_JUDGE:
        for name, index_name in (("judged_candidate_id", "replaces_candidate_id"), ("candidate_sha256", "candidate_sha256"),
                                 ("judge", "judge"), ("judge_fingerprint", "judge_fingerprint")):
            value = row.get(index_name)
            if not isinstance(value, str) or not value:
                raise ExportIndexError(f"{where}: a judge request's index {index_name} {shown_value(value)} is not a "
                                       "string")
            judging[name] = value
    return ExportedRequest(**values, content_key=content_key, kind=kind, input_fingerprint=input_fingerprint,
                           estimated_input_tokens=estimated, **judging)


def candidate_id(provider: Provider, request: ExportedRequest, raw_line: bytes) -> str:
    """Same result line, same id: importing a file twice yields duplicates the job can see."""
    parts = (b"batch", provider.name.encode(), request.request_id.encode(), hashlib.sha256(raw_line).digest())
    return "c-" + hashlib.sha256(b"\0".join(parts)).hexdigest()[:32]


def candidate_record(provider: Provider, request: ExportedRequest, outcome: ResultOutcome, raw_line: bytes,
                     received_at: str) -> dict:
    """The next attempt of the request's slot (contract §3.2); raw_response is exactly the model's text.
    A reconciliation's candidate carries the fingerprint of the entry list its request showed
    (``input_fingerprint``, from the export index); other candidates have no such field."""
    record = {
        "candidate_id": candidate_id(provider, request, raw_line),
        "family": request.family, "source_id": request.source_id, "chunk_id": request.chunk_id,
        "attempt": request.attempt,
        "producer": {"provider": provider.producer, "model": request.model},
        "prompt_fingerprint": request.prompt_fingerprint, "schema_fingerprint": request.schema_fingerprint,
        "raw_response": outcome.text if outcome.text is not None else "",
        "received_at": outcome.received_at or received_at,
        "usage": _usage_field(outcome),
    }
    if request.input_fingerprint is not None:
        record["input_fingerprint"] = request.input_fingerprint
    return record


def verdict_record(provider: Provider, request: ExportedRequest, outcome: ResultOutcome, raw_line: bytes,
                   received_at: str) -> dict:
    """A judge's answer as a verdict record (contract §3.3): the request's identities copied, the judge's
    text kept exactly. Whether it is usable is the job's call (``domain.judges.read_answer``): nothing
    a judge said is lost here."""
    return {
        "verdict_id": "v-" + candidate_id(provider, request, raw_line)[2:],
        "request_id": request.request_id, "judge": request.judge, "judge_fingerprint": request.judge_fingerprint,
        "candidate_id": request.judged_candidate_id, "candidate_sha256": request.candidate_sha256,
        "producer": {"provider": provider.producer, "model": request.model},
        "raw_response": outcome.text if outcome.text is not None else "",
        "received_at": outcome.received_at or received_at,
        "usage": _usage_field(outcome),
    }


def _usage_field(outcome: ResultOutcome) -> dict | None:
    """The record's ``usage``: what the provider billed, as ``domain.usage`` shapes it; null
    when the line said nothing readable (an unknown is never written as zero)."""
    return outcome.usage.as_record() if outcome.usage is not None else None


def is_verdict_record(record: Mapping[str, Any]) -> bool:
    """Whether an imported record is a verdict (``verdicts.jsonl``) rather than a candidate."""
    return "verdict_id" in record


def _line_text(raw: bytes) -> tuple[str, str]:
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), "base64"


class ImportLedger:
    """Feed it every non-blank result line with :meth:`add`; read the totals with :meth:`summary`."""

    def __init__(self, provider: Provider, requests: Sequence[ExportedRequest], *,
                 received_at: str = UNKNOWN_TIME, unanswered: str = MISSING) -> None:
        if unanswered not in (MISSING, EXPIRED, CANCELED):
            raise ValueError(f"unanswered requests can count as missing, expired or canceled, not {unanswered!r}")
        self.provider, self.received_at, self.unanswered = provider, received_at, unanswered
        self.requests = {r.request_id: r for r in requests}
        if len(self.requests) != len(requests):
            raise ExportIndexError("the export indexes name a request id twice")
        wrong = sorted({r.provider for r in requests} - {provider.name})
        if wrong:
            raise ExportIndexError(f"the requests were exported for {', '.join(wrong)}, not {provider.name}")
        self.by_wire = {r.wire_id: r for r in requests}
        keys = Counter(r.content_key for r in requests if r.content_key)
        self.by_content = {r.content_key: r for r in requests if r.content_key and keys[r.content_key] == 1}
        self.state: dict[str, str] = {}
        self.endings: dict[str, str] = {}
        self.lines: Counter[str] = Counter()
        self.unreadable_files: list[str] = []
        self.received_at_unreadable = 0  # candidates whose line had a time that could not be read
        self.usage: dict[str, Usage | None] = {}  # per imported request: what its answer billed
        self.usage_unreadable = 0  # imported answers whose line had a usage that could not be read

    def add(self, file: str, line_number: int, raw: bytes) -> tuple[dict, dict | None]:
        """(ledger row, candidate record or None) for one result line."""
        outcome, reason = self._read(raw)
        request = self._match(outcome) if outcome else None
        candidate = None
        if outcome is None:
            kind = UNREADABLE
        elif request is None:
            kind, reason = UNMATCHED, f"no exported request has id {shown_value(outcome.wire_id)}"
        elif outcome.status != ANSWERED:
            kind = outcome.status
            self.state.setdefault(request.request_id, outcome.status)
        elif self.state.get(request.request_id) == IMPORTED:
            kind = DUPLICATE  # the first answer in file order is the one imported
        else:
            kind = _ENDING_OUTCOME[outcome.ending]
            self.state[request.request_id] = IMPORTED
            self.endings[request.request_id] = outcome.ending
            build = verdict_record if request.kind == KIND_JUDGE else candidate_record
            candidate = build(self.provider, request, outcome, raw, self.received_at)
            self.received_at_unreadable += outcome.received_at_problem is not None
            self.usage[request.request_id] = outcome.usage
            self.usage_unreadable += outcome.usage_problem is not None
        self.lines[kind] += 1
        text, encoding = _line_text(raw)
        row = _ledger_row(file, line_number, kind, text, encoding,
                          request_id=request.request_id if request else None,
                          stop_reason=outcome.stop_reason if outcome else None,
                          http_status=outcome.http_status if outcome else None,
                          error=(outcome.error if outcome else None) or reason,
                          candidate_id=(candidate.get("verdict_id") or candidate["candidate_id"]) if candidate else None,
                          response_model=outcome.response_model if outcome else None,
                          received_at_problem=outcome.received_at_problem if outcome else None,
                          usage_problem=outcome.usage_problem if outcome else None)
        return row, candidate

    def add_unreadable_rest(self, file: str, line_number: int, reason: str) -> dict:
        """The ledger row for the rest of a result file that could not be read from ``line_number``
        on (cut or corrupt compression). How many lines it held is unknown: it counts as one
        unreadable line, and the summary no longer claims conservation (answers in it may be
        counted missing)."""
        self.unreadable_files.append(file)
        self.lines[UNREADABLE] += 1
        return _ledger_row(file, line_number, UNREADABLE, "", "utf-8", error=reason)

    def _read(self, raw: bytes) -> tuple[ResultOutcome | None, str | None]:
        try:
            return self.provider.parse_result(orjson.loads(raw)), None
        except orjson.JSONDecodeError as exc:
            return None, f"not valid JSON ({str(exc).split(':', 1)[0]})"
        except ResultLineError as exc:
            return None, str(exc)

    def _match(self, outcome: ResultOutcome) -> ExportedRequest | None:
        if outcome.wire_id is not None and outcome.wire_id in self.by_wire:
            return self.by_wire[outcome.wire_id]
        return self.by_content.get(outcome.content_key) if outcome.content_key else None

    def classes(self) -> dict[str, str]:
        return {rid: self.state.get(rid, self.unanswered) for rid in sorted(self.requests)}

    def summary(self) -> dict[str, Any]:
        classes = self.classes()
        totals = Counter(classes.values())
        per_class = {name: totals[name] for name in REQUEST_CLASSES}
        unreadable = sorted(set(self.unreadable_files))
        return {
            "exported": len(classes),
            "requests": per_class,
            "imported_by_kind": dict(sorted(Counter(self.requests[rid].kind for rid, c in classes.items()
                                                    if c == IMPORTED).items())),
            "unanswered_counted_as": self.unanswered,
            "imported_endings": {ending: sum(1 for e in self.endings.values() if e == ending)
                                 for ending in (COMPLETE, REFUSED, TRUNCATED)},
            "refused": sorted(rid for rid, e in self.endings.items() if e == REFUSED),
            "truncated": sorted(rid for rid, e in self.endings.items() if e == TRUNCATED),
            "not_imported": {name: [rid for rid, c in classes.items() if c == name] for name in NOT_IMPORTED},
            "result_lines": {kind: self.lines[kind] for kind in LINE_OUTCOMES},
            "received_at_unreadable": self.received_at_unreadable,
            # As the job reports its inputs' damaged files (domain.manifest): named, and no claim made.
            "unreadable_files": {"count": len(unreadable), "paths": unreadable,
                                 "records_may_be_missing": bool(unreadable)},
            "conservation": {**per_class, "exported": len(classes),
                             "holds": len(classes) == sum(per_class.values()) and not unreadable},
            "usage": self.usage_summary(),
        }

    def usage_summary(self) -> dict[str, Any]:
        """Billed tokens of the imported answers, per request kind and family and in total, each
        beside the export's estimate of the same requests' input tokens (contract §6.4)."""
        cells: dict[str, dict[str, list]] = {kind: {} for kind in REQUEST_KINDS}
        for request_id in sorted(self.usage):
            request = self.requests[request_id]
            cells[request.kind].setdefault(request.family, []).append(
                (self.usage[request_id], request.estimated_input_tokens))
        total = _usage_cell([answer for families in cells.values() for answers in families.values() for answer in answers])
        return {
            "by_kind": {kind: {family: _usage_cell(answers) for family, answers in sorted(families.items())}
                        for kind, families in cells.items()},
            "total": total,
            "usage_unreadable": self.usage_unreadable,
            # How far off the export's rule was for this provider: billed / estimated input tokens.
            "calibration": {"provider": self.provider.name, **total["estimate"]},
        }


def _ledger_row(file: str, line_number: int, outcome: str, line: str, line_encoding: str, *,
                request_id: str | None = None, stop_reason: str | None = None, http_status: int | None = None,
                error: str | None = None, candidate_id: str | None = None, response_model: str | None = None,
                received_at_problem: str | None = None, usage_problem: str | None = None) -> dict:
    return {
        "file": file, "line_number": line_number, "outcome": outcome, "request_id": request_id,
        "stop_reason": stop_reason, "http_status": http_status, "error": error, "candidate_id": candidate_id,
        "response_model": response_model, "received_at_problem": received_at_problem, "usage_problem": usage_problem,
        "line": line, "line_encoding": line_encoding,
    }


def _usage_cell(answers: Sequence[tuple[Usage | None, int | None]]) -> dict[str, Any]:
    """Billed tokens of some imported answers ((usage or None, estimated input tokens or None) each).
    Cached input tokens are added up where the provider said them (``cached_unknown`` counts the
    answers where it did not); the estimate is compared over the answers that have both."""
    billed = [usage for usage, _ in answers if usage is not None]
    compared = [(usage.input_tokens, estimated) for usage, estimated in answers
                if usage is not None and estimated is not None]
    billed_input, estimated_input = sum(b for b, _ in compared), sum(e for _, e in compared)
    return {
        "answers": len(answers), "with_usage": len(billed), "without_usage": len(answers) - len(billed),
        "input_tokens": sum(u.input_tokens for u in billed),
        "cached_input_tokens": sum(u.cached_input_tokens for u in billed if u.cached_input_tokens is not None),
        "cached_unknown": sum(u.cached_input_tokens is None for u in billed),
        "output_tokens": sum(u.output_tokens for u in billed),
        "estimate": {"answers": len(compared), "billed_input_tokens": billed_input,
                     "estimated_input_tokens": estimated_input,
                     "billed_per_estimated": round(billed_input / estimated_input, 4) if estimated_input else None},
    }


def not_imported_ids(summary: Mapping[str, Any]) -> list[str]:
    """Every request id to resubmit, sorted."""
    return sorted(rid for ids in summary["not_imported"].values() for rid in ids)
