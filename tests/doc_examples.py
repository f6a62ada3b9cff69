"""docs/outputs.md's examples, looked for where the page says each comes from
(``docgen.data_dictionary.example_sources``): tests/test_demo.py looks in its demo for those of ``out/demo/``,
tests/test_querying.py in its run for those of ``out/query/``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from docgen.data_dictionary import example_sources
from pipelines.outputs import read_rows

SLOT = ("family", "source_id", "chunk_id")


def _slot(row: Mapping[str, Any]) -> tuple | None:
    return tuple(row[key] for key in SLOT) if all(key in row for key in SLOT) else None


def missing_examples(prefix: str, folder: Path) -> list[str]:
    """The examples from under ``prefix`` (``out/demo/``) that are no row of ``folder`` (what ``prefix`` names
    here), each said with the row its slot has there now, if any: what to put in the example instead."""
    missing = []
    for example in example_sources():
        if not example.folder.startswith(prefix):
            continue
        rows = read_rows(folder / example.folder[len(prefix):])
        found = [record for row in rows for record in row["records"]] if example.record else rows
        if dict(example.row) in found:
            continue
        now = [row for row in found if _slot(row) is not None and _slot(row) == _slot(example.row)]
        missing.append(f"{example.shown_as} is no row of {example.folder}"
                       + (f"; its slot's row there now: {now[0]}" if now else ""))
    return missing
