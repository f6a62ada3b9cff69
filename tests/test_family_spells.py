import re

import orjson

from domain.evaluate import evaluate_response
from domain.families import FAMILIES
from domain.families.base import EvaluationContext
from domain.issues import render_guidance
from domain.source import transcript_from_record

SPEC = FAMILIES["spells"]
T = transcript_from_record({
    "source_id": "src-9",
    "units": [{"unit_id": u, "speaker": "SAM", "text": ""} for u in (10, 3, 7, 20, 1, 2)],
    "chunks": [{"chunk_id": "chunk-1", "kind": "extraction", "unit_ids": [10, 3, 7]}],
})
CTX = EvaluationContext(T, T.chunk("chunk-1"))


def spell(name, caster, level, start, end, ritual=False, targets=()):
    return {"spell_name": name, "caster_name": caster,
            "cast": {"level": level, "as_ritual": ritual, "target_names": list(targets)},
            "evidence": [{"start_unit_id": start, "end_unit_id": end}]}


def evaluate(*spells):
    return evaluate_response(SPEC, orjson.dumps({"spells": list(spells)}).decode(), CTX)


def test_reversed_resolvable_range_becomes_forward_and_non_monotonic_forward_stays():
    result = evaluate(spell("Shield", "SAM", 1, 7, 10), spell("Fireball", "SAM", 3, 10, 3))
    assert result.passed
    ranges = [(r.evidence[0].start_unit_id, r.evidence[0].end_unit_id) for r in result.adapted.records]
    assert ranges == [(10, 7), (10, 3)]


def test_independent_defects_are_reported_together():
    result = evaluate(
        spell("Fire Bolt", "SAM", 2, 10, 10, ritual=True),  # cantrip at level 2, and not a ritual
        spell("Fireball", "", 1, 3, 20, targets=[" "]),  # blank caster, below base level, blank target, leaves chunk
        spell("Shield", "LIAM", 12, 99, 7),  # level out of range, unresolved unit
    )
    codes = sorted(i.reason_code for i in result.issues)
    assert codes == sorted(["cantrip_level", "not_a_ritual", "blank_caster_name", "below_base_level",
                            "blank_target_name", "span_outside_chunk", "level_out_of_range", "unresolved_unit"])
    text = render_guidance(result.issues)
    for expected in ('"Fire Bolt"', '"Fireball"', '"Shield"', "units 3–20", "`cast.level`", "`cast.as_ritual`"):
        assert expected in text
    for forbidden in ("src-9", "chunk-1", "sha256", "cantrip_level", "spells.", "spells[", "/spells/"):
        assert forbidden not in text
    assert not re.search(r"\[\d+\]", text)


def test_unknown_spells_are_allowed_and_structural_failures_are_contextual():
    assert evaluate(spell("Grog's Mighty Shout", "TRAVIS", 9, 3, 7)).passed
    bad = evaluate_response(SPEC, '{"spells": [{"spell_name": "Sleep", "caster_name": "SAM", "cast": '
                                  '{"level": "one", "as_ritual": false, "target_names": []}, "evidence": []}]}', CTX)
    text = render_guidance(bad.issues)
    assert not bad.passed and '"Sleep"' in text and "`level`" in text and "`evidence`" in text
    truncated = evaluate_response(SPEC, '{"spells": [{"spell_name": "Sle', CTX)
    assert not truncated.passed and "JSON" in render_guidance(truncated.issues)


def test_same_candidate_same_bytes():
    a = evaluate(spell("Fire Bolt", "SAM", 2, 10, 10, ritual=True))
    b = evaluate(spell("Fire Bolt", "SAM", 2, 10, 10, ritual=True))
    assert render_guidance(a.issues) == render_guidance(b.issues)


def test_blank_names_are_named_by_what_the_record_still_says():
    result = evaluate(spell("", "SAM", 1, 10, 7), spell("Shield", "SAM", 1, 7, 10))
    assert [(i.reason_code, i.location) for i in result.issues] == [("blank_spell_name", "spells[0].spell_name")]
    assert "`spell_name` is blank." in render_guidance(result.issues)
