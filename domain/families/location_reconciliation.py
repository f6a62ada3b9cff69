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
SPEC = FAMILY.spec(policy_version="location-reconciliation-policy-2")
