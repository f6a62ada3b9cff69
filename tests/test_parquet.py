"""Parquet outputs: schemas derived from the Avro contracts, exact raw responses, DuckDB reads them."""

from __future__ import annotations

import hashlib

import apache_beam as beam
import orjson
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.assets import durable_avro_schema_path, load_json_asset, read_asset
from domain.families import FAMILIES
from domain.schemas import (
    OUTPUT_AVRO_SCHEMAS,
    arrow_schema,
    arrow_schema_path,
    generated_evaluation_schemas,
    generated_output_schemas,
)
from fixture_archive import run_job, write_archive
from transforms.write import OutputSpec, WriteOutputs, arrow_block
from transforms.write import arrow_schema as to_pyarrow

ARTIFACT_ARROW = to_pyarrow(load_json_asset(arrow_schema_path(durable_avro_schema_path("spells"))))


def test_generated_output_schemas_are_current():
    for path, data in {**generated_evaluation_schemas(), **generated_output_schemas()}.items():
        assert read_asset(path) == data, f"assets/{path} is stale: run python -m domain.schemagen"


@pytest.mark.parametrize("avro_path", [*OUTPUT_AVRO_SCHEMAS, *(durable_avro_schema_path(f) for f in sorted(FAMILIES))])
def test_arrow_schema_keeps_every_avro_field_and_its_nesting(avro_path):
    avro = load_json_asset(avro_path)
    schema = to_pyarrow(load_json_asset(arrow_schema_path(avro_path)))
    assert schema.names == [f["name"] for f in avro["fields"]]
    for field in avro["fields"]:
        arrow_type = schema.field(field["name"]).type
        kind = field["type"]["type"] if isinstance(field["type"], dict) else field["type"]
        expected = {"string": pa.types.is_string, "long": pa.types.is_int64, "array": pa.types.is_list,
                    "record": pa.types.is_struct, "enum": pa.types.is_string}
        if isinstance(kind, list):  # ["null", X]
            assert schema.field(field["name"]).nullable
        else:
            assert expected[kind](arrow_type), (field["name"], arrow_type)
            assert not schema.field(field["name"]).nullable


def test_unknown_avro_types_are_refused():
    with pytest.raises(ValueError):
        arrow_schema({"type": "record", "name": "X", "fields": [{"name": "a", "type": ["null", "string", "long"]}]})
    with pytest.raises(ValueError):
        arrow_schema({"type": "record", "name": "X", "fields": [{"name": "a", "type": "Undefined"}]})


def spell_artifact(raw: str) -> dict:
    return {
        "artifact_id": "a-" + "0" * 32, "family": "spells", "schema_version": "v1", "source_id": "s", "chunk_id": "x",
        "records": [{"spell_name": "Shield", "caster_name": "LIAM",
                     "cast": {"level": 1, "as_ritual": False, "target_names": []},
                     "evidence": [{"source_id": "s", "start_unit_id": 3, "end_unit_id": 4}]}],
        "earliest_evidence_unit_id": None,
        "provenance": {"candidate_id": "c", "attempt": 1, "producer": {"provider": "p", "model": "m"},
                       "prompt_fingerprint": "f", "schema_fingerprint": "g", "raw_response": raw,
                       "raw_response_sha256": hashlib.sha256(raw.encode()).hexdigest(), "judged_by": []},
        "validator_policy_fingerprint": "sha256:" + "0" * 64,
    }


@settings(max_examples=60, deadline=None)
@given(raw=st.text())  # any Unicode text without lone surrogates: what a decoded JSON string can hold
def test_raw_responses_survive_parquet_byte_for_byte(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("pq") / "part.parquet"
    pq.write_table(arrow_block([spell_artifact(raw)], ARTIFACT_ARROW), path, compression="snappy")
    (back,) = pq.read_table(path).to_pylist()
    assert back["provenance"]["raw_response"].encode("utf-8") == raw.encode("utf-8")
    assert back == spell_artifact(raw)


def test_tricky_raw_responses_survive_parquet(tmp_path):
    raws = ["\ufeff{\"spells\": []}", "caf\u00e9 \u2014 \U0001f409\r\n\x00tail", "", " " * 3, "\u0000"]
    path = tmp_path / "part.parquet"
    pq.write_table(arrow_block([spell_artifact(r) for r in raws], ARTIFACT_ARROW), path)
    assert [row["provenance"]["raw_response"] for row in pq.read_table(path).to_pylist()] == raws


def test_a_row_that_does_not_fit_the_schema_fails_loudly():
    row = spell_artifact("{}")
    row["provenance"]["attempt"] = "one"
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        arrow_block([row], ARTIFACT_ARROW)


def test_write_outputs_parquet_writes_a_readable_shard_even_when_empty(tmp_path):
    schema = to_pyarrow(load_json_asset(arrow_schema_path("outputs/dead_letter.v1.avsc")))
    rows = [{"input": "candidates", "reason": "r", "payload": "é", "payload_encoding": "utf-8"}]
    specs = {name: OutputSpec(str(tmp_path / name), "parquet", schema) for name in ("full", "empty")}
    with TestPipeline() as p:
        _ = (p | beam.Create([rows, [], rows]) | beam.Map(lambda block: ("full", block))
             | WriteOutputs(specs, str(tmp_path)))
    full = [r for f in sorted((tmp_path / "full").glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert full == rows * 2
    (empty,) = sorted((tmp_path / "empty").glob("part-*.parquet"))
    table = pq.read_table(empty)
    assert table.num_rows == 0 and table.schema.names == schema.names


# --- a whole run, read by DuckDB ----------------------------------------------------------------

@pytest.fixture(scope="module")
def parquet_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("parquet-run")
    archive = write_archive(root / "archive")
    manifest, _ = run_job(archive, root / "out", "--output-format", "parquet")
    return archive, root / "out", manifest


def test_duckdb_reads_every_output_of_a_parquet_run(parquet_run):
    archive, out, manifest = parquet_run
    con = duckdb.connect()
    count = lambda glob: con.execute(f"SELECT count(*) FROM read_parquet('{out}/{glob}', union_by_name=true)").fetchone()[0]
    assert count("evaluations/*.parquet") == manifest["conservation"]["evaluations"]
    assert count("retry_requests/*.parquet") == manifest["outputs"]["retry_requests"]
    assert count("artifacts/*/*.parquet") == manifest["outputs"]["artifacts"]
    assert count("dead_letters/*.parquet") == manifest["outputs"]["dead_letters"]
    verdicts = dict(con.execute(f"SELECT verdict, count(*) FROM '{out}/evaluations/*.parquet' GROUP BY verdict").fetchall())
    totals = manifest["totals"]
    assert verdicts.get("accepted", 0) == totals["accepted"] and verdicts.get("superseded", 0) == totals["superseded"]
    reordered = con.execute(f"SELECT sum(endpoints_reordered) FROM '{out}/evaluations/*.parquet'").fetchone()[0]
    assert reordered >= 1  # the fixture's reversed Fireball range


def test_duckdb_sees_typed_nested_columns(parquet_run):
    _, out, _ = parquet_run
    con = duckdb.connect()
    types = {row[0]: row[1] for row in con.execute(f"DESCRIBE SELECT * FROM '{out}/artifacts/spells/*.parquet'").fetchall()}
    assert types["earliest_evidence_unit_id"] == "BIGINT"
    assert types["records"].startswith("STRUCT(") and types["records"].endswith("[]")
    start, end = con.execute(f"SELECT records[1].evidence[1].start_unit_id, records[1].evidence[1].end_unit_id "
                         f"FROM '{out}/artifacts/spells/*.parquet' WHERE chunk_id = 'x-1'").fetchone()
    assert (start, end) == (10, 7)  # document order, kept as integers


def test_duckdb_returns_raw_responses_byte_for_byte(parquet_run):
    archive, out, _ = parquet_run
    raw_by_id = {r["candidate_id"]: r["raw_response"] for r in archive["good"]}
    rows = duckdb.connect().execute(
        f"SELECT provenance.candidate_id, provenance.raw_response, provenance.raw_response_sha256 "
        f"FROM read_parquet('{out}/artifacts/*/*.parquet', union_by_name=true)").fetchall()
    assert rows
    for candidate_id, raw, sha in rows:
        assert raw == raw_by_id[candidate_id]
        assert hashlib.sha256(raw.encode()).hexdigest() == sha


def test_read_keyed_inputs_reads_parquet_rows_as_json(tmp_path):
    """A Parquet run's outputs feed the next steps (--prior-registries, export-batch --retry-requests)."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.util import assert_that, equal_to

    from transforms.raw_records import decode_block
    from transforms.read import KEYED, KeyedInput, ReadKeyedInputs

    schema = to_pyarrow(load_json_asset(arrow_schema_path("outputs/dead_letter.v1.avsc")))
    rows = [{"input": "candidates", "reason": "r\n", "payload": "caf\u00e9 \U0001f409", "payload_encoding": "utf-8"},
            {"input": "transcripts", "reason": "", "payload": "", "payload_encoding": "base64"}]
    pq.write_table(arrow_block(rows, schema), tmp_path / "part-00000-of-00001.parquet")
    with TestPipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        read = p | ReadKeyedInputs((KeyedInput(str(tmp_path / "*.parquet"), "prior_registries", "input", 1000),))
        decoded = read[KEYED] | beam.FlatMap(lambda kv: [(kv[0], line) for line in decode_block(kv[1][1])])
        assert_that(decoded | beam.MapTuple(lambda key, line: (key, orjson.loads(line))),
                    equal_to([(row["input"], row) for row in rows]))


def test_a_parquet_run_verifies_and_a_changed_file_does_not(parquet_run, tmp_path):
    import shutil

    from pipelines.verify import verify_folder

    _, out, manifest = parquet_run
    assert verify_folder(str(out)).ok
    listed = [f for files in manifest["files"].values() for f in files]
    assert listed and all(f["format"] == "parquet" for f in listed)
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    victim = copy / "evaluations" / sorted(p.name for p in (out / "evaluations").glob("part-*"))[0]
    data = victim.read_bytes()
    victim.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))  # flipped: a change whatever the byte was
    assert not verify_folder(str(copy)).ok
