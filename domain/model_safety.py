"""What model-facing text must never hold (contract §7), as a check on text we did not write.

Guidance built by the families is safe by construction: it quotes model text with
``quote_name`` and writes only its own prose around it. A judge's explanation is
different: free text of another model, carried into a retry request. It goes in
only when :func:`internal_tokens` finds nothing internal in it: ids, hashes and
fingerprints, reason codes and validator keys, code-style paths and JSON pointers,
file paths, exception names. Words of the response the producer itself writes
(field names such as ``turn_kind`` or ``cast.level``, enum values such as
``cast_spell``) are allowed through ``allowed``.
"""

from __future__ import annotations

import re
from typing import Collection, Iterable

_CHECKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a code-style path", re.compile(r"\w\[\d+\]|\[\d+\]\.?")),
    ("a JSON pointer", re.compile(r"(?:^|[\s(])/[A-Za-z_]+/\d+")),
    ("a hash or fingerprint", re.compile(r"sha256|sha-256|\b[0-9a-f]{12,}\b", re.IGNORECASE)),
    ("an id", re.compile(r"\b[a-z]{1,4}-[0-9a-f]{6,}\b|\b[a-z][a-z0-9]*:[A-Za-z0-9][\w.-]*\d\b")),
    ("a file path", re.compile(r"[\w-]+\.(?:py|json|jsonl|avro|avsc|parquet|md|gz)\b|(?:^|\s)(?:/|\./|~/)[\w.-]+/|\\")),
    ("an exception", re.compile(r"Traceback|\b[A-Z]\w*(?:Error|Exception)\b")),
)
# snake_case or dotted identifiers: reason codes, validator keys - unless the response uses them.
_IDENTIFIER = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+\b")


def internal_tokens(text: str, forbidden: Iterable[str] = (), allowed: Collection[str] = ()) -> list[str]:
    """What in ``text`` a model must never see, one short description each (empty: safe).

    ``forbidden``: tokens known to be internal here (the source's ids, candidate ids);
    ``allowed``: identifiers the producer's own response uses (field names, enum values)."""
    found = [what for what, pattern in _CHECKS if pattern.search(text)]
    found += [f"an internal identifier {m.group(0)!r}" for m in _IDENTIFIER.finditer(text)
              if m.group(0) not in allowed and not _is_prose(m.group(0))]
    found += ["an id of this run" for token in forbidden if token and token in text]
    return found


def _is_prose(token: str) -> bool:
    # "e.g" and "i.e" style abbreviations, and numbers such as 2.5, are prose.
    return token.replace(".", "").isdigit() or token.lower() in {"e.g", "i.e"}
