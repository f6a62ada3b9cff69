"""The compiled schema checks (domain.families.schema_walk) report exactly what jsonschema's
Draft202012Validator.iter_errors reports: the same findings in the same order, each with the same path,
keyword, keyword value, instance, sub-schema and message."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from domain.assets import llm_schema_path, load_json_asset
from domain.evaluate import _structural_context
from domain.families import FAMILIES
from domain.families.common import llm_schema_walk, schema_errors, structural_issues
from domain.families.schema_walk import REPR_DEPTH, compiled_walk, violations
from test_family_contracts import FAMILY_KEYS, from_schema, json_values, mutate, paths_of


def jsonschema_findings(schema, document):
    return [(tuple(e.absolute_path), e.validator, e.validator_value, e.instance, e.schema, e.message)
            for e in Draft202012Validator(schema).iter_errors(document)]


def walk_findings(walk, document):
    return [(v.path, v.validator, v.validator_value, v.instance, v.schema, v.message)
            for v in violations(walk, document)]


def same_findings(ours, theirs):
    """Equal, and the instance and schema of each finding are the very objects jsonschema names (so True is
    never taken for 1, nor 1.0 for 1)."""
    return ours == theirs and all(a[3] is b[3] and a[4] is b[4] for a, b in zip(ours, theirs))


# Replacements that probe the type rules: booleans against integers, integral floats, nesting.
probing_values = st.one_of(json_values, st.sampled_from([True, False, 0, 1, 1.0, 2.5, -0.0, 2**63 - 1, -(2**63), 1e300, None,
                                                          [], {}, "", [[]], {"a": {}}]))


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_every_llm_schema_is_compiled(family):
    """The fast path is the one taken: no family's schema is left to jsonschema."""
    assert llm_schema_walk(family) is not None


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_walk_reports_what_jsonschema_reports_on_malformed_responses(family):
    schema = load_json_asset(llm_schema_path(family))
    walk = compiled_walk(schema)

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(schema), st.data())
    def check(valid, data):
        assert walk_findings(walk, valid) == []
        changed = valid
        for _ in range(data.draw(st.integers(1, 4))):
            path = data.draw(st.sampled_from(list(paths_of(changed))))
            how = data.draw(st.sampled_from(["replace", "drop", "extra", "extra"]))
            changed = mutate(changed, path, how, data.draw(probing_values))
        theirs = jsonschema_findings(schema, changed)
        ours = walk_findings(walk, changed)
        assert same_findings(ours, theirs), changed

    check()


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_walk_reports_what_jsonschema_reports_on_arbitrary_json(family):
    schema = load_json_asset(llm_schema_path(family))
    walk = compiled_walk(schema)
    list_field = FAMILIES[family].list_field

    @settings(max_examples=60, deadline=None)
    @given(json_values, st.lists(probing_values, max_size=3))
    def check(document, records):
        for candidate in (document, {list_field: records}, {list_field: [document]}):
            assert same_findings(walk_findings(walk, candidate), jsonschema_findings(schema, candidate)), candidate

    check()


def test_several_findings_at_one_place_keep_jsonschema_order():
    schema = load_json_asset(llm_schema_path("npc-occurrences"))
    walk = compiled_walk(schema)
    document = {"occurrences": [{"zeta": 1, "alpha": 2, "kind": 3},
                                {"npc_name": True, "kind": "lurking", "evidence": []}], "extra": None}
    ours = walk_findings(walk, document)
    assert same_findings(ours, jsonschema_findings(schema, document))
    assert [f[1] for f in ours] == ["additionalProperties", "additionalProperties", "required", "required", "type",
                                    "enum", "type", "enum", "minItems"]
    assert ours[0][5] == "Additional properties are not allowed ('extra' was unexpected)"
    assert ours[1][5] == "Additional properties are not allowed ('alpha', 'zeta' were unexpected)"


@pytest.mark.parametrize("schema", [
    True,
    {"type": "string", "pattern": "^a"},
    {"type": "object", "additionalProperties": True},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "additionalProperties": False, "patternProperties": {"^x": {}}},
    {"enum": [1, 2]},
    {"type": "decimal"},
    {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "string"}},
    {"type": "array", "items": False},
    {"type": "object", "properties": {"a": {"$ref": "#"}}},
])
def test_a_keyword_or_form_not_reproduced_is_left_to_jsonschema(schema):
    assert compiled_walk(schema) is None


def nested(depth):
    value = "x"
    for _ in range(depth):
        value = [value]
    return value


def test_an_instance_nested_too_deep_for_a_message_is_left_to_jsonschema():
    schema = load_json_asset(llm_schema_path("npc-occurrences"))
    walk = compiled_walk(schema)
    shallow = {"occurrences": [{"npc_name": nested(REPR_DEPTH - 1), "kind": "present",
                                "evidence": [{"start_unit_id": 1, "end_unit_id": 1}]}]}
    assert same_findings(walk_findings(walk, shallow), jsonschema_findings(schema, shallow))
    deep = {"occurrences": [{**shallow["occurrences"][0], "npc_name": nested(REPR_DEPTH + 1)}]}
    assert violations(walk, deep) is None
    # ... and the explanation is still jsonschema's, through the fallback.
    sctx = _structural_context(FAMILIES["npc-occurrences"])
    theirs = sorted(((list(e.absolute_path), e) for e in Draft202012Validator(schema).iter_errors(deep)),
                    key=lambda item: ([str(p) for p in item[0]], item[1].validator))
    assert [(p, e.validator, e.message) for p, e in schema_errors(sctx, deep)] == \
        [(p, e.validator, e.message) for p, e in theirs]
    assert [issue.reason_code for issue in structural_issues(sctx, deep)] == ["schema_type"]
