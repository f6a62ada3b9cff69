"""npc-registry: the non-player characters of an extraction chunk (contract §4).

Names and aliases are non-blank and unique across entries after case and
whitespace folding; the accepted registry feeds npc-occurrences membership.
"""

from __future__ import annotations

from domain.families.base import StrictModel
from domain.judges import JudgeSpec
from domain.families.registry_family import RegistryEntry, RegistryFamily

KEY = "npc-registry"


class NpcRegistryResponse(StrictModel):
    npcs: tuple[RegistryEntry, ...]


FAMILY = RegistryFamily(key=KEY, kind="npc", noun="NPC", list_field="npcs", response_model=NpcRegistryResponse)
SPEC = FAMILY.spec(policy_version="npc-registry-policy-1", docs=FAMILY.docs(
    intro="One record is one non-player character the chunk names (player characters are not NPCs).",
    example={"name": "Lord Greyspine", "aliases": ["Greyspine"], "description": "Named by TALIESIN: \"Mostly we are "
             "looking for Lord Greyspine, if I recall. We have business with him.\"",
             "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 181, "end_unit_id": 182},
                          {"source_id": "crd3:C1E001", "start_unit_id": 200, "end_unit_id": 200}]},
), judges=(
    JudgeSpec("npc-identity", KEY, "an entry is neither a player character nor a cast member at the table"),))
