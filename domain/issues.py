"""Validation issues and model-facing correction guidance: the shared mechanics.

An :class:`Issue` has two audiences kept strictly apart:

* the operator side (``validator``, ``reason_code``, ``location``, ``message``)
  goes to evaluations only and may hold paths, indexes and codes;
* the model side (:class:`Correction`) is built by the family from the
  candidate and its transcript: the affected record's transcript-grounded
  name, its cited range, the response field, what is wrong and what to
  return instead. Operator text is never copied into it.

This module owns the mechanics only - stable grouping, de-duplication,
range wording, safe quoting of model-supplied names, and the one bound on
issues and characters. Families own the meaning and the prose.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Container, Iterable, Sequence

from domain.frozen import Value

# One shared bound for every family (it is part of each validator policy fingerprint).
MAX_ISSUES = 50
MAX_GUIDANCE_CHARS = 6000
MAX_QUOTED_NAME_CHARS = 80
GUIDANCE_VERSION = "guidance-v3"
# Model-supplied integers are echoed only while short: longer ones read like hashes, and
# thousands of digits would push whole problems out of the bounded guidance.
MAX_SHOWN_NUMBER = 10**12

GUIDANCE_OPENING = (
    "Your previous response could not be accepted. Every problem found is listed below. "
    "Fix all of them and return one complete corrected replacement response: every record, "
    "not only the changed ones, in the same JSON shape."
)
GUIDANCE_CLOSING = "Return only the corrected JSON response."


class Correction(Value):  # a domain.frozen.Value, made in C (one or more per failing candidate)
    """What the model needs to repair one defect, in its own terms.

    ``subject`` names the record the way the model would recognise it (already
    quoted with :func:`quote_name` where it contains model-supplied text);
    ``cited`` is its range in transcript words (:func:`render_range`), or "";
    ``problem`` and ``fix`` are whole sentences owned by the family.
    """

    subject: str
    cited: str
    problem: str
    fix: str


class Issue(Value):  # a domain.frozen.Value, made in C (one or more per failing candidate)
    validator: str
    reason_code: str
    location: str
    message: str
    # None marks an operator-only issue (normalization invariants): never shown to a model.
    correction: Correction | None

    def as_record(self) -> dict[str, str]:
        return {
            "validator": self.validator,
            "reason_code": self.reason_code,
            "location": self.location,
            "message": self.message,
        }


class IssueCollector:
    """Collects every issue of one validator run over one candidate.

    A small accumulator local to one validator call; what leaves it is an
    immutable tuple. The bound applies later, when rendering.
    """

    __slots__ = ("validator", "_issues")

    def __init__(self, validator: str) -> None:
        self.validator = validator
        self._issues: list[Issue] = []

    def add(self, reason_code: str, location: str, message: str, correction: Correction | None) -> None:
        self._issues.append(Issue(self.validator, reason_code, location, message, correction))

    def issues(self) -> tuple[Issue, ...]:
        return tuple(self._issues)


def bound_issues(issues: Sequence[Issue], limit: int = MAX_ISSUES) -> tuple[tuple[Issue, ...], int]:
    """The first ``limit`` distinct issues and how many were left out."""
    unique = tuple(dict.fromkeys(issues))
    return unique[:limit], max(0, len(unique) - limit)


def operator_issue_records(issues: Sequence[Issue], limit: int = MAX_ISSUES) -> list[dict[str, str]]:
    """Issues for the evaluations output, bounded with an explicit 'and N more' row."""
    if not issues:  # most evaluations
        return []
    kept, omitted = bound_issues(issues, limit)
    rows = [issue.as_record() for issue in kept]
    if omitted:
        rows.append(
            {"validator": "bound", "reason_code": "more_issues", "location": "", "message": f"and {omitted} more issues"}
        )
    return rows


def render_range(start: Any, end: Any, known: Container = ()) -> str:
    """A cited range as a model reads it: "unit 40" or "units 40–44".

    ``known`` holds the ids that exist (the transcript's ``DocumentIndex``): those are
    always written exactly, however long. Only a number that exists nowhere is elided
    once it is too long to read as an id.
    """
    if start == end:
        return f"unit {_unit_text(start, known)}"
    return f"units {_unit_text(start, known)}–{_unit_text(end, known)}"


def render_ranges(ranges: Iterable[tuple[Any, Any]], limit: int = 3, known: Container = ()) -> str:
    """Several cited ranges, de-duplicated and bounded: "units 4–6, unit 9 and 2 more ranges"."""
    texts = list(dict.fromkeys(render_range(s, e, known) for s, e in ranges))
    shown = ", ".join(texts[:limit])
    more = len(texts) - limit
    return shown + (f" and {more} more range{'s' if more != 1 else ''}" if more > 0 else "")


def render_units(unit_ids: Sequence[Any], known: Container = (), total: int | None = None, limit: int = 3) -> str:
    """Single units, with number agreement: "unit 3", "units 3 and 8", "units 3, 8, 11 and 4 more".

    ``total`` is how many there are when ``unit_ids`` shows only the first few.
    """
    texts = list(dict.fromkeys(_unit_text(u, known) for u in unit_ids))[:limit]
    count = max(len(texts), total or 0)
    if count == 1:
        return f"unit {texts[0]}"
    more = count - len(texts)
    if more > 0:
        return f"units {', '.join(texts)} and {more} more"
    return f"units {', '.join(texts[:-1])} and {texts[-1]}"


def is_are(count: int) -> str:
    return "is" if count == 1 else "are"


def render_number(value: int, out_of_range: str = "an out-of-range number") -> str:
    """A model-supplied integer for guidance, bounded in length."""
    return str(value) if -MAX_SHOWN_NUMBER < value < MAX_SHOWN_NUMBER else out_of_range


def _unit_text(value: Any, known: Container = ()) -> str:
    if type(value) is int:
        if value in known:  # an id of the transcript: always exact
            return str(value)
        return render_number(value, "(an out-of-range id)")
    return quote_name(str(value), limit=20)


_CONTROL_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def quote_name(value: Any, limit: int = MAX_QUOTED_NAME_CHARS) -> str:
    """Quote model-supplied text for guidance: one line, no control characters,
    capped length, wrapped in double quotes that the text itself cannot close."""
    text = "" if value is None else str(value)
    # isprintable() is False for every control/separator category (and non-ASCII
    # spaces): only such rare text needs the per-character pass.
    if not text.isprintable():
        text = "".join(" " if unicodedata.category(ch) in _CONTROL_CATEGORIES else ch for ch in text)
    # split() and strip() use the same whitespace as the regex ``\s+``.
    cleaned = " ".join(text.split()).replace('"', "'").replace("`", "'")
    if len(cleaned) > limit:
        cleaned = cleaned[: limit - 1].rstrip() + "…"
    return f'"{cleaned}"' if cleaned else "(blank)"


def render_guidance(issues: Sequence[Issue], opening: str = GUIDANCE_OPENING) -> str:
    """Render the model-facing corrections of ``issues`` into one bounded text.

    Deterministic: the same issues give the same bytes. Records are grouped in
    first-seen order; an identical instruction given for several records is
    written once, naming all of them. Operator-only issues are skipped.
    """
    corrections = [issue.correction for issue in issues if issue.correction is not None]
    # Group identical (problem, fix) instructions; keep first-seen order.
    # Subjects are ordered sets (dicts): linear in the number of records sharing one problem.
    groups: dict[tuple[str, str], dict[str, None]] = {}
    for c in dict.fromkeys(corrections):
        label = f"{c.subject} ({c.cited})" if c.cited else c.subject
        groups.setdefault((c.problem, c.fix), {})[label] = None
    lines = [_correction_line(list(subjects), problem, fix) for (problem, fix), subjects in groups.items()]
    kept, omitted = lines[:MAX_ISSUES], max(0, len(lines) - MAX_ISSUES)

    head = opening + "\n"
    tail = "\n" + GUIDANCE_CLOSING
    body: list[str] = []
    used = len(head) + len(tail)
    for line in kept:
        more_line = _more_line(len(kept) - len(body) + omitted)
        if used + len(line) + 1 + len(more_line) + 1 > MAX_GUIDANCE_CHARS:
            break
        body.append(line)
        used += len(line) + 1
    omitted += len(kept) - len(body)
    if omitted:
        body.append(_more_line(omitted))
    return head + "\n".join(body) + tail


MAX_SUBJECTS_PER_LINE = 8


def _correction_line(subjects: list[str], problem: str, fix: str) -> str:
    # One instruction shared by many records names a bounded few, so the line
    # always fits the character bound and is never dropped whole.
    shown = subjects[:MAX_SUBJECTS_PER_LINE]
    more = len(subjects) - len(shown)
    who = "; ".join(shown) + (f"; and {more} more record{'s' if more != 1 else ''} with the same problem" if more else "")
    return f"- {who}: {problem} {fix}".rstrip()


def _more_line(count: int) -> str:
    return f"- …and {count} more problem{'s' if count != 1 else ''} of the kinds above; fix those too."
