"""What changed in a slot's accepted records from run A to run B (contract §6.3): records added, removed and
changed, each by its transcript-grounded name, with the fields that differ; bounded per slot.

Pure. The name of a record is its family's declaration (``FamilySpec.record_subject``); nothing here knows
a family. Records are matched in two passes, each in record order (earliest evidence first):

1. equal records (their canonical JSON) pair off as unchanged;
2. of the rest, records with the same name pair off in order as *changed* (their fields differ); what is
   left is *removed* (A only) or *added* (B only).

So a record whose name changed (another caster, a corrected spelling) shows as one removed and one added:
the name says which record, the pair says what it became. Only the first :data:`RECORDS_LISTED` changes
of a slot are listed (changed first, then added, then removed); the counts cover every record, and
``more`` says how many were left out. A value is shown as compact JSON cut at :data:`VALUE_CHARS`; a list
of evidence ranges as its unit ranges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import orjson

from domain.families import FAMILIES

RECORD_ADDED = "added"
RECORD_REMOVED = "removed"
RECORD_CHANGED = "changed"
RECORD_CHANGES = (RECORD_CHANGED, RECORD_ADDED, RECORD_REMOVED)  # the order they are listed in

# Per slot: record changes listed (the counts cover all of them), and characters of a value shown.
RECORDS_LISTED = 12
VALUE_CHARS = 80


@dataclass(frozen=True)
class FieldChange:
    """One field of a changed record: its path (``cast.level``) and its value in A and in B, as shown
    (None: the record has no such field in that run)."""

    field: str
    a: str | None
    b: str | None

    def as_row(self) -> dict:
        return {"field": self.field, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class RecordChange:
    change: str  # RECORD_ADDED, RECORD_REMOVED or RECORD_CHANGED
    record: str  # its name (the family's record_subject)
    fields: tuple[FieldChange, ...] = ()  # changed records only

    def as_row(self) -> dict:
        return {"change": self.change, "record": self.record, "fields": [f.as_row() for f in self.fields]}


@dataclass(frozen=True)
class RecordsDiff:
    """Every record of the slot counted once: unchanged, changed, added or removed; the first changes listed."""

    added: int
    removed: int
    changed: int
    unchanged: int
    listed: tuple[RecordChange, ...]

    @property
    def more(self) -> int:
        """Changes not listed (the bound)."""
        return self.added + self.removed + self.changed - len(self.listed)

    def as_row(self) -> dict:
        """The slot row's ``records`` (``assets/outputs/slot_change.v1``)."""
        return {"added": self.added, "removed": self.removed, "changed": self.changed, "unchanged": self.unchanged,
                "listed": [change.as_row() for change in self.listed], "more": self.more}


def record_name(family: str, record: Any) -> str:
    """A record's transcript-grounded name, as its family declares it."""
    spec = FAMILIES.get(family)
    if spec is None or not isinstance(record, Mapping):
        return "A record"  # a verified run holds only known families' records: never expected
    return spec.record_subject(record)


def _canonical(record: Any) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS)


def diff_records(family: str, a: Sequence[Any], b: Sequence[Any], limit: int = RECORDS_LISTED) -> RecordsDiff:
    """The records of A against those of B (either may be empty: nothing accepted in that run)."""
    left = list(enumerate(a))
    right = list(enumerate(b))
    # 1. equal records pair off (as many times as they occur on both sides)
    waiting: dict[bytes, list[int]] = {}
    for n, record in right:
        waiting.setdefault(_canonical(record), []).append(n)
    matched_b: set[int] = set()
    only_a = []
    for n, record in left:
        same = waiting.get(_canonical(record))
        if same:
            matched_b.add(same.pop(0))
        else:
            only_a.append(record)
    only_b = [record for n, record in right if n not in matched_b]
    unchanged = len(a) - len(only_a)
    # 2. the rest pair off by name, in order
    names_b = [record_name(family, record) for record in only_b]
    named_b: dict[str, list[int]] = {}
    for n, name in enumerate(names_b):
        named_b.setdefault(name, []).append(n)
    paired_b: set[int] = set()
    changed: list[RecordChange] = []
    removed: list[RecordChange] = []
    for record in only_a:
        name = record_name(family, record)
        partners = named_b.get(name)
        if partners:
            n = partners.pop(0)
            paired_b.add(n)
            changed.append(RecordChange(RECORD_CHANGED, name, field_changes(record, only_b[n])))
        else:
            removed.append(RecordChange(RECORD_REMOVED, name))
    added = [RecordChange(RECORD_ADDED, name) for n, name in enumerate(names_b) if n not in paired_b]
    listed = tuple((changed + added + removed)[:max(limit, 0)])
    return RecordsDiff(len(added), len(removed), len(changed), unchanged, listed)


def field_changes(a: Any, b: Any) -> tuple[FieldChange, ...]:
    """The fields of two records that differ (nested objects by dotted path; a list is one value), in the
    order of A's fields, then B's own."""
    flat_a, flat_b = dict(_flatten(a)), dict(_flatten(b))
    paths = list(flat_a) + [path for path in flat_b if path not in flat_a]
    return tuple(FieldChange(path, _shown_or_none(flat_a, path), _shown_or_none(flat_b, path)) for path in paths
                 if path not in flat_a or path not in flat_b or _canonical(flat_a[path]) != _canonical(flat_b[path]))


def _flatten(value: Any, prefix: str = "") -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping) and (value or not prefix):
        for key, inner in value.items():
            yield from _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix or "record", value


def _shown_or_none(flat: Mapping[str, Any], path: str) -> str | None:
    return shown_value(flat[path]) if path in flat else None


def shown_value(value: Any) -> str:
    """A field's value for a reader: a list of evidence ranges as its unit ranges ("units 86–87, 87–89"),
    anything else as compact JSON; cut at :data:`VALUE_CHARS` characters."""
    if isinstance(value, list) and value and all(_is_range(item) for item in value):
        text = "units " + ", ".join(_range_text(item) for item in value)
    else:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode("utf-8")
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 1] + "…"


def _is_range(item: Any) -> bool:
    """An evidence item (contract §6: ``{source_id, start_unit_id, end_unit_id}``)."""
    return isinstance(item, Mapping) and "start_unit_id" in item and "end_unit_id" in item


def _range_text(item: Mapping[str, Any]) -> str:
    start, end = item["start_unit_id"], item["end_unit_id"]
    return f"{start}" if start == end else f"{start}–{end}"
