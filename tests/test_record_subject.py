"""A family's records have one name (issue 42 item 3): ``FamilySpec.record_subject`` names a record in its
durable shape (an artifact's), and it is the name the family's validators give the same record in guidance,
the name a judge's problem uses (``subject_of``) and the name a comparison lists a changed record by."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.evidence import SourceRef
from domain.families import FAMILIES, combat_turns, enemy_events, scene_descriptions, spells
from domain.families import item_occurrences, item_registry, npc_occurrences, npc_reconciliation, npc_registry
from domain.families.occurrence_family import OccurrenceRecord
from domain.families.reconciliation import EntityRef, ReconciledRecord, entity_subject
from domain.families.registry_family import RegistryRecord

# Names as a model writes them: blank, spaced, quoted, long, odd characters.
names = st.one_of(st.sampled_from(["", "  ", "Grog", 'Pike "the cleric"', "Vex`ahlia", "x" * 200]), st.text(max_size=30))
EVIDENCE = (SourceRef("crd3:S1", 3, 7),)


@settings(max_examples=200, deadline=None)
@given(name=names, other=names, kind=st.sampled_from(["held", "mentioned", "used"]), round_=st.integers(-2, 40))
def test_each_family_names_a_record_alike_in_guidance_and_in_its_durable_shape(name, other, kind, round_):
    """The validators' subject of a typed record is ``record_subject`` of its durable record: one definition."""
    typed = {
        "spells": (spells.SpellRecord(name, other, 3, False, (), EVIDENCE), spells.subject),
        "combat-turns": (combat_turns.TurnRecord(round_, name, "attack", (other,), EVIDENCE), combat_turns.subject),
        "enemy-events": (enemy_events.EventRecord(name, "engaged", EVIDENCE), enemy_events.subject),
        "scene-descriptions": (scene_descriptions.SceneRecord("crd3:S1", "combat", name, other, 3, 7),
                               scene_descriptions.subject),
        "npc-registry": (RegistryRecord(name, (other,), "", EVIDENCE), npc_registry.FAMILY.subject),
        "item-registry": (RegistryRecord(name, (), other, EVIDENCE), item_registry.FAMILY.subject),
        "npc-occurrences": (OccurrenceRecord(name, "speaking", None, EVIDENCE), npc_occurrences.FAMILY.subject),
        "item-occurrences": (OccurrenceRecord(name, kind, other or None, EVIDENCE), item_occurrences.FAMILY.subject),
        "npc-reconciliation": (ReconciledRecord(name, (other,), "", ("E1",), (), EVIDENCE),
                               lambda rec: entity_subject(npc_reconciliation.FAMILY.words, EntityRef.of(rec))),
    }
    for family, (record, subject) in typed.items():
        spec = FAMILIES[family]
        assert spec.subject_of(record) == spec.record_subject(spec.durable_record(record)) == subject(record), family


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("record", [{}, {"name": 3, "spell_name": None, "round": "2", "kind": ["x"]}, []])
def test_any_mapping_is_named_without_raising(family, record):
    """An artifact's record read back (any format) is named, a field missing or of another type read as blank."""
    name = FAMILIES[family].record_subject(record)
    assert isinstance(name, str) and name and "\n" not in name


def test_every_family_declares_its_record_names():
    names = {key: spec.record_subject({}) for key, spec in FAMILIES.items()}
    assert names["spells"] == "The spell (blank) cast by (blank)"
    assert FAMILIES["spells"].record_subject({"spell_name": "Shield", "caster_name": "SAM"}) == \
        'The spell "Shield" cast by "SAM"'
    assert FAMILIES["combat-turns"].record_subject({"actor_name": "Vex", "round": 2}) == 'The turn of "Vex" in round 2'
    assert FAMILIES["npc-reconciliation"].record_subject({"name": "Grog"}) == 'The NPC "Grog"'
    assert FAMILIES["location-occurrences"].record_subject({"location_name": "Emon", "kind": "present"}) == \
        'The "present" occurrence of the location "Emon"'
