"""location-registry: the places of an extraction chunk (contract §4).

Identity as npc-registry; the accepted registry feeds location-occurrences membership.
"""

from __future__ import annotations

from domain.families.base import StrictModel
from domain.families.registry_family import RegistryEntry, RegistryFamily

KEY = "location-registry"


class LocationRegistryResponse(StrictModel):
    locations: tuple[RegistryEntry, ...]


FAMILY = RegistryFamily(
    key=KEY, kind="location", noun="location", list_field="locations", response_model=LocationRegistryResponse
)
SPEC = FAMILY.spec(policy_version="location-registry-policy-1", docs=FAMILY.docs(
    intro="One record is one location the chunk names.",
    example={"name": "mines", "aliases": [], "description": "Named by SAM: \"would have the mithral mines?\"",
             "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 236, "end_unit_id": 236}]},
))
