"""Every query of docs/querying.md, run by DuckDB against a Parquet run of the fixture archive.

Each answer is checked against the same figure computed in Python from the
rows (read back by ``pipelines.outputs``), so a query that drifts from the
outputs fails here.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from fixture_archive import run_job, write_archive

DOC = Path(__file__).resolve().parent.parent / "docs" / "querying.md"
QUERY = re.compile(r"<!-- query: (\w+) -->\s*```sql\n(.*?)```", re.DOTALL)
PLACEHOLDER = "out/run1"


def doc_queries() -> dict[str, str]:
    return dict(QUERY.findall(DOC.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("querying")
    manifest, outputs = run_job(write_archive(root / "archive"), root / "run", "--output-format", "parquet")
    return root / "run", manifest, outputs


def answer(run_dir: Path, name: str) -> list[tuple]:
    sql = doc_queries()[name]
    assert PLACEHOLDER in sql
    return duckdb.connect().execute(sql.replace(PLACEHOLDER, str(run_dir))).fetchall()


def test_the_document_has_the_five_queries():
    assert set(doc_queries()) == {"outcomes", "reason_codes", "waiting", "one_source", "npcs"}


def test_outcomes_per_family(run):
    run_dir, manifest, outputs = run
    expected = Counter((row["family"], row["verdict"]) for row in outputs["evaluations"])
    got = answer(run_dir, "outcomes")
    assert got == sorted((family, verdict, n) for (family, verdict), n in expected.items())
    accepted = {family: n for family, verdict, n in got if verdict == "accepted"}
    assert accepted == {f: c["accepted"] for f, c in manifest["outcomes"].items() if c["accepted"]}


def test_top_reason_codes(run):
    run_dir, _, outputs = run
    codes = Counter(issue["reason_code"] for row in outputs["evaluations"] for issue in row["issues"]
                    if issue["validator"] != "bound")
    expected = sorted(codes.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    got = answer(run_dir, "reason_codes")
    assert got == expected and got


def test_slots_waiting_for_a_retry(run):
    run_dir, manifest, outputs = run
    expected = sorted((r["family"], r["source_id"], r["chunk_id"], r["attempt"]) for r in outputs["retry_requests"])
    got = answer(run_dir, "waiting")
    assert got == expected and len(got) == manifest["totals"]["retry"]


def test_the_artifacts_of_one_source(run):
    run_dir, _, outputs = run
    expected = sorted((a["family"], a["chunk_id"], len(a["records"]), a["provenance"]["attempt"])
                      for name, rows in outputs.items() if name.startswith("artifacts/") for a in rows
                      if a["source_id"] == "crd3:S1")
    got = answer(run_dir, "one_source")
    assert got == expected and len({family for family, *_ in got}) > 3


def test_npcs_found_per_episode(run):
    run_dir, _, outputs = run
    names: dict[str, set[str]] = {}
    for artifact in outputs["artifacts/npc-registry"]:
        names.setdefault(artifact["source_id"], set()).update(r["name"] for r in artifact["records"])
    expected = [(source, len(found), sorted(found)) for source, found in sorted(names.items())]
    got = answer(run_dir, "npcs")
    assert got == expected and got
