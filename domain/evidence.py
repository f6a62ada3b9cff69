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
from typing import Any, Iterable

from domain.source import Chunk, DocumentIndex, chunk_contains_positions


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


def _resolved_positions(index: DocumentIndex | None, ref: SourceRef | None) -> tuple[int, int] | None:
    """Both endpoint positions when ``ref`` belongs to ``index``'s source and resolves."""
    if index is None or ref is None or ref.source_id != index.source_id:
        return None
    start = index.position(ref.start_unit_id)
    end = index.position(ref.end_unit_id)
    if start is None or end is None:
        return None
    return start, end


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
    positions = _resolved_positions(index, ref)
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
    if chunk is None:
        return False
    positions = _resolved_positions(index, ref)
    if positions is None:
        return False
    first, last = positions
    if first > last:
        return False
    return chunk_contains_positions(chunk, first, last)


def evidence_sort_key(index: DocumentIndex, ref: SourceRef) -> tuple:
    """Document-position order; unresolvable refs sort last, stably by their text."""
    positions = _resolved_positions(index, ref)
    if positions is None:
        return (1, 0, 0, repr((ref.source_id, ref.start_unit_id, ref.end_unit_id)))
    return (0, positions[0], positions[1], "")


def canonical_evidence(index: DocumentIndex, source_id: str, refs: Iterable[SourceRef]) -> tuple[SourceRef, ...]:
    """Order every endpoint pair, then sort by document position and de-duplicate."""
    ordered = {order_endpoints(index, source_id, ref) for ref in refs}
    return tuple(sorted(ordered, key=lambda ref: evidence_sort_key(index, ref)))


def earliest_evidence_unit_id(index: DocumentIndex, refs: Iterable[SourceRef]) -> int | None:
    """The unit id of the earliest resolvable start position, or None."""
    best: tuple[int, int] | None = None
    for ref in refs:
        positions = _resolved_positions(index, ref)
        if positions is not None and (best is None or positions[0] < best[0]):
            best = (positions[0], ref.start_unit_id)
    return None if best is None else best[1]


def evidence_is_canonical(index: DocumentIndex, refs: tuple[SourceRef, ...]) -> bool:
    """Normalization invariant: forward, sorted by document position, no duplicates."""
    keys = [evidence_sort_key(index, ref) for ref in refs]
    forward = all(k[0] == 1 or k[1] <= k[2] for k in keys)
    return forward and keys == sorted(keys) and len(set(refs)) == len(refs)
