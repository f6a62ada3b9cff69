"""docs/outputs.md, the data dictionary, against the schemas the job writes with (docgen/data_dictionary.py).

Fails when a field of any output schema file under assets/ (at any depth) has
no entry, when an entry names a field no schema has, when a manifest key the
job writes is undocumented (or a documented one is never written), when an
example row does not validate against its schema, and when docs/outputs.md is
not what the generator renders (run ``python -m docgen.data_dictionary``).
"""

from __future__ import annotations

import json
import shutil

import fastavro
import jsonschema
import pytest

from docgen import data_dictionary as dd
from docgen.output_prose import EXAMPLES_FROM
from domain.families import FAMILIES
from domain.manifest import build_manifest
from domain.counters import USAGE_MEASURES, verdict_usage
from domain.counters import unreadable_file as unreadable_file_key
from fixture_archive import run_job, write_archive

REGENERATE = "run python -m docgen.data_dictionary"


def test_the_schemas_are_found():
    schemas = dd.output_schema_files()
    assert {dd.artifact_schema(family) for family in FAMILIES} <= set(schemas)
    assert {"outputs/retry_request.v1", "outputs/evaluation.v1", "outputs/dead_letter.v1"} <= set(schemas)
    for schema, files in schemas.items():
        assert sorted(name[len(schema):] for name in files) == [".arrow.json", ".avsc", ".json"], schema
    # Nested fields count, at every depth and in every format.
    spells = dd.schema_paths(schemas[dd.artifact_schema("spells")])
    assert {"records[].cast.level", "records[].evidence[].start_unit_id", "provenance.producer.model"} <= spells


def test_every_schema_field_has_an_entry():
    assert dd.undocumented_fields() == [], f"add their meaning to the family's declaration (FamilySpec.docs) or docgen/output_prose.py, then {REGENERATE}"


def test_no_entry_names_a_field_no_schema_has():
    assert dd.unknown_entries() == []


def test_every_output_schema_has_a_section():
    assert dd.problems() == []


def test_the_three_formats_describe_the_same_fields():
    for schema, files in dd.output_schema_files().items():
        by_format = {name[len(schema):]: dd.schema_paths([name]) for name in files}
        assert by_format[".avsc"] == by_format[".arrow.json"] == by_format[".json"], schema


def test_docs_outputs_md_is_what_the_generator_renders():
    assert dd.DOC_PATH.read_text(encoding="utf-8") == dd.render(), f"docs/outputs.md is stale: {REGENERATE}"


def test_the_command_line_writes_and_checks(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(dd, "DOC_PATH", tmp_path / "outputs.md")
    assert dd.main(["--check"]) == 1
    assert dd.main([]) == 0 and dd.DOC_PATH.read_text(encoding="utf-8") == dd.render()
    assert dd.main(["--check"]) == 0


# --- the checks fail when they should: a copy of the assets, changed --------------------------------

@pytest.fixture
def assets_copy(tmp_path, monkeypatch):
    root = tmp_path / "assets"
    shutil.copytree(dd.ASSETS_DIR / "outputs", root / "outputs")
    for family in FAMILIES:
        shutil.copytree(dd.ASSETS_DIR / "dnd" / family / "schemas", root / "dnd" / family / "schemas")
    monkeypatch.setattr(dd, "ASSETS_DIR", root)
    return root


def _edit(path, change):
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_a_new_nested_field_without_an_entry_is_reported(assets_copy):
    def add(schema):
        record = next(f for f in schema["fields"] if f["name"] == "records")["type"]["items"]
        cast = next(f for f in record["fields"] if f["name"] == "cast")["type"]
        cast["fields"].append({"name": "components", "type": "string"})

    _edit(assets_copy / "dnd/spells/schemas/dnd_spells.v1.avsc", add)
    assert dd.undocumented_fields() == ["dnd/spells/schemas/dnd_spells.v1: records[].cast.components"]


def test_a_new_output_schema_without_a_section_is_reported(assets_copy):
    shutil.copy(assets_copy / "outputs/dead_letter.v1.avsc", assets_copy / "outputs/novel.v1.avsc")
    assert "outputs/novel.v1: input" in dd.undocumented_fields()
    assert any(p.startswith("no section for the schema outputs/novel.v1") for p in dd.problems())


def test_an_entry_for_a_field_no_schema_has_is_reported(assets_copy):
    def drop(schema):
        schema["fields"] = [f for f in schema["fields"] if f["name"] != "payload_encoding"]

    for suffix in (".avsc", ".arrow.json"):
        _edit(assets_copy / f"outputs/dead_letter.v1{suffix}", drop)
    _edit(assets_copy / "outputs/dead_letter.v1.json", lambda s: s["properties"].pop("payload_encoding"))
    assert dd.unknown_entries() == ["outputs/dead_letter.v1: payload_encoding"]


# --- example rows --------------------------------------------------------------------------------

def _validate(schema: str, row: dict) -> None:
    jsonschema.Draft202012Validator(dd.load_schema(schema + ".json")).validate(row)
    assert fastavro.validation.validate(row, fastavro.parse_schema(dd.load_schema(schema + ".avsc")),
                                        raise_errors=True)


def test_the_example_artifact_and_every_family_record_validate():
    _validate(dd.artifact_schema("spells"), dd.ARTIFACT_EXAMPLE)
    for family, spec in FAMILIES.items():
        chunk = "*" if spec.chunk_kind == "source" else dd.ARTIFACT_EXAMPLE["chunk_id"]
        _validate(dd.artifact_schema(family), {**dd.ARTIFACT_EXAMPLE, "family": family, "chunk_id": chunk,
                                               "records": [spec.docs.example]})


def test_every_output_example_validates():
    for doc in dd.OUTPUT_DOCS:
        for row in (doc.example, *doc.more_examples):
            _validate(doc.schema, row)


def test_examples_are_shortened_when_shown():
    shown = dd.render_example(dd.ARTIFACT_EXAMPLE)
    assert '"sha256:a964dde8…"' in shown and dd.ARTIFACT_EXAMPLE["validator_policy_fingerprint"] not in shown


def test_every_example_comes_from_where_a_test_looks_for_it():
    """out/demo/: tests/test_demo.py; out/query/: tests/test_querying.py; the dead letters, which the demo does
    not write: tests/test_pipeline_e2e.py (on tests/fixture_archive.py's archive)."""
    for example in dd.example_sources():
        assert example.folder.startswith(("out/demo/", "out/query/")) or (
            example.shown_as == "an example row of dead_letters/" and "tests/fixture_archive.py" in example.folder), \
            example.shown_as
        assert example.folder.startswith(tuple(EXAMPLES_FROM)) == example.folder.startswith("out/")
    assert dd.MANIFEST_EXAMPLE_FROM.startswith("out/demo/") and dd.ARTIFACT_EXAMPLE_FROM.startswith("out/demo/")


# --- the manifest ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    root = tmp_path_factory.mktemp("data_dictionary")
    written, _ = run_job(write_archive(root / "archive"), root / "run")
    return written


def test_the_manifest_blocks_are_documented(manifest):
    assert list(dd.MANIFEST_BLOCKS) and set(manifest) == set(dd.MANIFEST_BLOCKS)
    assert {path.split(".")[0] for path in dd.MANIFEST_FIELDS} == set(dd.MANIFEST_BLOCKS)


def test_every_manifest_key_is_documented_and_every_documented_key_is_written(manifest):
    # A run with no unreadable file leaves unreadable_files.by_input empty: a manifest with one fills it.
    damaged = build_manifest({unreadable_file_key("candidates", "/archive/c.jsonl.gz"): 1},
                             options=manifest["options"], runner=manifest["runner"])
    written = dd.manifest_paths(manifest) | dd.manifest_paths(damaged) | dd.manifest_paths(judged(manifest))
    assert written - set(dd.MANIFEST_FIELDS) == set(), "manifest keys without an entry in MANIFEST_FIELDS"
    assert set(dd.MANIFEST_FIELDS) - written == set(), "MANIFEST_FIELDS entries the manifest does not have"


def test_the_manifest_types_are_right(manifest):
    names = {bool: "boolean", int: "integer", str: "string", list: "array", type(None): "null"}
    for path, value in dd._manifest_items(manifest):
        if path not in dd.MANIFEST_FIELDS:
            continue
        kind = dd.MANIFEST_FIELDS[path][0]
        assert names[type(value)] in kind or (value is None and "or null" in kind), (path, value, kind)


def test_the_manifest_example_is_documented_and_complete(manifest):
    example = dd.manifest_paths(dd.MANIFEST_EXAMPLE)
    assert example <= set(dd.MANIFEST_FIELDS)
    # Everything a sound run writes is in the example (by_input is empty there too; it has a judge).
    assert dd.manifest_paths(manifest) | dd.manifest_paths(judged(manifest)) == example


def judged(manifest):
    """The manifest of the same counts with --judges all: its judges block has an entry per judge, and one
    verdict that carried a usage (verdict_usage's by_producer)."""
    billed = {verdict_usage("combat-semantics", "openai", "sim-2", True, measure): 1 for measure in USAGE_MEASURES}
    return build_manifest(billed, options={**manifest["options"], "judges": ["combat-semantics"]},
                          runner=manifest["runner"])
