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
SPEC = FAMILY.spec(policy_version="npc-reconciliation-policy-2")
