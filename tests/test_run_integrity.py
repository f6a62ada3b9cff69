"""Run integrity: one run per folder, the manifest lists every file, `verify` proves it, misuse stops the run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import apache_beam as beam
import orjson
import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.run_integrity import OutputFile, files_block, listed_files, verify_run
from fixture_archive import write_archive
from pipelines import batch_export, report, reprocess, retry_economy, verify
from pipelines.outputs import read_manifest, read_outputs
from pipelines.options import JOB_OPTIONS, OptionsError, check_arguments
from transforms.files import (OutputFolderError, is_filesystem_root, pattern_reaches, prepare_output_folder,
                              remove_folder_contents)
from transforms.read import DEAD, KEYED, KeyedInput, ReadKeyedInputs, decode_block

ROOT = Path(__file__).resolve().parent.parent


# --- the comparison (pure) -----------------------------------------------------------------------

paths = st.lists(
    st.tuples(st.sampled_from(["evaluations", "dead_letters", "retry_requests", "artifacts/spells", "artifacts/npc-registry"]),
              st.integers(0, 5)),
    min_size=1, max_size=8, unique=True,
).map(lambda items: [f"{folder}/part-{n:05d}-of-00006.jsonl" for folder, n in items])


def balanced_manifest(files: list[OutputFile]) -> dict:
    rows = {top: sum(f.rows for f in files if f.path.split("/", 1)[0] == top)
            for top in ("evaluations", "dead_letters", "artifacts")}
    return {
        "files": files_block(files),
        "conservation": {"candidates_in": rows["evaluations"] + 2, "evaluations": rows["evaluations"],
                         "dead_letters": 2, "filtered": 0, "holds": True},
        "transcript_conservation": {"transcripts_in": 1, "usable": 1, "dead_letters": 0, "holds": True},
        "prior_registry_conservation": {"prior_registries_in": 0, "valid": 0, "dead_letters": 0, "holds": True},
        "outputs": {"dead_letters": rows["dead_letters"], "artifacts": rows["artifacts"], "evaluations": rows["evaluations"]},
    }


@settings(max_examples=200, deadline=None)
@given(paths, st.data())
def test_verify_names_exactly_the_files_that_changed(listed_paths, data):
    files = [OutputFile(p, "jsonl", data.draw(st.integers(0, 10**6)), f"{n:064x}", data.draw(st.integers(0, 50)))
             for n, p in enumerate(listed_paths)]
    manifest = orjson.loads(orjson.dumps(balanced_manifest(files)))  # as read back from disk
    assert listed_files(manifest) == {f.path: f for f in files}
    found: dict = {f.path: f for f in files}
    assert verify_run(manifest, found, list(found)).ok

    removed = set(data.draw(st.lists(st.sampled_from(listed_paths), unique=True, max_size=2)))
    altered = set(data.draw(st.lists(st.sampled_from(listed_paths), unique=True, max_size=3))) - removed
    field = data.draw(st.sampled_from(["bytes", "sha256", "rows"]))
    added = {f"evaluations/part-{n:05d}-of-00009.jsonl" for n in data.draw(st.sets(st.integers(0, 3), max_size=2))}
    for path in removed:
        found[path] = None
    for path in altered:
        f = found[path]
        found[path] = OutputFile(f.path, f.format, f.bytes + (field == "bytes"), "f" * 64 if field == "sha256" else f.sha256,
                                 f.rows + (field == "rows"))
    verdict = verify_run(manifest, found, [p for p in listed_paths if p not in removed] + sorted(added))

    assert verdict.ok == (not removed and not altered and not added)
    named = {problem.split(": ")[1] for problem in verdict.problems}
    assert named == removed | altered | added
    assert all(p.startswith("missing: ") for p in verdict.problems if p.split(": ")[1] in removed)
    assert all(p.startswith("unlisted: ") for p in verdict.problems if p.split(": ")[1] in added)


def test_verify_checks_conservation_and_the_rows_behind_the_counts():
    files = [OutputFile("evaluations/part-00000-of-00001.jsonl", "jsonl", 10, "a" * 64, 3)]
    manifest = balanced_manifest(files)
    found = {f.path: f for f in files}
    assert verify_run(manifest, found, list(found)).ok
    unbalanced = {**manifest, "conservation": {**manifest["conservation"], "candidates_in": 99}}
    assert "conservation does not hold" in verify_run(unbalanced, found, list(found)).problems[0]
    unclaimed = {**manifest, "conservation": {**manifest["conservation"], "holds": False},
                 "unreadable_files": {"paths": ["/in/c.jsonl.gz"]}}
    assert verify_run(unclaimed, found, list(found)).problems == (
        "conservation is not claimed by the manifest: input files could not be read to their end (/in/c.jsonl.gz)",)
    miscounted = {**manifest, "conservation": {**manifest["conservation"], "evaluations": 4, "candidates_in": 6}}
    assert verify_run(miscounted, found, list(found)).problems == (
        "evaluations: the files hold 3 rows, the manifest counts 4",)


@pytest.mark.parametrize("path", ["../x/part-0.jsonl", "/etc/part-0.jsonl", "evaluations/../../part-0.jsonl",
                                  "gs://b/part-0.jsonl"])
def test_a_manifest_cannot_point_outside_its_folder(path):
    manifest = {"files": {"evaluations": [{"path": path, "format": "jsonl", "bytes": 0, "sha256": "", "rows": 0}]}}
    verdict = verify_run(manifest, {}, [])
    assert not verdict.ok and "not a path inside this folder" in verdict.problems[0]


def test_a_manifest_without_a_listing_does_not_verify():
    assert "lists no files" in verify_run({"conservation": {}}, {}, []).problems[0]


# --- paths and folders -------------------------------------------------------------------------------

@pytest.mark.parametrize("pattern,path,reached", [
    ("/a/**", "/a/out/evaluations/part-0.jsonl", True),
    ("/a/*", "/a/out/evaluations/part-0.jsonl", False),
    ("/a/**/*.jsonl", "/a/out/evaluations/part-0.jsonl", True),
    ("/a/**/*.jsonl.gz", "/a/out/evaluations/part-0.jsonl", False),
    ("/a/*/*/part-*", "/a/out/evaluations/part-0.jsonl", True),
    ("/a/candidates-*", "/a/candidates-out/evaluations/part-0.jsonl", False),
    ("/a/", "/a/manifest.json", True),
])
def test_pattern_reach_follows_beams_match(pattern, path, reached):
    assert pattern_reaches(pattern, path) is reached


TREE = ["a/out/evaluations/part-0.jsonl", "a/out/manifest.json", "a/candidates-1.jsonl", "a/b/c/part-1.avro", "top.jsonl"]
PATTERN_PARTS = st.lists(st.sampled_from(["*", "**", "a", "out", "?", "candidates-*", "*.jsonl", "part-*", "b", "[ab]",
                                          "**/*.jsonl", "c"]), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(parts=PATTERN_PARTS)
def test_pattern_reach_agrees_with_what_beam_matches(tmp_path_factory, parts):
    root = tmp_path_factory.getbasetemp() / "reach-tree"
    if not root.exists():
        for rel in TREE:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(b"")
    pattern = str(root / "/".join(parts))
    matched = {m.path for m in FileSystems.match([pattern])[0].metadata_list}
    for rel in TREE:
        assert pattern_reaches(pattern, str(root / rel)) == (str(root / rel) in matched), (pattern, rel)


@pytest.mark.parametrize("folder,root", [("/", True), ("/tmp", False), ("gs://bucket", True), ("gs://bucket/x", False),
                                         ("s3://b/", True)])
def test_filesystem_roots(folder, root):
    assert is_filesystem_root(folder) is root


def test_overwrite_removes_only_what_is_inside_the_folder(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    out = tmp_path / "out"
    (out / "evaluations").mkdir(parents=True)
    (out / "evaluations" / "part-00000-of-00001.avro").write_bytes(b"old")
    (out / "manifest.json").write_text("{}")
    os.symlink(outside, out / "link")
    with pytest.raises(OutputFolderError, match="already holds files"):
        prepare_output_folder(str(out), {}, [], overwrite=False)
    assert prepare_output_folder(str(out), {}, [], overwrite=True, remove_first=["manifest.json"]) == str(out)
    assert out.is_dir() and not os.listdir(out)
    assert (outside / "keep.txt").read_text() == "keep"


def test_removing_a_folders_contents_keeps_the_folder(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("x")
    remove_folder_contents(str(tmp_path / "a"))
    assert (tmp_path / "a").is_dir() and not os.listdir(tmp_path / "a")


# --- the job: misuse stops it before anything is written ----------------------------------------------

@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return write_archive(tmp_path_factory.mktemp("archive"))


def job_argv(archive, out, *extra):
    return ["--transcripts", archive["transcripts"], "--candidates", archive["candidates"], "--output", str(out), *extra]


MISUSES = {
    "--familes spells": (["--familes", "spells"], "unknown option --familes"),
    "a flag this version lacks": (["--refresh-everything"], "unknown option --refresh-everything"),
    "a stray word": (["spells"], "unexpected argument 'spells'"),
    "--max-record-bytes=-2": (["--max-record-bytes=-2"], "--max-record-bytes must be at least 1"),
    "--max-record-bytes 0": (["--max-record-bytes", "0"], "--max-record-bytes must be at least 1"),
    "--max-attempts 0": (["--max-attempts", "0"], "--max-attempts must be at least 1"),
    "--max-attempts x": (["--max-attempts", "x"], "invalid int value"),
    "--output-format csv": (["--output-format", "csv"], "invalid choice"),
    "--families ,": (["--families", ","], "names no family"),
    "--families potions": (["--families", "spells,potions"], "unknown family potions"),
}


@pytest.mark.parametrize("name", list(MISUSES))
def test_misuse_is_refused_before_anything_is_written(archive, tmp_path, name):
    extra, message = MISUSES[name]
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=message.replace("-", r"\-").replace("'", "'")):
        reprocess.run(job_argv(archive, out, *extra))
    assert not out.exists()


def test_a_job_server_runner_gets_its_own_options_but_never_a_near_miss_of_ours():
    base = ["--transcripts", "t", "--candidates", "c", "--output", "o"]
    java = ["--checkpointingInterval", "1000", "--objectReuse"]
    assert check_arguments([*base, *java], "FlinkRunner") == ["--checkpointingInterval", "--objectReuse"]
    with pytest.raises(OptionsError, match="unknown option --checkpointingInterval"):
        check_arguments([*base, *java])  # the in-process runner has no job server to take it
    for runner in ("FlinkRunner", None):
        with pytest.raises(OptionsError, match="did you mean --max-attempts"):
            check_arguments([*base, "--max-attempt", "2"], runner)
    assert check_arguments([*base, "--runner=FlinkRunner", "--flink_master=localhost:8081", "--parallelism=2"],
                           "FlinkRunner") == []


@pytest.mark.parametrize("extra,message", [
    (["--max-lines-per-fle", "10"], "unknown option --max-lines-per-fle \\(did you mean --max-lines-per-file\\?\\)"),
    (["--kind", "retry"], "did you mean --kinds"),
    (["stray"], "unexpected argument 'stray'"),
    (["--max-record-bytes", "0"], "--max-record-bytes must be at least 1"),
])
def test_export_batch_refuses_what_beam_would_drop_without_a_word(tmp_path, extra, message):
    """export-batch parses its own flags and hands the rest to Beam, which would discard an
    unknown one with a log line: a typo must stop the export instead of being ignored."""
    argv = ["--retry-requests", str(tmp_path / "r-*"), "--transcripts", str(tmp_path / "t-*"),
            "--provider", "openai-chat", "--model", "m", "--output", str(tmp_path / "out"), *extra]
    with pytest.raises(SystemExit, match=message):
        batch_export.run(argv)
    assert not (tmp_path / "out").exists()


def test_help_lists_this_jobs_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        reprocess.run(["--help"])
    assert exit_.value.code == 0
    printed = capsys.readouterr().out
    assert all(option.flag in printed for option in JOB_OPTIONS)


def test_every_numeric_option_is_bounded():
    assert all(o.minimum is not None for o in JOB_OPTIONS if o.type is int)


@pytest.mark.parametrize("output,message", [
    ("/", "root of its filesystem"),
    ("{tmp}/o[1]", "contains \\[ \\]"),
    ("{tmp}/o*", "contains \\*"),
    ("{tmp}/o?", "contains \\?"),
    ("{archive}/candidates-1.jsonl", "is a file, not a folder"),
    ("{archive}/candidates-1.jsonl/sub", "is a file, not a folder"),
    ("{archive}", "holds input files"),
])
def test_output_folders_that_cannot_work_are_refused(archive, tmp_path, output, message):
    folder = Path(archive["candidates"]).parent
    output = output.format(tmp=tmp_path, archive=folder)
    before = sorted(os.listdir(folder))
    with pytest.raises(SystemExit, match=message):
        reprocess.run(job_argv(archive, output))
    assert sorted(os.listdir(folder)) == before and sorted(os.listdir(tmp_path)) == []


def test_an_output_folder_the_inputs_would_read_is_refused(archive, tmp_path):
    folder = Path(archive["candidates"]).parent
    argv = ["--transcripts", archive["transcripts"], "--candidates", str(folder / "**"), "--output", str(folder / "out")]
    with pytest.raises(SystemExit, match=r"within reach of --candidates .*the next run would read"):
        reprocess.run(argv)
    assert not (folder / "out").exists()


def test_dot_dot_in_the_output_creates_no_folder_on_the_way(archive, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match="unknown option"):
        reprocess.run(job_argv(archive, "a/sub/../out", "--nope"))
    options = reprocess.preflight(job_argv(archive, "a/sub/../out"))
    assert options.view_as(reprocess.ReprocessOptions).output == str(tmp_path / "a" / "out")
    assert not (tmp_path / "a").exists()


def test_a_refusal_is_one_line_on_stderr_and_a_non_zero_exit(archive, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", *job_argv(archive, tmp_path / "o", "--familes", "x")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["notarius-reprocess: unknown option --familes (did you mean --families?): see --help for this "
                    "job's options; Beam's own options pass through"]
    assert not (tmp_path / "o").exists()


# --- the scenario of the issue, verify, and the commands that read a folder --------------------------

@pytest.fixture(scope="module")
def first_run(archive, tmp_path_factory):
    out = tmp_path_factory.mktemp("scenario") / "x"
    assert reprocess.main(job_argv(archive, out)) == 0  # Avro, all families
    return out


def test_a_second_run_into_a_used_folder_is_refused_and_overwrite_replaces_it(archive, first_run, tmp_path):
    out = tmp_path / "x"
    shutil.copytree(first_run, out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    second = ("--output-format", "jsonl", "--families", "spells")
    with pytest.raises(SystemExit, match="already holds files .* --overwrite"):
        reprocess.run(job_argv(archive, out, *second))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before

    assert reprocess.main(job_argv(archive, out, *second, "--overwrite")) == 0
    assert verify.verify_folder(str(out)).ok
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    listed = {f["path"] for files in manifest["files"].values() for f in files}
    on_disk = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert on_disk == listed | {"manifest.json"}
    assert all(path.endswith(".jsonl") for path in listed)
    assert manifest["options"]["families"] == ["spells"]


def test_the_manifest_lists_every_file_with_its_facts(first_run):
    manifest = orjson.loads((first_run / "manifest.json").read_bytes())
    files = manifest["files"]
    assert set(files) == {f"artifacts/{family}" for family in manifest["outcomes"]} | {
        "evaluations", "retry_requests", "dead_letters"}
    rows = {output: sum(f["rows"] for f in entries) for output, entries in files.items()}
    assert rows["evaluations"] == manifest["conservation"]["evaluations"]
    assert rows["artifacts/spells"] == manifest["outcomes"]["spells"]["accepted"]
    for entries in files.values():
        for f in entries:
            assert f["format"] == "avro" and f["bytes"] == (first_run / f["path"]).stat().st_size


def test_verify_names_each_altered_removed_and_added_file(first_run, tmp_path, capsys):
    out = tmp_path / "x"
    shutil.copytree(first_run, out)
    assert verify.main([str(out)]) == 0
    assert "verified" in capsys.readouterr().out

    altered = out / "evaluations" / "part-00000-of-00001.avro"
    altered.write_bytes(altered.read_bytes()[:-1] + b"\x00")
    removed = out / "artifacts" / "spells" / "part-00000-of-00001.avro"
    removed.unlink()
    added = out / "dead_letters" / "part-00001-of-00002.avro"
    shutil.copy(out / "dead_letters" / "part-00000-of-00001.avro", added)
    assert verify.main([str(out)]) == 1
    printed = capsys.readouterr().out
    assert "altered: evaluations/part-00000-of-00001.avro" in printed
    assert "missing: artifacts/spells/part-00000-of-00001.avro" in printed
    assert "unlisted: dead_letters/part-00001-of-00002.avro" in printed
    assert "NOT VERIFIED: 3 problem(s)" in printed

    with pytest.raises(SystemExit, match="does not verify .*notarius-reprocess verify"):
        retry_economy.load_figures(out)


def test_a_folder_without_a_manifest_does_not_verify(first_run, tmp_path):
    out = tmp_path / "x"
    shutil.copytree(first_run, out)
    (out / "manifest.json").unlink()
    verdict = verify.verify_folder(str(out))
    assert not verdict.ok and "not a committed run" in verdict.problems[0]


def test_verify_is_a_subcommand_of_the_console_script(first_run):
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "verify", str(first_run)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("verified: 16 files as listed, conservation holds")


# --- a byte order mark at the start of a JSON Lines file -------------------------------------------

def test_a_byte_order_mark_on_a_files_first_byte_is_skipped(tmp_path):
    bom = b"\xef\xbb\xbf"
    (tmp_path / "a.jsonl").write_bytes(bom + b'{"k": "s1"}\n' + bom + b'{"k": "s2"}\n')
    (tmp_path / "b.jsonl.gz").write_bytes(__import__("gzip").compress(bom + b'{"k": "s3"}\r\n'))
    with TestPipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        read = p | ReadKeyedInputs((KeyedInput(str(tmp_path / "*"), "candidates", "k", 100),))
        keyed = read[KEYED] | beam.FlatMap(lambda kv: [kv[0] for _ in decode_block(kv[1][1])])
        assert_that(keyed, equal_to(["s1", "s3"]), label="keyed")
        dead = read[DEAD] | beam.FlatMap(lambda rows: [r["payload"] for r in rows])
        assert_that(dead, equal_to([(bom + b'{"k": "s2"}').decode()]), label="dead")  # elsewhere: a dead letter


# --- an object store (no folders): what gs:// and s3:// do -------------------------------------------

def test_on_an_object_store_a_used_folder_is_refused_and_overwrite_touches_only_its_own_prefix(archive):
    from memory_filesystem import MemoryFileSystem

    store = MemoryFileSystem.objects
    store.clear()
    out = "memtest://bucket/runs/x"
    store[f"{out}/artifacts/npc-registry/part-00000-of-00001.avro"] = b"an earlier run"
    neighbours = {"memtest://bucket/runs/xy/keep": b"a", "memtest://bucket/runs/x.json": b"b",
                  "memtest://bucket/keep": b"c"}
    store.update(neighbours)
    with pytest.raises(SystemExit, match="already holds files"):
        reprocess.run(job_argv(archive, out))
    with pytest.raises(SystemExit, match="root of its filesystem"):
        reprocess.run(job_argv(archive, "memtest://bucket/"))

    assert reprocess.main(job_argv(archive, out, "--overwrite", "--output-format", "jsonl")) == 0
    assert {k: v for k, v in store.items() if not k.startswith(out + "/")} == neighbours
    assert f"{out}/artifacts/npc-registry/part-00000-of-00001.avro" not in store
    assert verify.verify_folder(out).ok
    assert not [k for k in store if "/.temp-" in k]  # the writer's temporary objects are gone
    # What reads a run folder reads it on an object store too (no pathlib join turning memtest:// into memtest:/).
    manifest = read_manifest(out)
    rows = read_outputs(out)
    assert len(rows["evaluations"]) == manifest["conservation"]["evaluations"]
    assert sum(len(v) for k, v in rows.items() if k.startswith("artifacts/")) == manifest["totals"]["accepted"]
    assert retry_economy.load_figures(out).manifest == manifest
    assert report.main(["--output", out]) == 0 and store[f"{out}/report.html"].startswith(b"<!DOCTYPE html>")
    del store[f"{out}/report.html"]

    store[f"{out}/evaluations/part-00000-of-00001.jsonl"] += b'{"x": 1}\n'
    assert verify.verify_folder(out).problems[0].startswith(
        "altered: evaluations/part-00000-of-00001.jsonl: bytes")
    store.clear()
