"""item-registry: the notable items of an extraction chunk (contract §4).

Identity as npc-registry; the accepted registry feeds item-occurrences membership.
"""

from __future__ import annotations

from domain.families.base import StrictModel
from domain.families.registry_family import RegistryEntry, RegistryFamily

KEY = "item-registry"


class ItemRegistryResponse(StrictModel):
    items: tuple[RegistryEntry, ...]


FAMILY = RegistryFamily(key=KEY, kind="item", noun="item", list_field="items", response_model=ItemRegistryResponse)
SPEC = FAMILY.spec(policy_version="item-registry-policy-1", docs=FAMILY.docs(
    intro="One record is one item the chunk names.",
    example={"name": "dagger", "aliases": [], "description": "Named by MATT: \"As you pull back the dagger, his hand "
             "reaches up and grabs your wrist. His head slowly tur\"",
             "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 936, "end_unit_id": 937}]},
))
