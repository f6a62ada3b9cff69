"""Output rows shared by every stage of the job (no D&D rule here)."""

from __future__ import annotations

import base64


def dead_letter_row(input_name: str, reason: str, payload: bytes) -> dict:
    """A dead letter (SPEC §6): the original bytes kept, base64 when they are not UTF-8."""
    try:
        text, encoding = payload.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(payload).decode("ascii"), "base64"
    return {"input": input_name, "reason": reason, "payload": text, "payload_encoding": encoding}
