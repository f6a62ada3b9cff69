"""npc-occurrences, item-occurrences and location-occurrences: behaviour, not prose."""

from __future__ import annotations

from leak_check import assert_model_safe
import re

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
from domain.families.base import ROLE_OCCURRENCE, EvaluationContext, RegistryView, fold_name
from domain.reprocess import process_source
from domain.source import transcript_from_record

SOURCE = "crd3:T-OCC"
# Unit ids deliberately not increasing: document order is 10, 3, 7, 20, 1, 2.
UNIT_IDS = [10, 3, 7, 20, 1, 2]
CHUNK = "x-0001"  # units 10, 3, 7, 20
OTHER_CHUNK = "x-0002"  # units 1, 2

# (occurrence family, registry family, registry list field, name field, noun, supported kinds)
OCCURRENCES = [
    ("npc-occurrences", "npc-registry", "npcs", "npc_name", "NPC", ("present", "speaking", "mentioned", "acting")),
    ("item-occurrences", "item-registry", "items", "item_name", "item",
     ("acquired", "used", "transferred", "lost", "mentioned")),
    ("location-occurrences", "location-registry", "locations", "location_name", "location",
     ("visited", "mentioned", "departed")),
]
IDS = [row[0] for row in OCCURRENCES]
NAME_FIELDS = {row[0]: row[3] for row in OCCURRENCES}
UNSUPPORTED = ["", "Present", "VISITED", "spoke", "appeared", "other", " mentioned", "mentioned "]


def transcript_record() -> dict:
    return {
        "source_id": SOURCE,
        "units": [{"unit_id": u, "speaker": "MATT", "text": f"line {u}"} for u in UNIT_IDS],
        "chunks": [
            {"chunk_id": CHUNK, "kind": "extraction", "unit_ids": [10, 3, 7, 20]},
            {"chunk_id": OTHER_CHUNK, "kind": "extraction", "unit_ids": [1, 2]},
        ],
    }


TRANSCRIPT = transcript_from_record(transcript_record())


def ev(start: int, end: int) -> dict:
    return {"start_unit_id": start, "end_unit_id": end}


def occurrence(family: str, name: str, kind: str, evidence=None, holder: str | None = "Grog") -> dict:
    name_field = NAME_FIELDS[family]
    record = {name_field: name, "kind": kind}
    if family == "item-occurrences":
        record["holder_name"] = holder
    record["evidence"] = evidence if evidence is not None else [ev(10, 3)]
    return record


def response(*records: dict) -> str:
    return orjson.dumps({"occurrences": list(records)}).decode()


def registry_response(list_field: str, *entries: tuple[str, list[str]]) -> str:
    return orjson.dumps({list_field: [
        {"name": n, "aliases": a, "description": "known", "evidence": [ev(10, 10)]} for n, a in entries
    ]}).decode()


def registry_view(family: str, *names: str) -> RegistryView:
    return RegistryView(FAMILIES[family].registry_kind, frozenset(fold_name(n) for n in names))


def ctx(family: str, *names: str, chunk: str = CHUNK) -> EvaluationContext:
    return EvaluationContext(TRANSCRIPT, TRANSCRIPT.chunk(chunk), registry_view(family, *names))


def candidate_line(family: str, raw: str, cid: str, chunk: str = CHUNK, attempt: int = 1) -> bytes:
    prompt_fp, schema_fp = current_fingerprints(family)
    return orjson.dumps({
        "candidate_id": cid, "family": family, "source_id": SOURCE, "chunk_id": chunk, "attempt": attempt,
        "producer": {"provider": "openai", "model": "gpt-4.1-mini"},
        "prompt_fingerprint": prompt_fp, "schema_fingerprint": schema_fp,
        "raw_response": raw, "received_at": "2026-10-01T12:00:00Z",
    })


def run(*lines: bytes):
    return process_source(SOURCE, [orjson.dumps(transcript_record())], list(lines))



# --- schema and model -------------------------------------------------------------------------

def _walk(schema):
    yield schema
    if isinstance(schema, dict):
        for value in schema.values():
            yield from _walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _walk(value)


def _model_accepts(family: str, document: dict) -> bool:
    try:
        FAMILIES[family].response_model.model_validate_json(orjson.dumps(document))
        return True
    except ValidationError:
        return False


@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
def test_llm_schema_is_the_provider_subset_with_the_exact_kinds(family, registry, list_field, name_field, noun, kinds):
    schema = load_json_asset(llm_schema_path(family))
    Draft202012Validator.check_schema(schema)
    for obj in (s for s in _walk(schema) if isinstance(s, dict) and s.get("type") == "object"):
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])
    forbidden = {"uniqueItems", "if", "then", "else", "oneOf", "anyOf", "allOf", "not", "dependentRequired"}
    assert not any(isinstance(s, dict) and forbidden & set(s) for s in _walk(schema))
    item = schema["properties"]["occurrences"]["items"]
    assert item["properties"]["kind"]["enum"] == list(kinds)
    assert item["properties"]["evidence"]["minItems"] == 1
    assert dict(FAMILIES[family].enums) == {"kind": kinds}
    expected = {name_field, "kind", "evidence"} | ({"holder_name"} if family == "item-occurrences" else set())
    assert set(item["properties"]) == expected


@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
def test_every_supported_kind_is_accepted_by_schema_and_model(family, registry, list_field, name_field, noun, kinds):
    validator = Draft202012Validator(load_json_asset(llm_schema_path(family)))
    for kind in kinds:
        document = {"occurrences": [occurrence(family, "Grog", kind)]}
        assert validator.is_valid(document), kind
        assert _model_accepts(family, document), kind


@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
@pytest.mark.parametrize("bad", UNSUPPORTED + [None, 3])
def test_unsupported_kinds_are_rejected_by_schema_and_model(family, registry, list_field, name_field, noun, kinds, bad):
    validator = Draft202012Validator(load_json_asset(llm_schema_path(family)))
    document = {"occurrences": [occurrence(family, "Grog", "mentioned")]}
    document["occurrences"][0]["kind"] = bad
    assert not validator.is_valid(document)
    assert not _model_accepts(family, document)


@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
def test_kinds_of_other_families_are_not_accepted(family, registry, list_field, name_field, noun, kinds):
    others = {k for row in OCCURRENCES if row[0] != family for k in row[5]} - set(kinds)
    assert others
    validator = Draft202012Validator(load_json_asset(llm_schema_path(family)))
    for kind in sorted(others):
        document = {"occurrences": [occurrence(family, "Grog", kind)]}
        assert not validator.is_valid(document) and not _model_accepts(family, document), kind


def test_item_holder_is_string_or_null_and_always_present():
    validator = Draft202012Validator(load_json_asset(llm_schema_path("item-occurrences")))
    for holder, valid in [("Grog", True), (None, True), ("", True), (3, False), (["Grog"], False)]:
        document = {"occurrences": [occurrence("item-occurrences", "Bag", "used", holder=holder)]}
        assert validator.is_valid(document) is valid
        assert _model_accepts("item-occurrences", document) is valid
    document = {"occurrences": [occurrence("item-occurrences", "Bag", "used")]}
    del document["occurrences"][0]["holder_name"]
    assert not validator.is_valid(document) and not _model_accepts("item-occurrences", document)


@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
def test_spec_declares_an_occurrence_family(family, registry, list_field, name_field, noun, kinds):
    spec = FAMILIES[family]
    assert spec.role == ROLE_OCCURRENCE and spec.needs_registry and not spec.provides_registry
    assert spec.registry_kind == FAMILIES[registry].registry_kind
    assert spec.chunk_kind == "extraction" and spec.list_field == "occurrences"


@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
def test_structural_guidance_lists_the_allowed_kinds(family, registry, list_field, name_field, noun, kinds):
    bad = occurrence(family, "Grog", "mentioned")
    bad["kind"] = "whispering"
    reg = candidate_line(registry, registry_response(list_field, ("Grog", [])), "c-reg")
    result = run(reg, candidate_line(family, response(bad), "c-occ"))
    (request,) = result.retry_requests
    guidance = request["correction_guidance"]
    assert f'{noun} "Grog"' in guidance and '"whispering"' in guidance and "`kind`" in guidance
    for kind in kinds:
        assert kind in guidance
    assert_model_safe(guidance, [e for ev_ in result.evaluations for e in ev_["issues"]], "c-occ", "c-reg", SOURCE, CHUNK, OTHER_CHUNK)


# --- adapter ----------------------------------------------------------------------------------

@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
def test_adapter_orders_reversed_ranges_and_keeps_forward_ones(family, registry, list_field, name_field, noun, kinds):
    spec = FAMILIES[family]
    raw = response(
        occurrence(family, "Scanlan", "mentioned", [ev(7, 3)]),  # reversed and resolvable -> (3, 7)
        occurrence(family, "Grog", "mentioned", [ev(20, 20), ev(10, 3)]),  # 10 before 3: forward, kept
    )
    result = evaluate_response(spec, raw, ctx(family, "Grog", "Scanlan"))
    assert result.passed, result.issues
    first, second = result.adapted.records
    assert first.name == "Grog" and second.name == "Scanlan"  # earliest evidence first
    assert first.evidence == (SourceRef(SOURCE, 10, 3), SourceRef(SOURCE, 20, 20))
    assert second.evidence == (SourceRef(SOURCE, 3, 7),)
    assert result.adapted.earliest_evidence_unit_id == 10


@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
def test_unresolvable_or_wrong_chunk_ranges_are_rejected(family, registry, list_field, name_field, noun, kinds):
    raw = response(
        occurrence(family, "Grog", "mentioned", [ev(99, 3)]),
        occurrence(family, "Grog", "mentioned", [ev(1, 2)]),
    )
    result = evaluate_response(FAMILIES[family], raw, ctx(family, "Grog"))
    assert sorted(i.reason_code for i in result.issues) == ["span_outside_chunk", "unresolved_unit"]
    assert SourceRef(SOURCE, 99, 3) in [r.evidence[0] for r in result.adapted.records]


# --- membership -------------------------------------------------------------------------------

@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
@pytest.mark.parametrize("used,known", [
    ("Grog", True), ("  grog ", True), ("GROG", True),
    ("grog   strongjaw", True), ("Grog\tStrongjaw", True),  # an alias, folded
    ("Grog Strong", False), ("Pike", False), ("Grogg", False),
])
def test_membership_folds_case_whitespace_and_knows_aliases(family, registry, list_field, name_field, noun, kinds,
                                                            used, known):
    result = evaluate_response(FAMILIES[family], response(occurrence(family, used, "mentioned")),
                               ctx(family, "Grog", "Grog Strongjaw"))
    assert result.passed is known
    if not known:
        assert [i.reason_code for i in result.issues] == ["not_in_registry"]


@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
def test_membership_against_the_registry_accepted_in_the_same_run(family, registry, list_field, name_field, noun,
                                                                   kinds):
    reg = candidate_line(registry, registry_response(list_field, ("Grog", ["The Goliath"]), ("Pike", [])), "c-reg")
    # The other chunk's registry is accepted too; membership uses the union.
    reg2 = candidate_line(registry, orjson.dumps({list_field: [
        {"name": "Scanlan", "aliases": [], "description": "bard", "evidence": [ev(1, 1)]}]}).decode(),
        "c-reg2", chunk=OTHER_CHUNK)
    good = candidate_line(family, response(occurrence(family, "the  goliath", "mentioned"),
                                           occurrence(family, "SCANLAN", "mentioned", [ev(3, 3)])), "c-good")
    bad = candidate_line(family, response(occurrence(family, "Keyleth", "mentioned", [ev(1, 2)])), "c-bad",
                         chunk=OTHER_CHUNK)
    result = run(bad, good, reg2, reg)  # arrival order does not matter
    verdicts = {e["candidate_id"]: e["verdict"] for e in result.evaluations}
    assert verdicts == {"c-reg": "accepted", "c-reg2": "accepted", "c-good": "accepted", "c-bad": "rejected"}
    (request,) = result.retry_requests
    assert request["candidate_id"] == "c-bad"
    assert f'{noun} "Keyleth"' in request["correction_guidance"]
    occ = next(a for a in result.artifacts if a["family"] == family)
    Draft202012Validator(load_json_asset(durable_schema_path(family))).validate(occ)
    avro = fastavro.parse_schema(load_json_asset(durable_avro_schema_path(family)))
    assert fastavro.validation.validate(occ, avro, raise_errors=True)
    assert occ["records"][0][name_field] == "the  goliath"  # names are kept as given


@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
def test_occurrences_are_deferred_without_an_accepted_registry(family, registry, list_field, name_field, noun, kinds):
    occ1 = candidate_line(family, response(occurrence(family, "Grog", "mentioned")), "c-occ-1")
    occ2 = candidate_line(family, response(occurrence(family, "Grog", "mentioned")), "c-occ-2", attempt=2)
    # no registry at all
    result = run(occ1, occ2)
    assert {e["verdict"] for e in result.evaluations} == {"deferred"}
    assert len(result.evaluations) == 2
    assert not result.retry_requests and not result.artifacts
    assert result.counts[f"outcome/{family}/deferred"] == 1
    # a registry candidate that is rejected does not count either
    bad_registry = candidate_line(registry, registry_response(list_field, ("Grog", []), ("grog", [])), "c-reg")
    result = run(occ1, bad_registry)
    verdicts = {e["candidate_id"]: e["verdict"] for e in result.evaluations}
    assert verdicts == {"c-reg": "rejected", "c-occ-1": "deferred"}
    assert [r["family"] for r in result.retry_requests] == [registry]
    # a registry of another kind does not count either
    other = next(row for row in OCCURRENCES if row[0] != family)
    result = run(occ1, candidate_line(other[1], registry_response(other[2], ("Grog", [])), "c-other"))
    verdicts = {e["candidate_id"]: e["verdict"] for e in result.evaluations}
    assert verdicts == {"c-other": "accepted", "c-occ-1": "deferred"}


# --- several defects at once, guidance ---------------------------------------------------------

@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
def test_every_defect_is_reported_in_one_evaluation(family, registry, list_field, name_field, noun, kinds):
    raw = response(
        occurrence(family, "Keyleth", "mentioned", [ev(10, 10)]),  # not in the registry
        occurrence(family, "   ", "mentioned", [ev(3, 3)]),  # blank name (reported once)
        occurrence(family, "Grog", "mentioned", [ev(20, 1)]),  # leaves the chunk
        occurrence(family, "Pike", "mentioned", [ev(7, 42)]),  # unresolved unit
        occurrence(family, "Vex", "mentioned", [ev(7, 7)]),  # another unknown name
    )
    result = evaluate_response(FAMILIES[family], raw, ctx(family, "Grog", "Pike"))
    codes = sorted(i.reason_code for i in result.issues)
    assert codes == sorted([f"blank_{name_field}", "not_in_registry", "not_in_registry",
                            "span_outside_chunk", "unresolved_unit"])
    assert all(i.correction is not None for i in result.issues)


@pytest.mark.parametrize("family,registry,list_field,name_field,noun,kinds", OCCURRENCES, ids=IDS)
def test_guidance_names_records_and_ranges_without_internal_tokens(family, registry, list_field, name_field, noun,
                                                                   kinds):
    reg = candidate_line(registry, registry_response(list_field, ("Grog", [])), "c-reg-9f1e")
    raw = response(
        occurrence(family, "Keyleth", "mentioned", [ev(7, 3)]),
        occurrence(family, "Grog", "mentioned", [ev(20, 1), ev(3, 99)]),
        occurrence(family, "", "mentioned", [ev(10, 10)]),
    )
    cid = "c-occ-7f3a"
    result = run(reg, candidate_line(family, raw, cid))
    (request,) = result.retry_requests
    guidance = request["correction_guidance"]
    # the record's name and its canonical (forward) range, on one line
    assert re.search(f'{noun} "Keyleth"[^\n]* \\(units 3–7\\):', guidance)
    assert re.search(f'{noun} "Grog"[^\n]* \\(units 20–1\\):', guidance) and "units 3–99" in guidance
    assert f"`{name_field}`" in guidance and "(unit 10)" in guidance
    issues = [i for e in result.evaluations for i in e["issues"]]
    assert_model_safe(guidance, issues, cid, "c-reg-9f1e", request["request_id"], SOURCE, CHUNK, OTHER_CHUNK)
    assert run(reg, candidate_line(family, raw, cid)).retry_requests[0]["correction_guidance"] == guidance


# --- item holders -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,holder,ok", [
    ("acquired", "Grog", True), ("transferred", "Pike", True),
    ("acquired", None, False), ("transferred", None, False),
    ("acquired", "  ", False), ("transferred", "", False),
    ("used", None, True), ("lost", None, True), ("mentioned", None, True), ("used", "Grog", True),
    ("used", " ", False), ("mentioned", "", False),
])
def test_item_holder_rules(kind, holder, ok):
    raw = response(occurrence("item-occurrences", "Bag of Holding", kind, holder=holder))
    result = evaluate_response(FAMILIES["item-occurrences"], raw, ctx("item-occurrences", "Bag of Holding"))
    assert result.passed is ok, result.issues
    if not ok:
        assert len(result.issues) == 1 and result.issues[0].correction is not None
        assert "holder_name" in result.issues[0].correction.problem


def test_item_holder_defects_are_all_reported_with_context():
    reg = candidate_line("item-registry", registry_response("items", ("Bag of Holding", ["the bag"]),
                                                            ("Vorpal Sword", [])), "c-reg")
    raw = response(
        occurrence("item-occurrences", "Bag of Holding", "transferred", [ev(10, 10)], holder=None),
        occurrence("item-occurrences", "The Bag", "acquired", [ev(7, 3)], holder="   "),
        occurrence("item-occurrences", "Vorpal Sword", "used", [ev(20, 20)], holder=""),
        occurrence("item-occurrences", "Deck of Many Things", "acquired", [ev(20, 1)], holder=None),
    )
    result = run(reg, candidate_line("item-occurrences", raw, "c-items"))
    occ_eval = next(e for e in result.evaluations if e["candidate_id"] == "c-items")
    codes = sorted(i["reason_code"] for i in occ_eval["issues"])
    assert codes == sorted(["holder_required", "holder_required", "holder_required", "blank_holder_name",
                            "not_in_registry", "span_outside_chunk"])
    guidance = result.retry_requests[0]["correction_guidance"]
    for named in ('"Bag of Holding" (unit 10)', '"The Bag" (units 3–7)', '"Vorpal Sword" (unit 20)',
                  '"Deck of Many Things"'):
        assert named in guidance
    assert "`holder_name`" in guidance
    assert_model_safe(guidance, occ_eval["issues"], "c-items", "c-reg", SOURCE, CHUNK, OTHER_CHUNK)
