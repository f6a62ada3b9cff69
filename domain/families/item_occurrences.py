"""item-occurrences: what happens to known items in an extraction chunk (contract §4).

``kind`` is one of acquired, used, transferred, lost, mentioned; ``item_name``
must be a name or alias of the source's accepted item registry; an item that
is acquired or transferred needs a holder (``holder_name`` non-null and
non-blank). A holder given for another kind may be null but not blank text.
"""

from __future__ import annotations

from typing import Literal, get_args

from domain.families.base import Adapted, EvaluationContext, EvidenceList, StrictModel
from domain.families.common import RecordIssues
from domain.families.occurrence_family import LIST_FIELD, OccurrenceFamily
from domain.issues import Issue

KEY = "item-occurrences"

ItemOccurrenceKind = Literal["acquired", "used", "transferred", "lost", "mentioned"]
KINDS: tuple[str, ...] = get_args(ItemOccurrenceKind)
# Kinds that only make sense with somebody holding the item afterwards.
NEEDS_HOLDER: dict[str, str] = {
    "acquired": "who acquires it",
    "transferred": "who receives it",
}


class ItemOccurrence(StrictModel):
    item_name: str
    kind: ItemOccurrenceKind
    holder_name: str | None
    evidence: EvidenceList


class ItemOccurrencesResponse(StrictModel):
    occurrences: tuple[ItemOccurrence, ...]


FAMILY = OccurrenceFamily(
    key=KEY, registry_kind="item", noun="item", name_field="item_name", kinds=KINDS,
    response_model=ItemOccurrencesResponse, has_holder=True,
)


def validate_holder(adapted: Adapted, ctx: EvaluationContext) -> tuple[Issue, ...]:
    """acquired/transferred need a holder; a holder is never blank text - every record, one pass."""
    out = RecordIssues(f"{KEY}.holder", LIST_FIELD, FAMILY.subject, ctx.transcript.index)
    for n, rec in enumerate(adapted.records):
        holder = rec.holder_name
        blank_holder = holder is not None and not holder.strip()
        if rec.kind in NEEDS_HOLDER and (holder is None or blank_holder):
            missing = "blank" if blank_holder else "null"
            out.add_for(n, rec, "holder_required", ".holder_name", f"kind {rec.kind} with {missing} holder_name",
                        f"`holder_name` is {missing}, but an item that is {rec.kind} always has a holder.",
                        f"Set `holder_name` to the name of {NEEDS_HOLDER[rec.kind]}, as the transcript "
                        f"names them; if the excerpt does not say, use another `kind` or leave the "
                        f"occurrence out.")
        elif blank_holder:
            out.add_for(n, rec, "blank_holder_name", ".holder_name", "blank holder_name",
                        "`holder_name` is blank text.",
                        "Give the name of who holds the item, or null when the excerpt does not say.")
    return out.issues()


SPEC = FAMILY.spec(policy_version="item-occurrences-policy-1", extra_validators=(validate_holder,), docs=FAMILY.docs(
    intro="One record is one thing that happens to or with a known item in the chunk.",
    kinds="What happens to the item: `acquired`, `used`, `transferred`, `lost` or only `mentioned`.",
    more_fields={"records[].holder_name": "Who holds the item after the occurrence; always given for `acquired` and "
                                          "`transferred`, otherwise null when not stated."},
    example={"item_name": "bag", "kind": "used", "holder_name": "TRAVIS",
             "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 483, "end_unit_id": 484}]},
))
