"""npc-occurrences: where known NPCs appear in an extraction chunk (contract §4).

``kind`` is one of present, speaking, mentioned, acting; ``npc_name`` must be a
name or alias of the source's accepted NPC registry.
"""

from __future__ import annotations

from typing import Literal, get_args

from domain.families.base import EvidenceList, StrictModel
from domain.families.occurrence_family import OccurrenceFamily

KEY = "npc-occurrences"

NpcOccurrenceKind = Literal["present", "speaking", "mentioned", "acting"]
KINDS: tuple[str, ...] = get_args(NpcOccurrenceKind)


class NpcOccurrence(StrictModel):
    npc_name: str
    kind: NpcOccurrenceKind
    evidence: EvidenceList


class NpcOccurrencesResponse(StrictModel):
    occurrences: tuple[NpcOccurrence, ...]


FAMILY = OccurrenceFamily(
    key=KEY, registry_kind="npc", noun="NPC", name_field="npc_name", kinds=KINDS,
    response_model=NpcOccurrencesResponse,
)
SPEC = FAMILY.spec(policy_version="npc-occurrences-policy-1", docs=FAMILY.docs(
    intro="One record is one appearance or mention of a known NPC in the chunk.",
    kinds="How the NPC occurs: `present` (there, silent), `speaking`, `acting` or only `mentioned`.",
    example={"npc_name": "Cassandra", "kind": "acting",
             "evidence": [{"source_id": "crd3:C1E035", "start_unit_id": 390, "end_unit_id": 390}]},
))
