"""item-reconciliation: one item registry per source, merged from the accepted chunk registries (contract §4.1)."""

from __future__ import annotations

from domain.families.reconciliation import ReconciliationFamily, ReconciliationWords

KEY = "item-reconciliation"

FAMILY = ReconciliationFamily(
    key=KEY,
    kind="item",
    words=ReconciliationWords(
        noun="item",
        one="an item",
        plural="items",
        supplement="Two objects of the same sort (two healing potions) are one item only when the entries show "
                   "they are the same object.",
    ),
)
SPEC = FAMILY.spec(policy_version="item-reconciliation-policy-2")
