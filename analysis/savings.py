"""Retries saved by endpoint canonicalization (contract §5.3): accepted slots that would fail without it.

Three ways to the figure: re-evaluating every passing candidate of the archive with endpoint ordering
disabled (``canonicalization_savings``: slow, it needs the archive), what the job recorded as it went
(``recorded_savings``, from the manifest) and what the ground truth says (``saved_by_truth``). Pure.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping

from analysis.ground_truth import DefectVocabulary, TruthRow
from analysis.slots import Slot, slot_of
from domain.evaluate import evaluate_response
from domain.evidence import evidence_as_written
from domain.families import FAMILIES
from domain.families.base import ROLE_RECONCILIATION, ROLE_REGISTRY, Adapted, EvaluationContext, FamilySpec
from domain.families.common import order_records
from domain.families.response_structs import with_items
from domain.frozen import replaced
from domain.rows import PASSING_VERDICTS, VERDICT_ACCEPTED
from domain.source import Transcript


# --- retries saved by endpoint canonicalization --------------------------------------------

@dataclass(frozen=True, slots=True)
class _AdapterWithoutOrdering:
    """The family's own adapter, record by record, with evidence kept as written.

    Each response item is adapted on its own by the family (so every other
    field is mapped exactly as in the job), then its evidence is replaced by
    the written ranges, and records are ordered as usual.
    """

    spec: FamilySpec

    def __call__(self, response: Any, transcript: Transcript) -> Adapted:
        field_name = self.spec.list_field
        records = []
        for item in getattr(response, field_name):
            single = with_items(response, field_name, (item,))
            (record,) = self.spec.adapt(single, transcript).records
            evidence = evidence_as_written(transcript.index, transcript.source_id, item.evidence)
            records.append(replaced(record, evidence=evidence))
        return order_records(transcript.index, records)


@lru_cache(maxsize=None)
def without_endpoint_ordering(spec: FamilySpec) -> FamilySpec:
    """The family as it would be without lossless endpoint ordering (contract §5.3).

    Only the nine extraction families order endpoints; any other family is
    returned as it is. Reversed ranges then reach the strict source-reference
    validator, which rejects them.
    """
    if spec.chunk_kind != "extraction":
        return spec
    return dataclasses.replace(spec, adapt=_AdapterWithoutOrdering(spec))


class _AnyName:
    """A registry that knows every name: membership is left to the job's own verdict."""

    def __init__(self, kind: str | None) -> None:
        self.kind = kind

    def knows(self, name: str) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class ArchivedCandidate:
    """What the re-evaluation needs of one archived candidate."""

    candidate_id: str
    slot: Slot
    attempt: int
    raw_response: str


def passes_without_ordering(spec: FamilySpec, transcript: Transcript, candidate: ArchivedCandidate) -> bool:
    """Re-evaluate a candidate the job passed, with endpoint ordering disabled."""
    if spec.chunk_kind != "extraction":
        return True  # scenes are never reordered; reconciliations cite no endpoints of their own
    variant = without_endpoint_ordering(spec)
    registry = _AnyName(spec.registry_kind) if spec.needs_registry else None
    ctx = EvaluationContext(transcript, transcript.chunk(candidate.slot.chunk_id), registry)  # type: ignore[arg-type]
    return evaluate_response(variant, candidate.raw_response, ctx).passed


@dataclass(frozen=True, slots=True)
class CanonicalizationSavings:
    accepted_slots: int  # accepted slots considered (every one but the unavailable)
    would_retry: Mapping[str, int]  # family -> accepted slots with no attempt passing without ordering
    would_defer: Mapping[str, int]  # family -> accepted slots whose registry kind would be lost
    unavailable: int  # accepted slots whose transcript or candidates were not at hand

    @property
    def retries_saved(self) -> int:
        return sum(self.would_retry.values())

    @property
    def deferrals_saved(self) -> int:
        return sum(self.would_defer.values())


def canonicalization_savings(
    evaluations: Iterable[Mapping[str, Any]],
    transcripts: Mapping[str, Transcript],
    candidates: Mapping[str, ArchivedCandidate],
) -> CanonicalizationSavings:
    """Accepted slots that would have needed a producer retry without endpoint ordering.

    Every candidate the job passed (accepted or superseded) is evaluated
    again with the family's adapter variant that keeps ranges as written
    (:func:`without_endpoint_ordering`). A slot is saved when none of its
    attempts passes that way. Membership in a registry is the job's own
    verdict (the variant asks only about everything else). One knock-on effect
    is counted apart: an occurrence (or reconciliation) slot whose kind would
    have no accepted chunk registry in its source would be deferred. Slots
    the job did not accept are not affected: the variant only adds issues.
    """
    passed_by_slot: dict[Slot, list[str]] = defaultdict(list)
    accepted: set[Slot] = set()
    for row in evaluations:
        if row["verdict"] in PASSING_VERDICTS:
            passed_by_slot[slot_of(row)].append(row["candidate_id"])
        if row["verdict"] == VERDICT_ACCEPTED:
            accepted.add(slot_of(row))

    survives: dict[Slot, bool] = {}
    unavailable = 0
    for slot in sorted(accepted):
        spec, transcript = FAMILIES.get(slot.family), transcripts.get(slot.source_id)
        ids = passed_by_slot[slot]
        if spec is not None and without_endpoint_ordering(spec) is spec:
            survives[slot] = True  # the family never orders endpoints: the job's verdict stands
            continue
        if spec is None or transcript is None or any(cid not in candidates for cid in ids):
            unavailable += 1
            continue
        survives[slot] = any(passes_without_ordering(spec, transcript, candidates[cid]) for cid in sorted(ids))

    registry_kinds = {(slot.source_id, FAMILIES[slot.family].registry_kind)
                      for slot, ok in survives.items() if ok and FAMILIES[slot.family].role == ROLE_REGISTRY}
    would_retry: Counter[str] = Counter()
    would_defer: Counter[str] = Counter()
    for slot, ok in survives.items():
        spec = FAMILIES[slot.family]
        if not ok:
            would_retry[slot.family] += 1
        elif ((spec.needs_registry or spec.role == ROLE_RECONCILIATION)
              and (slot.source_id, spec.registry_kind) not in registry_kinds):
            would_defer[slot.family] += 1
    return CanonicalizationSavings(len(survives), dict(sorted(would_retry.items())),
                                   dict(sorted(would_defer.items())), unavailable)


def recorded_savings(manifest: Mapping[str, Any]) -> CanonicalizationSavings:
    """The same figures as :func:`canonicalization_savings`, as the job recorded them.

    The job counts, per family, the accepted slots none of whose passing
    attempts passes without endpoint ordering (each cited a reversed range the
    strict validator would reject) and the knock-on deferrals, in the
    manifest's ``endpoint_ordering`` block. Nothing is re-evaluated, so nothing
    is unavailable. ``canonicalization_savings`` stays as the slow reference.
    """
    block = manifest.get("endpoint_ordering", {})
    retries = block.get("retries_saved", {}).get("by_family", {})
    deferrals = block.get("deferrals_saved", {}).get("by_family", {})
    accepted = int(manifest.get("totals", {}).get("accepted", 0))
    return CanonicalizationSavings(accepted, {f: int(n) for f, n in sorted(retries.items()) if n},
                                   {f: int(n) for f, n in sorted(deferrals.items()) if n}, 0)


def saved_by_truth(
    truth: Mapping[str, TruthRow], evaluations: Iterable[Mapping[str, Any]], vocabulary: DefectVocabulary
) -> Mapping[str, int]:
    """The ground truth's count of the same thing: accepted slots none of whose
    evaluated attempts passes without endpoint ordering (family -> slots)."""
    rows_by_slot: dict[Slot, list[TruthRow]] = defaultdict(list)
    accepted: set[Slot] = set()
    for row in evaluations:
        if row["verdict"] == VERDICT_ACCEPTED:
            accepted.add(slot_of(row))
        known = truth.get(row["candidate_id"])
        if known is not None:
            rows_by_slot[slot_of(row)].append(known)
    saved = Counter(slot.family for slot in accepted
                    if rows_by_slot[slot] and not any(vocabulary.passes_without_canonicalization(r)
                                                      for r in rows_by_slot[slot]))
    return dict(sorted(saved.items()))
