"""Cited ranges: each one resolved once, and every rule about ranges read off that resolution.

A cited range is ``(source_id, start_unit_id, end_unit_id)``, a :class:`SourceRef`.
Unit ids are labels, not positions: :func:`resolve_range` is the ONE place a range
meets the source's :class:`DocumentIndex`. It gives the range's *resolved form*: the
same :class:`SourceRef` carrying the document positions of its two endpoints, as
given (``first``, ``last``), and the index that gave them; None when the range
cites another source or an endpoint is not a unit of it. Adapters store resolved
refs in their records, so a range the model wrote is looked up once per candidate,
whatever later asks about it; :func:`resolve` returns a ref's resolution, itself
when it already carries one from that index.

Every rule is written once, on the resolved form:

* endpoint order (contract §5 step 3):
  :meth:`SourceRef.ordered`. A range whose endpoints both resolve in the current
  source but were given in reverse document order is the same range written
  backwards; it is rewritten silently, with no warning, diagnostic or retry.
  ``first > last`` is "written backwards", which is also what the candidate's
  ``endpoints_reordered`` counts (:func:`canonical_written`);
* sort key: :func:`evidence_sort_key` (document position; unresolvable refs last);
* earliest start: :func:`earliest_start`;
* containment (contract §5.3): :func:`span_within_chunk`. A range that cannot be
  resolved, belongs to another source, runs backwards or leaves the chunk is a
  real defect: the strict validators reject it, never repair it.

Canonical evidence (:func:`canonical_written` for what a model wrote,
:func:`canonical_evidence` for refs) and the invariant that checks it
(:func:`evidence_is_canonical`) are compositions of those; so is
:func:`evidence_as_written`, canonical evidence without the endpoint ordering. Everything here is
pure: new values, inputs never mutated.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Iterable, Sequence

from domain.frozen import Value
from domain.source import Chunk, DocumentIndex, chunk_contains_positions


class SourceRef(Value):
    """A cited range ``(source_id, start_unit_id, end_unit_id)``, and once resolved, its positions.

    Unit ids are kept as the model gave them (``Any``): an unresolvable value
    must survive untouched so a validator can reject it. Equality, hashing and
    the repr are the three fields alone: a resolved ref equals the plain one.
    (A :class:`~domain.frozen.Value`, built in C: one or more per cited range.)
    """

    source_id: str | None
    start_unit_id: Any
    end_unit_id: Any
    # The resolution (resolve_range): document positions of start and end as given, and the
    # index they were read from. None: not resolved by anyone (yet), or not resolvable.
    first: int | None = None
    last: int | None = None
    index: DocumentIndex | None = None

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return ((self.source_id, self.start_unit_id, self.end_unit_id)
                == (other.source_id, other.start_unit_id, other.end_unit_id))  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.source_id, self.start_unit_id, self.end_unit_id))

    def __repr__(self) -> str:
        return (f"SourceRef(source_id={self.source_id!r}, start_unit_id={self.start_unit_id!r}, "
                f"end_unit_id={self.end_unit_id!r})")

    def as_record(self) -> dict[str, Any]:
        return {"source_id": self.source_id, "start_unit_id": self.start_unit_id, "end_unit_id": self.end_unit_id}

    def ordered(self) -> SourceRef:
        """This range with its endpoints in document order: the ONE endpoint ordering.

        Swaps only a resolved range given backwards (by the positions it carries: its
        start later in the document than its end); anything else - forward, single-unit, and every ref that does
        not resolve (another source, missing, non-positive or unknown ids) - comes
        back as it is, so the strict validators still see and reject it.
        """
        first, last = self.first, self.last
        if first is None or first <= last:
            return self
        return SourceRef(self.source_id, self.end_unit_id, self.start_unit_id, last, first, self.index)


def resolve_range(index: DocumentIndex, source_id: str | None, start: Any, end: Any) -> SourceRef | None:
    """The resolved form of the range ``(source_id, start, end)``: a ref carrying the
    document positions of both endpoints as given; None when it cites a source other
    than ``index``'s or an endpoint is not a unit of it (``bool`` is never a unit id).

    The ONE lookup of a cited range in the index.
    """
    if source_id == index.source_id and type(start) is int and type(end) is int:
        positions = index.positions
        first = positions.get(start)
        if first is not None:
            last = positions.get(end)
            if last is not None:
                return SourceRef(source_id, start, end, first, last, index)
    return None


def resolve(index: DocumentIndex, ref: SourceRef) -> SourceRef | None:
    """``ref``'s resolved form: itself when it carries one from ``index``, else :func:`resolve_range`."""
    if ref.index is index:
        return ref
    return resolve_range(index, ref.source_id, ref.start_unit_id, ref.end_unit_id)


def span_within_chunk(index: DocumentIndex | None, chunk: Chunk | None, ref: SourceRef | None) -> bool:
    """True when every unit of ``ref``'s inclusive document-ordered span is in ``chunk`` (contract §5.3).

    Source identity must match, endpoints resolve through the index (never by
    numeric order), and a reversed range is not a span: it returns False so
    the strict validator rejects it. None or unresolved inputs give False. The
    wording of any error belongs to the calling validator.
    """
    if chunk is None or index is None or ref is None:
        return False
    if ref.index is not index:
        ref = resolve_range(index, ref.source_id, ref.start_unit_id, ref.end_unit_id)
        if ref is None:
            return False
    first, last = ref.first, ref.last
    return first <= last and chunk_contains_positions(chunk, first, last)


def evidence_sort_key(index: DocumentIndex, ref: SourceRef) -> tuple:
    """Document-position order of refs as given; unresolvable refs sort last, stably by their text."""
    resolved = resolve(index, ref)
    if resolved is None:
        return (1, 0, 0, repr((ref.source_id, ref.start_unit_id, ref.end_unit_id)))
    return (0, resolved.first, resolved.last, "")


def earliest_start(index: DocumentIndex, refs: Iterable[SourceRef]) -> SourceRef | None:
    """The resolved ref among ``refs`` whose start (as given) comes first in the document;
    None when none resolves. Its ``first`` is the position, its ``start_unit_id`` the unit.

    The ONE earliest-evidence rule: records are ordered by it, a reconciliation's entry
    list is labelled by it, and the normalization invariant checks it.
    """
    best = None
    for ref in refs:
        if ref.index is not index:
            ref = resolve_range(index, ref.source_id, ref.start_unit_id, ref.end_unit_id)
            if ref is None:
                continue
        if best is None or ref.first < best.first:
            best = ref
    return best


def canonical_written(index: DocumentIndex, source_id: str, written: Sequence[Any]) -> tuple[tuple[SourceRef, ...], int]:
    """A record's evidence as the model wrote it (items with ``start_unit_id`` and
    ``end_unit_id``, cited in ``source_id``): its canonical evidence (each range resolved
    once and put in document order, then de-duplicated and sorted by position), and how
    many of the written ranges were backwards (each one counts, duplicates included).
    """
    if len(written) == 1:  # most records cite one range: nothing to sort or de-duplicate
        (item,) = written
        start, end = item.start_unit_id, item.end_unit_id
        resolved = resolve_range(index, source_id, start, end)
        if resolved is None:
            return (SourceRef(source_id, start, end),), 0
        if resolved.first > resolved.last:
            return (resolved.ordered(),), 1
        return (resolved,), 0
    refs = []
    for item in written:
        start, end = item.start_unit_id, item.end_unit_id
        refs.append(resolve_range(index, source_id, start, end) or SourceRef(source_id, start, end))
    return _canonical(refs)


def canonical_evidence(index: DocumentIndex, source_id: str | None, refs: Iterable[SourceRef]) -> tuple[SourceRef, ...]:
    """Refs put in document order when they cite ``source_id`` (the source ``index``
    describes; with another, none is reordered), then de-duplicated and sorted by position."""
    if source_id != index.source_id:
        return tuple(sorted(set(refs), key=lambda ref: evidence_sort_key(index, ref)))
    return _canonical([resolve(index, ref) or _unresolved(ref) for ref in refs])[0]


def evidence_as_written(index: DocumentIndex, source_id: str, written: Sequence[Any]) -> tuple[SourceRef, ...]:
    """:func:`canonical_written` without :meth:`SourceRef.ordered`: resolved, de-duplicated and sorted by position
    the same way, every range kept as written (one given backwards stays backwards, for a validator to reject).
    What a family would hold without lossless endpoint ordering (the retry economy's counterfactual)."""
    refs = [resolve_range(index, source_id, item.start_unit_id, item.end_unit_id)
            or SourceRef(source_id, item.start_unit_id, item.end_unit_id) for item in written]
    return _canonical(refs, ordered=False)[0]


def _unresolved(ref: SourceRef) -> SourceRef:
    """``ref`` without a resolution (it may carry one from another source's index)."""
    return ref if ref.first is None else SourceRef(ref.source_id, ref.start_unit_id, ref.end_unit_id)


def _canonical(refs: list[SourceRef], ordered: bool = True) -> tuple[tuple[SourceRef, ...], int]:
    """Canonical evidence of ``refs``, each resolved or not resolvable (no position), and how many
    were backwards. Equal ranges after ordering are kept once, the first written; their
    sort keys are distinct (positions identify unit ids), so the sort never meets a tie.
    ``ordered`` False: a range written backwards is kept as written (and sorted by its written start)."""
    kept: dict[tuple, tuple] = {}  # (source_id, start, end) in document order -> (sort key, ref)
    backwards = 0
    for ref in refs:
        first = ref.first
        if first is None:  # not resolvable
            triple = (ref.source_id, ref.start_unit_id, ref.end_unit_id)
            if triple not in kept:
                kept[triple] = ((1, 0, 0, repr(triple)), ref)
            continue
        last = ref.last
        if first <= last or not ordered:
            triple = (ref.source_id, ref.start_unit_id, ref.end_unit_id)
            if triple not in kept:
                kept[triple] = ((0, first, last, ""), ref)
        else:  # the same range written backwards: lossless ordering
            backwards += 1
            triple = (ref.source_id, ref.end_unit_id, ref.start_unit_id)
            if triple not in kept:
                kept[triple] = ((0, last, first, ""), ref.ordered())
    if len(kept) == 1:
        ((_, ref),) = kept.values()
        return (ref,), backwards
    return tuple(ref for _, ref in sorted(kept.values(), key=_key)), backwards


_key = itemgetter(0)  # no Python call per ref


def evidence_is_canonical(index: DocumentIndex, refs: Sequence[SourceRef]) -> bool:
    """Normalization invariant: forward, sorted by document position, no duplicates."""
    if len(refs) == 1:
        (resolved,) = refs
        if resolved.index is not index:
            resolved = resolve_range(index, resolved.source_id, resolved.start_unit_id, resolved.end_unit_id)
            if resolved is None:
                return True
        return resolved.first <= resolved.last
    keys = [evidence_sort_key(index, ref) for ref in refs]
    return (all(k[0] == 1 or k[1] <= k[2] for k in keys) and keys == sorted(keys)
            and len({(r.source_id, r.start_unit_id, r.end_unit_id) for r in refs}) == len(refs))
