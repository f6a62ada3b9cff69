"""The data dictionary of the job's outputs, ``docs/outputs.md``: rendered from the schemas the job writes
with and the prose of the declarations.

Types, nullability and rules (patterns, allowed values, minimums) come from the output schema files
under ``assets/`` at the moment of rendering: the Avro schema of each output (``*.avsc``, what the
writers use), the Arrow schema of its Parquet files (``*.arrow.json``) and its JSON Schema
(``*.json``), all produced by ``python -m domain.schemagen``. What no schema can say - what a field
means, a short example row, what the manifest's blocks hold - is prose: a family's own records in its
declaration (``FamilySpec.docs``, domain/families/), everything else in ``docgen.output_prose`` (the
manifest's in ``docgen.manifest_prose``).

    python -m docgen.data_dictionary           # writes docs/outputs.md
    python -m docgen.data_dictionary --check   # exit 1 when docs/outputs.md is not what render() gives

``tests/test_data_dictionary.py`` fails when a field of any output schema (at any depth) has no entry,
when an entry names a field no schema has, when a manifest key is undocumented (or documented but never
written), when an example row does not validate, and when docs/outputs.md is stale; tests/test_demo.py,
tests/test_querying.py and tests/test_pipeline_e2e.py when an example is not a row of the folder the page names
beside it (``example_sources``; the message shows that slot's row there now). A new field: add its meaning (and
to the example rows, as the demo writes them), then run the command above.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import assets as _assets_package
from docgen.manifest_prose import MANIFEST_BLOCKS, MANIFEST_EXAMPLE, MANIFEST_EXAMPLE_FROM, MANIFEST_FIELDS
from docgen.output_prose import (ARTIFACT_EXAMPLE, ARTIFACT_EXAMPLE_FROM, ARTIFACT_FIELDS, EVIDENCE_FIELDS,
                                 EXAMPLES_FROM, OUTPUT_DOCS, OutputDoc, family_example_from)
from domain.assets import durable_schema_path
from domain.families import FAMILIES

ASSETS_DIR = Path(_assets_package.__file__).resolve().parent
DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "outputs.md"
GENERATOR = "python -m docgen.data_dictionary"

# =================================================================================================
# The schemas: reading every output schema file under assets/
# =================================================================================================

# The files of one schema; the longest suffix first (an Arrow schema also ends in .json).
SCHEMA_SUFFIXES = (".arrow.json", ".avsc", ".json")


def artifact_schema(family: str) -> str:
    """Asset path without extension of a family's durable schemas: ``dnd/spells/schemas/dnd_spells.v1``."""
    return durable_schema_path(family).removesuffix(".json")


def output_schema_files() -> dict[str, list[str]]:
    """Every output schema file under assets/, by schema (asset path without extension): the durable
    artifact schemas of assets/dnd/*/schemas/ (not the LLM-facing ``*_llm.*``) and assets/outputs/."""
    found: dict[str, list[str]] = {}
    paths = [*ASSETS_DIR.glob("outputs/*"), *ASSETS_DIR.glob("dnd/*/schemas/*")]
    for path in sorted(paths):
        name = path.relative_to(ASSETS_DIR).as_posix()
        suffix = next((s for s in SCHEMA_SUFFIXES if name.endswith(s)), None)
        if suffix is None or "_llm." in name:
            continue
        found.setdefault(name[: -len(suffix)], []).append(name)
    return found


def load_schema(path: str) -> Any:
    return json.loads((ASSETS_DIR / path).read_text(encoding="utf-8"))


def avro_fields(schema: Mapping) -> Iterator[tuple[str, Any, bool]]:
    """(path, Avro type without its null branch, nullable) of every field, depth first, named types resolved."""
    named: dict[str, Any] = {}

    def resolve(avro_type: Any) -> tuple[Any, bool]:
        nullable = isinstance(avro_type, list) and "null" in avro_type
        if isinstance(avro_type, list):
            rest = [t for t in avro_type if t != "null"]
            avro_type = rest[0] if len(rest) == 1 else rest
        if isinstance(avro_type, str) and avro_type in named:
            avro_type = named[avro_type]
        if isinstance(avro_type, dict) and "name" in avro_type and avro_type.get("type") in ("record", "enum"):
            named.setdefault(avro_type["name"], avro_type)
        return avro_type, nullable

    def walk(record: Mapping, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        for fld in record["fields"]:
            path = f"{prefix}{fld['name']}"
            avro_type, nullable = resolve(fld["type"])
            yield path, avro_type, nullable
            yield from inner(avro_type, path)

    def inner(avro_type: Any, path: str) -> Iterator[tuple[str, Any, bool]]:
        if isinstance(avro_type, dict) and avro_type.get("type") == "record":
            yield from walk(avro_type, path + ".")
        elif isinstance(avro_type, dict) and avro_type.get("type") == "array":
            item, _ = resolve(avro_type["items"])
            yield from inner(item, path + "[]")

    yield from walk(schema, "")


def avro_type_name(avro_type: Any) -> str:
    if isinstance(avro_type, str):
        return avro_type
    if isinstance(avro_type, list):
        return " or ".join(avro_type_name(t) for t in avro_type)
    kind = avro_type.get("type")
    if kind == "array":
        items = avro_type["items"]
        items = [t for t in items if t != "null"][0] if isinstance(items, list) else items
        return f"array<{avro_type_name(items)}>"
    if kind in ("record", "enum"):
        return kind
    return avro_type_name(kind)


def json_schema_paths(schema: Mapping) -> set[str]:
    """Every property path of a JSON Schema (``properties`` and array ``items``, through ``allOf``)."""
    paths: set[str] = set()

    def walk(node: Any, prefix: str) -> None:
        if not isinstance(node, Mapping):
            return
        for name, sub in node.get("properties", {}).items():
            path = f"{prefix}{name}"
            paths.add(path)
            walk(sub, path + ".")
            items = sub.get("items") if isinstance(sub, Mapping) else None
            while isinstance(items, Mapping):
                walk(items, path + "[].")
                path, items = path + "[]", items.get("items")
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in node.get(key, []):
                walk(sub, prefix)
        for key in ("if", "then", "else"):
            walk(node.get(key), prefix)

    walk(schema, "")
    return paths


def json_schema_node(schema: Mapping, path: str) -> Mapping:
    node: Any = schema
    for part in path.split("."):
        name, lists = part.rstrip("[]"), part.count("[]")
        node = node["properties"][name]
        for _ in range(lists):
            node = node["items"]
    return node


def arrow_fields(schema: Mapping) -> dict[str, tuple[str, bool]]:
    """{path: (Arrow type, nullable)} of every field of an ``*.arrow.json`` description."""
    found: dict[str, tuple[str, bool]] = {}

    def type_name(arrow_type: Any) -> str:
        if isinstance(arrow_type, str):
            return arrow_type
        if "list" in arrow_type:
            return f"list<{type_name(arrow_type['list']['type'])}>"
        return "struct"

    def inner(arrow_type: Any, path: str) -> None:
        if isinstance(arrow_type, dict) and "struct" in arrow_type:
            walk(arrow_type["struct"], path + ".")
        elif isinstance(arrow_type, dict) and "list" in arrow_type:
            inner(arrow_type["list"]["type"], path + "[]")

    def walk(fields: list, prefix: str) -> None:
        for fld in fields:
            path = prefix + fld["name"]
            found[path] = (type_name(fld["type"]), bool(fld["nullable"]))
            inner(fld["type"], path)

    walk(schema["fields"], "")
    return found


def schema_paths(files: list[str]) -> set[str]:
    """The field paths of one schema's files (Avro, JSON Schema, Arrow), together."""
    paths: set[str] = set()
    for name in files:
        data = load_schema(name)
        if name.endswith(".avsc"):
            paths.update(path for path, _, _ in avro_fields(data))
        elif name.endswith(".arrow.json"):
            paths.update(arrow_fields(data))
        else:
            paths.update(json_schema_paths(data))
    return paths


def _rule(node: Mapping) -> str:
    """What the JSON Schema requires of a value beyond its type."""
    parts = []
    if "const" in node:
        parts.append(f"always `{node['const']}`")
    if "enum" in node:
        parts.append("one of " + ", ".join(f"`{value}`" for value in node["enum"]))
    if "pattern" in node:
        parts.append(f"pattern `{node['pattern']}`")
    if "minimum" in node:
        parts.append(f"≥ {node['minimum']}")
    if "maximum" in node:
        parts.append(f"≤ {node['maximum']}")
    if node.get("minLength"):
        parts.append("not empty" if node["minLength"] == 1 else f"at least {node['minLength']} characters")
    if node.get("minItems"):
        parts.append(f"at least {node['minItems']} item" + ("s" if node["minItems"] > 1 else ""))
    return "; ".join(parts)


@dataclass(frozen=True)
class FieldRow:
    path: str
    avro: str
    parquet: str
    nullable: bool
    rule: str


def field_rows(schema: str) -> list[FieldRow]:
    """One row per field of a schema, in the Avro schema's order, with its Parquet type and JSON Schema rule."""
    avro = load_schema(schema + ".avsc")
    arrow = arrow_fields(load_schema(schema + ".arrow.json"))
    json_schema = load_schema(schema + ".json")
    rows = []
    for path, avro_type, nullable in avro_fields(avro):
        parquet, arrow_nullable = arrow.get(path, ("?", nullable))
        try:
            rule = _rule(json_schema_node(json_schema, path))
        except (KeyError, TypeError):
            rule = ""
        rows.append(FieldRow(path, avro_type_name(avro_type), parquet, nullable or arrow_nullable, rule))
    return rows


def artifact_envelope_rows() -> list[FieldRow]:
    """The artifact fields outside ``records``, the same in every family (the ``family`` rule, a constant,
    differs: it is given as the folder's family)."""
    by_family = {family: [row for row in field_rows(artifact_schema(family))
                          if not (row.path == "records" or row.path.startswith("records["))]
                 for family in FAMILIES}
    first = next(iter(by_family.values()))
    for family, rows in by_family.items():
        if [(r.path, r.avro, r.parquet, r.nullable) for r in rows] != [(r.path, r.avro, r.parquet, r.nullable)
                                                                       for r in first]:
            raise ValueError(f"the artifact envelope of {family} differs from the others'")
    return [FieldRow(r.path, r.avro, r.parquet, r.nullable, "the folder's family" if r.path == "family" else r.rule)
            for r in first]


# =================================================================================================
# Checks: what the test asserts, and what the command line reports
# =================================================================================================


def family_meanings(family: str) -> dict[str, str]:
    """Every entry that may describe a field of ``family``'s artifacts."""
    return {**ARTIFACT_FIELDS, **EVIDENCE_FIELDS, **FAMILIES[family].docs.fields}


def meaning_of(schema: str, path: str) -> str | None:
    """The entry for a field of ``schema`` (an asset path without extension), or None."""
    for family in FAMILIES:
        if schema == artifact_schema(family):
            return family_meanings(family).get(path)
    for doc in OUTPUT_DOCS:
        if doc.schema == schema:
            return doc.fields.get(path)
    return None


def undocumented_fields() -> list[str]:
    """``schema: path`` of every field of an output schema file under assets/ with no entry here."""
    missing = []
    for schema, files in output_schema_files().items():
        for path in sorted(schema_paths(files)):
            if meaning_of(schema, path) is None:
                missing.append(f"{schema}: {path}")
    return missing


def unknown_entries() -> list[str]:
    """Entries naming a field that no schema has (where they are meant to apply)."""
    files = output_schema_files()
    paths = {schema: schema_paths(names) for schema, names in files.items()}
    family_schemas = [artifact_schema(family) for family in FAMILIES]
    unknown = []
    for path in ARTIFACT_FIELDS:
        if not all(path in paths.get(schema, ()) for schema in family_schemas):
            unknown.append(f"artifacts (every family): {path}")
    for path in EVIDENCE_FIELDS:
        if not any(path in paths.get(schema, ()) for schema in family_schemas):
            unknown.append(f"artifacts (evidence): {path}")
    for family, spec in FAMILIES.items():
        unknown += [f"artifacts/{family}: {path}" for path in spec.docs.fields
                    if path not in paths.get(artifact_schema(family), ())]
    for doc in OUTPUT_DOCS:
        if doc.schema not in paths:
            unknown.append(f"{doc.folder}: no schema files {doc.schema}.*")
            continue
        unknown += [f"{doc.schema}: {path}" for path in doc.fields if path not in paths[doc.schema]]
    return unknown


def documented_schemas() -> set[str]:
    return {artifact_schema(family) for family in FAMILIES} | {doc.schema for doc in OUTPUT_DOCS}


def problems() -> list[str]:
    """Everything that keeps the dictionary from describing the schemas as they are."""
    found = [f"no entry for {item}" for item in undocumented_fields()]
    found += [f"entry for a field no schema has: {item}" for item in unknown_entries()]
    found += [f"no section for the schema {schema} ({', '.join(files)})"
              for schema, files in output_schema_files().items() if schema not in documented_schemas()]
    found += [f"no intro or record example for the family {family}"
              for family, spec in FAMILIES.items() if not spec.docs.intro.strip() or not spec.docs.example]
    return found


# =================================================================================================
# Rendering
# =================================================================================================

_DIGEST = re.compile(r"^(sha256:)?([0-9a-f]{64})$")
_MAX_SHOWN = 100


def _shorten(value: Any) -> Any:
    """Example values as shown: digests cut to 8 hex digits, long text to its beginning (marked with …)."""
    if isinstance(value, str):
        digest = _DIGEST.match(value)
        if digest:
            return f"{digest.group(1) or ''}{digest.group(2)[:8]}…"
        return value if len(value) <= _MAX_SHOWN else value[: _MAX_SHOWN - 4] + "…"
    if isinstance(value, Mapping):
        return {key: _shorten(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shorten(item) for item in value]
    return value


@dataclass(frozen=True)
class ExampleSource:
    """One example of the page and where it comes from: a row of ``folder`` (a family's record: a record of one
    of its rows' ``records``, ``record=True``)."""

    shown_as: str  # which example, for a message: "the example row of retry_requests/"
    folder: str  # "out/demo/run1/retry_requests/", or prose when it is no folder of the demo's
    row: Mapping[str, Any]
    record: bool = False


def example_sources() -> list[ExampleSource]:
    """Every example row of the page with the folder it is a row of (what the tests look for)."""
    found = [ExampleSource("the artifact example", ARTIFACT_EXAMPLE_FROM, ARTIFACT_EXAMPLE)]
    found += [ExampleSource(f"the example record of {family}", family_example_from(family), spec.docs.example, True)
              for family, spec in FAMILIES.items() if spec.docs.example]
    found += [ExampleSource(f"an example row of {doc.folder}", doc.origin, row)
              for doc in OUTPUT_DOCS for row in (doc.example, *doc.more_examples)]
    return found


def _from(origin: str) -> str:
    """Where an example comes from, as the page says it: a folder in backticks, or the prose as written."""
    return f"`{origin}`" if origin.startswith(tuple(EXAMPLES_FROM)) else origin


def render_example(row: Mapping[str, Any]) -> str:
    """A row as JSON: one top-level field per line, each value on its line."""
    lines = [f"  {json.dumps(key)}: {json.dumps(_shorten(value), ensure_ascii=False)}" for key, value in row.items()]
    return "```json\n{\n" + ",\n".join(lines) + "\n}\n```"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _field_table(rows: list[FieldRow], meaning: Any) -> list[str]:
    out = ["| field | type (Avro / Parquet) | null | rule | meaning |", "|---|---|---|---|---|"]
    for row in rows:
        text = meaning(row.path)
        out.append(f"| `{row.path}` | {row.avro} / {row.parquet} | {'yes' if row.nullable else 'no'} | "
                   f"{_cell(row.rule)} | {_cell(text) if text else '**(no entry)**'} |")
    return out


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


def _manifest_items(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(documented-form path, value) of every key of a manifest or an excerpt of one: family names, output
    folders and input names as ``<family>``, ``<output>``, ``<input>``; the elements of a list as ``[]``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if prefix == "files.":
                key = "<output>"
            elif prefix.endswith("by_input."):
                key = "<input>"
            elif prefix in ("judges.", "verdict_usage."):
                key = "<judge>"
            elif key in FAMILIES:
                key = "<family>"
            yield prefix + key, item
            yield from _manifest_items(item, prefix + key + ".")
    elif isinstance(value, list):
        for item in value:
            yield from _manifest_items(item, prefix[:-1] + "[].")


def manifest_paths(manifest: Mapping[str, Any]) -> set[str]:
    """The paths of a manifest as MANIFEST_FIELDS names them: every key whose value is not an object."""
    return {path for path, value in _manifest_items(manifest) if not isinstance(value, Mapping)}


def render() -> str:
    out: list[str] = [
        "# Outputs: the data dictionary",
        "",
        f"<!-- Generated by `{GENERATOR}` from the output schemas under assets/ and the prose of the family "
        "declarations (domain/families/), docgen/output_prose.py and docgen/manifest_prose.py: edit those, not this "
        "file. "
        "tests/test_data_dictionary.py checks it. -->",
        "",
        "Every folder a run writes, every field of its rows (type, whether it can be null, what the schema requires "
        "of it, what it means) and a short example row; then the manifest. The types and rules below are read from "
        "the schemas the job writes with - the Avro schemas (`*.avsc`), the Arrow schemas of the Parquet files "
        "(`*.arrow.json`) and the JSON Schemas (`*.json`) under `assets/outputs/` and "
        "`assets/dnd/<family>/schemas/`, all generated by `python -m domain.schemagen` - so they are the contract, "
        f"and this page is regenerated from them (`{GENERATOR}`).",
        "",
        "## A run folder",
        "",
        "`notarius-reprocess --output DIR` (or `python -m pipelines.reprocess`) writes, under `DIR`:",
        "",
        "| folder | audience | one row is | schema |",
        "|---|---|---|---|",
        "| [`artifacts/<family>/`](#artifactsfamily) | downstream | the one canonical artifact of an accepted slot | "
        "`assets/dnd/<family>/schemas/dnd_<family>.v1.*` |",
    ]
    for doc in OUTPUT_DOCS:
        if doc.command != "reprocess":
            continue
        out.append(f"| [`{doc.folder}`](#{_anchor(doc.folder)}) | {doc.audience} | {_cell(doc.row)} | "
                   f"`assets/{doc.schema}.*` |")
    out += [
        "| [`manifest.json`](#manifestjson) | operators | the run's counts, conservation, fingerprints, options and "
        "the list of every file (written last) | none: see below |",
        "",
        "A *slot* is `(source_id, chunk_id, family)`: one chunk of one transcript, extracted by one family. Each "
        "folder holds sharded files named `part-NNNNN-of-NNNNN` with the extension of `--output-format`: `.avro` "
        "(the default), `.jsonl` or `.parquet`. Every format holds the same rows; raw responses are byte-identical "
        "in each. Read only a folder that has `manifest.json` (`notarius-reprocess verify DIR` checks it); query "
        "one with DuckDB: `docs/querying.md`.",
        "",
        "### Types",
        "",
        "| Avro | Parquet (Arrow) | JSON Lines |",
        "|---|---|---|",
        "| `string` | `string` | string |",
        "| `long` | `int64` | number (an integer) |",
        "| `boolean` | `bool` | `true` / `false` |",
        "| `enum` | `string` | string |",
        "| `record` | `struct` | object |",
        "| `array<T>` | `list<T>` | array |",
        "| null = yes: a union with `null` | nullable | `null` |",
        "",
        "A field path `a.b` is field `b` of the record in field `a`; `a[]` stands for each element of the list in "
        "`a` (in DuckDB: `unnest(a)`). Every field is always present; *null* says whether its value can be null. "
        "*Rule* is what the JSON Schema requires beyond the type. In the examples, digests are cut to their first "
        "8 hex digits and long text to its beginning (`…`); each is otherwise a real row of the folder named "
        "beside it: under `out/demo/` as `make demo` writes it, under `out/query/` as the run of "
        "[docs/querying.md](querying.md) writes it from the demo's archive (the tests find every one there).",
        "",
        "## `artifacts/<family>/`",
        "",
        "For downstream: one row per accepted slot, the slot's canonical artifact. The fields outside `records` "
        "are the same in every family:",
        "",
    ]
    out += _field_table(artifact_envelope_rows(), lambda path: ARTIFACT_FIELDS.get(path))
    out += ["", f"An artifact, from {_from(ARTIFACT_EXAMPLE_FROM)}:", "", render_example(ARTIFACT_EXAMPLE), "",
            "Each family's `records`:", ""]
    out += [", ".join(f"[{family}](#{_anchor(family)})" for family in FAMILIES), ""]
    for family in FAMILIES:
        rows = [row for row in field_rows(artifact_schema(family))
                if row.path == "records" or row.path.startswith("records[")]
        meanings, docs = family_meanings(family), FAMILIES[family].docs
        out += [f"### {family}", "", docs.intro or "**(no intro)**", ""]
        out += _field_table(rows, lambda path, meanings=meanings: meanings.get(path))
        if docs.example:
            out += ["", f"A record, from {_from(family_example_from(family))}:", "", "```json",
                    json.dumps(_shorten(docs.example), ensure_ascii=False), "```"]
        out.append("")
    for doc in OUTPUT_DOCS:
        if doc.command == "compare":
            continue
        out += _output_section(doc, "##")
    out += _manifest_section()
    compare_docs = [doc for doc in OUTPUT_DOCS if doc.command == "compare"]
    if compare_docs:
        out += ["## A comparison folder", "",
                "`notarius-reprocess compare RUN_A RUN_B --output DIR` compares two run folders (each must verify) "
                "and writes, under `DIR`, `compare.json` (per family and in total: transition counts, accepted "
                "artifacts changed or not, reason codes in A and B, requests of A answered in B; and `cost`: each run's "
                "attempts per family and verdict, tokens and, with `--prices`, money, and the revision's refresh "
                "round, B's attempts answering A's refresh requests; `docs/batch.md`), `compare.html` "
                "(the same at a glance), its own `manifest.json`, and:", ""]
        for doc in compare_docs:
            out += _output_section(doc, "###")
    return "\n".join(out).rstrip("\n") + "\n"


def _output_section(doc: OutputDoc, level: str) -> list[str]:
    out = [f"{level} `{doc.folder}`", "", f"For {doc.audience}: {doc.row}. {doc.intro}", ""]
    out += _field_table(field_rows(doc.schema), lambda path: doc.fields.get(path))
    examples = (doc.example, *doc.more_examples)
    out += ["", f"{'Example rows' if len(examples) > 1 else 'An example row'}, from {_from(doc.origin)}:", ""]
    for example in examples:
        out += [render_example(example), ""]
    return out


def _manifest_section() -> list[str]:
    out = ["## `manifest.json`", "",
           "One JSON object, written last (by temporary name and rename) once every output file is final: a folder "
           "without it is not a finished run. Keys are sorted. `<family>` stands for each family's key (every "
           "family appears, with zeros), `<output>` for each output folder (`artifacts/spells`, `evaluations`, ...), "
           "`<input>` for an input name. Its blocks: "
           + ", ".join(f"[`{block}`](#{_anchor(block)})" for block in MANIFEST_BLOCKS) + ".", ""]
    for block, text in MANIFEST_BLOCKS.items():
        entries = [(path, kind, meaning) for path, (kind, meaning) in MANIFEST_FIELDS.items()
                   if path == block or path.startswith(block + ".")]
        out += [f"### `{block}`", "", text, "", "| key | type | meaning |", "|---|---|---|"]
        out += [f"| `{path}` | {kind} | {_cell(meaning)} |" for path, kind, meaning in entries]
        out.append("")
    out += [f"A manifest, from {_from(MANIFEST_EXAMPLE_FROM)}, with its maps by family cut to one family, by judge "
            "to one judge and `files` to two outputs, and its paths relative to the folder that holds `out/` (the "
            "real ones are absolute; the files' hashes are one run's: every Avro file has a random sync marker):", "",
            render_example(MANIFEST_EXAMPLE), ""]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=GENERATOR, description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that docs/outputs.md is current")
    args = parser.parse_args(argv)
    text = render()
    found = problems()
    for problem in found:
        print(f"data dictionary: {problem}", file=sys.stderr)
    if args.check:
        current = DOC_PATH.read_text(encoding="utf-8") if DOC_PATH.exists() else ""
        if current != text:
            print(f"{DOC_PATH} is stale: run {GENERATOR}", file=sys.stderr)
            return 1
        return 1 if found else 0
    DOC_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {DOC_PATH}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
