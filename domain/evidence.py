"""Shared evidence mechanics for every extraction family.

Each operation exists once, here. Families call them; none compares endpoints
or walks a chunk on its own. All functions are pure: they return new values
and never mutate their inputs.

Two different things happen to a cited range, and they must not be confused:

* lossless endpoint ordering (:func:`order_endpoints`): a range whose two
  endpoints both resolve in the current source but were given in reverse
  document order is the same range written backwards. It is rewritten
  silently, with no warning, diagnostic or retry.
* malformed-reference validation (:func:`span_within_chunk` and the family
  validators): a range that cannot be resolved, belongs to another source or
  leaves the chunk is a real defect and is rejected, never repaired.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from domain.frozen import quick_init
from domain.source import Chunk, DocumentIndex, chunk_contains_positions


@quick_init
@dataclass(frozen=True, slots=True)
class SourceRef:
    """A cited range ``(source_id, start_unit_id, end_unit_id)``.

    Unit ids are kept as the model gave them (``Any``): an unresolvable value
    must survive untouched so a validator can reject it.
    """

    source_id: str | None
    start_unit_id: Any
    end_unit_id: Any

    def as_record(self) -> dict[str, Any]:
        return {"source_id": self.source_id, "start_unit_id": self.start_unit_id, "end_unit_id": self.end_unit_id}


def range_positions(source_id: str, positions: Mapping[int, int], ref_source: str | None,
                    start: Any, end: Any) -> tuple[int, int] | None:
    """Document positions of a cited range's two endpoints; None when the range cites a
    source other than ``source_id`` or an endpoint is not a unit of it (``positions``: its
    index's unit id -> document position).

    The one lookup every cited range goes through. It takes the index's parts, not the
    index: it runs for each range of each record of each candidate, several times.
    """
    if ref_source == source_id and type(start) is int and type(end) is int:  # bool is never a unit id
        first = positions.get(start)
        if first is not None:
            last = positions.get(end)
            if last is not None:
                return first, last
    return None


def order_endpoints(index: DocumentIndex | None, source_id: str | None, ref: SourceRef | None) -> SourceRef | None:
    """Return ``ref`` with its endpoints in document order.

    Swaps only when ``ref`` belongs to ``source_id`` (the current source, which
    ``index`` describes), both ids resolve, and the start sits later in the
    document than the end. Anything else - forward, single-unit, wrong-source,
    missing, non-positive or unresolved references - comes back unchanged, so
    the strict validators still see and reject what cannot be safely ordered.
    """
    if ref is None or index is None or source_id != index.source_id or ref.source_id != source_id:
        return ref
    positions = range_positions(index.source_id, index.positions, ref.source_id, ref.start_unit_id, ref.end_unit_id)
    if positions is None or positions[0] <= positions[1]:
        return ref
    return SourceRef(ref.source_id, ref.end_unit_id, ref.start_unit_id)


def span_within_chunk(index: DocumentIndex | None, chunk: Chunk | None, ref: SourceRef | None) -> bool:
    """True when every unit of ``ref``'s inclusive document-ordered span is in ``chunk``.

    Source identity must match, endpoints resolve through the index (never by
    numeric order), and a reversed range is not a span: it returns False so
    the strict validator rejects it. None or unresolved inputs give False. The
    wording of any error belongs to the calling validator.
    """
    if chunk is None or index is None or ref is None:
        return False
    positions = range_positions(index.source_id, index.positions, ref.source_id, ref.start_unit_id, ref.end_unit_id)
    if positions is None:
        return False
    first, last = positions
    if first > last:
        return False
    return chunk_contains_positions(chunk, first, last)


def evidence_sort_key(index: DocumentIndex, ref: SourceRef) -> tuple:
    """Document-position order; unresolvable refs sort last, stably by their text."""
    positions = range_positions(index.source_id, index.positions, ref.source_id, ref.start_unit_id, ref.end_unit_id)
    if positions is None:
        return (1, 0, 0, repr((ref.source_id, ref.start_unit_id, ref.end_unit_id)))
    return (0, positions[0], positions[1], "")


def evidence_sort_keys(index: DocumentIndex, refs: Iterable[SourceRef]) -> list[tuple]:
    """``evidence_sort_key`` of each ref, without a call per ref to it: these run for every
    record of every candidate."""
    source_id, positions = index.source_id, index.positions
    keys = []
    for ref in refs:
        ref_source, start, end = ref.source_id, ref.start_unit_id, ref.end_unit_id
        resolved = range_positions(source_id, positions, ref_source, start, end)
        if resolved is None:
            keys.append((1, 0, 0, repr((ref_source, start, end))))
        else:
            first, last = resolved
            keys.append((0, first, last, ""))
    return keys


def canonical_evidence(index: DocumentIndex, source_id: str, refs: Iterable[SourceRef]) -> tuple[SourceRef, ...]:
    """Order every endpoint pair, then sort by document position and de-duplicate."""
    if source_id != index.source_id:  # order_endpoints leaves every ref as it is
        ordered = set(refs)
        return tuple(sorted(ordered, key=lambda ref: evidence_sort_key(index, ref)))
    return canonical_spans(index, ((ref.source_id, ref.start_unit_id, ref.end_unit_id) for ref in refs))


def canonical_spans(index: DocumentIndex, spans: Iterable[tuple[str | None, Any, Any]]) -> tuple[SourceRef, ...]:
    """``canonical_evidence`` of refs given as (source_id, start, end), for the source ``index``
    describes: endpoints ordered, sorted by document position, de-duplicated. A SourceRef is
    built only for each range kept."""
    source_id, positions = index.source_id, index.positions
    keyed: dict[tuple, tuple] = {}  # (source_id, start, end) after ordering -> sort key; equal refs once
    for span in spans:
        ref_source, start, end = span
        resolved = range_positions(source_id, positions, ref_source, start, end)
        if resolved is None:
            keyed.setdefault(span, (1, 0, 0, repr(span)))
            continue
        first, last = resolved
        if first <= last:
            keyed.setdefault(span, (0, first, last, ""))
        else:  # the same range written backwards: lossless ordering
            keyed.setdefault((ref_source, end, start), (0, last, first, ""))
    if len(keyed) == 1:
        ((ref_source, start, end),) = keyed
        return (SourceRef(ref_source, start, end),)
    # Keys are distinct for distinct refs (positions identify unit ids), so ties never arise.
    return tuple(SourceRef(*span) for span, _ in sorted(keyed.items(), key=_second))


def canonical_span(index: DocumentIndex, ref_source: str | None, start: Any, end: Any) -> tuple[SourceRef]:
    """``canonical_spans`` of one range (most records cite one): its endpoints ordered, with
    no sorting or de-duplication to do."""
    resolved = range_positions(index.source_id, index.positions, ref_source, start, end)
    if resolved is not None and resolved[0] > resolved[1]:  # written backwards: lossless ordering
        return (SourceRef(ref_source, end, start),)
    return (SourceRef(ref_source, start, end),)


def _second(item: tuple) -> Any:
    return item[1]


def earliest_position(index: DocumentIndex, refs: Iterable[SourceRef]) -> tuple[int, int] | None:
    """(document position, unit id) of the earliest resolvable start, or None."""
    source_id, positions = index.source_id, index.positions
    best: tuple[int, int] | None = None
    for ref in refs:
        start = ref.start_unit_id
        resolved = range_positions(source_id, positions, ref.source_id, start, ref.end_unit_id)
        if resolved is not None and (best is None or resolved[0] < best[0]):
            best = (resolved[0], start)
    return best


def earliest_of_sort_keys(index: DocumentIndex, keys: list[tuple]) -> tuple[int, int] | None:
    """``earliest_position`` of refs read from their ``evidence_sort_keys``, for a caller that
    has them (the normalization invariants): resolvable keys sort first, by start position,
    so the least key is the earliest start when it resolves."""
    if not keys:
        return None
    least = min(keys)
    if least[0]:
        return None
    return least[1], index.unit_ids_in_order[least[1]]


def earliest_evidence_unit_id(index: DocumentIndex, refs: Iterable[SourceRef]) -> int | None:
    """The unit id of the earliest resolvable start position, or None."""
    best = earliest_position(index, refs)
    return None if best is None else best[1]


def evidence_is_canonical(index: DocumentIndex, refs: tuple[SourceRef, ...]) -> bool:
    """Normalization invariant: forward, sorted by document position, no duplicates."""
    return sort_keys_are_canonical(evidence_sort_keys(index, refs), refs)


def sort_keys_are_canonical(keys: list[tuple], refs: tuple[SourceRef, ...]) -> bool:
    """``evidence_is_canonical`` of ``refs`` given their ``evidence_sort_keys``."""
    if len(keys) == 1:
        key = keys[0]
        return key[0] == 1 or key[1] <= key[2]
    forward = all(k[0] == 1 or k[1] <= k[2] for k in keys)
    return (forward and keys == sorted(keys)
            and len({(r.source_id, r.start_unit_id, r.end_unit_id) for r in refs}) == len(refs))
