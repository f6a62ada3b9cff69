"""The family registry: one table from module key to :class:`FamilySpec`.

Adding a family is its module (listed here), its assets under ``assets/dnd/<key>/`` and its
simulator builder (``sample/sim_records.py``, ``@simulates``): docs/internal/dnd.md, "How to add a
family". Nothing in ``transforms/`` or ``pipelines/`` changes.
"""

from __future__ import annotations

from domain.families import (
    combat_turns,
    enemy_events,
    item_occurrences,
    item_reconciliation,
    item_registry,
    location_occurrences,
    location_reconciliation,
    location_registry,
    npc_occurrences,
    npc_reconciliation,
    npc_registry,
    scene_descriptions,
    spells,
)
from domain.families.base import FamilySpec

_MODULES = (
    spells,
    npc_registry,
    npc_reconciliation,
    npc_occurrences,
    item_registry,
    item_reconciliation,
    item_occurrences,
    location_registry,
    location_reconciliation,
    location_occurrences,
    combat_turns,
    enemy_events,
    scene_descriptions,
)

FAMILIES: dict[str, FamilySpec] = {m.SPEC.key: m.SPEC for m in _MODULES if m.SPEC is not None}

