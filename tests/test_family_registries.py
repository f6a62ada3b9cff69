"""npc-registry, item-registry and location-registry: behaviour, not prose."""

from __future__ import annotations

from leak_check import assert_model_safe

import fastavro
import orjson
import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from domain.assets import (
    current_fingerprints,
    durable_avro_schema_path,
    durable_schema_path,
    llm_schema_path,
    load_json_asset,
)
from domain.evaluate import evaluate_response
from domain.evidence import SourceRef
from domain.families import FAMILIES
from domain.families.base import ROLE_REGISTRY, EvaluationContext
from domain.reprocess import process_source
from domain.source import transcript_from_record

SOURCE = "crd3:T-REG"
# Unit ids deliberately not increasing: document order is 10, 3, 7, 20, 1, 2.
UNIT_IDS = [10, 3, 7, 20, 1, 2]
CHUNK = "x-0001"  # units 10, 3, 7, 20
OTHER_CHUNK = "x-0002"  # units 1, 2

# (family, list field, noun as guidance names an entry)
REGISTRIES = [
    ("npc-registry", "npcs", "NPC"),
    ("item-registry", "items", "item"),
    ("location-registry", "locations", "location"),
]


def transcript_record() -> dict:
    return {
        "source_id": SOURCE,
        "units": [{"unit_id": u, "speaker": "MATT", "text": f"line {u}"} for u in UNIT_IDS],
        "chunks": [
            {"chunk_id": CHUNK, "kind": "extraction", "unit_ids": [10, 3, 7, 20]},
            {"chunk_id": OTHER_CHUNK, "kind": "extraction", "unit_ids": [1, 2]},
            {"chunk_id": "s-0001", "kind": "scene", "unit_ids": [10, 3, 7, 20, 1, 2]},
        ],
    }


TRANSCRIPT = transcript_from_record(transcript_record())


def ctx(chunk: str = CHUNK) -> EvaluationContext:
    return EvaluationContext(TRANSCRIPT, TRANSCRIPT.chunk(chunk))


def ev(start: int, end: int) -> dict:
    return {"start_unit_id": start, "end_unit_id": end}


def entry(name: str, aliases=(), description: str = "someone", evidence=None) -> dict:
    return {"name": name, "aliases": list(aliases), "description": description,
            "evidence": evidence if evidence is not None else [ev(10, 3)]}


def response(list_field: str, *entries: dict) -> str:
    return orjson.dumps({list_field: list(entries)}).decode()


def candidate_line(family: str, raw: str, cid: str, chunk: str = CHUNK, attempt: int = 1) -> bytes:
    prompt_fp, schema_fp = current_fingerprints(family)
    return orjson.dumps({
        "candidate_id": cid, "family": family, "source_id": SOURCE, "chunk_id": chunk, "attempt": attempt,
        "producer": {"provider": "openai", "model": "gpt-4.1-mini"},
        "prompt_fingerprint": prompt_fp, "schema_fingerprint": schema_fp,
        "raw_response": raw, "received_at": "2026-10-01T12:00:00Z",
    })



# --- schema -------------------------------------------------------------------------------

def _walk(schema):
    yield schema
    if isinstance(schema, dict):
        for value in schema.values():
            yield from _walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _walk(value)


@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
def test_llm_schema_is_the_provider_subset(family, list_field, noun):
    schema = load_json_asset(llm_schema_path(family))
    Draft202012Validator.check_schema(schema)
    objects = [s for s in _walk(schema) if isinstance(s, dict) and s.get("type") == "object"]
    assert len(objects) == 3  # response, entry, evidence item
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])
    forbidden = {"uniqueItems", "if", "then", "else", "oneOf", "anyOf", "allOf", "not", "dependentRequired"}
    assert not any(isinstance(s, dict) and forbidden & set(s) for s in _walk(schema))
    item = schema["properties"][list_field]["items"]
    assert set(item["properties"]) == {"name", "aliases", "description", "evidence"}
    assert item["properties"]["evidence"]["minItems"] == 1


@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
@pytest.mark.parametrize("mutate,valid", [
    (lambda e: None, True),
    (lambda e: e.update(aliases=[]), True),
    (lambda e: e.update(evidence=[{"start_unit_id": 10.0, "end_unit_id": 3}]), True),
    (lambda e: e.pop("aliases"), False),
    (lambda e: e.update(extra="x"), False),
    (lambda e: e.update(evidence=[]), False),
    (lambda e: e.update(name=None), False),
    (lambda e: e.update(aliases="Grog"), False),
    (lambda e: e.update(evidence=[{"start_unit_id": "10", "end_unit_id": 3}]), False),
    (lambda e: e.update(evidence=[{"start_unit_id": 10, "end_unit_id": 3, "source_id": SOURCE}]), False),
    (lambda e: e.update(description=True), False),
])
def test_schema_and_model_agree(family, list_field, noun, mutate, valid):
    spec = FAMILIES[family]
    record = entry("Grog", ["the Goliath"])
    mutate(record)
    document = {list_field: [record]}
    validator = Draft202012Validator(load_json_asset(llm_schema_path(family)))
    assert validator.is_valid(document) is valid
    try:
        spec.response_model.model_validate_json(orjson.dumps(document))
        model_ok = True
    except ValidationError:
        model_ok = False
    assert model_ok is valid


@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
def test_spec_declares_a_registry(family, list_field, noun):
    spec = FAMILIES[family]
    assert spec.role == ROLE_REGISTRY and spec.provides_registry and not spec.needs_registry
    assert spec.registry_kind == family.split("-")[0]
    assert spec.chunk_kind == "extraction" and spec.list_field == list_field and dict(spec.enums) == {}


# --- adapter ------------------------------------------------------------------------------

@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
def test_adapter_orders_reversed_ranges_and_keeps_forward_ones(family, list_field, noun):
    spec = FAMILIES[family]
    raw = response(
        list_field,
        # 7 comes after 3 in the document: reversed, resolvable -> (3, 7).
        entry("Scanlan", evidence=[ev(7, 3)]),
        # 10 precedes 3 in the document although 10 > 3: forward, kept.
        entry("Grog", evidence=[ev(10, 3), ev(10, 3), ev(20, 20)]),
    )
    result = evaluate_response(spec, raw, ctx())
    assert result.passed, result.issues
    first, second = result.adapted.records
    assert first.name == "Grog"  # earliest evidence first (unit 10 is the first unit)
    assert first.evidence == (SourceRef(SOURCE, 10, 3), SourceRef(SOURCE, 20, 20))  # de-duplicated, doc order
    assert second.evidence == (SourceRef(SOURCE, 3, 7),)
    assert result.adapted.earliest_evidence_unit_id == 10


@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
def test_unresolvable_reversed_range_is_not_repaired(family, list_field, noun):
    spec = FAMILIES[family]
    raw = response(list_field, entry("Grog", evidence=[ev(99, 3)]))
    result = evaluate_response(spec, raw, ctx())
    assert not result.passed
    assert result.adapted.records[0].evidence == (SourceRef(SOURCE, 99, 3),)
    assert [i.reason_code for i in result.issues] == ["unresolved_unit"]


# --- identity -------------------------------------------------------------------------------

@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
@pytest.mark.parametrize("a,b", [
    (entry("Grog", evidence=[ev(10, 10)]), entry("  GROG ", evidence=[ev(3, 3)])),
    (entry("Pike Trickfoot", evidence=[ev(10, 10)]), entry("Pike", ["pike   trickfoot"], evidence=[ev(3, 3)])),
    (entry("Pike", ["The Cleric"], evidence=[ev(10, 10)]), entry("Kima", ["the\tcleric"], evidence=[ev(3, 3)])),
    (entry("Grog", ["Grog the Strongjaw"], evidence=[ev(10, 10)]),
     entry("grog THE strongjaw", evidence=[ev(3, 3)])),
    # an exact repeat of an entry is a clash too
    (entry("Grog", evidence=[ev(10, 3)]), entry("Grog", evidence=[ev(10, 3)])),
])
def test_identity_folds_case_whitespace_and_aliases(family, list_field, noun, a, b):
    result = evaluate_response(FAMILIES[family], response(list_field, a, b), ctx())
    assert not result.passed
    assert [i.reason_code for i in result.issues] == ["duplicate_name"]
    assert result.issues[0].correction is not None


@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
def test_distinct_names_and_an_alias_repeating_its_own_name_pass(family, list_field, noun):
    raw = response(
        list_field,
        entry("Grog", ["grog", "Grog Strongjaw"], evidence=[ev(10, 10)]),
        entry("Pike", ["Pike Trickfoot"], evidence=[ev(3, 7)]),
    )
    assert evaluate_response(FAMILIES[family], raw, ctx()).passed


@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
def test_every_defect_is_reported_in_one_evaluation(family, list_field, noun):
    raw = response(
        list_field,
        entry("Grog", ["  "], evidence=[ev(10, 10)]),  # blank alias
        entry("grog", evidence=[ev(3, 3)]),  # duplicate name
        entry("", evidence=[ev(7, 7)]),  # blank name
        entry("Vex", evidence=[ev(20, 1)]),  # span leaves the chunk
        entry("Percy", evidence=[ev(3, 42)]),  # unresolved unit
    )
    result = evaluate_response(FAMILIES[family], raw, ctx())
    codes = sorted(i.reason_code for i in result.issues)
    assert codes == sorted(["blank_name", "duplicate_name", "blank_name", "span_outside_chunk", "unresolved_unit"])
    assert all(i.correction is not None for i in result.issues)


@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
def test_reversed_range_reaching_the_validator_is_rejected(family, list_field, noun):
    spec = FAMILIES[family]
    adapted = spec.adapt(spec.response_model.model_validate_json(response(list_field, entry("Grog"))), TRANSCRIPT)
    rec = adapted.records[0]
    reversed_rec = type(rec)(rec.name, rec.aliases, rec.description, (SourceRef(SOURCE, 7, 3),))
    issues = [i for v in spec.validators for i in v(type(adapted)((reversed_rec,), 3), ctx())]
    assert [i.reason_code for i in issues] == ["reversed_range"]


# --- end to end: artifacts, retries, guidance ---------------------------------------------------

@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
def test_accepted_registry_artifact_matches_the_durable_contract(family, list_field, noun):
    raw = response(list_field, entry("Scanlan", ["Scanlan Shorthalt"], evidence=[ev(7, 3)]),
                   entry("Grog", evidence=[ev(10, 10)]))
    result = process_source(SOURCE, [orjson.dumps(transcript_record())], [candidate_line(family, raw, "c-reg-1")])
    (artifact,) = result.artifacts
    assert artifact["provenance"]["raw_response"] == raw
    assert [r["name"] for r in artifact["records"]] == ["Grog", "Scanlan"]
    assert artifact["records"][1]["evidence"] == [{"source_id": SOURCE, "start_unit_id": 3, "end_unit_id": 7}]
    assert artifact["earliest_evidence_unit_id"] == 10
    Draft202012Validator(load_json_asset(durable_schema_path(family))).validate(artifact)
    avro = fastavro.parse_schema(load_json_asset(durable_avro_schema_path(family)))
    assert fastavro.validation.validate(artifact, avro, raise_errors=True)
    assert [e["verdict"] for e in result.evaluations] == ["accepted"]


@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
def test_guidance_names_records_and_ranges_without_internal_tokens(family, list_field, noun):
    raw = response(
        list_field,
        entry("Grog", ["Big G", ""], evidence=[ev(10, 10)]),
        entry("big  g", evidence=[ev(7, 3)]),
        entry("Vex'ahlia", evidence=[ev(20, 1), ev(3, 99)]),
    )
    cid = "c-guidance-7f3a"
    result = process_source(SOURCE, [orjson.dumps(transcript_record())], [candidate_line(family, raw, cid)])
    (request,) = result.retry_requests
    (evaluation,) = result.evaluations
    guidance = request["correction_guidance"]
    assert f'The {noun} "Grog" (unit 10)' in guidance
    assert f'The {noun} "big g" (units 3–7)' in guidance  # range as canonicalized: forward
    assert f'The {noun} "Vex\'ahlia"' in guidance
    assert "units 20–1" in guidance and "units 3–99" in guidance
    assert 'name "big g" is also used by' in guidance  # the clashing name and its owner are named
    assert "`aliases`" in guidance
    assert_model_safe(guidance, evaluation["issues"], cid, request["request_id"], SOURCE, CHUNK)
    assert request["attempt"] == 2 and request["candidate_id"] == cid
    # deterministic: the same candidate gives the same bytes
    again = process_source(SOURCE, [orjson.dumps(transcript_record())], [candidate_line(family, raw, cid)])
    assert again.retry_requests[0]["correction_guidance"] == guidance


@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
def test_structural_guidance_names_the_entry(family, list_field, noun):
    raw = orjson.dumps({list_field: [{"name": "Grog", "aliases": [], "description": "x", "evidence": []},
                                     {"name": "Pike", "aliases": [], "evidence": [ev(10, 10)]}]}).decode()
    result = process_source(SOURCE, [orjson.dumps(transcript_record())], [candidate_line(family, raw, "c-s-1")])
    guidance = result.retry_requests[0]["correction_guidance"]
    assert f'The {noun} "Grog"' in guidance and f'The {noun} "Pike"' in guidance
    assert "`evidence`" in guidance and "`description`" in guidance
    assert_model_safe(guidance, result.evaluations[0]["issues"], "c-s-1", SOURCE, CHUNK)


@pytest.mark.parametrize("family,list_field,noun", REGISTRIES)
def test_registry_names_include_aliases(family, list_field, noun):
    spec = FAMILIES[family]
    adapted = spec.adapt(
        spec.response_model.model_validate_json(response(list_field, entry("Grog", ["Grog Strongjaw"]))), TRANSCRIPT
    )
    assert spec.registry_names(adapted.records[0]) == ("Grog", "Grog Strongjaw")
