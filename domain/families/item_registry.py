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
SPEC = FAMILY.spec(policy_version="item-registry-policy-1")
