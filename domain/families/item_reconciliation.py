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
SPEC = FAMILY.spec(policy_version="item-reconciliation-policy-2", docs=FAMILY.docs(
    intro="Source-level (`chunk_id` `*`): one record is one item of the source's merged registry.",
    example={"name": "bag", "aliases": [], "description": "Named by TRAVIS: \"I put it in the bag of holding.\"",
             "members": [{"chunk_id": "x-0017", "name": "bag"}, {"chunk_id": "x-0039", "name": "bag"}],
             "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 483, "end_unit_id": 483},
                          {"source_id": "crd3:C1E001", "start_unit_id": 1164, "end_unit_id": 1164}]},
))
