"""What changed in a slot's records (issue 42 item 3, ``analysis.record_diff``): every record counted once,
named as its family names it, the fields that differ, and a bound that says what it left out."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.record_diff import (RECORD_ADDED, RECORD_CHANGED, RECORD_CHANGES, RECORD_REMOVED, RECORDS_LISTED,
                                  VALUE_CHARS, diff_records, field_changes, shown_value)
from domain import schemas


def spell(name, caster, level=1, start=10, end=12, targets=()):
    return {"spell_name": name, "caster_name": caster,
            "cast": {"level": level, "as_ritual": False, "target_names": list(targets)},
            "evidence": [{"source_id": "crd3:S1", "start_unit_id": start, "end_unit_id": end}]}


def test_the_demos_kind_of_change_reads_as_which_spell_changed_and_how():
    a = [spell("Healing Word", "TRAVIS", 1, 327, 329, ["Nostoc"]), spell("Fireball", "ORION", 5, 769, 770),
         spell("Shield", "SAM")]
    b = [spell("Shield", "SAM"), spell("Healing Word", "SAM", 1, 327, 327), spell("Fireball", "ORION", 3, 757, 759)]
    diff = diff_records("spells", a, b)
    assert (diff.added, diff.removed, diff.changed, diff.unchanged, diff.more) == (1, 1, 1, 1, 0)
    assert diff.as_row()["listed"] == [
        {"change": "changed", "record": 'The spell "Fireball" cast by "ORION"',
         "fields": [{"field": "cast.level", "a": "5", "b": "3"},
                    {"field": "evidence", "a": "units 769–770", "b": "units 757–759"}]},
        {"change": "added", "record": 'The spell "Healing Word" cast by "SAM"', "fields": []},
        {"change": "removed", "record": 'The spell "Healing Word" cast by "TRAVIS"', "fields": []},
    ]


def test_a_fix_lists_its_records_as_added_and_a_regression_as_removed():
    records = [spell("Shield", "SAM"), spell("Bless", "PIKE")]
    assert [c.change for c in diff_records("spells", [], records).listed] == [RECORD_ADDED, RECORD_ADDED]
    assert [c.record for c in diff_records("spells", records, []).listed] == [
        'The spell "Shield" cast by "SAM"', 'The spell "Bless" cast by "PIKE"']


def test_the_bound_says_how_many_more():
    b = [spell(f"Spell {n}", "SAM") for n in range(RECORDS_LISTED + 5)]
    diff = diff_records("spells", [], b)
    assert len(diff.listed) == RECORDS_LISTED and diff.more == 5 and diff.as_row()["more"] == 5


def test_values_are_shown_short_and_evidence_as_unit_ranges():
    assert shown_value([{"source_id": "s", "start_unit_id": 4, "end_unit_id": 4},
                        {"source_id": "s", "start_unit_id": 7, "end_unit_id": 9}]) == "units 4, 7–9"
    assert shown_value("x" * 500) == '"' + "x" * (VALUE_CHARS - 2) + "…"
    assert shown_value(None) == "null" and shown_value(["Grog"]) == '["Grog"]'
    assert field_changes({"name": "a", "aliases": []}, {"name": "a", "description": "b"}) == (
        field_changes({"aliases": []}, {})[0], field_changes({}, {"description": "b"})[0])


def test_the_schema_spells_the_same_names_and_bound():
    assert schemas.RECORD_CHANGES == RECORD_CHANGES and schemas.RECORDS_LISTED == RECORDS_LISTED


# --- properties ------------------------------------------------------------------------------------------

POOL = [spell("Shield", "SAM"), spell("Shield", "SAM", 2), spell("Shield", "LIAM"), spell("Bless", "PIKE"),
        spell("Bless", "PIKE", 1, 3, 4), {"spell_name": "Odd"}, {}]
records = st.lists(st.sampled_from(POOL), max_size=8)


@settings(max_examples=300, deadline=None)
@given(a=records, b=records, limit=st.integers(0, 6))
def test_every_record_is_counted_once_and_the_listing_is_bounded(a, b, limit):
    diff = diff_records("spells", a, b, limit)
    assert diff.unchanged + diff.changed + diff.removed == len(a)
    assert diff.unchanged + diff.changed + diff.added == len(b)
    assert len(diff.listed) == min(limit, diff.added + diff.removed + diff.changed)
    assert diff.more == diff.added + diff.removed + diff.changed - len(diff.listed) >= 0
    order = [RECORD_CHANGES.index(c.change) for c in diff.listed]
    assert order == sorted(order)  # changed, then added, then removed
    for change in diff.listed:
        assert (change.change == RECORD_CHANGED) == bool(change.fields)
        assert all(f.a != f.b for f in change.fields)
    reverse = diff_records("spells", b, a, limit)
    assert (reverse.added, reverse.removed, reverse.changed, reverse.unchanged) == (
        diff.removed, diff.added, diff.changed, diff.unchanged)


@settings(max_examples=200, deadline=None)
@given(a=records, order=st.randoms(use_true_random=False))
def test_the_same_records_in_any_order_change_nothing(a, order):
    b = list(a)
    order.shuffle(b)
    diff = diff_records("spells", a, b)
    assert (diff.added, diff.removed, diff.changed, diff.unchanged, diff.listed) == (0, 0, 0, len(a), ())
