"""A test double that plays a provider's batch service on files only.

It reads exported request lines, decides each request's fate from a plan, and
writes result lines in the provider's real shapes (checked against the
providers' own response models in tests/test_batch_provider_shapes.py):

- ``answer``: the model returns the planned text;
- ``refuse``: the model (or its filter) declines;
- ``truncate``: the answer stops at the output limit, cut in the middle;
- ``fail``: the request fails (an HTTP 400, an ``errored`` result, an error status);
- ``expire`` / ``cancel``: the batch ended before the request ran (OpenAI and
  Anthropic write a line saying so; Gemini and Vertex write none);
- ``missing``: no line at all.

Result lines are written in reverse id order, so nothing can rely on line order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import orjson

ANSWER, REFUSE, TRUNCATE, FAIL, EXPIRE, CANCEL, MISSING = "answer", "refuse", "truncate", "fail", "expire", "cancel", "missing"
REFUSAL_TEXT = "I'm sorry, but I can't help with that request."
CREATED = 1767225600  # 2026-01-01T00:00:00Z
CREATED_ISO = "2026-01-01T00:00:00Z"
VERTEX_LABEL = "notarius_request"


def truncated(text: str) -> str:
    return text[: max(1, len(text) // 2)]


def _usage_openai_chat() -> dict:
    return {"prompt_tokens": 812, "completion_tokens": 64, "total_tokens": 876}


def openai_chat(n: int, cid: str, body: dict, fate: str, text: str) -> tuple[str, dict] | None:
    """(file, line): "output" for answered requests, "error" for every failure."""
    envelope = {"id": f"batch_req_{n:04d}", "custom_id": cid}
    if fate in (EXPIRE, CANCEL):
        code, message = (("batch_expired", "This request could not be executed before the completion window expired.")
                         if fate == EXPIRE else
                         ("batch_cancelled", "This request was not executed because the batch was cancelled."))
        return "error", {**envelope, "response": None, "error": {"code": code, "message": message}}
    if fate == FAIL:
        return "error", {**envelope, "response": {"status_code": 400, "request_id": f"req_{n:04d}", "body": {"error": {
            "message": "Invalid schema for response_format 'x'.", "type": "invalid_request_error",
            "param": "response_format", "code": None}}}, "error": None}
    message = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
    finish = "stop"
    if fate == REFUSE:
        message = {"role": "assistant", "content": None, "refusal": REFUSAL_TEXT, "annotations": []}
    elif fate == TRUNCATE:
        message["content"], finish = truncated(text), "length"
    completion = {"id": f"chatcmpl-{n:04d}", "object": "chat.completion", "created": CREATED,
                  "model": body["model"] + "-2025-04-14",
                  "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                  "usage": _usage_openai_chat(), "service_tier": "default", "system_fingerprint": "fp_test"}
    return "output", {**envelope, "response": {"status_code": 200, "request_id": f"req_{n:04d}", "body": completion},
                      "error": None}


def openai_responses(n: int, cid: str, body: dict, fate: str, text: str) -> tuple[str, dict] | None:
    if fate in (EXPIRE, CANCEL, FAIL):
        kind, line = openai_chat(n, cid, body, fate, text)
        return kind, line
    status, incomplete = "completed", None
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    if fate == REFUSE:
        content = [{"type": "refusal", "refusal": REFUSAL_TEXT}]
    elif fate == TRUNCATE:
        status, incomplete = "incomplete", {"reason": "max_output_tokens"}
        content = [{"type": "output_text", "text": truncated(text), "annotations": [], "logprobs": []}]
    response = {
        "id": f"resp_{n:04d}", "object": "response", "created_at": CREATED, "status": status, "error": None,
        "incomplete_details": incomplete, "instructions": body["instructions"], "max_output_tokens": body["max_output_tokens"],
        "model": body["model"] + "-2025-04-14",
        "output": [
            {"type": "reasoning", "id": f"rs_{n:04d}", "summary": []},  # not the answer: must be skipped
            {"type": "message", "id": f"msg_{n:04d}", "status": status, "role": "assistant", "content": content},
        ],
        "parallel_tool_calls": True, "temperature": 1.0, "tool_choice": "auto", "tools": [], "top_p": 1.0,
        "text": body["text"], "metadata": {},
        "usage": {"input_tokens": 812, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}, "output_tokens": 64,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 876},
    }
    return "output", {"id": f"batch_req_{n:04d}", "custom_id": cid,
                      "response": {"status_code": 200, "request_id": f"req_{n:04d}", "body": response}, "error": None}


def anthropic(n: int, cid: str, params: dict, fate: str, text: str) -> tuple[str, dict] | None:
    if fate == EXPIRE:
        return "results", {"custom_id": cid, "result": {"type": "expired"}}
    if fate == CANCEL:
        return "results", {"custom_id": cid, "result": {"type": "canceled"}}
    if fate == FAIL:
        return "results", {"custom_id": cid, "result": {"type": "errored", "error": {
            "type": "error", "error": {"type": "invalid_request_error", "message": "output_config.format.schema: invalid"},
            "request_id": f"req_{n:04d}"}}}
    stop, content = "end_turn", [{"type": "text", "text": text}]
    if fate == REFUSE:
        stop, content = "refusal", []
    elif fate == TRUNCATE:
        stop, content = "max_tokens", [{"type": "text", "text": truncated(text)}]
    message = {"id": f"msg_{n:04d}", "type": "message", "role": "assistant", "model": params["model"],
               "content": content, "stop_reason": stop, "stop_sequence": None,
               "usage": {"input_tokens": 812, "output_tokens": 64}}
    return "results", {"custom_id": cid, "result": {"type": "succeeded", "message": message}}


def gemini_response(fate: str, text: str, model: str, vertex: bool) -> dict:
    if fate == REFUSE:
        response = {"candidates": [{"finishReason": "SAFETY", "index": 0, "safetyRatings": [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}]}]}
    else:
        part_text, finish = (truncated(text), "MAX_TOKENS") if fate == TRUNCATE else (text, "STOP")
        response = {"candidates": [{"content": {"role": "model", "parts": [{"text": part_text}]},
                                    "finishReason": finish, "index": 0}]}
    response["usageMetadata"] = {"promptTokenCount": 812, "candidatesTokenCount": 64, "totalTokenCount": 876}
    response["modelVersion"] = model
    if vertex:
        response["createTime"] = "2026-01-01T00:00:05.123456Z"
        response["responseId"] = "vertex-response-id"
    return response


def gemini(n: int, key: str, request: dict, fate: str, text: str, model: str) -> tuple[str, dict] | None:
    if fate in (EXPIRE, CANCEL):
        return None  # the batch ended; Gemini writes no line for requests it never ran
    if fate == FAIL:
        # A google.rpc.Status: code 3 is INVALID_ARGUMENT.
        return "output", {"key": key, "error": {"code": 3, "message": "Request contains an invalid argument."}}
    return "output", {"key": key, "response": gemini_response(fate, text, model, vertex=False)}


def vertex_echo(request: dict, drop_label: bool) -> dict:
    """The request as Vertex echoes it: re-encoded (keys sorted, 64-bit integers as
    strings, as protobuf JSON writes them), optionally without its labels."""

    def reencode(value, key=None):
        if isinstance(value, dict):
            return {k: reencode(value[k], k) for k in sorted(value)}
        if isinstance(value, list):
            return [reencode(v) for v in value]
        if key in ("minItems", "maxItems") and isinstance(value, int):
            return str(value)
        return value

    echoed = reencode(request)
    if drop_label:
        echoed.pop("labels", None)
    return echoed


def vertex(n: int, request: dict, fate: str, text: str, model: str, drop_label: bool) -> tuple[str, dict] | None:
    if fate in (EXPIRE, CANCEL):
        return None
    line = {"status": "", "processed_time": f"2026-01-01T00:00:{n % 60:02d}.000+00:00",
            "request": vertex_echo(request, drop_label)}
    if fate == FAIL:
        line["status"] = "Bad Request: {\"error\": {\"code\": 400, \"message\": \"Request contains an invalid argument.\"}}"
        return "predictions", line
    line["response"] = gemini_response(fate, text, model, vertex=True)
    return "predictions", line


def request_id_of(provider: str, line: dict) -> str:
    if provider == "gemini":
        return line["key"]
    if provider == "vertex":
        return line["request"]["labels"][VERTEX_LABEL]
    return line["custom_id"]


def play(provider: str, request_files: list[Path], out_dir: Path, fates: Mapping[str, str],
         answers: Mapping[str, str], *, model: str = "test-model", drop_vertex_labels: frozenset[str] = frozenset(),
         extra_lines: Mapping[str, list[bytes]] | None = None) -> list[Path]:
    """Answer every request line of ``request_files`` by its fate (default ``answer``);
    returns the result files written (output/error files as the provider names them)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = [orjson.loads(raw) for path in request_files for raw in path.read_bytes().splitlines() if raw.strip()]
    written: dict[str, list[bytes]] = {}
    for n, line in enumerate(sorted(lines, key=lambda l: request_id_of(provider, l), reverse=True), start=1):
        rid = request_id_of(provider, line)
        fate, text = fates.get(rid, ANSWER), answers.get(rid, "{}")
        if fate == MISSING:
            continue
        result = _result(provider, n, rid, line, fate, text, model, rid in drop_vertex_labels)
        if result is not None:
            kind, obj = result
            written.setdefault(kind, []).append(orjson.dumps(obj))
    for kind, extra in (extra_lines or {}).items():
        written.setdefault(kind, []).extend(extra)
    paths = []
    for kind in sorted(written):
        path = out_dir / _file_name(provider, kind)
        path.write_bytes(b"".join(raw + b"\n" for raw in written[kind]))
        paths.append(path)
    return paths


def _result(provider, n, rid, line, fate, text, model, drop_label):
    if provider == "openai-chat":
        return openai_chat(n, rid, line["body"], fate, text)
    if provider == "openai-responses":
        return openai_responses(n, rid, line["body"], fate, text)
    if provider == "anthropic":
        return anthropic(n, rid, line["params"], fate, text)
    if provider == "gemini":
        return gemini(n, rid, line["request"], fate, text, model)
    if provider == "vertex":
        return vertex(n, line["request"], fate, text, model, drop_label)
    raise ValueError(provider)


def _file_name(provider: str, kind: str) -> str:
    return {
        "output": "batch_test_output.jsonl" if provider.startswith("openai") else "batch-results.jsonl",
        "error": "batch_test_error.jsonl",
        "results": "msgbatch_test_results.jsonl",
        "predictions": "predictions.jsonl",
    }[kind]
