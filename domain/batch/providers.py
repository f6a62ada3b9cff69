"""One small class per provider: its request line, how it reads a result line,
its per-file limits and its schema subset.

Shapes follow each provider's own references (and are checked in tests against
the typed request and response definitions of the official openai, anthropic
and google-genai packages):

- OpenAI Batch: input ``{"custom_id", "method", "url", "body"}``; every output
  and error file line ``{"id", "custom_id", "response": {"status_code",
  "request_id", "body"} | null, "error": {"code", "message"} | null}``; requests
  not run before the window closed or the batch was cancelled come back with
  error codes ``batch_expired`` / ``batch_cancelled``.
- Anthropic Message Batches: input ``{"custom_id", "params"}``; results
  ``{"custom_id", "result": {"type": succeeded|errored|canceled|expired, ...}}``.
- Gemini Batch API file: input ``{"key", "request"}``; output ``{"key",
  "response" | "error"}``.
- Vertex AI batch prediction: input ``{"request"}`` only; each output line
  echoes the request next to ``response``, ``status`` and ``processed_time``, so
  the request carries its id in ``labels`` (never shown to the model) and the
  export keeps a line-to-id index beside the file.

Every answered line's billed usage is read into one shape (``domain.usage``);
each provider's fields are mapped below, above ``Provider``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

import orjson

from domain.batch.prompts import ModelPrompt
from domain.batch.schemas import anthropic_problems, gemini_problems, openai_strict_problems, provider_schema, to_gemini_schema
from domain.errors import NotariusError
from domain.intake import received_instant
from domain.records import shown_value
from domain.usage import Usage, is_token_count

# One id that every provider accepts (OpenAI and Anthropic custom_id, Gemini key).
WIRE_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

# What a result line says about its request.
ANSWERED = "answered"
ERRORED = "errored"
EXPIRED = "expired"
CANCELED = "canceled"

# How an answered request ended (kept as a candidate in every case).
COMPLETE = "complete"
REFUSED = "refused"
TRUNCATED = "truncated"

_MB = 1000 * 1000  # providers state limits in MB; decimal is the safe reading


@dataclass(frozen=True, slots=True)
class RequestSettings:
    model: str
    max_output_tokens: int
    temperature: float | None = None


@dataclass(frozen=True, slots=True)
class ResultOutcome:
    """One provider result line, read. ``wire_id`` (or, for Vertex, ``content_key``)
    names the request it answers."""

    wire_id: str | None
    status: str
    text: str | None = None
    ending: str | None = None  # COMPLETE, REFUSED or TRUNCATED when answered
    stop_reason: str | None = None
    http_status: int | None = None
    error: str | None = None
    received_at: str | None = None
    response_model: str | None = None
    content_key: str | None = None
    received_at_problem: str | None = None  # why the line's own time was not used, when it had one
    usage: Usage | None = None  # what the provider billed for the answer (contract §6.4); None when it did not say
    usage_problem: str | None = None  # why the line's usage was not read, when it had one

    def __post_init__(self) -> None:
        # A result line holds whatever JSON it holds; the ledger's columns keep one type each
        # (the line itself is kept byte for byte beside them), and only a string id can name a request.
        if not isinstance(self.wire_id, str):
            object.__setattr__(self, "wire_id", None)
        if type(self.http_status) is not int:
            object.__setattr__(self, "http_status", None)
        for name in ("stop_reason", "response_model"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                object.__setattr__(self, name, _short(value))


class ResultLineError(NotariusError, ValueError):
    """A result line that names no request (not JSON, not an object, no id)."""


def schema_name(family: str) -> str:
    """The structured-output schema name: one token every provider accepts."""
    name = f"dnd_{family.replace('-', '_')}_llm_v1"
    if not WIRE_ID.match(name):
        raise ValueError(f"schema name {name!r} does not match {WIRE_ID.pattern}")
    return name


# The last second an RFC 3339 time (four-digit years) and Python's datetime can name: 9999-12-31T23:59:59Z.
LATEST_UNIX_SECOND = 253_402_300_799


def unix_to_iso(value: Any) -> str | None:
    """A Unix time in seconds as RFC 3339 UTC text; None when ``value`` is not one.

    An int, or a float as the openai SDK types ``created_at`` (``1794060000.0``): a
    fraction of a second is dropped, since received_at names whole seconds. Booleans,
    negative times and times past year 9999 (a time in milliseconds is one) are not
    Unix times in seconds: no guess is made about what they meant.
    """
    if type(value) not in (int, float) or not 0 <= value <= LATEST_UNIX_SECOND:  # NaN fails the range too
        return None
    return datetime.fromtimestamp(int(value), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def unix_time_field(record: Mapping[str, Any], field: str) -> tuple[str | None, str | None]:
    """(received_at, why not) from a provider's Unix-time field; (None, None) when the line has none."""
    value = record.get(field)
    if value is None:
        return None, None
    iso = unix_to_iso(value)
    if iso is not None:
        return iso, None
    in_milliseconds = type(value) in (int, float) and LATEST_UNIX_SECOND < value <= LATEST_UNIX_SECOND * 1000
    return None, (f"{field} {shown_value(value)} is not a Unix time in seconds from 1970 to 9999"
                  + (" (milliseconds?)" if in_milliseconds else ""))


def rfc3339_field(record: Mapping[str, Any], field: str) -> tuple[str | None, str | None]:
    """(received_at, why not) from a provider's RFC 3339 time field, kept as written when the
    job can read it as a time; (None, None) when the line has none."""
    value = record.get(field)
    if value is None:
        return None, None
    if isinstance(value, str) and received_instant(value) is not None:  # how the job reads received_at
        return value, None
    return None, f"{field} {shown_value(value)} is not an RFC 3339 time"


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode("utf-8", "replace")
    return text[:limit]


def _malformed(wire_id: str, exc: Exception) -> ResultOutcome:
    return ResultOutcome(wire_id, ERRORED, error=f"unrecognised result shape ({type(exc).__name__}: {_short(str(exc), 120)})")


# --- billed usage (contract §3.2 ``usage``, §6.4) ------------------------------------------------
#
# Each provider reports usage its own way; the candidate's ``usage`` has one meaning
# (``domain.usage``): every prompt token, the part of them read from a cache, every generated
# token. Where a provider splits a count, the parts are added up (documented in docs/batch.md).
# A usage that cannot be read never costs the answer: the answer is imported with usage null and
# the ledger row says why (``usage_problem``).

Billed = tuple[Usage | None, str | None]


def _field(container: Any, path: str) -> Any:
    """``container``'s value at a dotted path; None where any step is absent or not an object."""
    value = container
    for key in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _billed(container: Any, where: str, inputs: Sequence[str], outputs: Sequence[str], cached: str, *,
            required: Sequence[str], cached_absent_is_zero: bool = False) -> Billed:
    """The usage object at ``where`` in ``container`` read into one :class:`Usage` (batch: true).

    ``inputs`` and ``outputs``: the counts added up into input and output tokens (an absent one
    is 0, except those ``required``); ``cached``: the cached part of the input (absent: unknown,
    or 0 where the provider omits zero counts). (None, None) when there is no usage object.
    """
    usage = _field(container, where)
    if usage is None:
        return None, None
    if not isinstance(usage, dict):
        return None, f"{where} {shown_value(usage)} is not an object"
    for name in (*inputs, *outputs, cached):
        parent = name.rpartition(".")[0]
        details = _field(usage, parent) if parent else None
        if details is not None and not isinstance(details, dict):
            return None, f"{where}.{parent} {shown_value(details)} is not an object"
        value = _field(usage, name)
        if value is None and name in required:
            return None, f"{where}.{name} is missing"
        if value is not None and not is_token_count(value):
            return None, f"{where}.{name} {shown_value(value)} is not a token count"
    input_tokens = sum(_field(usage, name) or 0 for name in inputs)
    output_tokens = sum(_field(usage, name) or 0 for name in outputs)
    cached_tokens = _field(usage, cached)
    if cached_tokens is None and cached_absent_is_zero:
        cached_tokens = 0
    if not (is_token_count(input_tokens) and is_token_count(output_tokens)):
        return None, f"{where}: the counts add up to more than a token count holds"
    billed = Usage(input_tokens=input_tokens, output_tokens=output_tokens, cached_input_tokens=cached_tokens, batch=True)
    if not billed.consistent:
        return None, f"{where}: {cached_tokens} cached input tokens of only {input_tokens} input tokens"
    return billed, None


def openai_chat_usage(body: Any) -> Billed:
    """Chat Completions ``usage`` (openai ``CompletionUsage``): ``prompt_tokens`` (cached ones
    included), ``completion_tokens`` (reasoning included), ``prompt_tokens_details.cached_tokens``."""
    return _billed(body, "usage", ("prompt_tokens",), ("completion_tokens",), "prompt_tokens_details.cached_tokens",
                   required=("prompt_tokens", "completion_tokens"))


def openai_responses_usage(body: Any) -> Billed:
    """Responses ``usage`` (openai ``ResponseUsage``): ``input_tokens`` (cached ones included),
    ``output_tokens`` (reasoning included), ``input_tokens_details.cached_tokens``."""
    return _billed(body, "usage", ("input_tokens",), ("output_tokens",), "input_tokens_details.cached_tokens",
                   required=("input_tokens", "output_tokens"))


def anthropic_usage(message: Any) -> Billed:
    """Messages ``usage`` (anthropic ``Usage``): ``input_tokens`` counts only the prompt tokens
    after the last cache breakpoint, so the prompt is ``input_tokens + cache_creation_input_tokens
    + cache_read_input_tokens``, of which ``cache_read_input_tokens`` were read from the cache."""
    return _billed(message, "usage", ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"),
                   ("output_tokens",), "cache_read_input_tokens", required=("input_tokens", "output_tokens"))


def gemini_usage(response: Any) -> Billed:
    """Gemini and Vertex ``usageMetadata`` (google-genai ``GenerateContentResponseUsageMetadata``):
    ``promptTokenCount`` (cached content included) plus ``toolUsePromptTokenCount``;
    ``candidatesTokenCount`` plus ``thoughtsTokenCount`` (thinking is billed as output);
    ``cachedContentTokenCount``. The JSON omits a count that is zero (proto3), so an absent count
    is 0; a usage without ``promptTokenCount`` is no usage."""
    return _billed(response, "usageMetadata", ("promptTokenCount", "toolUsePromptTokenCount"),
                   ("candidatesTokenCount", "thoughtsTokenCount"), "cachedContentTokenCount",
                   required=("promptTokenCount",), cached_absent_is_zero=True)


class Provider:
    """Base: subclasses set the class attributes and implement the three methods."""

    name = ""
    producer = ""  # producer.provider of the imported candidates
    max_lines: int | None = None
    max_bytes = 0
    takes_temperature = True

    def schema_problems(self, llm_schema: Mapping[str, Any]) -> tuple[str, ...]:
        raise NotImplementedError

    def schema(self, llm_schema: Mapping[str, Any]) -> dict:
        return provider_schema(llm_schema)

    def wire_id(self, request_id: str) -> str:
        if not WIRE_ID.match(request_id):
            raise ValueError(f"request id {request_id!r} does not match {WIRE_ID.pattern}")
        return request_id

    def request_line(self, wire_id: str, prompt: ModelPrompt, family: str, schema: dict,
                     settings: RequestSettings) -> dict:
        raise NotImplementedError

    def content_key(self, line: Mapping[str, Any]) -> str | None:
        return None

    def parse_result(self, record: Any) -> ResultOutcome:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<provider {self.name}>"


# --- OpenAI -----------------------------------------------------------------------------

class _OpenAIBatch(Provider):
    producer = "openai"
    max_lines = 50_000
    max_bytes = 200 * _MB
    url = ""

    def schema_problems(self, llm_schema):
        return openai_strict_problems(provider_schema(llm_schema))

    def request_line(self, wire_id, prompt, family, schema, settings):
        return {"custom_id": wire_id, "method": "POST", "url": self.url, "body": self.body(prompt, family, schema, settings)}

    def body(self, prompt, family, schema, settings) -> dict:
        raise NotImplementedError

    def parse_result(self, record):
        wire_id = record.get("custom_id") if isinstance(record, dict) else None
        if not isinstance(wire_id, str):
            raise ResultLineError("an OpenAI result line needs a string custom_id")
        error = record.get("error")
        if error:
            code = error.get("code") if isinstance(error, dict) else None
            if not isinstance(code, str):
                code = None  # a code of another type names no batch end (and may not even be hashable)
            status = {"batch_expired": EXPIRED, "batch_cancelled": CANCELED}.get(code, ERRORED)
            return ResultOutcome(wire_id, status, error=_short(error))
        try:
            response = record["response"]
            http_status, body = response["status_code"], response["body"]
            if type(http_status) is not int or http_status >= 400 or not isinstance(body, dict):
                detail = body.get("error", body) if isinstance(body, dict) else body
                return ResultOutcome(wire_id, ERRORED, http_status=http_status, error=_short(detail))
            return self.answered(wire_id, http_status, body)
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            return _malformed(wire_id, exc)

    def answered(self, wire_id: str, http_status: int, body: dict) -> ResultOutcome:
        raise NotImplementedError


class OpenAIChat(_OpenAIBatch):
    name = "openai-chat"
    url = "/v1/chat/completions"

    def body(self, prompt, family, schema, settings):
        body = {
            "model": settings.model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": [{"type": "text", "text": part} for part in prompt.user_parts]},
            ],
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": schema_name(family), "schema": schema, "strict": True}},
            "max_completion_tokens": settings.max_output_tokens,
        }
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        return body

    def answered(self, wire_id, http_status, body):
        choice = body["choices"][0]
        message = choice["message"]
        content, refusal = message.get("content"), message.get("refusal")
        # The model's text: its content; a refusal has none and says why in `refusal`.
        text = content if isinstance(content, str) else refusal if isinstance(refusal, str) else ""
        finish = choice.get("finish_reason")
        if isinstance(refusal, str) or finish == "content_filter":
            ending, stop = REFUSED, "refusal" if isinstance(refusal, str) else finish
        else:
            ending, stop = (TRUNCATED if finish == "length" else COMPLETE), finish
        received_at, time_problem = unix_time_field(body, "created")
        usage, usage_problem = openai_chat_usage(body)
        return ResultOutcome(wire_id, ANSWERED, text=text, ending=ending, stop_reason=stop, http_status=http_status,
                             received_at=received_at, received_at_problem=time_problem, response_model=body.get("model"),
                             usage=usage, usage_problem=usage_problem)


class OpenAIResponses(_OpenAIBatch):
    name = "openai-responses"
    url = "/v1/responses"

    def body(self, prompt, family, schema, settings):
        body = {
            "model": settings.model,
            "instructions": prompt.system,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": part}
                                                   for part in prompt.user_parts]}],
            "text": {"format": {"type": "json_schema", "name": schema_name(family), "schema": schema, "strict": True}},
            "max_output_tokens": settings.max_output_tokens,
        }
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        return body

    def answered(self, wire_id, http_status, body):
        status = body.get("status")
        if body.get("error") or status == "failed":
            return ResultOutcome(wire_id, ERRORED, http_status=http_status, error=_short(body.get("error") or status))
        texts, refusals = [], []
        for item in body["output"]:
            if item.get("type") != "message":
                continue  # reasoning and tool items are not the answer
            for part in item["content"]:
                if part.get("type") == "output_text":
                    texts.append(part["text"])
                elif part.get("type") == "refusal":
                    refusals.append(part["refusal"])
        reason = (body.get("incomplete_details") or {}).get("reason") if status == "incomplete" else None
        if (refusals and not texts) or reason == "content_filter":
            ending, stop = REFUSED, "refusal" if refusals else reason
        else:
            ending, stop = (TRUNCATED if reason == "max_output_tokens" else COMPLETE), reason or status
        received_at, time_problem = unix_time_field(body, "created_at")
        usage, usage_problem = openai_responses_usage(body)
        return ResultOutcome(wire_id, ANSWERED, text="".join(texts) if texts else "".join(refusals), ending=ending,
                             stop_reason=stop, http_status=http_status, received_at=received_at,
                             received_at_problem=time_problem, response_model=body.get("model"),
                             usage=usage, usage_problem=usage_problem)


# --- Anthropic --------------------------------------------------------------------------

class Anthropic(Provider):
    name = "anthropic"
    producer = "anthropic"
    max_lines = 100_000
    max_bytes = 256 * _MB
    takes_temperature = False  # the current Messages API has no sampling parameters

    def schema_problems(self, llm_schema):
        return anthropic_problems(provider_schema(llm_schema))

    def request_line(self, wire_id, prompt, family, schema, settings):
        params = {
            "model": settings.model,
            "max_tokens": settings.max_output_tokens,
            "system": prompt.system,
            "messages": [{"role": "user", "content": [{"type": "text", "text": part} for part in prompt.user_parts]}],
            "output_config": {"format": {"type": "json_schema", "schema": schema}},
        }
        if settings.temperature is not None:
            raise ValueError("the Anthropic Messages API takes no temperature")
        return {"custom_id": wire_id, "params": params}

    def parse_result(self, record):
        wire_id = record.get("custom_id") if isinstance(record, dict) else None
        if not isinstance(wire_id, str):
            raise ResultLineError("an Anthropic result line needs a string custom_id")
        try:
            result = record["result"]
            kind = result["type"]
            if kind == "expired":
                return ResultOutcome(wire_id, EXPIRED)
            if kind == "canceled":
                return ResultOutcome(wire_id, CANCELED)
            if kind != "succeeded":
                return ResultOutcome(wire_id, ERRORED, error=_short(result.get("error", kind)))
            message = result["message"]
            text = "".join(block["text"] for block in message["content"] if block.get("type") == "text")
            stop = message.get("stop_reason")
            truncated = stop in ("max_tokens", "model_context_window_exceeded")
            ending = REFUSED if stop == "refusal" else TRUNCATED if truncated else COMPLETE
            usage, usage_problem = anthropic_usage(message)
            return ResultOutcome(wire_id, ANSWERED, text=text, ending=ending, stop_reason=stop,
                                 response_model=message.get("model"), usage=usage, usage_problem=usage_problem)
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            return _malformed(wire_id, exc)


# --- Google -----------------------------------------------------------------------------

# Finish reasons that mean the model (or its filters) declined to answer.
GEMINI_REFUSALS = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE"})


def _gemini_request(prompt: ModelPrompt, schema: dict, settings: RequestSettings) -> dict:
    config: dict = {"responseMimeType": "application/json", "responseSchema": schema,
                    "maxOutputTokens": settings.max_output_tokens}
    if settings.temperature is not None:
        config["temperature"] = settings.temperature
    return {
        "systemInstruction": {"parts": [{"text": prompt.system}]},
        "contents": [{"role": "user", "parts": [{"text": part} for part in prompt.user_parts]}],
        "generationConfig": config,
    }


def _gemini_answer(wire_id: str | None, response: Any, **extra) -> ResultOutcome:
    feedback = response.get("promptFeedback") or {}
    candidates = response.get("candidates") or []
    model = response.get("modelVersion")
    usage, usage_problem = gemini_usage(response)
    if not candidates:
        if feedback.get("blockReason"):  # the prompt itself was blocked: nothing was generated
            return ResultOutcome(wire_id, ANSWERED, text="", ending=REFUSED, stop_reason=f"blockReason:{feedback['blockReason']}",
                                 response_model=model, usage=usage, usage_problem=usage_problem, **extra)
        return ResultOutcome(wire_id, ERRORED, error="response has no candidates", **extra)
    candidate = candidates[0]
    parts = (candidate.get("content") or {}).get("parts") or []
    # The model's text: every text part, in order; thought summaries are not the answer.
    text = "".join(p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought"))
    finish = candidate.get("finishReason")
    ending = TRUNCATED if finish == "MAX_TOKENS" else REFUSED if finish in GEMINI_REFUSALS else COMPLETE
    if extra.get("received_at") is None:  # Vertex's processed_time first, else the response's own time
        created, created_problem = rfc3339_field(response, "createTime")
        extra["received_at"] = created
        extra["received_at_problem"] = None if created else extra.get("received_at_problem") or created_problem
    return ResultOutcome(wire_id, ANSWERED, text=text, ending=ending, stop_reason=finish, response_model=model,
                         usage=usage, usage_problem=usage_problem, **extra)


class _Google(Provider):
    producer = ""
    # Whether the target's Schema can say additionalProperties: false (Vertex AI can,
    # the Gemini API cannot; see domain/batch/schemas.py).
    keeps_closed_objects = False

    def schema_problems(self, llm_schema):
        return gemini_problems(llm_schema, keep_closed=self.keeps_closed_objects)

    def schema(self, llm_schema):
        return to_gemini_schema(llm_schema, keep_closed=self.keeps_closed_objects)


class Gemini(_Google):
    """Gemini API Batch Mode with an input file."""

    name = "gemini"
    producer = "gemini"
    max_lines = None  # bounded by file size only
    max_bytes = 2000 * _MB

    def request_line(self, wire_id, prompt, family, schema, settings):
        return {"key": wire_id, "request": _gemini_request(prompt, schema, settings)}

    def parse_result(self, record):
        wire_id = record.get("key") if isinstance(record, dict) else None
        if not isinstance(wire_id, str):
            raise ResultLineError("a Gemini result line needs a string key")
        try:
            if record.get("error"):
                return ResultOutcome(wire_id, ERRORED, error=_short(record["error"]))
            return _gemini_answer(wire_id, record["response"])
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            return _malformed(wire_id, exc)


VERTEX_LABEL = "notarius_request"
_VERTEX_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{1,63}$")


class Vertex(_Google):
    """Vertex AI batch prediction for Gemini (JSONL in Cloud Storage)."""

    name = "vertex"
    producer = "vertex"
    max_lines = 200_000
    max_bytes = 1000 * _MB
    keeps_closed_objects = True  # Vertex's Schema has additionalProperties

    def wire_id(self, request_id):
        super().wire_id(request_id)
        # Label values are lower-case and at most 63 characters; anything else is hashed.
        if _VERTEX_LABEL_VALUE.match(request_id):
            return request_id
        return "h-" + hashlib.sha256(request_id.encode("utf-8")).hexdigest()[:40]

    def request_line(self, wire_id, prompt, family, schema, settings):
        return {"request": {**_gemini_request(prompt, schema, settings), "labels": {VERTEX_LABEL: wire_id}}}

    def content_key(self, line):
        return _texts_key(line.get("request"))

    def parse_result(self, record):
        if not isinstance(record, dict) or not isinstance(record.get("request"), dict):
            raise ResultLineError("a Vertex result line echoes its request; this one has none")
        request = record["request"]
        labels = request.get("labels")
        wire_id = labels.get(VERTEX_LABEL) if isinstance(labels, dict) else None  # a non-string id is none
        processed, time_problem = rfc3339_field(record, "processed_time")
        extra = {"content_key": _texts_key(request), "received_at": processed, "received_at_problem": time_problem}
        try:
            if record.get("status"):  # a non-empty status is the row's error
                return ResultOutcome(wire_id, ERRORED, error=_short(record["status"]), **extra)
            return _gemini_answer(wire_id, record["response"], **extra)
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            return ResultOutcome(wire_id, ERRORED, error=f"unrecognised result shape ({type(exc).__name__})", **extra)


def _texts_key(request: Any) -> str | None:
    """A digest of every text the request carried: text survives the echo exactly,
    even where the echo re-encodes numbers or reorders keys."""
    if not isinstance(request, dict):
        return None
    try:
        system = [p["text"] for p in request.get("systemInstruction", {}).get("parts", [])]
        contents = [[p["text"] for p in c["parts"]] for c in request["contents"]]
    except (KeyError, TypeError, AttributeError):
        return None
    return "sha256:" + hashlib.sha256(orjson.dumps([system, contents])).hexdigest()


PROVIDERS: dict[str, Provider] = {p.name: p for p in (OpenAIChat(), OpenAIResponses(), Anthropic(), Gemini(), Vertex())}
