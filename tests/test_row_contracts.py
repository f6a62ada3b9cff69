"""The typed output rows (``domain.rows``) against the contracts they are written with.

Row shapes used to live in four places (dict literals in the job, JSON Schema
and Avro in ``domain.schemas``, ``RetryRequest`` in export-batch) with
nothing holding them together. Each ``TypedDict`` of ``domain.rows`` is now the
shape (export-batch's ``RetryRequest`` and the request row's Avro schema are derived
from it), and these tests derive from it what each contract must say: the same
fields in the same order, the same types and nullability, the same closed value
sets, for the JSON Schema and the Avro schema of every output (generated, and on
disk), and a row built by the builders validates against both.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin, get_type_hints

import fastavro
import orjson
import pytest
from jsonschema import Draft202012Validator

from domain import rows
from domain import schemas as schemagen
from domain.assets import durable_avro_schema_path, durable_schema_path, load_json_asset
from domain.batch.prompts import parse_retry_request
from domain.families import FAMILIES
from domain.intake import INPUT_CANDIDATES, INPUT_PRIOR_REGISTRIES, INPUT_TRANSCRIPTS, INPUT_VERDICTS, parse_candidate
from domain.issues import Correction, Issue
from domain.revision import REQUEST_KINDS

FP = "sha256:" + "b" * 64


def _hints(shape: type) -> dict[str, Any]:
    return get_type_hints(shape)


def _is_typed_dict(tp: Any) -> bool:
    return isinstance(tp, type) and typing.is_typeddict(tp)


def _nullable(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (types.UnionType, typing.Union):
        rest = [a for a in get_args(tp) if a is not type(None)]
        assert len(rest) == 1, tp
        return rest[0], True
    return tp, False


# --- JSON Schema -------------------------------------------------------------------------------

def assert_json_matches(shape: type, schema: dict, where: str, skip: frozenset[str] = frozenset()) -> None:
    """``schema`` (an object schema) says what ``shape`` says."""
    hints = _hints(shape)
    assert schema.get("additionalProperties") is False, where
    assert schema["required"] == list(hints), where
    assert list(schema["properties"]) == list(hints), where
    for name, tp in hints.items():
        if name in skip:
            continue
        prop, at = schema["properties"][name], f"{where}.{name}"
        tp, nullable = _nullable(tp)
        if get_origin(tp) is Literal:
            assert prop["enum"] == list(get_args(tp)) and not nullable, at
        elif _is_typed_dict(tp):
            assert prop["type"] == ("object" if not nullable else ["object", "null"]), at
            assert_json_matches(tp, prop, at)
        elif get_origin(tp) is list:
            (item,) = get_args(tp)
            assert prop["type"] == "array", at
            if _is_typed_dict(item):
                assert_json_matches(item, prop["items"], at + "[]")
        else:
            kind = {str: "string", int: "integer", bool: "boolean"}[tp]
            if "const" in prop:  # a field the contract fixes to one value (an artifact's family, its version)
                assert isinstance(prop["const"], {"string": str, "integer": int, "boolean": bool}[kind]), at
            else:
                assert prop["type"] == ([kind, "null"] if nullable else kind), at


# --- Avro --------------------------------------------------------------------------------------

# Closed sets the Avro contract writes as a plain string (its doc names the values): changing it to an
# enum would change every Avro dead-letter file's schema, so the JSON Schema alone closes it.
AVRO_OPEN_STRINGS = frozenset({"dead_letters.payload_encoding"})


def assert_avro_matches(shape: type, record: dict, where: str, named: dict | None = None,
                        skip: frozenset[str] = frozenset()) -> None:
    """``record`` (an Avro record schema) says what ``shape`` says."""
    named = {} if named is None else named
    named[record["name"]] = record
    hints = _hints(shape)
    assert [f["name"] for f in record["fields"]] == list(hints), where
    for fld in record["fields"]:
        name, avro = fld["name"], fld["type"]
        if name in skip:
            continue
        at = f"{where}.{name}"
        tp, nullable = _nullable(hints[name])
        if nullable:
            assert isinstance(avro, list) and avro[0] == "null" and len(avro) == 2, at
            avro = avro[1]
        else:
            assert not isinstance(avro, list), at
        if isinstance(avro, str) and avro in named:
            avro = named[avro]
        if get_origin(tp) is Literal and at in AVRO_OPEN_STRINGS:
            assert avro == "string", at
        elif get_origin(tp) is Literal:
            assert avro["type"] == "enum" and avro["symbols"] == list(get_args(tp)), at
            named[avro["name"]] = avro
        elif _is_typed_dict(tp):
            assert avro["type"] == "record", at
            assert_avro_matches(tp, avro, at, named)
        elif get_origin(tp) is list:
            (item,) = get_args(tp)
            assert avro["type"] == "array", at
            if _is_typed_dict(item):
                assert_avro_matches(item, avro["items"], at + "[]", named)
        else:
            assert avro == {str: "string", int: "long", bool: "boolean"}[tp], at


# --- the contracts -----------------------------------------------------------------------------

OUTPUT_CONTRACTS = [
    ("evaluations", rows.EvaluationRow, schemagen.evaluation_json_schema(), schemagen.evaluation_avro_schema(),
     schemagen.EVALUATION_SCHEMA_JSON, schemagen.EVALUATION_SCHEMA_AVRO),
    ("retry_requests", rows.RequestRow, schemagen.request_json_schema(), schemagen.request_avro_schema(),
     schemagen.REQUEST_SCHEMA_JSON, schemagen.REQUEST_SCHEMA_AVRO),
    # Written by hand (no generator): held to the shape all the same.
    ("dead_letters", rows.DeadLetterRow, None, None, "outputs/dead_letter.v1.json", "outputs/dead_letter.v1.avsc"),
]


@pytest.mark.parametrize("output, shape, generated_json, generated_avro, json_path, avro_path", OUTPUT_CONTRACTS,
                         ids=[c[0] for c in OUTPUT_CONTRACTS])
def test_each_output_contract_says_what_its_row_shape_says(output, shape, generated_json, generated_avro,
                                                           json_path, avro_path):
    for schema in filter(None, (generated_json, load_json_asset(json_path))):
        assert_json_matches(shape, schema, output)
    for schema in filter(None, (generated_avro, load_json_asset(avro_path))):
        assert_avro_matches(shape, schema, output)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_artifact_contract_says_what_the_artifact_shape_says(family):
    spec = FAMILIES[family]
    generated = schemagen.generated_schemas(family, spec.list_field, spec.durable_record_schema)
    for schema in (orjson.loads(generated[durable_schema_path(family)]), load_json_asset(durable_schema_path(family))):
        assert_json_matches(rows.ArtifactRow, schema, family, skip=frozenset({"records"}))
        assert schema["properties"]["records"]["type"] == "array"
    for schema in (orjson.loads(generated[durable_avro_schema_path(family)]),
                   load_json_asset(durable_avro_schema_path(family))):
        assert_avro_matches(rows.ArtifactRow, schema, family, skip=frozenset({"records"}))


def test_closed_value_sets_have_one_definition():
    hints = _hints(rows.EvaluationRow)
    assert get_args(hints["verdict"]) == rows.VERDICTS == schemagen.VERDICTS
    assert get_args(_hints(rows.RequestRow)["kind"]) == REQUEST_KINDS
    dead = _hints(rows.DeadLetterRow)
    assert get_args(dead["input"]) == (INPUT_TRANSCRIPTS, INPUT_CANDIDATES, INPUT_PRIOR_REGISTRIES, INPUT_VERDICTS)
    assert get_args(dead["payload_encoding"]) == rows.PAYLOAD_ENCODINGS


# --- built rows validate ---------------------------------------------------------------------------

def _candidate(family: str = "spells", chunk_id: str = "x-1", raw: str = '{"spells": []}'):
    return parse_candidate(orjson.dumps({
        "candidate_id": "c-1", "family": family, "source_id": "s-1", "chunk_id": chunk_id, "attempt": 2,
        "producer": {"provider": "p", "model": "m"}, "prompt_fingerprint": FP, "schema_fingerprint": FP,
        "raw_response": raw, "received_at": "2026-10-01T12:00:00Z"}))


def _validate(row: dict, json_schema: dict, avro_schema: dict, shape: type) -> None:
    assert list(row) == list(_hints(shape))
    errors = list(Draft202012Validator(json_schema).iter_errors(row))
    assert errors == []
    assert fastavro.validation.validate(row, fastavro.parse_schema(avro_schema), raise_errors=True)


def test_built_rows_validate_against_both_contracts():
    cand = _candidate()
    issue = Issue("spells.shape", "blank_name", "spells[0]", "blank", Correction("The spell", "", "Blank.", "Name it."))
    evaluation = rows.evaluation_row(cand, rows.VERDICT_REJECTED, (issue,), 1)
    _validate(evaluation, load_json_asset(schemagen.EVALUATION_SCHEMA_JSON),
              load_json_asset(schemagen.EVALUATION_SCHEMA_AVRO), rows.EvaluationRow)
    assert list(evaluation["issues"][0]) == list(_hints(rows.IssueRow))
    for request in (rows.retry_request_row("spells", "x-1", cand, 3, "Fix it.", FP, FP, FP, None),
                    rows.refresh_request_row("npc-reconciliation", "*", cand, 3, FP, FP, FP, FP)):
        _validate(request, load_json_asset(schemagen.REQUEST_SCHEMA_JSON),
                  load_json_asset(schemagen.REQUEST_SCHEMA_AVRO), rows.RequestRow)
        read = parse_retry_request(orjson.dumps(request))
        assert {name: getattr(read, name) for name in request} == request
    for payload in (b'{"x": 1}', b"\xff\xfe"):
        dead = rows.dead_letter_row(INPUT_CANDIDATES, "why", payload)
        _validate(dead, load_json_asset("outputs/dead_letter.v1.json"), load_json_asset("outputs/dead_letter.v1.avsc"),
                  rows.DeadLetterRow)
    artifact = rows.artifact_row("scene-descriptions", "s-1", cand, [], None, FP)
    _validate(artifact, load_json_asset(durable_schema_path("scene-descriptions")),
              load_json_asset(durable_avro_schema_path("scene-descriptions")), rows.ArtifactRow)
    assert list(artifact["provenance"]) == list(_hints(rows.ProvenanceRow))
    assert list(artifact["provenance"]["producer"]) == list(_hints(rows.ProducerRow))
