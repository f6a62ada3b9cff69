"""Every command and query of docs/querying.md, run as printed against a small ``make demo``.

The demo (``pipelines.demo`` on the bundled sample, in Parquet so that its run 1
holds refresh requests too) writes ``out/demo/`` under a temporary folder; the
document's job command then writes ``out/query/`` from the demo's archive,
with the document's own arguments; each query is run by DuckDB from that
folder, unchanged, and its answer checked against the same figure computed in
Python from the rows (read back by ``pipelines.outputs``), so a query that
drifts from the outputs, or returns nothing on a demo run, fails here.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import orjson
import pytest

from pipelines import demo, reprocess
from pipelines.outputs import read_manifest, read_outputs

DOC = Path(__file__).resolve().parent.parent / "docs" / "querying.md"
QUERY = re.compile(r"<!-- query: (\w+) -->\s*```sql\n(.*?)```", re.DOTALL)
COMMAND = re.compile(r"<!-- command: (\w+) -->\s*```\w+\n(.*?)```", re.DOTALL)
RUN = "out/query"


def doc_queries() -> dict[str, str]:
    return dict(QUERY.findall(DOC.read_text(encoding="utf-8")))


def doc_commands() -> dict[str, str]:
    return dict(COMMAND.findall(DOC.read_text(encoding="utf-8")))


def shell_lines(block: str) -> list[str]:
    """The block's command lines, continuations joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", block)
    return [line.split("  #")[0].strip() for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A folder holding out/demo/ (a finished small demo) and out/query/ (the document's job command)."""
    root = tmp_path_factory.mktemp("querying")
    lines = shell_lines(doc_commands()["run"])
    assert lines[0] == "make demo" and len(lines) == 2, lines
    with contextlib.redirect_stdout(io.StringIO()):
        # The whole sample, as make demo: a smaller demo keeps a share of the slots, and a source's reconciled
        # registry needs all of its chunk registries.
        assert demo.main(["--output", str(root / "out" / "demo"), "--output-format", "parquet"]) == 0
    program, *argv = shlex.split(lines[1])
    assert program == ".venv/bin/python" and argv[:2] == ["-m", "pipelines.reprocess"], lines[1]
    with contextlib.chdir(root), contextlib.redirect_stdout(io.StringIO()):
        assert reprocess.main(argv[2:]) == 0
    return root


def answer(root: Path, name: str, run: str = RUN) -> list[tuple]:
    sql = doc_queries()[name]
    assert RUN in sql
    with contextlib.chdir(root):
        return duckdb.connect().execute(sql.replace(RUN, run)).fetchall()


def test_the_document_has_its_queries_and_commands():
    text = DOC.read_text(encoding="utf-8")
    assert set(doc_queries()) == {"outcomes", "reason_codes", "waiting", "one_source", "npcs"}
    assert set(doc_commands()) == {"run", "query", "python"}
    # Every code block is one of them: nothing on the page runs untested.
    assert text.count("```") == 2 * (len(doc_queries()) + len(doc_commands()))
    assert "import polars" not in doc_commands()["python"]  # nothing installs polars


def test_the_job_command_reads_the_demo_archive(root):
    manifest = read_manifest(root / RUN)
    assert manifest["conservation"]["holds"] and manifest["options"]["output_format"] == "parquet"
    assert manifest["inputs"]["candidates"] == read_manifest(root / "out" / "demo" / "run2")["inputs"]["candidates"]


def test_the_documented_query_command_runs(root):
    first, *rest = doc_commands()["query"].splitlines()
    program, flag, code, heredoc = shlex.split(first)
    assert (program, flag, heredoc) == (".venv/bin/python", "-c", "<<SQL") and rest[-1] == "SQL"
    done = subprocess.run([sys.executable, "-c", code], input="\n".join(rest[:-1]), cwd=root, text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    outputs = read_outputs(root / RUN)
    for family in {name.split("/", 1)[1] for name, rows in outputs.items() if name.startswith("artifacts/") and rows}:
        assert family in done.stdout


def test_the_python_example_runs(root):
    printed = io.StringIO()
    with contextlib.chdir(root), contextlib.redirect_stdout(printed):
        exec(compile(doc_commands()["python"], str(DOC), "exec"), {})
    evaluations = len(read_outputs(root / RUN)["evaluations"])
    assert f"{evaluations} evaluations;" in printed.getvalue()


def test_outcomes_per_family(root):
    manifest, outputs = read_manifest(root / RUN), read_outputs(root / RUN)
    expected = Counter((row["family"], row["verdict"]) for row in outputs["evaluations"])
    got = answer(root, "outcomes")
    assert got == sorted((family, verdict, n) for (family, verdict), n in expected.items()) and got
    accepted = {family: n for family, verdict, n in got if verdict == "accepted"}
    assert accepted == {f: c["accepted"] for f, c in manifest["outcomes"].items() if c["accepted"]}


def test_top_reason_codes(root):
    outputs = read_outputs(root / RUN)
    codes = Counter(issue["reason_code"] for row in outputs["evaluations"] for issue in row["issues"]
                    if issue["validator"] != "bound")
    expected = sorted(codes.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    got = answer(root, "reason_codes")
    assert got == expected and got


@pytest.mark.parametrize("run", [RUN, "out/demo/run1"])
def test_slots_waiting_for_a_retry(root, run):
    manifest, requests = read_manifest(root / run), read_outputs(root / run)["retry_requests"]
    expected = sorted((r["family"], r["source_id"], r["chunk_id"], r["attempt"]) for r in requests
                      if r["kind"] == "retry")
    got = answer(root, "waiting", run)
    assert got == expected and got and len(got) == manifest["totals"]["retry"]
    if run != RUN:  # the demo's run 1 plans refresh requests too: the query leaves them out
        assert manifest["outputs"]["refresh_requests"] > 0 and len(requests) > len(got)


def test_the_artifacts_of_one_source(root):
    outputs = read_outputs(root / RUN)
    source = re.search(r"source_id = '([^']+)'", doc_queries()["one_source"]).group(1)
    expected = sorted((a["family"], a["chunk_id"], len(a["records"]), a["provenance"]["attempt"])
                      for name, rows in outputs.items() if name.startswith("artifacts/") for a in rows
                      if a["source_id"] == source)
    got = answer(root, "one_source")
    assert got == expected and len({family for family, *_ in got}) > 3


def test_npcs_found_per_episode(root):
    """One count per NPC of the reconciled registry, the people at the table (the transcripts' speakers)
    and the player characters the query lists left out."""
    transcripts = [orjson.loads(line) for line in
                   gzip.decompress((root / "out/demo/archive/transcripts.jsonl.gz").read_bytes()).splitlines()]
    speakers = {unit["speaker"].upper() for transcript in transcripts for unit in transcript["units"]}
    player_characters = set(re.findall(r"\('([^']+)'\)", doc_queries()["npcs"]))
    assert {"Grog", "Vex"} <= player_characters
    reconciled: dict[str, list[str]] = {}
    for artifact in read_outputs(root / RUN)["artifacts/npc-reconciliation"]:
        reconciled.setdefault(artifact["source_id"], []).extend(r["name"] for r in artifact["records"])
    npcs = {source: sorted(name for name in names if name.upper() not in speakers
                           and re.match(r"[A-Za-z]*", name).group() not in player_characters)
            for source, names in reconciled.items()}
    got = answer(root, "npcs")
    assert got == [(source, len(names), names) for source, names in sorted(npcs.items()) if names] and got
    # The demo's registries do name the cast and the party: the query is what leaves them out.
    every_name = {name for names in reconciled.values() for name in names}
    assert {name for name in every_name if name.upper() in speakers} and {"Grog", "Vex"} & every_name
    assert not {name for _, _, names in got for name in names} & ({"Grog", "Vex", "Pike"} | {"Laura", "Matt"})


def test_the_examples_of_docs_outputs_md_from_this_run_are_rows_of_it(root):
    """The examples docs/outputs.md takes from out/query/ (the reconciled registries, which make demo's run 2 has
    too few of, and the occurrences checked against them) are rows of it."""
    from doc_examples import missing_examples
    from docgen.data_dictionary import example_sources

    assert [e for e in example_sources() if e.folder.startswith("out/query/")]
    assert missing_examples("out/query/", root / RUN) == []
