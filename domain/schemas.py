"""Derive a family's durable v1 contract (JSON Schema and Avro) from its LLM schema.

The durable artifact record (contract §6) is the same for every family except its
``records``, which are the response records with each evidence item extended
by ``source_id``. Writing that envelope by hand ten times invites drift, so
the files under ``assets/`` are generated here and a test checks they are
current. Run ``python -m domain.schemagen`` after changing an LLM schema.

The generated files are the contract: readers need nothing from this module.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

from domain.evidence_contract import DURABLE_EVIDENCE
from domain.assets import durable_avro_schema_path, durable_schema_path, llm_schema_path, load_json_asset
from domain.judges import PASSING_JUDGE_VERDICTS
from domain.revision import REQUEST_KINDS
from domain.rows import VERDICTS

_JSON_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE



def durable_record_schema(llm_schema: dict, list_field: str) -> dict:
    item = copy.deepcopy(llm_schema["properties"][list_field]["items"])
    evidence = item.get("properties", {}).get("evidence")
    if evidence is not None:
        evidence["items"] = copy.deepcopy(DURABLE_EVIDENCE)
    return item


def durable_json_schema(family: str, record_schema: dict) -> dict:
    def string(pattern: str | None = None) -> dict:
        return {"type": "string", **({"pattern": pattern} if pattern else {})}

    provenance = {
        "type": "object",
        "additionalProperties": False,
        "required": ["candidate_id", "attempt", "producer", "prompt_fingerprint", "schema_fingerprint",
                     "raw_response", "raw_response_sha256", "judged_by"],
        "properties": {
            "candidate_id": string(),
            "attempt": {"type": "integer", "minimum": 1},
            "producer": {
                "type": "object", "additionalProperties": False, "required": ["provider", "model"],
                "properties": {"provider": string(), "model": string()},
            },
            "prompt_fingerprint": string(),
            "schema_fingerprint": string(),
            "raw_response": {"type": "string", "description": "The provider's response, byte for byte."},
            "raw_response_sha256": string("^[0-9a-f]{64}$"),
            "judged_by": {
                "type": "array",
                "description": "The judges' verdicts the accepted attempt passed (contract §4.3); empty when no judge "
                               "ran for it.",
                "items": {
                    "type": "object", "additionalProperties": False,
                    "required": ["judge", "judge_fingerprint", "verdict_id", "verdict"],
                    "properties": {"judge": string(), "judge_fingerprint": string("^sha256:[0-9a-f]{64}$"),
                                   "verdict_id": string(), "verdict": {"enum": list(PASSING_JUDGE_VERDICTS)}},
                },
            },
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://notarius.example/schemas/dnd/{family}/dnd_{family.replace('-', '_')}.v1.json",
        "title": f"D&D {family} canonical artifact (durable, v1)",
        "type": "object",
        "additionalProperties": False,
        "required": ["artifact_id", "family", "schema_version", "source_id", "chunk_id", "records",
                     "earliest_evidence_unit_id", "provenance", "validator_policy_fingerprint"],
        "properties": {
            "artifact_id": string("^a-[0-9a-f]{32}$"),
            "family": {"const": family},
            "schema_version": {"const": "v1"},
            "source_id": string(),
            "chunk_id": string(),
            "records": {"type": "array", "items": record_schema,
                        "description": "Records in earliest-evidence order; evidence sorted by document position."},
            "earliest_evidence_unit_id": {"type": ["integer", "null"]},
            "provenance": provenance,
            "validator_policy_fingerprint": string("^sha256:[0-9a-f]{64}$"),
        },
    }


def _camel(text: str) -> str:
    return "".join(part.capitalize() for part in text.replace("-", "_").split("_"))


class _AvroNamer:
    """Avro named types must be defined once and referenced by name afterwards."""

    def __init__(self) -> None:
        self.defined: set[str] = set()

    def convert(self, schema: dict, name: str) -> Any:
        types = schema.get("type")
        if isinstance(types, list):
            non_null = [t for t in types if t != "null"]
            inner = self.convert({**schema, "type": non_null[0]}, name)
            return ["null", inner] if "null" in types else inner
        if "enum" in schema:
            if name in self.defined:
                return name
            self.defined.add(name)
            return {"type": "enum", "name": name, "symbols": list(schema["enum"])}
        if types == "string":
            return "string"
        if types == "integer":
            return "long"
        if types == "boolean":
            return "boolean"
        if types == "array":
            return {"type": "array", "items": self.convert(schema["items"], name + "Item")}
        if types == "object":
            if name in self.defined:
                return name
            self.defined.add(name)
            return {
                "type": "record",
                "name": name,
                "fields": [{"name": key, "type": self.convert(sub, name + _camel(key))}
                           for key, sub in schema["properties"].items()],
            }
        raise ValueError(f"no Avro mapping for {schema!r}")


def durable_avro_schema(family: str, record_schema: dict) -> dict:
    prefix = _camel(family)
    namer = _AvroNamer()
    record_schema = copy.deepcopy(record_schema)
    evidence = record_schema.get("properties", {}).get("evidence")
    records_type = namer.convert(record_schema, f"{prefix}Record")
    if evidence is not None:
        # Rename the nested evidence record to a stable, readable name.
        for fld in records_type["fields"]:
            if fld["name"] == "evidence":
                fld["type"]["items"]["name"] = "EvidenceRef"
    return {
        "type": "record",
        "name": f"{prefix}ArtifactV1",
        "namespace": f"notarius.dnd.{family.replace('-', '_')}",
        "doc": f"Canonical {family} artifact, durable contract v1 (contract §6).",
        "fields": [
            {"name": "artifact_id", "type": "string"},
            {"name": "family", "type": "string"},
            {"name": "schema_version", "type": "string"},
            {"name": "source_id", "type": "string"},
            {"name": "chunk_id", "type": "string"},
            {"name": "records", "type": {"type": "array", "items": records_type}},
            {"name": "earliest_evidence_unit_id", "type": ["null", "long"]},
            {"name": "provenance", "type": {
                "type": "record", "name": "Provenance", "fields": [
                    {"name": "candidate_id", "type": "string"},
                    {"name": "attempt", "type": "long"},
                    {"name": "producer", "type": {"type": "record", "name": "Producer", "fields": [
                        {"name": "provider", "type": "string"}, {"name": "model", "type": "string"}]}},
                    {"name": "prompt_fingerprint", "type": "string"},
                    {"name": "schema_fingerprint", "type": "string"},
                    {"name": "raw_response", "type": "string"},
                    {"name": "raw_response_sha256", "type": "string"},
                    {"name": "judged_by", "type": {"type": "array", "items": {
                        "type": "record", "name": "JudgedBy", "fields": [
                            {"name": "judge", "type": "string"}, {"name": "judge_fingerprint", "type": "string"},
                            {"name": "verdict_id", "type": "string"},
                            {"name": "verdict", "type": {"type": "enum", "name": "PassingJudgeVerdict",
                                                         "symbols": list(PASSING_JUDGE_VERDICTS)}}]}},
                     "default": []},
                ]}},
            {"name": "validator_policy_fingerprint", "type": "string"},
        ],
    }


# --- the evaluation rows (evaluations/, contract §6) -------------------------------------------------

EVALUATION_SCHEMA_JSON = "outputs/evaluation.v1.json"
EVALUATION_SCHEMA_AVRO = "outputs/evaluation.v1.avsc"
ENDPOINTS_REORDERED_DOC = ("Cited ranges of this response whose endpoints the job put in document order "
                           "(contract §5 step 3); a passing attempt with a count above zero passes because of it.")
PRODUCER_DOC = "Who made the attempt: the candidate's producer (contract §3.2), the provider and model that answered."
USAGE_DOC = ("What the provider billed for the attempt, as the candidate carried it (contract §3.2 usage, §6.4); null "
             "when it said nothing (its cost is then unknown, never zero).")
USAGE_FIELDS = (  # (name, JSON Schema, Avro type, doc): the one usage shape (domain.usage)
    ("input_tokens", {"type": "integer", "minimum": 0}, "long", "Every token of the prompt, cached ones included."),
    ("output_tokens", {"type": "integer", "minimum": 0}, "long", "Every token generated, reasoning included."),
    ("cached_input_tokens", {"type": ["integer", "null"], "minimum": 0}, ["null", "long"],
     "The part of input_tokens read from a cache; null when the provider did not say."),
    ("batch", {"type": "boolean"}, "boolean", "Whether the answer came through a provider's batch API."),
)


def evaluation_json_schema() -> dict:
    issue_fields = ("validator", "reason_code", "location", "message")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Evaluation (v1)",
        "type": "object",
        "additionalProperties": False,
        "required": ["candidate_id", "family", "source_id", "chunk_id", "attempt", "verdict", "issues",
                     "endpoints_reordered", "producer", "usage"],
        "properties": {
            "candidate_id": {"type": "string"},
            "family": {"type": "string"},
            "source_id": {"type": "string"},
            "chunk_id": {"type": "string"},
            "attempt": {"type": "integer", "minimum": 1},
            "verdict": {"enum": list(VERDICTS)},
            "issues": {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": list(issue_fields),
                "properties": {name: {"type": "string"} for name in issue_fields}}},
            "endpoints_reordered": {"type": "integer", "minimum": 0, "description": ENDPOINTS_REORDERED_DOC},
            "producer": {"type": "object", "additionalProperties": False, "required": ["provider", "model"],
                         "properties": {"provider": {"type": "string"}, "model": {"type": "string"}},
                         "description": PRODUCER_DOC},
            "usage": {"type": ["object", "null"], "additionalProperties": False,
                      "required": [name for name, *_ in USAGE_FIELDS],
                      "properties": {name: {**schema, "description": doc} for name, schema, _, doc in USAGE_FIELDS},
                      "description": USAGE_DOC},
        },
    }


def evaluation_avro_schema() -> dict:
    return {
        "type": "record",
        "name": "EvaluationV1",
        "namespace": "notarius.outputs",
        "doc": "One row per evaluated input candidate, for operators (contract §6).",
        "fields": [
            {"name": "candidate_id", "type": "string"},
            {"name": "family", "type": "string"},
            {"name": "source_id", "type": "string"},
            {"name": "chunk_id", "type": "string"},
            {"name": "attempt", "type": "long"},
            {"name": "verdict", "type": {"type": "enum", "name": "Verdict", "symbols": list(VERDICTS)}},
            {"name": "issues", "type": {"type": "array", "items": {
                "type": "record", "name": "EvaluationIssue",
                "fields": [{"name": name, "type": "string"}
                           for name in ("validator", "reason_code", "location", "message")]}}},
            {"name": "endpoints_reordered", "type": "long", "doc": ENDPOINTS_REORDERED_DOC},
            {"name": "producer", "type": {"type": "record", "name": "EvaluationProducer", "fields": [
                {"name": "provider", "type": "string"}, {"name": "model", "type": "string"}]}, "doc": PRODUCER_DOC},
            {"name": "usage", "type": ["null", {"type": "record", "name": "EvaluationUsage", "fields": [
                {"name": name, "type": avro, "doc": doc} for name, _, avro, doc in USAGE_FIELDS]}],
             "doc": USAGE_DOC},
        ],
    }


def generated_evaluation_schemas() -> dict[str, bytes]:
    """{asset path: bytes} of the evaluation row schemas (JSON Schema and Avro)."""
    return {EVALUATION_SCHEMA_JSON: orjson.dumps(evaluation_json_schema(), option=_JSON_OPTS),
            EVALUATION_SCHEMA_AVRO: orjson.dumps(evaluation_avro_schema(), option=_JSON_OPTS)}


# --- Arrow (Parquet) ---------------------------------------------------------------------------
#
# The Arrow schema of every output is derived from its Avro schema, so the
# three contracts cannot drift. It is written as a small JSON description
# (``*.arrow.json`` beside the ``.avsc``) that ``transforms.write`` turns into
# a ``pyarrow.Schema``: a field is ``{"name", "type", "nullable"}`` and a type
# is ``"string"``, ``"int64"``, ``"bool"``, ``{"list": field}`` or
# ``{"struct": [fields]}``. Nested records stay structs and arrays stay lists.

OUTPUT_AVRO_SCHEMAS = ("outputs/retry_request.v1.avsc", "outputs/evaluation.v1.avsc", "outputs/dead_letter.v1.avsc",
                       "outputs/slot_change.v1.avsc")
_ARROW_PRIMITIVES = {"string": "string", "long": "int64", "int": "int32", "boolean": "bool", "double": "float64",
                     "float": "float32", "bytes": "binary"}


def arrow_schema_path(avro_path: str) -> str:
    """``x.v1.avsc`` -> ``x.v1.arrow.json``."""
    if not avro_path.endswith(".avsc"):
        raise ValueError(f"not an Avro schema path: {avro_path}")
    return avro_path[: -len(".avsc")] + ".arrow.json"


def arrow_schema(avro_schema: dict) -> dict:
    """The Arrow description of an Avro record schema (see the comment above)."""
    named: dict[str, Any] = {}

    def field(name: str, avro_type: Any) -> dict:
        nullable = isinstance(avro_type, list) and "null" in avro_type
        if isinstance(avro_type, list):
            rest = [t for t in avro_type if t != "null"]
            if len(rest) != 1:
                raise ValueError(f"no Arrow mapping for the union {avro_type!r}")
            avro_type = rest[0]
        return {"name": name, "type": convert(avro_type), "nullable": nullable}

    def convert(avro_type: Any) -> Any:
        if isinstance(avro_type, str):
            if avro_type in _ARROW_PRIMITIVES:
                return _ARROW_PRIMITIVES[avro_type]
            if avro_type in named:
                return named[avro_type]
            raise ValueError(f"no Arrow mapping for the Avro type {avro_type!r}")
        kind = avro_type["type"]
        if kind == "enum":
            result: Any = "string"
        elif kind == "array":
            result = {"list": field("item", avro_type["items"])}
        elif kind == "record":
            result = {"struct": [field(f["name"], f["type"]) for f in avro_type["fields"]]}
        else:
            return convert(kind)
        if "name" in avro_type:
            named[avro_type["name"]] = result
        return result

    if avro_schema.get("type") != "record":
        raise ValueError("an output schema is an Avro record")
    return {"fields": [field(f["name"], f["type"]) for f in avro_schema["fields"]]}


def generated_schemas(family: str, list_field: str, record_schema: dict | None = None) -> dict[str, bytes]:
    """{asset path: bytes} of the durable JSON Schema, Avro schema and Arrow schema of ``family``."""
    if record_schema is None:
        record_schema = durable_record_schema(load_json_asset(llm_schema_path(family)), list_field)
    avro = durable_avro_schema(family, record_schema)
    return {
        durable_schema_path(family): orjson.dumps(durable_json_schema(family, record_schema), option=_JSON_OPTS),
        durable_avro_schema_path(family): orjson.dumps(avro, option=_JSON_OPTS),
        arrow_schema_path(durable_avro_schema_path(family)): orjson.dumps(arrow_schema(avro), option=_JSON_OPTS),
    }


def generated_output_schemas() -> dict[str, bytes]:
    """{asset path: bytes} of the Arrow schemas of retry requests, evaluations and dead letters
    (from their Avro schemas as they are on disk: generate the Avro ones first)."""
    return {arrow_schema_path(path): orjson.dumps(arrow_schema(load_json_asset(path)), option=_JSON_OPTS)
            for path in OUTPUT_AVRO_SCHEMAS}


# --- the request rows (retry_requests/): retry and refresh requests (contract §6, §6.1) ----------

REQUEST_SCHEMA_JSON = "outputs/retry_request.v1.json"
REQUEST_SCHEMA_AVRO = "outputs/retry_request.v1.avsc"


def request_json_schema() -> dict:
    fingerprint = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Retry, refresh or judge request (v1)",
        "type": "object",
        "additionalProperties": False,
        "required": ["request_id", "kind", "family", "source_id", "chunk_id", "candidate_id", "attempt",
                     "correction_guidance", "prompt_fingerprint", "schema_fingerprint", "validator_policy_fingerprint",
                     "input_fingerprint", "candidate_sha256", "judge", "judge_fingerprint"],
        "properties": {
            "request_id": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
            "kind": {"enum": list(REQUEST_KINDS),
                     "description": "retry: correct a failing attempt; refresh: extract again after a prompt revision; "
                                    "judge: a semantic judge's verdict on an attempt (contract §4.3)"},
            "family": {"type": "string"},
            "source_id": {"type": "string"},
            "chunk_id": {"type": "string"},
            "candidate_id": {"type": "string"},
            "attempt": {"type": "integer", "minimum": 1},
            "correction_guidance": {"type": "string"},
            "prompt_fingerprint": fingerprint,
            "schema_fingerprint": fingerprint,
            "validator_policy_fingerprint": fingerprint,
            "input_fingerprint": {
                "type": ["string", "null"], "pattern": "^sha256:[0-9a-f]{64}$",
                "description": "reconciliations: the fingerprint of the entry list the request was built with "
                               "(contract §4.1); null for every other family"},
            "candidate_sha256": {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$",
                                 "description": "judge requests: sha256 of the judged attempt's raw response"},
            "judge": {"type": ["string", "null"], "description": "judge requests: the judge's name"},
            "judge_fingerprint": {"type": ["string", "null"], "pattern": "^sha256:[0-9a-f]{64}$",
                                  "description": "judge requests: the judge's fingerprint (prompt and schema)"},
        },
        # A retry always says what to correct; a refresh or a judge request never does. A retry or refresh
        # asks for a new attempt (2 or more); a judge request names the attempt it judges and its judge.
        "allOf": [
            {"if": {"properties": {"kind": {"const": "retry"}}},
             "then": {"properties": {"correction_guidance": {"minLength": 1}}}},
            {"if": {"properties": {"kind": {"enum": ["refresh", "judge"]}}},
             "then": {"properties": {"correction_guidance": {"maxLength": 0}}}},
            {"if": {"properties": {"kind": {"enum": ["retry", "refresh"]}}},
             "then": {"properties": {"attempt": {"minimum": 2}, "candidate_sha256": {"type": "null"},
                                     "judge": {"type": "null"}, "judge_fingerprint": {"type": "null"}}}},
            {"if": {"properties": {"kind": {"const": "judge"}}},
             "then": {"properties": {"candidate_sha256": {"type": "string"}, "judge": {"type": "string"},
                                     "judge_fingerprint": {"type": "string"}}}},
        ],
    }


def request_avro_schema() -> dict:
    string = "string"
    return {
        "type": "record",
        "name": "RetryRequestV1",
        "namespace": "notarius.outputs",
        "doc": "One request per slot that needs a new attempt: a retry (still failing) or a refresh (rests only on "
               "attempts under an earlier prompt). Model-facing fields only (contract §6, §6.1).",
        "fields": [
            {"name": "request_id", "type": string},
            {"name": "kind", "type": {"type": "enum", "name": "RequestKind", "symbols": list(REQUEST_KINDS)}},
            {"name": "family", "type": string},
            {"name": "source_id", "type": string},
            {"name": "chunk_id", "type": string},
            {"name": "candidate_id", "type": string},
            {"name": "attempt", "type": "long"},
            {"name": "correction_guidance", "type": string},
            {"name": "prompt_fingerprint", "type": string},
            {"name": "schema_fingerprint", "type": string},
            {"name": "validator_policy_fingerprint", "type": string},
            {"name": "input_fingerprint", "type": ["null", string], "default": None,
             "doc": "Reconciliations: the fingerprint of the entry list the request was built with (contract §4.1); "
                    "null for every other family."},
            {"name": "candidate_sha256", "type": ["null", string], "default": None,
             "doc": "Judge requests: sha256 of the judged attempt's raw response (contract §4.3); null otherwise."},
            {"name": "judge", "type": ["null", string], "default": None,
             "doc": "Judge requests: the judge's name; null otherwise."},
            {"name": "judge_fingerprint", "type": ["null", string], "default": None,
             "doc": "Judge requests: the judge's fingerprint (its prompt and schema); null otherwise."},
        ],
    }


def generated_request_schemas() -> dict[str, bytes]:
    """{asset path: bytes} of the request row schemas (JSON Schema and Avro)."""
    opts = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    return {REQUEST_SCHEMA_JSON: orjson.dumps(request_json_schema(), option=opts),
            REQUEST_SCHEMA_AVRO: orjson.dumps(request_avro_schema(), option=opts)}



# --- the slot rows of a comparison (compare's slots/, contract §6.3) ------------------------------

SLOT_CHANGE_SCHEMA_JSON = "outputs/slot_change.v1.json"
SLOT_CHANGE_SCHEMA_AVRO = "outputs/slot_change.v1.avsc"
# = analysis.compare.SLOT_OUTCOMES and SLOT_CHANGES (a test keeps them equal).
SLOT_OUTCOMES = ("accepted", "retry", "refresh", "exhausted", "deferred", "absent")
SLOT_CHANGES = ("regression", "fix", "records_changed", "other")
DECIDING_DOC = ("The attempt the slot's outcome rests on in this run (the accepted one, the one a request replaces, "
                "else the latest); null when the run holds nothing of the slot.")
# = analysis.record_diff.RECORD_CHANGES and RECORDS_LISTED (a test keeps them equal).
RECORD_CHANGES = ("changed", "added", "removed")
RECORDS_LISTED = 12
RECORDS_DOC = ("What changed in the slot's accepted records from A to B (a run that accepted nothing has no records): "
               "every record counted once, the first changes listed by the record's name; null when neither run "
               "accepted the slot.")


def _records_json_schema() -> dict:
    count = {"type": "integer", "minimum": 0}
    value = {"type": ["string", "null"]}
    field_change = {"type": "object", "additionalProperties": False, "required": ["field", "a", "b"],
                    "properties": {"field": {"type": "string"}, "a": value, "b": value}}
    change = {"type": "object", "additionalProperties": False, "required": ["change", "record", "fields"],
              "properties": {"change": {"enum": list(RECORD_CHANGES)}, "record": {"type": "string"},
                             "fields": {"type": "array", "items": field_change}}}
    return {"type": ["object", "null"], "additionalProperties": False, "description": RECORDS_DOC,
            "required": ["added", "removed", "changed", "unchanged", "listed", "more"],
            "properties": {"added": count, "removed": count, "changed": count, "unchanged": count,
                           "listed": {"type": "array", "maxItems": RECORDS_LISTED, "items": change},
                           "more": count}}


def _records_avro_schema() -> dict:
    field_change = {"type": "record", "name": "FieldChange", "fields": [
        {"name": "field", "type": "string"}, {"name": "a", "type": ["null", "string"]},
        {"name": "b", "type": ["null", "string"]}]}
    change = {"type": "record", "name": "RecordChange", "fields": [
        {"name": "change", "type": {"type": "enum", "name": "RecordChangeKind", "symbols": list(RECORD_CHANGES)}},
        {"name": "record", "type": "string"},
        {"name": "fields", "type": {"type": "array", "items": field_change}}]}
    return {"type": "record", "name": "RecordChanges", "doc": RECORDS_DOC, "fields": [
        *({"name": name, "type": "long"} for name in ("added", "removed", "changed", "unchanged")),
        {"name": "listed", "type": {"type": "array", "items": change}},
        {"name": "more", "type": "long"}]}


def slot_change_json_schema() -> dict:
    deciding = {
        "type": ["object", "null"], "additionalProperties": False, "description": DECIDING_DOC,
        "required": ["candidate_id", "attempt", "reason_codes", "records_sha256"],
        "properties": {
            "candidate_id": {"type": "string"},
            "attempt": {"type": "integer", "minimum": 1},
            "reason_codes": {"type": "array", "items": {"type": "string"},
                             "description": "The deciding attempt's reason codes, distinct, sorted."},
            "records_sha256": {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$",
                               "description": "Accepted only: sha256 of the artifact's records as canonical JSON."},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Slot whose outcome or accepted records differ between two runs (v1)",
        "type": "object",
        "additionalProperties": False,
        "required": ["family", "source_id", "chunk_id", "transition", "change", "deciding_a", "deciding_b", "records"],
        "properties": {
            "family": {"type": "string"},
            "source_id": {"type": "string"},
            "chunk_id": {"type": "string"},
            "transition": {"type": "object", "additionalProperties": False, "required": ["from", "to"],
                           "properties": {"from": {"enum": list(SLOT_OUTCOMES)}, "to": {"enum": list(SLOT_OUTCOMES)}}},
            "change": {"enum": list(SLOT_CHANGES),
                       "description": "regression: accepted in A, not in B; fix: the reverse; records_changed: "
                                      "accepted in both with other records; other: another outcome"},
            "deciding_a": deciding,
            "deciding_b": deciding,
            "records": _records_json_schema(),
        },
    }


def slot_change_avro_schema() -> dict:
    deciding = {"type": "record", "name": "DecidingAttempt", "doc": DECIDING_DOC, "fields": [
        {"name": "candidate_id", "type": "string"},
        {"name": "attempt", "type": "long"},
        {"name": "reason_codes", "type": {"type": "array", "items": "string"}},
        {"name": "records_sha256", "type": ["null", "string"]},
    ]}
    return {
        "type": "record",
        "name": "SlotChangeV1",
        "namespace": "notarius.outputs",
        "doc": "One slot whose outcome or accepted records differ between run A and run B (contract §6.3).",
        "fields": [
            {"name": "family", "type": "string"},
            {"name": "source_id", "type": "string"},
            {"name": "chunk_id", "type": "string"},
            {"name": "transition", "type": {"type": "record", "name": "Transition", "fields": [
                {"name": "from", "type": {"type": "enum", "name": "SlotOutcome", "symbols": list(SLOT_OUTCOMES)}},
                {"name": "to", "type": "SlotOutcome"},
            ]}},
            {"name": "change", "type": {"type": "enum", "name": "SlotChange", "symbols": list(SLOT_CHANGES)}},
            {"name": "deciding_a", "type": ["null", deciding]},
            {"name": "deciding_b", "type": ["null", "DecidingAttempt"]},
            {"name": "records", "type": ["null", _records_avro_schema()], "default": None},
        ],
    }


def generated_slot_change_schemas() -> dict[str, bytes]:
    """{asset path: bytes} of the comparison's slot row schemas (JSON Schema and Avro); the Arrow one
    is derived from the Avro one with the other outputs' (``generated_output_schemas``)."""
    return {SLOT_CHANGE_SCHEMA_JSON: orjson.dumps(slot_change_json_schema(), option=_JSON_OPTS),
            SLOT_CHANGE_SCHEMA_AVRO: orjson.dumps(slot_change_avro_schema(), option=_JSON_OPTS)}
