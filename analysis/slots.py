"""A slot (one family's output for one chunk of one source) and how a row names it.

The one definition of :class:`Slot` for every analysis that gathers rows per slot: comparing two runs
(``analysis.compare``) and the retry economy (``analysis.retry_economy``). Pure.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from domain.errors import NotariusError
from domain.run_integrity import shown


class Slot(NamedTuple):
    """A tuple: rows are gathered in dicts keyed by their slot and sorted by it, and a tuple is hashed,
    compared and built by the interpreter itself (a dataclass's ``__hash__``, ``__eq__`` and ``__lt__`` are
    Python calls: most of compare's time gathering rows per slot, issue 43)."""

    family: str
    source_id: str
    chunk_id: str

    @property
    def key(self) -> tuple[str, str, str]:
        """The slot as a plain tuple (what a runner groups by)."""
        return (self.family, self.source_id, self.chunk_id)


class RowError(NotariusError, ValueError):
    """A row that is not what the run's output contract says (a verified run never has one)."""


_KIND_NAMES = {int: "an integer", str: "a string"}


def is_mapping(value: Any) -> bool:
    # A dict first: isinstance against typing.Mapping goes through the ABC machinery, and this runs several
    # times per row read (a sixth of compare's time at 10k, before).
    return type(value) is dict or isinstance(value, Mapping)


def row_field(row: Mapping[str, Any], name: str, kind: type) -> Any:
    """``row[name]``, refused with a :class:`RowError` unless ``row`` is an object and the value a ``kind``."""
    if not is_mapping(row):
        raise RowError(f"a row that is {shown(row)}, not an object")
    if name not in row:
        raise RowError(f"a row without {name!r}")
    value = row[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise RowError(f"{name!r} is {shown(value)}, not {_KIND_NAMES[kind]}")
    return value


def slot_of(row: Mapping[str, Any]) -> Slot:
    """The slot of an evaluation, request, artifact or ground-truth row."""
    return Slot(row_field(row, "family", str), row_field(row, "source_id", str), row_field(row, "chunk_id", str))
