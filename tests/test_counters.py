"""Counter keys have one builder each (``domain.counters``), used by the steps that count and
by the manifests that read the counts back (issue 30: they were built as strings in three
modules and parsed back in a fourth)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import orjson

import domain.counters as counters
from domain.batch.export import INPUT_REGISTRIES, INPUT_RETRY_REQUESTS, build_export_manifest
from domain.families import FAMILIES
from domain.intake import INPUT_CANDIDATES, INPUT_PRIOR_REGISTRIES, INPUT_TRANSCRIPTS
from domain.manifest import build_manifest
from domain.reprocess import RunConfig, process_source
from domain.revision import REQUEST_KINDS

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("domain", "analysis", "pipelines", "transforms")
# The per-family and per-input prefixes of counter keys: only domain/counters.py may spell them.
PREFIXES = ("outcome/", "revision/", "invariant_failures/", "reordering_saved_retries/", "reordering_saved_deferrals/",
            "dead_letters/", "blank_lines/", "shaped/", "unreadable_file/")


def _spelled_keys(path: Path) -> list[str]:
    """String literals and f-strings of a module that build a counter key (docstrings aside)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
            head = node.values[0].value if node.values and isinstance(node.values[0], ast.Constant) else ""
            tail = node.values[-1].value if node.values and isinstance(node.values[-1], ast.Constant) else ""
            if head.startswith(PREFIXES) or (tail == "_in" and len(node.values) == 2):
                found.append("f" + repr("".join(parts)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            rest = node.value.partition("/")[2]
            if node.value.startswith(PREFIXES) and rest and "." not in rest:  # a file path is not a key
                found.append(repr(node.value))
    return found


def test_no_module_but_the_counters_spells_a_counter_key():
    offenders = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "domain" / "counters.py":
                continue
            spelled = _spelled_keys(path)
            if spelled:
                offenders[str(path.relative_to(ROOT))] = spelled
    assert offenders == {}


def test_outcomes_have_one_definition():
    import domain.manifest
    import domain.reprocess
    import pipelines.reprocess

    assert domain.manifest.OUTCOMES is counters.OUTCOMES is pipelines.reprocess.OUTCOMES
    assert not hasattr(domain.reprocess, "OUTCOMES")
    manifest = build_manifest({}, options={}, runner="test")
    assert tuple(manifest["totals"]) == counters.OUTCOMES
    assert all(tuple(row) == counters.OUTCOMES for row in manifest["outcomes"].values())


def test_request_kinds_have_one_definition():
    import domain.schemas

    assert domain.schemas.REQUEST_KINDS is REQUEST_KINDS


def test_every_key_the_job_writes_is_read_by_the_manifest():
    """Each key the per-source step and the reading step write moves a manifest figure: the
    manifest of the counts differs from the manifest without that key."""
    from test_intake import COMPACT, SOURCE, candidate

    result = process_source(SOURCE, [COMPACT, COMPACT], [candidate("c-1", "2026-10-01T12:00:00Z"),
                                                         candidate("c-2", "2026-10-01T12:00:00Z", "not json"),
                                                         candidate("c-3", "x", family="nope")],
                            RunConfig(refresh_stale=True))
    read_side = {counters.records_in(name): 3 for name in (INPUT_TRANSCRIPTS, INPUT_CANDIDATES, INPUT_PRIOR_REGISTRIES)}
    read_side.update({counters.blank_lines(INPUT_CANDIDATES): 1, counters.blank_lines(INPUT_TRANSCRIPTS): 1,
                      counters.unreadable_file(INPUT_CANDIDATES, "/a/c.jsonl"): 1})
    counts = Counter(result.counts) + Counter(read_side)
    counts.update({counters.FILTERED: 1, counters.PRIOR_REGISTRIES_VALID: 1,
                   counters.dead_letters(INPUT_PRIOR_REGISTRIES): 1})
    for family in FAMILIES:
        keys = counters.family_keys(family)
        counts.update({getattr(keys, name): 1 for name in keys.__slots__})
    full = orjson.dumps(build_manifest(counts, options={}, runner="t"))
    for key in counts:
        without = {k: v for k, v in counts.items() if k != key}
        assert orjson.dumps(build_manifest(without, options={}, runner="t")) != full, key


def test_every_key_export_batch_writes_is_read_by_its_manifest():
    counts = {counters.records_in(INPUT_RETRY_REQUESTS): 9, counters.dead_letters(INPUT_RETRY_REQUESTS): 1,
              counters.FILTERED: 1, counters.STALE_REQUESTS: 1, counters.SHAPED: 2,
              **{counters.shaped(kind): 1 for kind in REQUEST_KINDS},
              counters.records_in(INPUT_TRANSCRIPTS): 1, counters.dead_letters(INPUT_TRANSCRIPTS): 1,
              counters.blank_lines(INPUT_RETRY_REQUESTS): 1, counters.records_in(INPUT_REGISTRIES): 1,
              counters.REGISTRIES_USED: 1, counters.dead_letters(INPUT_REGISTRIES): 1}
    options = {"provider": "openai-chat", "model": "m", "max_output_tokens": 100}  # as export-batch passes them
    full = orjson.dumps(build_export_manifest(counts, [], options=options, runner="t"))
    for key in counts:
        if key == counters.SHAPED:  # the sum of shaped/<kind>, kept for the progress log
            continue
        without = {k: v for k, v in counts.items() if k != key}
        assert orjson.dumps(build_export_manifest(without, [], options=options, runner="t")) != full, key
