"""location-reconciliation: one location registry per source, merged from the accepted chunk registries (contract §4.1)."""

from __future__ import annotations

from domain.families.reconciliation import ReconciliationFamily, ReconciliationWords

KEY = "location-reconciliation"

FAMILY = ReconciliationFamily(
    key=KEY,
    kind="location",
    words=ReconciliationWords(
        noun="location",
        one="a location",
        plural="locations",
        supplement="A place inside another place (a tavern in a city) is a location of its own, not an alias "
                   "of the larger place.",
    ),
)
SPEC = FAMILY.spec(policy_version="location-reconciliation-policy-2", docs=FAMILY.docs(
    intro="Source-level (`chunk_id` `*`): one record is one location of the source's merged registry.",
    example={"name": "cave", "aliases": [], "description": "Named by MATT: \"with the back of the cave wall.\"",
             "members": [{"chunk_id": "x-0026", "name": "cave"}, {"chunk_id": "x-0055", "name": "cave"}],
             "evidence": [{"source_id": "crd3:C1E001", "start_unit_id": 768, "end_unit_id": 768},
                          {"source_id": "crd3:C1E001", "start_unit_id": 1649, "end_unit_id": 1650}]},
))
