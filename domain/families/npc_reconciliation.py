"""npc-reconciliation: one NPC registry per source, merged from the accepted chunk registries (contract §4.1)."""

from __future__ import annotations

from domain.families.reconciliation import ReconciliationFamily, ReconciliationWords

KEY = "npc-reconciliation"

FAMILY = ReconciliationFamily(
    key=KEY,
    kind="npc",
    words=ReconciliationWords(
        noun="NPC",
        one="an NPC",
        plural="NPCs",
        supplement="Player characters are not NPCs: never merge an NPC with a player character.",
    ),
)
SPEC = FAMILY.spec(policy_version="npc-reconciliation-policy-2", docs=FAMILY.docs(
    intro="Source-level (`chunk_id` `*`): one record is one NPC of the source's merged registry, the chunk registry "
          "entries that name the same NPC brought together.",
    example={"name": "Alcove", "aliases": [], "description": "Named by TALIESIN: \"Can we pass by the Alcove?\"",
             "members": [{"chunk_id": "x-0059", "name": "Alcove"}, {"chunk_id": "x-0060", "name": "Alcove"}],
             "evidence": [{"source_id": "crd3:C1E035", "start_unit_id": 1764, "end_unit_id": 1764},
                          {"source_id": "crd3:C1E035", "start_unit_id": 1774, "end_unit_id": 1776}]},
))
