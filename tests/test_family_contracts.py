"""Contracts every family must meet, checked for all registered families at once."""

import dataclasses

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from domain.assets import llm_schema_path, load_json_asset, read_asset
from domain.families import FAMILIES
from domain.families.base import _policy_fingerprint
from domain.schemas import generated_schemas

FAMILY_KEYS = sorted(FAMILIES)
FORBIDDEN_KEYWORDS = {"uniqueItems", "if", "then", "else", "oneOf", "anyOf", "allOf", "not", "dependentRequired",
                      "dependentSchemas", "patternProperties"}


def walk(schema, path="#"):
    yield path, schema
    if isinstance(schema, dict):
        for key, value in schema.items():
            if isinstance(value, (dict, list)):
                yield from walk(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for n, value in enumerate(schema):
            yield from walk(value, f"{path}/{n}")


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_llm_schema_is_in_the_provider_subset(family):
    schema = load_json_asset(llm_schema_path(family))
    Draft202012Validator.check_schema(schema)
    for path, node in walk(schema):
        if not isinstance(node, dict):
            continue
        assert not (FORBIDDEN_KEYWORDS & node.keys()), f"{path} uses {FORBIDDEN_KEYWORDS & node.keys()}"
        if node.get("type") == "object":
            assert node.get("additionalProperties") is False, path
            assert sorted(node.get("required", [])) == sorted(node.get("properties", {})), f"{path}: not all required"


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_llm_schema_enums_are_exactly_the_declared_sets(family):
    spec = FAMILIES[family]
    schema = load_json_asset(llm_schema_path(family))
    found = {}
    for path, node in walk(schema):
        if isinstance(node, dict) and "enum" in node:
            found[path.rsplit("/", 1)[-1]] = tuple(node["enum"])
    assert found == dict(spec.enums)


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_durable_schemas_are_generated_and_current(family):
    spec = FAMILIES[family]
    for path, data in generated_schemas(family, spec.list_field, spec.durable_record_schema).items():
        assert read_asset(path) == data, f"assets/{path} is stale: run python -m domain.schemagen"


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_policy_fingerprint_moves_with_rules(family):
    spec = FAMILIES[family]
    base = spec.validator_policy_fingerprint()
    assert base == spec.validator_policy_fingerprint()
    bumped = dataclasses.replace(spec, policy_version=spec.policy_version + "+1")
    assert _policy_fingerprint(bumped) != base
    if spec.enums:
        field = sorted(spec.enums)[0]
        fewer = dataclasses.replace(spec, enums={**spec.enums, field: spec.enums[field][:-1]})
        assert _policy_fingerprint(fewer) != base


# --- differential: the typed model accepts exactly what the schema accepts ------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8), st.sampled_from(["attack", "engaged", "present", "combat", "acquired", "visited", ""]),
)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                 st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                           max_leaves=8)


def from_schema(schema):
    """Valid instances of a provider-subset schema (the subset our LLM schemas use)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    types = schema.get("type")
    if isinstance(types, list):
        return st.one_of(*(from_schema({**schema, "type": t}) for t in types))
    if types == "null":
        return st.none()
    if types == "boolean":
        return st.booleans()
    if types == "integer":
        return st.integers(-5, 60)
    if types == "string":
        return st.text(max_size=10)
    if types == "array":
        return st.lists(from_schema(schema["items"]), min_size=schema.get("minItems", 0), max_size=3)
    if types == "object":
        return st.fixed_dictionaries({k: from_schema(v) for k, v in schema["properties"].items()})
    raise AssertionError(f"schema outside the provider subset: {schema}")


def model_accepts(spec, document) -> bool:
    try:
        spec.response_model.model_validate_json(orjson.dumps(document))
        return True
    except ValidationError:
        return False


def paths_of(document, path=()):
    yield path
    if isinstance(document, dict):
        for key, value in document.items():
            yield from paths_of(value, path + (key,))
    elif isinstance(document, list):
        for n, value in enumerate(document):
            yield from paths_of(value, path + (n,))


def mutate(document, path, how, replacement):
    """A copy of ``document`` changed at ``path``: replace the value, drop the key, or add an extra key."""
    doc = orjson.loads(orjson.dumps(document))
    if not path:
        return replacement if how == "replace" else doc
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "replace":
        parent[last] = replacement
    elif how == "drop" and isinstance(parent, dict):
        del parent[last]
    elif how == "drop" and isinstance(parent, list):
        parent.pop(last)
    elif how == "extra" and isinstance(parent[last], dict):
        parent[last]["unexpected_field"] = replacement
    return doc


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_model_and_schema_agree_on_generated_instances(family):
    spec = FAMILIES[family]
    schema = load_json_asset(llm_schema_path(family))
    validator = Draft202012Validator(schema)

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(schema), st.data())
    def check(valid, data):
        assert validator.is_valid(valid)
        assert model_accepts(spec, valid), valid
        paths = list(paths_of(valid))
        path = data.draw(st.sampled_from(paths))
        how = data.draw(st.sampled_from(["replace", "drop", "extra"]))
        changed = mutate(valid, path, how, data.draw(json_values))
        assert validator.is_valid(changed) == model_accepts(spec, changed), (path, how, changed)

    check()


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_model_and_schema_agree_on_arbitrary_json(family):
    spec = FAMILIES[family]
    validator = Draft202012Validator(load_json_asset(llm_schema_path(family)))

    @settings(max_examples=60, deadline=None)
    @given(json_values)
    def check(document):
        assert validator.is_valid(document) == model_accepts(spec, document)

    check()


def test_integral_floats_count_as_integers_like_the_schema():
    spec = FAMILIES["spells"]
    doc = {"spells": [{"spell_name": "Shield", "caster_name": "A", "cast": {"level": 1.0, "as_ritual": False,
                                                                           "target_names": []},
                       "evidence": [{"start_unit_id": 2.0, "end_unit_id": 3}]}]}
    assert model_accepts(spec, doc) and Draft202012Validator(load_json_asset(llm_schema_path("spells"))).is_valid(doc)
    doc["spells"][0]["cast"]["level"] = 1.5
    assert not model_accepts(spec, doc)


@pytest.mark.parametrize("family", FAMILY_KEYS)
def test_schema_errors_skip_only_records_without_violations(family):
    """The structural explanation walks only records the typed record model rejects; it must
    find exactly what jsonschema finds walking the whole response, paths and order included."""
    from domain.evaluate import _structural_context
    from domain.families.common import schema_errors

    spec = FAMILIES[family]
    schema = load_json_asset(llm_schema_path(family))
    validator = Draft202012Validator(schema)
    sctx = _structural_context(spec)

    def described(errors):
        return [(list(path), error.validator, error.message) for path, error in errors]

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(schema), st.data())
    def check(valid, data):
        records = valid[spec.list_field]
        valid = {**valid, spec.list_field: records + data.draw(st.lists(st.sampled_from(records), max_size=3))
                 if records else records}
        changed = valid
        for _ in range(data.draw(st.integers(1, 3))):
            path = data.draw(st.sampled_from(list(paths_of(changed))))
            how = data.draw(st.sampled_from(["replace", "drop", "extra"]))
            changed = mutate(changed, path, how, data.draw(json_values))
        whole = sorted(((list(e.absolute_path), e) for e in validator.iter_errors(changed)),
                       key=lambda item: ([str(p) for p in item[0]], item[1].validator))
        assert described(schema_errors(sctx, changed)) == described(whole), changed

    check()
