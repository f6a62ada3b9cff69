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
    example={"name": "Lady Kima", "aliases": ["Kima"], "description": "Named by MATT: \"time friend of hers, Lady Kima "
             "of Vord, who is a very well known and very well respected h\"",
             "members": [{"chunk_id": "x-0002", "name": "Lady Kima"}, {"chunk_id": "x-0010", "name": "Lady Kima"}],
             "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 52, "end_unit_id": 52},
                          {"source_id": "crd3:C1E001", "start_unit_id": 298, "end_unit_id": 298}]},
))
