"""Source documents: transcripts, their units and chunks, and the document index.

Document order is the order of ``units``. Unit ids are positive and unique but
NOT ordered: edits and merges renumber, so nothing here (or anywhere) may
assume a smaller id comes earlier. Every positional question goes through
:class:`DocumentIndex`.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from typing import Annotated, Any, Callable, Mapping, Sequence

import msgspec
import orjson

from domain.errors import NotariusError
from domain.frozen import quick_init
from domain.records import json_error_summary, shown_value

CHUNK_KINDS = ("extraction", "scene")
# Outputs store ids as Avro longs.
MAX_UNIT_ID = 2**63 - 1


class TranscriptError(NotariusError, ValueError):
    """A transcript record that cannot be used. The message names the problem
    in words an operator understands; the job turns it into a dead letter."""


@quick_init
@dataclass(frozen=True, slots=True)
class Unit:
    unit_id: int
    speaker: str
    text: str


@quick_init
@dataclass(frozen=True, slots=True)
class Chunk:
    """A chunk of a transcript. Its record's list names a *set* of units (contract §3.1):
    ``unit_ids`` holds them in document order, whatever order the record listed
    them in, so the excerpt and the first and last unit are document-ordered."""

    chunk_id: str
    kind: str
    unit_ids: tuple[int, ...]
    # Document positions of the members, sorted: containment of a span is then
    # two binary searches instead of a walk over the span.
    sorted_positions: tuple[int, ...] = field(repr=False, compare=False, default=())

    @property
    def first_unit_id(self) -> int:
        return self.unit_ids[0]

    @property
    def last_unit_id(self) -> int:
        return self.unit_ids[-1]


@dataclass(frozen=True, slots=True)
class DocumentIndex:
    """unit_id -> document position, built once per source."""

    source_id: str
    positions: Mapping[int, int]
    unit_ids_in_order: tuple[int, ...]

    @classmethod
    def of(cls, source_id: str, unit_ids: Sequence[int]) -> "DocumentIndex":
        return cls(source_id, {uid: pos for pos, uid in enumerate(unit_ids)}, tuple(unit_ids))

    def position(self, unit_id: Any) -> int | None:
        """Document position of ``unit_id``; None when it does not resolve."""
        if type(unit_id) is not int:  # bool is an int subclass and never a unit id
            return None
        return self.positions.get(unit_id)

    def __contains__(self, unit_id: object) -> bool:
        return self.position(unit_id) is not None

    def __len__(self) -> int:
        return len(self.unit_ids_in_order)


_unit_id, _speaker, _text = attrgetter("unit_id"), attrgetter("speaker"), attrgetter("text")


def _units_of_records(records: Sequence[Any]) -> tuple[Unit, ...]:
    """Units of decoded unit records (anything with ``unit_id``, ``speaker`` and ``text``)."""
    return tuple(map(Unit, map(_unit_id, records), map(_speaker, records), map(_text, records)))


def _units_of_columns(unit_ids: Sequence[int], speakers: Sequence[str], texts: Sequence[str]) -> tuple[Unit, ...]:
    return tuple(map(Unit, unit_ids, speakers, texts))


@dataclass(frozen=True, slots=True, eq=False)
class Transcript:
    """A usable transcript. Its :class:`Unit` objects are built on first use of
    ``units`` (the per-source step never reads them; prompts and reports do)."""

    source_id: str
    # Builds ``units``, in document order, on first use. The per-source step never reads a
    # speaker or a text, so neither path builds anything for it: the typed decoder keeps its
    # unit records as decoded, the record path its checked columns.
    build_units: Callable[[], tuple[Unit, ...]] = field(repr=False)
    chunks: Mapping[str, Chunk]
    index: DocumentIndex = field(repr=False)
    _units: tuple[Unit, ...] | None = field(default=None, repr=False)

    @property
    def units(self) -> tuple[Unit, ...]:
        units = self._units
        if units is None:
            units = self.build_units()
            object.__setattr__(self, "_units", units)
        return units

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Transcript):
            return NotImplemented
        return (self.source_id, self.units, self.chunks) == (other.source_id, other.units, other.chunks)

    __hash__ = None  # type: ignore[assignment]  # chunks is a mapping, as before

    def chunk(self, chunk_id: str) -> Chunk | None:
        return self.chunks.get(chunk_id)

    def unit(self, unit_id: int) -> Unit | None:
        pos = self.index.position(unit_id)
        return None if pos is None else self.units[pos]


def contiguous_positions(chunk: Chunk | None) -> tuple[int, int] | None:
    """``(first, last)`` document positions of a chunk whose members are consecutive units, for which
    :func:`chunk_contains_positions` is ``first <= a <= b <= last``; None for any other chunk (or none)."""
    if chunk is None:
        return None
    positions = chunk.sorted_positions
    if not positions or positions[-1] - positions[0] + 1 != len(positions):
        return None
    return positions[0], positions[-1]


def chunk_contains_positions(chunk: Chunk, first: int, last: int) -> bool:
    """True when every document position in [first, last] belongs to ``chunk``; one
    position is the span [position, position].

    Members are distinct, so the span is covered exactly when the number of
    member positions inside it equals its length.
    """
    positions = chunk.sorted_positions
    lo = bisect_left(positions, first)
    hi = bisect_left(positions, last + 1)
    return hi - lo == last - first + 1


def chunk_missing_positions(chunk: Chunk, first: int, last: int, limit: int = 3) -> tuple[tuple[int, ...], int]:
    """The first ``limit`` document positions in [first, last] that are NOT members of
    ``chunk`` (a gap in it), and how many there are in all.

    O(limit * log n), whatever the span: ``sorted_positions[i] - i`` never decreases,
    so the first gap after a member run is one binary search away.
    """
    positions = chunk.sorted_positions
    lo = bisect_left(positions, first)
    hi = bisect_left(positions, last + 1)
    total = (last - first + 1) - (hi - lo)
    found: list[int] = []
    current, i = first, lo  # every member from index i on sits at or after ``current``
    while len(found) < limit and current <= last:
        key = current - i
        a, b = i, hi
        while a < b:  # first j in [i, hi) where positions[j] - j > key: a gap before it
            mid = (a + b) // 2
            if positions[mid] - mid <= key:
                a = mid + 1
            else:
                b = mid
        missing = current + (a - i)
        if missing > last:
            break
        found.append(missing)
        current, i = missing + 1, a
    return tuple(found), total


def _require(record: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in record:
        raise TranscriptError(f"{where} is missing the field '{key}'")
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise TranscriptError(f"{where} has '{key}' of type {type(value).__name__}, expected {expected}")
    return value


def transcript_from_record(record: Any) -> Transcript:
    """Build a :class:`Transcript` from a decoded transcript record (contract §3.1).

    Raises :class:`TranscriptError` naming the first problem found.
    """
    if not isinstance(record, dict):
        raise TranscriptError(f"transcript record is a JSON {type(record).__name__}, expected an object")
    source_id = _require(record, "source_id", str, "transcript")
    if not source_id.strip():
        raise TranscriptError("transcript has a blank 'source_id'")
    where = f"transcript {shown_value(source_id)}"
    raw_units = _require(record, "units", list, where)
    raw_chunks = _require(record, "chunks", list, where)
    if not raw_units:
        raise TranscriptError(f"{where} has no units")

    units = _well_formed_units(raw_units)
    if units is None:
        units = _checked_units(raw_units, where)
    unit_ids, speakers, texts, positions = units
    index = DocumentIndex(source_id, positions, unit_ids)
    # Every document position once (the index's values, in order): chunks share slices of it.
    document_positions = tuple(range(len(unit_ids)))
    chunks: dict[str, Chunk] = {}
    for n, raw in enumerate(raw_chunks, start=1):
        chunk = _well_formed_chunk_record(raw, index, document_positions, chunks)
        if chunk is None:
            chunk = _checked_chunk(raw, n, index, chunks, where)
        chunks[chunk.chunk_id] = chunk
    return Transcript(source_id, partial(_units_of_columns, unit_ids, speakers, texts), chunks, index)


# (unit ids, speakers, texts, unit id -> document position) of a transcript's units.
UnitColumns = tuple[tuple[int, ...], tuple[str, ...], tuple[str, ...], dict[int, int]]


def _all_exactly(kind: type, values: Sequence) -> bool:
    """Every value is of exactly ``kind`` (a bool is not an int here), at C speed."""
    return list(map(type, values)).count(kind) == len(values)


def _well_formed_units(raw_units: list) -> UnitColumns | None:
    """The columns when every unit is well formed (exact JSON types, ids positive, in range
    and distinct), checked column by column at C speed; None sends the record through
    :func:`_checked_units`, which names the first problem."""
    if not raw_units:
        return None
    try:
        unit_ids = tuple([raw["unit_id"] for raw in raw_units])
        speakers = tuple([raw["speaker"] for raw in raw_units])
        texts = tuple([raw["text"] for raw in raw_units])
    except (TypeError, KeyError, IndexError):
        return None
    # (A unit that is not an object failed the indexing above.)
    if not _all_exactly(int, unit_ids) or not _all_exactly(str, speakers) or not _all_exactly(str, texts):
        return None
    if min(unit_ids) <= 0 or max(unit_ids) > MAX_UNIT_ID:
        return None
    positions = _distinct_positions(unit_ids, tuple(range(len(unit_ids))))
    return None if positions is None else (unit_ids, speakers, texts, positions)


def _distinct_positions(unit_ids: tuple[int, ...], document_positions: tuple[int, ...]) -> dict[int, int] | None:
    """unit id -> document position (``document_positions``: every position, in order) when the
    ids (ints in range, at least one) are distinct; None otherwise. Zipped with the positions'
    own tuple, the dict and the chunks share its ints instead of making a second set."""
    positions = dict(zip(unit_ids, document_positions))
    if len(positions) != len(unit_ids):  # a duplicate id
        return None
    return positions


def _checked_units(raw_units: list, where: str) -> UnitColumns:
    """The same columns, unit by unit; raises :class:`TranscriptError` naming the first problem."""
    unit_ids: list[int] = []
    speakers: list[str] = []
    texts: list[str] = []
    positions: dict[int, int] = {}
    for n, raw in enumerate(raw_units, start=1):
        unit_where = f"{where} unit #{n}"
        if not isinstance(raw, dict):
            raise TranscriptError(f"{unit_where} is not an object")
        uid = _require(raw, "unit_id", int, unit_where)
        if uid <= 0:
            raise TranscriptError(f"{unit_where} has non-positive unit_id {uid}")
        if uid > MAX_UNIT_ID:
            raise TranscriptError(f"{unit_where} has unit_id {uid}, above the 64-bit limit of the outputs")
        if uid in positions:
            raise TranscriptError(f"{where} has duplicate unit_id {uid}")
        positions[uid] = len(unit_ids)
        unit_ids.append(uid)
        speakers.append(_require(raw, "speaker", str, unit_where))
        texts.append(_require(raw, "text", str, unit_where))
    return tuple(unit_ids), tuple(speakers), tuple(texts), positions


def _well_formed_chunk_record(
    raw: Any, index: DocumentIndex, document_positions: tuple[int, ...], chunks: Mapping[str, Chunk]
) -> Chunk | None:
    """:func:`_well_formed_chunk` of a decoded chunk record whose values are of exactly the
    JSON types; None sends it through :func:`_checked_chunk`, which names the problem."""
    if type(raw) is not dict:
        return None
    chunk_id, kind, member_ids = raw.get("chunk_id"), raw.get("kind"), raw.get("unit_ids")
    if (type(chunk_id) is not str or type(kind) is not str or type(member_ids) is not list
            or not _all_exactly(int, member_ids)):  # bool and float keys would hash like ints
        return None
    return _well_formed_chunk(chunk_id, kind, member_ids, index, document_positions, chunks)


def _well_formed_chunk(
    chunk_id: str, kind: str, member_ids: list[int],
    index: DocumentIndex, document_positions: tuple[int, ...], chunks: Mapping[str, Chunk],
) -> Chunk | None:
    """The chunk when its values (of exactly these types; ints of any size) are well formed:
    id usable and new, kind known, members known and distinct. None otherwise.
    ``document_positions``: every position of ``index``, in order."""
    if (not member_ids or chunk_id == "*" or not chunk_id.strip() or chunk_id in chunks
            or kind not in CHUNK_KINDS):
        return None
    # The usual record lists one run of consecutive units in document order: compared with
    # the index's run at C speed, without a lookup per member.
    first = index.positions.get(member_ids[0])
    if first is not None:
        end = first + len(member_ids)
        run = index.unit_ids_in_order[first:end]
        if run == tuple(member_ids):
            return Chunk(chunk_id, kind, run, document_positions[first:end])
    try:
        positions = sorted(map(index.positions.__getitem__, member_ids))
    except KeyError:
        return None
    if len(set(positions)) != len(positions):
        return None
    # The list names a set: members are kept in document order, once per transcript.
    return Chunk(chunk_id, kind, tuple(map(index.unit_ids_in_order.__getitem__, positions)), tuple(positions))


def _checked_chunk(raw: Any, n: int, index: DocumentIndex, chunks: Mapping[str, Chunk], where: str) -> Chunk:
    chunk_where = f"{where} chunk #{n}"
    if not isinstance(raw, dict):
        raise TranscriptError(f"{chunk_where} is not an object")
    chunk_id = _require(raw, "chunk_id", str, chunk_where)
    chunk_where = f"{where} chunk {shown_value(chunk_id)}"
    if not chunk_id.strip() or chunk_id == "*":
        raise TranscriptError(f"{chunk_where} has a reserved or blank chunk_id")
    if chunk_id in chunks:
        raise TranscriptError(f"{where} has duplicate chunk_id {shown_value(chunk_id)}")
    kind = _require(raw, "kind", str, chunk_where)
    if kind not in CHUNK_KINDS:
        raise TranscriptError(f"{chunk_where} has kind {shown_value(kind)}, expected one of {', '.join(CHUNK_KINDS)}")
    member_ids = _require(raw, "unit_ids", list, chunk_where)
    if not member_ids:
        raise TranscriptError(f"{chunk_where} names no units")
    positions = []
    for uid in member_ids:
        pos = index.position(uid)
        if pos is None:
            raise TranscriptError(f"{chunk_where} names unknown unit {shown_value(uid)}")
        positions.append(pos)
    if len(set(positions)) != len(positions):
        raise TranscriptError(f"{chunk_where} names a unit twice")
    # The list names a set: members are kept in document order, once per transcript.
    ordered = tuple(sorted(positions))
    in_order = index.unit_ids_in_order
    return Chunk(chunk_id, kind, tuple(in_order[pos] for pos in ordered), ordered)


def parse_transcript(raw: bytes) -> Transcript:
    """Decode one transcript JSON record. Raises :class:`TranscriptError`."""
    transcript = _well_formed_transcript(raw)
    if transcript is None:
        transcript = _parse_via_record(raw)
    return transcript


def _parse_via_record(raw: bytes) -> Transcript:
    """Any transcript line: decoded to plain values, then :func:`transcript_from_record`,
    which names the first problem. The outcome every input must have."""
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TranscriptError(f"transcript is not valid JSON ({json_error_summary(exc)})") from None
    return transcript_from_record(record)


# The typed decoding of a well-formed transcript line: no dict per unit, no type check per
# value (about 0.7 of the time of _parse_via_record on the bench transcripts). An accelerator
# only: whatever it rejects or the checks below decline goes through _parse_via_record, so
# outcomes and messages are that path's. Extra fields are refused, not skipped: msgspec skips
# a value without validating its UTF-8 or its number range, where orjson rejects the line.
# Ids are range-checked as they are decoded, not only in the record that results: a key
# written twice keeps its last value, and an earlier one orjson refuses (an int beyond a
# double) would otherwise pass unseen.
_UnitId = Annotated[int, msgspec.Meta(ge=1, le=MAX_UNIT_ID)]


class _UnitRecord(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    unit_id: _UnitId
    speaker: str
    text: str


class _ChunkRecord(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    chunk_id: str
    kind: str
    unit_ids: list[_UnitId]


class _TranscriptRecord(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    source_id: str
    units: list[_UnitRecord]
    chunks: list[_ChunkRecord]


_decode_transcript_record = msgspec.json.Decoder(_TranscriptRecord).decode


def _well_formed_transcript(raw: bytes) -> Transcript | None:
    """The transcript when its line decodes as exactly the three typed fields and passes
    the same checks as the dict fast paths; None otherwise (nothing is reported here)."""
    try:
        record = _decode_transcript_record(raw)
    except Exception:  # any failure at all: _parse_via_record decides, and names it
        return None
    source_id, units = record.source_id, record.units
    if not units or not source_id.strip():
        return None
    # The ids are in range (``_UnitId``, checked as they were decoded, so not again here); a
    # repeated id sends the line back. (map with attrgetter: no Python step per unit, which
    # tests/test_hostile_input.py counts; a list comprehension costs fewer instructions, one step per unit.)
    unit_ids = tuple(map(_unit_id, units))
    document_positions = tuple(range(len(unit_ids)))
    positions = _distinct_positions(unit_ids, document_positions)
    if positions is None:
        return None
    index = DocumentIndex(source_id, positions, unit_ids)
    chunks: dict[str, Chunk] = {}
    for raw_chunk in record.chunks:
        chunk = _well_formed_chunk(raw_chunk.chunk_id, raw_chunk.kind, raw_chunk.unit_ids,
                                   index, document_positions, chunks)
        if chunk is None:
            return None
        chunks[chunk.chunk_id] = chunk
    return Transcript(source_id, partial(_units_of_records, units), chunks, index)
