"""What the model is asked for one retry request: the family's composed prompt
as the system instruction, and a user turn in two labelled parts - the chunk's
units in document order, then the correction guidance, marked as feedback from
the automatic checker rather than words of the user.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import orjson
from jsonschema import Draft202012Validator

from domain.assets import composed_prompt, load_json_asset
from domain.families import FAMILIES
from domain.source import Transcript

RETRY_REQUEST_SCHEMA = "outputs/retry_request.v1.json"

EXCERPT_HEADING = (
    "Transcript excerpt. The units below are in transcript order, one JSON object per line, "
    "each with its unit_id, speaker and text.")
FEEDBACK_HEADING = (
    "Validator feedback on your previous response to this same excerpt. It was written by an "
    "automatic checker, not by the user, and lists what the checker could not accept.")


class RetryRequestError(ValueError):
    """A retry request record that cannot be exported; the message is for operators."""


@dataclass(frozen=True, slots=True)
class RetryRequest:
    request_id: str
    family: str
    source_id: str
    chunk_id: str
    candidate_id: str
    attempt: int
    correction_guidance: str
    prompt_fingerprint: str
    schema_fingerprint: str
    validator_policy_fingerprint: str


@dataclass(frozen=True, slots=True)
class ModelPrompt:
    system: str
    excerpt: str
    feedback: str


@lru_cache(maxsize=1)
def _retry_request_validator() -> Draft202012Validator:
    return Draft202012Validator(load_json_asset(RETRY_REQUEST_SCHEMA))


def parse_retry_request(raw: bytes) -> RetryRequest:
    """Decode and check one retry request record (SPEC §6). Raises :class:`RetryRequestError`."""
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise RetryRequestError("retry request is not valid JSON") from None
    errors = sorted(_retry_request_validator().iter_errors(record), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "record"
        raise RetryRequestError(f"retry request does not match retry_request.v1 at {where}: {errors[0].message}"[:300])
    return RetryRequest(**{field: record[field] for field in RetryRequest.__slots__})


def build_prompt(request: RetryRequest, transcript: Transcript) -> ModelPrompt:
    """The prompt for ``request`` over ``transcript``. Raises :class:`RetryRequestError`
    when the family or chunk cannot be exported."""
    spec = FAMILIES.get(request.family)
    if spec is None:
        raise RetryRequestError(f"unknown family {request.family!r}")
    if spec.chunk_kind == "source":
        raise RetryRequestError(
            f"{request.family} is a source-level reconciliation family: its prompt lists the source's accepted "
            "registry entries, which export-batch does not read yet")
    chunk = transcript.chunk(request.chunk_id)
    if chunk is None:
        raise RetryRequestError(f"unknown chunk {request.chunk_id!r} in source {request.source_id!r}")
    if chunk.kind != spec.chunk_kind:
        raise RetryRequestError(f"chunk {request.chunk_id!r} is a {chunk.kind} chunk; {request.family} needs {spec.chunk_kind}")
    positions = sorted(transcript.index.position(uid) for uid in chunk.unit_ids)  # document order, never id order
    return ModelPrompt(
        system=composed_prompt(request.family).decode("utf-8"),
        excerpt=excerpt_text([transcript.units[pos] for pos in positions]),
        feedback=feedback_text(request.correction_guidance),
    )


def excerpt_text(units) -> str:
    lines = (orjson.dumps({"unit_id": u.unit_id, "speaker": u.speaker, "text": u.text}).decode("utf-8") for u in units)
    return EXCERPT_HEADING + "\n\n" + "\n".join(lines)


def feedback_text(guidance: str) -> str:
    return f"{FEEDBACK_HEADING}\n\n<validator_feedback>\n{guidance}\n</validator_feedback>"
