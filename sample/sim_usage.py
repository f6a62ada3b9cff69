"""SIMULATED billed usage: what a provider could have billed for one answer, NOT any provider's count.

The simulated producer, batch provider and judge report usage derived from the text they answer,
deterministically (contract §3.2 ``usage``):

- input tokens: the UTF-8 bytes of the prompt as sent (system prompt, the user turn, the response
  schema) / 4, rounded up, plus ``MESSAGE_OVERHEAD`` tokens of message framing a real request
  carries (so import-batch's calibration of export-batch's rule, which leaves it out, is not 1);
- output tokens: the UTF-8 bytes of the answer / 4, rounded up;
- cached input tokens: the system prompt's tokens for one request in ``CACHE_HIT_EVERY`` (the
  same prefix sent again soon: a provider's prompt cache), else 0;
- and, for the archive, ``WITHOUT_USAGE_EVERY``: one attempt in so many was recorded without
  usage (``usage`` absent), so the report shows a cost known for only part of the attempts.

Which requests hit the cache and which attempts carry no usage is decided by a digest of the
answer's id, never by an RNG the rest of the simulation draws from.
"""

from __future__ import annotations

import hashlib

BYTES_PER_TOKEN = 4
MESSAGE_OVERHEAD = 12
CACHE_HIT_EVERY = 3
WITHOUT_USAGE_EVERY = 10
# A retry's validator feedback, which the simulated producer does not render: its size in bytes.
RETRY_FEEDBACK_BYTES = 400


def tokens_of(size: int) -> int:
    return -(-size // BYTES_PER_TOKEN)


def _digest(key: str) -> int:
    return int.from_bytes(hashlib.sha256(f"usage\x1f{key}".encode("utf-8")).digest()[:8], "big")


def recorded(key: str) -> bool:
    """Whether the archive's attempt ``key`` was recorded with its usage."""
    return _digest(key) % WITHOUT_USAGE_EVERY != 0


def cached_tokens(key: str, system_bytes: int) -> int:
    return tokens_of(system_bytes) if _digest(key) % CACHE_HIT_EVERY == 0 else 0


def billed(key: str, *, prompt_bytes: int, system_bytes: int, answer: str) -> tuple[int, int, int]:
    """(input tokens, cached input tokens, output tokens) of the answer ``key``: ``prompt_bytes`` the whole
    prompt as sent (the system prompt's ``system_bytes`` among them), ``answer`` the text returned."""
    input_tokens = tokens_of(prompt_bytes) + MESSAGE_OVERHEAD
    return input_tokens, min(cached_tokens(key, system_bytes), input_tokens), tokens_of(len(answer.encode("utf-8")))


def usage_record(key: str, *, prompt_bytes: int, system_bytes: int, answer: str, batch: bool) -> dict:
    """The candidate's ``usage`` (contract §3.2)."""
    input_tokens, cached, output_tokens = billed(key, prompt_bytes=prompt_bytes, system_bytes=system_bytes,
                                                 answer=answer)
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "cached_input_tokens": cached,
            "batch": batch}


def chat_usage(key: str, *, prompt_bytes: int, system_bytes: int, answer: str) -> dict:
    """The same in an OpenAI chat completion's ``usage`` (what the simulated batch provider and judge write)."""
    input_tokens, cached, output_tokens = billed(key, prompt_bytes=prompt_bytes, system_bytes=system_bytes,
                                                 answer=answer)
    return {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens, "prompt_tokens_details": {"cached_tokens": cached}}


def chat_request_bytes(request_line: dict) -> tuple[int, int]:
    """(prompt bytes, system bytes) of an openai-chat request line: every message's text and the response
    schema as sent."""
    body = request_line.get("body") or {}
    system = prompt = 0
    for message in body.get("messages") or ():
        content = message.get("content")
        parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or ()]
        size = sum(len(part.encode("utf-8")) for part in parts)
        prompt += size
        if message.get("role") in ("system", "developer"):
            system += size
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
    if schema is not None:
        import orjson

        prompt += len(orjson.dumps(schema))
    return prompt, system
