"""A folder named on the command line is read as named by every reader (issue 38, item 4).

A committed run renamed to ``run[1]`` or ``ru*`` (a name the job itself refuses to write, but a rename
makes) must verify, compare, report, give its retry economy and export its requests as itself: never the
folders its name would match as a pattern (``run1`` beside it), never none at all. Each test failed on the
code before the fix: verify reported all 16 files missing, or a ``ValueError ... is not inside`` traceback.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import orjson
import pytest
from apache_beam.io.filesystem import FileSystem
from hypothesis import given, settings
from hypothesis import strategies as st

from fixture_archive import write_archive
from pipelines import batch_export, report, reprocess, retry_economy, verify
from pipelines.outputs import read_manifest
from pipelines.folders import pattern_reaches
from transforms.files import list_files, literal_pattern, matching_files, pattern_regex

ROOT = Path(__file__).resolve().parent.parent
# Names a rename can give a run folder, each with a plain sibling its name would match as a pattern.
GLOB_NAMES = ["run[1]", "ru*", "r?n1", "[r]un1"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One committed run (JSON Lines, with retry and refresh requests) copied under glob-character names,
    beside ``run1``: the plain folder each of those names matches as a pattern."""
    root = tmp_path_factory.mktemp("literal")
    archive = write_archive(root / "archive")
    plain = root / "runs" / "run1"
    argv = ["--transcripts", archive["transcripts"], "--candidates", archive["candidates"], "--output", str(plain),
            "--output-format", "jsonl", "--refresh-stale"]
    assert reprocess.main(argv) == 0
    for name in GLOB_NAMES:
        shutil.copytree(plain, root / "runs" / name)
    return {"root": root, "archive": archive, "plain": plain}


def cli(*args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("name", GLOB_NAMES)
def test_verify_reads_a_folder_named_with_glob_characters_as_itself(runs, capsys, name):
    folder = runs["root"] / "runs" / name
    assert verify.main([str(folder)]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.strip().endswith("verified: 16 files as listed, conservation holds")
    assert sorted(list_files(str(folder))) == sorted(str(p) for p in folder.rglob("*") if p.is_file())


def test_a_glob_named_folder_that_lost_a_file_does_not_borrow_its_siblings(runs, tmp_path):
    """``run[1]`` without one of its files does not verify, though ``run1`` beside it, which its name
    matches as a pattern, is whole."""
    shutil.copytree(runs["plain"], tmp_path / "run1")
    damaged = tmp_path / "run[1]"
    shutil.copytree(runs["plain"], damaged)
    lost = next((damaged / "evaluations").glob("part-*"))
    lost.unlink()
    verdict = verify.verify_folder(str(damaged))
    assert verdict.problems[0] == f"missing: evaluations/{lost.name}"
    assert verify.verify_folder(str(tmp_path / "run1")).ok


def test_the_retry_economy_and_the_report_read_a_glob_named_run_as_itself(runs, tmp_path):
    folder = runs["root"] / "runs" / "run[1]"
    figures = retry_economy.load_figures(folder)
    assert figures.summary == retry_economy.load_figures(runs["plain"]).summary
    assert figures.summary.requests > 0 and figures.summary.reason_codes
    html = tmp_path / "report.html"
    assert report.main(["--output", str(folder), "--html", str(html)]) == 0
    assert "notarius-reprocess run report" in html.read_text()


def test_compare_reads_glob_named_runs_as_themselves(runs):
    root = runs["root"]
    done = cli("compare", root / "runs" / "run[1]", root / "runs" / "ru*", "--output", root / "cmp", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    document = orjson.loads((root / "cmp" / "compare.json").read_bytes())
    assert document["total"]["changed_slots"] == 0 and document["conservation"]["holds"]
    listed = read_manifest(runs["plain"])["conservation"]["evaluations"]
    assert document["conservation"]["rows"]["a"]["evaluations"] == {"listed": listed, "read": listed, "unreadable": 0}
    assert verify.main([str(root / "cmp")]) == 0


def test_compare_never_overwrites_a_folder_that_holds_a_glob_named_run(runs, tmp_path):
    """``--output`` the folder holding ``x[1]`` with ``--overwrite``: refused as holding the run's files (read as a
    pattern, ``x[1]/**`` matched nothing, and --overwrite would have deleted the run it was about to read)."""
    holder = tmp_path / "holder"
    shutil.copytree(runs["plain"], holder / "x[1]")
    done = cli("compare", holder / "x[1]", holder / "x[1]", "--output", holder, "--overwrite")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "holds input files of RUN_A" in done.stderr
    assert verify.verify_folder(str(holder / "x[1]")).ok


def test_export_batch_reads_the_requests_of_the_glob_named_run_it_verified(runs, tmp_path):
    """``--retry-requests 'runs/run[1]/retry_requests/part-*'`` verifies ``run[1]`` and reads its requests, not
    those of ``run1`` beside it (here given a second copy of every request, so reading it would show)."""
    holder = tmp_path / "runs"
    shutil.copytree(runs["plain"], holder / "run[1]")
    shutil.copytree(runs["plain"], holder / "run1")
    requests = next((holder / "run1" / "retry_requests").glob("part-*"))
    shutil.copy(requests, requests.with_name("part-extra.jsonl"))
    manifest = batch_export.run(["--retry-requests", str(holder / "run[1]" / "retry_requests" / "part-*"),
                                 "--transcripts", runs["archive"]["transcripts"], "--provider", "openai-chat",
                                 "--model", "gpt-4.1-mini", "--output", str(tmp_path / "batch")])
    run = read_manifest(holder / "run[1]")
    assert manifest["conservation"]["retry_requests_in"] == run["outputs"]["retry_requests"] + \
        run["outputs"]["refresh_requests"] > 0
    assert manifest["conservation"]["holds"]


# --- patterns: one translation of Beam's syntax, and a path as a pattern of itself ------------------------

NAME_CHARS = st.sampled_from(list("ab1-!^]*?[") + ["\\"])
names = st.text(NAME_CHARS, min_size=1, max_size=6).filter(lambda n: n not in (".", ".."))


@settings(max_examples=300, deadline=None)
@given(name=names, other=names)
def test_a_literal_pattern_reaches_exactly_its_own_path(name, other):
    folder = f"/r/{name}"
    pattern = literal_pattern(folder) + "/**"
    assert pattern_reaches(pattern, f"{folder}/x/part-0.jsonl")
    assert pattern_reaches(pattern, f"/r/{other}/x/part-0.jsonl") is (other == name)


def test_list_files_and_matching_take_a_folder_literally(tmp_path):
    for name in ("x[1]", "x1", "x*", "xy", "x?"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_bytes(b"")
    for name in ("x[1]", "x*", "x?"):
        assert list_files(str(tmp_path / name)) == [str(tmp_path / name / "f")]
        assert matching_files(literal_pattern(str(tmp_path / name)) + "/*") == [str(tmp_path / name / "f")]
    # as a pattern, still Beam's syntax
    assert sorted(matching_files(str(tmp_path / "x?" / "f"))) == sorted(str(tmp_path / n / "f")
                                                                        for n in ("x1", "x*", "xy", "x?"))


PATTERN_CHARS = st.sampled_from(list("ab/-!^]*?[") + ["\\", "**"])
PATH_CHARS = st.sampled_from(list("ab/-!^]*?[") + ["\\"])


@settings(max_examples=500, deadline=None)
@given(pattern=st.lists(PATTERN_CHARS, min_size=1, max_size=8).map("".join),
       paths=st.lists(st.text(PATH_CHARS, max_size=8), min_size=1, max_size=6))
def test_the_translation_matches_what_beams_does(pattern, paths):
    """``pattern_regex`` is Beam's ``FileSystem.translate_pattern`` read the same way, without its warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Beam's translation of "[[" and the like draws re's FutureWarnings
        try:
            beams = re.compile(FileSystem.translate_pattern(pattern))
        except re.error:  # a set Beam passes to re as it stands ("[b-a]"): no file matches it either way
            return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ours draws none
        ours = pattern_regex(pattern)
    for path in paths:
        assert (beams.match(path) is None) == (ours.match(path) is None), (pattern, path)
