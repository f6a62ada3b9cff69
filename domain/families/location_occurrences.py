"""location-occurrences: where known locations figure in an extraction chunk (contract §4).

``kind`` is one of visited, mentioned, departed; ``location_name`` must be a
name or alias of the source's accepted location registry.
"""

from __future__ import annotations

from typing import Literal, get_args

from domain.families.base import EvidenceList, StrictModel
from domain.families.occurrence_family import OccurrenceFamily

KEY = "location-occurrences"

LocationOccurrenceKind = Literal["visited", "mentioned", "departed"]
KINDS: tuple[str, ...] = get_args(LocationOccurrenceKind)


class LocationOccurrence(StrictModel):
    location_name: str
    kind: LocationOccurrenceKind
    evidence: EvidenceList


class LocationOccurrencesResponse(StrictModel):
    occurrences: tuple[LocationOccurrence, ...]


FAMILY = OccurrenceFamily(
    key=KEY, registry_kind="location", noun="location", name_field="location_name", kinds=KINDS,
    response_model=LocationOccurrencesResponse,
)
SPEC = FAMILY.spec(policy_version="location-occurrences-policy-1", docs=FAMILY.docs(
    intro="One record is one visit, departure or mention of a known location in the chunk.",
    kinds="How the location occurs: `visited`, `departed` or only `mentioned`.",
    example={"location_name": "mine", "kind": "visited",
             "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 1438, "end_unit_id": 1440}]},
))
