"""Input values as operators read them in reasons and issues (no D&D rule here)."""

from __future__ import annotations

from typing import Any

MAX_SHOWN_CHARS = 80


def shown_value(value: Any) -> str:
    """A value from an input record, for an operator message (reasons, issues).

    Never the repr of a list or object: a deeply nested one raises RecursionError,
    and the job must not crash on data. Long text is cut.
    """
    if isinstance(value, (list, dict)):
        return f"(a JSON {'array' if isinstance(value, list) else 'object'})"
    text = repr(value)
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"


def json_error_summary(exc: ValueError) -> str:
    """Where and why orjson refused a record. Its messages are short and stable ("unexpected
    end of data: line 1 column 9"); operators see them, models never do."""
    return str(exc).split(":", 1)[0].strip() + f" at character {exc.pos}"
