"""What a provider billed for one answer (contract §3.2 and §3.3 ``usage``, §6.4), in one shape
whatever the provider:

``{"input_tokens": int, "output_tokens": int, "cached_input_tokens": int | null, "batch": bool}``

``input_tokens`` counts every token of the prompt, ``cached_input_tokens`` the part of them read
from a cache (so never more than ``input_tokens``; null when the provider did not say),
``output_tokens`` every token generated (reasoning included). ``batch`` says whether the answer
came through a provider's batch API (``import-batch`` writes true).

Read in two places with one outcome: the candidate envelope's typed fast path decodes it with
:class:`Usage` (msgspec), and every other reader (the general envelope path, verdict records)
calls :func:`parse_usage`, which names the first problem. Pure, and free of Beam.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from domain.errors import NotariusError
from domain.records import shown_value

# The largest count a usage field may hold: an Avro ``long`` (assets/inputs/*.avsc) and a
# Parquet int64 hold it, and no provider bills more.
MAX_TOKENS = 2**63 - 1
_MAX_SHOWN = "2^63-1"

TokenCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKENS)]


class Usage(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True, kw_only=True):
    """One answer's billed usage. Also the typed decoder of a well-formed ``usage`` object: counts
    are range-checked as they are decoded, and extra keys are refused (the general path decides
    those: it ignores them, as it ignores a producer's extra keys)."""

    input_tokens: TokenCount
    output_tokens: TokenCount
    cached_input_tokens: TokenCount | None = None
    batch: bool

    @property
    def consistent(self) -> bool:
        """Cached input tokens are part of the input: never more than it."""
        return self.cached_input_tokens is None or self.cached_input_tokens <= self.input_tokens

    def as_record(self) -> dict:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cached_input_tokens": self.cached_input_tokens, "batch": self.batch}


class UsageError(NotariusError, ValueError):
    """A ``usage`` value that is not one; the message says why, without naming the record kind."""


def is_token_count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_TOKENS


def parse_usage(value: Any) -> Usage | None:
    """A decoded ``usage`` value (null, or an object): the usage, or None for null. Raises
    :class:`UsageError` naming the first problem; keys other than the four are ignored."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UsageError(f"usage {shown_value(value)} must be an object or null")
    for name in ("input_tokens", "output_tokens"):
        count = value.get(name)
        if not is_token_count(count):
            raise UsageError(f"usage {name} {shown_value(count)} is not a token count (an integer from 0 to {_MAX_SHOWN})")
    cached = value.get("cached_input_tokens")
    if cached is not None and not is_token_count(cached):
        raise UsageError(f"usage cached_input_tokens {shown_value(cached)} is not a token count (an integer from 0 "
                         f"to {_MAX_SHOWN}) or null")
    batch = value.get("batch")
    if type(batch) is not bool:
        raise UsageError(f"usage batch {shown_value(batch)} is not true or false")
    usage = Usage(input_tokens=value["input_tokens"], output_tokens=value["output_tokens"], cached_input_tokens=cached,
                  batch=batch)
    if not usage.consistent:
        raise UsageError(f"usage cached_input_tokens {cached} is more than input_tokens {usage.input_tokens} (cached "
                         "input tokens are part of the input)")
    return usage
