"""Semantic judges (contract §4.3): the shared mechanics.

A judge is a validator whose answer comes back through the batch round trip:
the job writes a judge request for an attempt that passes every rule, a
provider answers it, the answer joins the next run as a *verdict record*
(contract §3.3), and that run applies it. A family declares its judges
(``FamilySpec.judges``); this module owns what every judge shares:

- the declaration (:class:`JudgeSpec`: a name, a family, a prompt and one
  strict response schema, both packaged assets) and its fingerprint;
- the response schema, derived from the family's LLM schema (the ``field``
  enum is the family's response field names) - the asset is held to it;
- reading a verdict record's envelope (a bad one is a dead letter) and a
  judge's answer (an unusable one is counted, never applied);
- which verdict applies to an attempt (current fingerprint, latest first);
- turning a ``fail`` into issues whose guidance names each record by its
  transcript-grounded name and cited range, with an explanation that passed
  the model-safety check (:func:`domain.model_safety.internal_tokens`).

Pure: no Beam, no I/O beyond the packaged assets.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

import orjson

from domain.assets import fingerprint, llm_schema_path, load_json_asset, read_asset
from domain.errors import NotariusError
from domain.frozen import quick_init
from domain.issues import Correction, Issue, quote_name
from domain.model_safety import internal_tokens
from domain.usage import Usage, UsageError, parse_usage

VERDICT_PASS = "pass"
VERDICT_FAIL = "fail"
VERDICT_UNSURE = "unsure"
JUDGE_VERDICTS = (VERDICT_PASS, VERDICT_FAIL, VERDICT_UNSURE)
# What an accepted attempt may have passed (an artifact's provenance ``judged_by``).
PASSING_JUDGE_VERDICTS = (VERDICT_PASS, VERDICT_UNSURE)
# What one answer may say (contract §4.3): part of the schema, hence of the fingerprint.
MAX_PROBLEMS = 10
MAX_EXPLANATION_CHARS = 300

# Operator-only issue codes of judging (evaluations only; never in guidance).
AWAITING_JUDGMENT = "awaiting_judgment"
JUDGE_FAIL = "judge_fail"
JUDGE_UNSURE = "judge_unsure"
JUDGE_UNUSABLE = "judge_unusable"
UNJUDGED = "unjudged"

# What replaces an explanation that fails the model-safety check: the model still learns which
# record and field the judge found wrong, never the judge's unsafe words.
NEUTRAL_EXPLANATION = "A reviewer found that the cited lines do not support this field."


@dataclass(frozen=True)
class JudgeSpec:
    """One judge, declared by its family (``FamilySpec.judges``)."""

    name: str
    family: str
    # One line for help and docs: what the judge checks.
    checks: str

    @property
    def validator(self) -> str:
        return f"judge:{self.name}"

    @property
    def prompt_path(self) -> str:
        return f"dnd/{self.family}/judges/{self.name}.md"

    @property
    def schema_path(self) -> str:
        return f"dnd/{self.family}/judges/{self.name}.schema.json"

    def fingerprint(self) -> str:
        return judge_fingerprint(self)


@lru_cache(maxsize=None)
def judge_fingerprint(judge: JudgeSpec) -> str:
    """``sha256:`` over the judge's prompt bytes followed by its schema bytes (contract §4.3): revising
    either makes every earlier verdict of the judge stale."""
    return fingerprint(read_asset(judge.prompt_path) + read_asset(judge.schema_path))


# --- the response schema ------------------------------------------------------------------------

def response_field_names(family: str) -> tuple[str, ...]:
    """The names a judge's ``field`` may take: every property of one record of the family's LLM
    schema, nested objects' properties dotted (``cast.level``), in schema order."""
    schema = load_json_asset(llm_schema_path(family))
    (list_property,) = schema["properties"].values()
    return tuple(_dotted(list_property["items"], ""))


@lru_cache(maxsize=None)
def response_words(family: str) -> frozenset[str]:
    """Identifiers the producer's own response uses (field names, dotted and plain, and enum values):
    an explanation may say them (contract §7: response field names are fine in guidance)."""
    words = set(response_field_names(family))
    words.update(name.rpartition(".")[2] for name in list(words))

    def enums(node: Any) -> None:
        if isinstance(node, dict):
            words.update(v for v in node.get("enum", ()) if isinstance(v, str))
            for value in node.values():
                enums(value)
        elif isinstance(node, list):
            for value in node:
                enums(value)

    enums(load_json_asset(llm_schema_path(family)))
    return frozenset(words)


def _dotted(obj: Mapping[str, Any], prefix: str):
    for name, sub in obj["properties"].items():
        yield prefix + name
        if sub.get("type") == "object":
            yield from _dotted(sub, f"{prefix}{name}.")


def judge_response_schema(judge: JudgeSpec) -> dict:
    """The one strict response schema of ``judge`` in the provider subset (contract §4, §4.3); the
    packaged asset at ``judge.schema_path`` is exactly this (tests/test_judges.py). The bounds (10
    problems, 300 characters, records from 1) are in the descriptions and checked by
    :func:`read_answer`: Anthropic's and Gemini's structured outputs take no ``maxItems``,
    ``minimum`` or ``maxLength`` (domain.batch.schemas), and one schema serves every target."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://notarius.example/schemas/dnd/{judge.family}/judges/{judge.name}.schema.json",
        "title": f"Verdict of the {judge.name} judge over {judge.family} (LLM-facing, v1)",
        "type": "object",
        "additionalProperties": False,
        "required": ["verdict", "problems"],
        "properties": {
            "verdict": {"type": "string", "enum": list(JUDGE_VERDICTS)},
            "problems": {
                "type": "array",
                "description": f"Empty for pass; for fail, at most {MAX_PROBLEMS} problems.",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["record", "field", "explanation"],
                    "properties": {
                        "record": {"type": "integer", "description": "The record's number as shown, from 1."},
                        "field": {"type": "string", "enum": list(response_field_names(judge.family))},
                        "explanation": {"type": "string",
                                        "description": f"At most {MAX_EXPLANATION_CHARS} characters."},
                    },
                },
            },
        },
    }


@lru_cache(maxsize=None)
def _answer_validator(judge: JudgeSpec):
    # Imported on first use: jsonschema costs every process 0.13 s at start (domain.batch.prompts).
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load_json_asset(judge.schema_path))


# --- verdict records (contract §3.3) -------------------------------------------------------------------

class VerdictEnvelopeError(NotariusError, ValueError):
    """A verdict record that is not one (a dead letter of input ``verdicts``)."""


@quick_init
@dataclass(frozen=True, slots=True)
class VerdictRecord:
    verdict_id: str
    request_id: str
    judge: str
    judge_fingerprint: str
    candidate_id: str
    candidate_sha256: str  # hex, as written (a "sha256:" prefix and case are ignored when matching)
    provider: str
    model: str
    raw_response: str
    received_at: str
    line: bytes
    # What the provider billed for the judge's answer (contract §3.3, §6.4); None when the record says nothing.
    usage: Usage | None = None

    @property
    def judged_sha256(self) -> str:
        return normalized_sha256(self.candidate_sha256)


_REQUIRED_STRINGS = ("verdict_id", "request_id", "judge", "judge_fingerprint", "candidate_id", "candidate_sha256",
                     "raw_response", "received_at")


def normalized_sha256(value: str) -> str:
    value = value.strip().lower()
    return value[len("sha256:"):] if value.startswith("sha256:") else value


def parse_verdict(line: bytes) -> VerdictRecord:
    """A verdict record's envelope (contract §3.3); raises :class:`VerdictEnvelopeError` with the reason a
    dead letter gives. The judge's answer (``raw_response``) is not read here: whether it is usable
    is decided where its attempt is known."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise VerdictEnvelopeError(f"verdict record is not valid JSON ({exc.args[0][:120]})") from None
    if not isinstance(record, dict):
        raise VerdictEnvelopeError("verdict record is not a JSON object")
    for name in _REQUIRED_STRINGS:
        value = record.get(name)
        if not isinstance(value, str):
            raise VerdictEnvelopeError(f"verdict field {name!r} is missing or not a string")
        if name != "raw_response" and not value.strip():
            raise VerdictEnvelopeError(f"verdict field {name!r} is blank")
    producer = record.get("producer")
    if not isinstance(producer, dict) or not all(isinstance(producer.get(k), str) for k in ("provider", "model")):
        raise VerdictEnvelopeError("verdict field 'producer' must be an object with string 'provider' and 'model'")
    try:
        usage = parse_usage(record.get("usage"))  # checked as a candidate's is (contract §3.2); the manifest totals it
    except UsageError as exc:
        raise VerdictEnvelopeError(f"verdict {exc}") from None
    return VerdictRecord(record["verdict_id"], record["request_id"], record["judge"], record["judge_fingerprint"],
                         record["candidate_id"], record["candidate_sha256"], producer["provider"], producer["model"],
                         record["raw_response"], record["received_at"], line, usage)


# --- a judge's answer ---------------------------------------------------------------------------

@quick_init
@dataclass(frozen=True, slots=True)
class Problem:
    record: int  # 1-based, in the list the judge was shown
    field: str
    explanation: str


@quick_init
@dataclass(frozen=True, slots=True)
class JudgeAnswer:
    verdict: str
    problems: tuple[Problem, ...]


def read_answer(judge: JudgeSpec, raw_response: str, shown: int) -> JudgeAnswer | str:
    """The judge's answer, or why it is unusable (contract §4.3): not JSON, outside the schema, a
    ``fail`` with no problem, a ``pass`` with problems, or a record the judge was not shown
    (``shown`` records were)."""
    text = raw_response[1:] if raw_response.startswith("\ufeff") else raw_response
    try:
        answer = orjson.loads(text)
    except orjson.JSONDecodeError:
        return "the answer is not valid JSON"
    error = next(iter(_answer_validator(judge).iter_errors(answer)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the answer"
        return f"the answer is outside the judge's schema at {where}: {error.message[:160]}"
    problems = tuple(Problem(p["record"], p["field"], p["explanation"]) for p in answer["problems"])
    if len(problems) > MAX_PROBLEMS:
        return f"names {len(problems)} problems, more than {MAX_PROBLEMS}"
    if any(len(p.explanation) > MAX_EXPLANATION_CHARS for p in problems):
        return f"an explanation is longer than {MAX_EXPLANATION_CHARS} characters"
    if any(p.record < 1 for p in problems):
        return "names a record below 1 (records are numbered from 1)"
    verdict = answer["verdict"]
    if verdict == VERDICT_FAIL and not problems:
        return "a fail that names no problem"
    if verdict == VERDICT_PASS and problems:
        return "a pass that names problems"
    unseen = sorted({p.record for p in problems if p.record > shown})
    if unseen:
        return f"names record(s) {', '.join(map(str, unseen[:5]))}, but {shown} were shown"
    return JudgeAnswer(verdict, problems)


# --- which verdict applies -------------------------------------------------------------------------

@quick_init
@dataclass(frozen=True, slots=True)
class Judgment:
    """What one judge's verdicts come to for one attempt (contract §4.3): the applied verdict and its
    answer (None when no usable current verdict), and how many were superseded, unusable, stale."""

    judge: JudgeSpec
    applied: VerdictRecord | None
    answer: JudgeAnswer | None
    superseded: int
    unusable: tuple[tuple[VerdictRecord, str], ...]
    stale: int


def judgment(judge: JudgeSpec, verdicts: Sequence[VerdictRecord], shown: int) -> Judgment:
    """The verdicts of ``judge`` for one attempt (all match its candidate id and hash), classified:
    another fingerprint is stale; an unusable answer is counted; among the usable ones the latest
    ``received_at`` wins (ties: the smallest ``verdict_id``), the others are superseded."""
    current = judge_fingerprint(judge)
    stale = 0
    unusable: list[tuple[VerdictRecord, str]] = []
    usable: list[tuple[VerdictRecord, JudgeAnswer]] = []
    for verdict in verdicts:
        if verdict.judge_fingerprint != current:
            stale += 1
            continue
        answer = read_answer(judge, verdict.raw_response, shown)
        if isinstance(answer, str):
            unusable.append((verdict, answer))
        else:
            usable.append((verdict, answer))
    if not usable:
        return Judgment(judge, None, None, 0, tuple(unusable), stale)
    # Latest received_at first; among equal times the smallest verdict id.
    usable.sort(key=lambda pair: pair[0].verdict_id)
    usable.sort(key=lambda pair: pair[0].received_at, reverse=True)
    applied, answer = usable[0]
    return Judgment(judge, applied, answer, len(usable) - 1, tuple(unusable), stale)


# --- a fail as issues --------------------------------------------------------------------------

def safe_explanation(text: str, forbidden: Sequence[str] = (), allowed: frozenset[str] = frozenset()) -> str | None:
    """The judge's explanation as guidance may carry it: one line, quotes and control characters
    made harmless, at most ``MAX_EXPLANATION_CHARS``; None when it holds anything internal (ids,
    hashes, codes, paths, fingerprints: contract §7) or the ``forbidden`` tokens (this source's ids)."""
    line = " ".join(quote_name(text, MAX_EXPLANATION_CHARS + 2)[1:-1].split())
    if not line or internal_tokens(line, forbidden, allowed):
        return None
    return line


def fail_issues(judge: JudgeSpec, answer: JudgeAnswer, records: Sequence[Any], list_field: str,
                subject_of: Callable[[Any], str], ranges_of: Callable[[Any], str],
                forbidden: Sequence[str] = ()) -> tuple[Issue, ...]:
    """The issues a ``fail`` adds to its attempt (validator ``judge:<name>``, reason ``judge_fail``):
    per problem, the record named by its transcript-grounded name and cited range (never its
    number), the field, and the judge's explanation or, when that fails the model-safety check,
    a neutral sentence. The operator's message keeps the judge's own words."""
    issues = []
    for problem in answer.problems:
        record = records[problem.record - 1]
        explanation = safe_explanation(problem.explanation, forbidden, response_words(judge.family))
        shown = NEUTRAL_EXPLANATION if explanation is None else explanation
        replaced = " (replaced in guidance: it failed the model-safety check)" if explanation is None else ""
        issues.append(Issue(
            judge.validator, JUDGE_FAIL, f"{list_field}[{problem.record - 1}].{problem.field}",
            f"{judge.name} judged record {problem.record} {problem.field!r}: {problem.explanation!r}{replaced}",
            Correction(subject_of(record), ranges_of(record),
                       f"A review of the cited lines found `{problem.field}` wrong: {shown}",
                       f"Correct `{problem.field}` so that it says what the cited lines show, or leave the "
                       "record out if the lines do not support it.")))
    return tuple(issues)


def operator_issue(judge: JudgeSpec, reason_code: str, message: str) -> Issue:
    """An operator-only judging issue (awaiting_judgment, judge_unsure, judge_unusable, unjudged)."""
    return Issue(judge.validator, reason_code, "", message, None)

