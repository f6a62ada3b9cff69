"""Run integrity: one run per folder, the manifest lists every file, `verify` proves it, misuse stops the run."""

from __future__ import annotations

import hashlib
import json
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
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from domain.errors import NotariusError
from domain.manifest import build_manifest
from domain.run_integrity import (NON_ARTIFACT_OUTPUTS, OutputFile, Verdict, artifact_output, files_block, listed_files,
                                  output_of, verify_run)
from fixture_archive import write_archive
from pipelines import batch_export, report, reprocess, retry_economy, verify
from pipelines.outputs import read_manifest, read_outputs
from pipelines.options import JOB_OPTIONS, HelpShown, OptionsError, check_arguments
from pipelines.folders import (OutputFolderError, check_output_folder, empty_output_folder, pattern_reaches,
                               remove_folder_contents)
from transforms.files import is_filesystem_root
from transforms.raw_records import decode_block
from transforms.read import DEAD, KEYED, KeyedInput, ReadKeyedInputs

ROOT = Path(__file__).resolve().parent.parent


# --- the comparison (pure) -----------------------------------------------------------------------

paths = st.lists(
    st.tuples(st.sampled_from(["evaluations", "dead_letters", "retry_requests", "artifacts/spells", "artifacts/npc-registry"]),
              st.integers(0, 5)),
    min_size=1, max_size=8, unique=True,
).map(lambda items: [f"{folder}/part-{n:05d}-of-00006.jsonl" for folder, n in items])


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def balanced_manifest(files: list[OutputFile]) -> dict:
    """The manifest the job (domain.manifest) writes for these files: its counts are their rows, and an
    output without a file among them gets the empty shard the writer gives it."""
    rows = {output: sum(f.rows for f in files if output_of(f.path) == output)
            for output in (*NON_ARTIFACT_OUTPUTS, "artifacts/spells", "artifacts/npc-registry")}
    counts = {"outcome/spells/accepted": rows["artifacts/spells"],
              "outcome/npc-registry/accepted": rows["artifacts/npc-registry"],
              "outcome/spells/retry": rows["retry_requests"], "evaluations": rows["evaluations"],
              "candidates_in": rows["evaluations"] + rows["dead_letters"], "dead_letters/candidates": rows["dead_letters"],
              "transcripts_in": 1, "transcripts_ok": 1}
    manifest = build_manifest(counts, options={"max_attempts": 3}, runner="test")
    declared = [artifact_output(family) for family in manifest["outcomes"]] + list(NON_ARTIFACT_OUTPUTS)
    shards = [OutputFile(f"{output}/part-00000-of-00001.jsonl", "jsonl", 0, EMPTY_SHA256, 0) for output in declared
              if not any(output_of(f.path) == output for f in files)]
    return {**manifest, "files": files_block([*files, *shards])}


@settings(max_examples=200, deadline=None)
@given(paths, st.data())
def test_verify_names_exactly_the_files_that_changed(listed_paths, data):
    files = [OutputFile(p, "jsonl", data.draw(st.integers(0, 10**6)), f"{n:064x}", data.draw(st.integers(0, 50)))
             for n, p in enumerate(listed_paths)]
    manifest = orjson.loads(orjson.dumps(balanced_manifest(files)))  # as read back from disk
    listed = listed_files(manifest)
    assert {path: listed[path] for path in listed_paths} == {f.path: f for f in files}  # and every other output's shard
    found: dict = dict(listed)
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
    verdict = verify_run(manifest, found, [p for p in listed if p not in removed] + sorted(added))

    assert verdict.ok == (not removed and not altered and not added)
    named = {problem.split(": ")[1] for problem in verdict.problems}
    assert named == removed | altered | added
    assert all(p.startswith("missing: ") for p in verdict.problems if p.split(": ")[1] in removed)
    assert all(p.startswith("unlisted: ") for p in verdict.problems if p.split(": ")[1] in added)


def test_verify_checks_conservation_and_the_rows_behind_the_counts():
    files = [OutputFile("evaluations/part-00000-of-00001.jsonl", "jsonl", 10, "a" * 64, 3)]
    manifest = balanced_manifest(files)
    found = listed_files(manifest)
    assert verify_run(manifest, found, list(found)).ok
    unbalanced = {**manifest, "conservation": {**manifest["conservation"], "candidates_in": 99}}
    assert "conservation does not hold" in verify_run(unbalanced, found, list(found)).problems[0]
    unclaimed = {**manifest, "conservation": {**manifest["conservation"], "holds": False},
                 "unreadable_files": {"count": 1, "by_input": {"candidates": 1}, "paths": ["/in/c.jsonl.gz"],
                                      "records_may_be_missing": True, "conservation_not_provable_for": ["candidates"]}}
    assert verify_run(unclaimed, found, list(found)).problems == (
        "conservation is not claimed by the manifest: input files could not be read to their end (/in/c.jsonl.gz)",)
    # Counts that agree with each other (conservation balances) but not with the listed rows.
    miscounted = {**manifest, "conservation": {**manifest["conservation"], "evaluations": 4, "candidates_in": 4},
                  "outputs": {**manifest["outputs"], "evaluations": 4}, "inputs": {**manifest["inputs"], "candidates": 4}}
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
    target = check_output_folder(str(out), {}, [])
    assert target.folder == str(out)
    with pytest.raises(OutputFolderError, match="already holds files"):
        empty_output_folder(str(out), target, overwrite=False)
    empty_output_folder(str(out), target, overwrite=True, remove_first=["manifest.json"])
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
    with pytest.raises(NotariusError, match=message.replace("-", r"\-").replace("'", "'")):
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
    with pytest.raises(NotariusError, match=message):
        batch_export.run(argv)
    assert not (tmp_path / "out").exists()


def test_help_lists_this_jobs_options(capsys):
    with pytest.raises(HelpShown) as exit_:
        reprocess.run(["--help"])
    assert exit_.value.exit_code == 0 and exit_.value.line("notarius-reprocess") is None
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
    with pytest.raises(NotariusError, match=message):
        reprocess.run(job_argv(archive, output))
    assert sorted(os.listdir(folder)) == before and sorted(os.listdir(tmp_path)) == []


def test_an_output_folder_the_inputs_would_read_is_refused(archive, tmp_path):
    folder = Path(archive["candidates"]).parent
    argv = ["--transcripts", archive["transcripts"], "--candidates", str(folder / "**"), "--output", str(folder / "out")]
    with pytest.raises(NotariusError, match=r"within reach of --candidates .*the next run would read"):
        reprocess.run(argv)
    assert not (folder / "out").exists()


def test_dot_dot_in_the_output_creates_no_folder_on_the_way(archive, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotariusError, match="unknown option"):
        reprocess.run(job_argv(archive, "a/sub/../out", "--nope"))
    options = reprocess.preflight(job_argv(archive, "a/sub/../out"))
    assert not (tmp_path / "a").exists()
    with reprocess.output_claim(options.view_as(reprocess.ReprocessOptions)) as folder:
        assert folder == str(tmp_path / "a" / "out")
    assert sorted(os.listdir(tmp_path / "a")) == ["out"] and not os.listdir(tmp_path / "a" / "out")


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
    with pytest.raises(NotariusError, match="already holds files .* --overwrite"):
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
    data = altered.read_bytes()
    # The last byte flipped, never set: an Avro file ends in a random sync marker, whose last byte is 0 once in
    # 256 runs, and writing 0 over a 0 altered nothing (the flaky test of issue 33).
    altered.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    removed = out / "artifacts" / "spells" / "part-00000-of-00001.avro"
    removed.unlink()
    added = out / "dead_letters" / "part-00009-of-00010.avro"
    shutil.copy(sorted((out / "dead_letters").glob("part-*"))[0], added)
    assert verify.main([str(out)]) == 1
    printed = capsys.readouterr().out
    assert "altered: evaluations/part-00000-of-00001.avro" in printed
    assert "missing: artifacts/spells/part-00000-of-00001.avro" in printed
    assert "unlisted: dead_letters/part-00009-of-00010.avro" in printed
    assert "NOT VERIFIED: 3 problem(s)" in printed

    with pytest.raises(NotariusError, match="does not verify .*see: .*verify "):
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
    listed = sum(len(entries) for entries in orjson.loads((first_run / "manifest.json").read_bytes())["files"].values())
    assert listed == len([p for p in first_run.rglob("part-*")])
    assert proc.stdout.strip().endswith(f"verified: {listed} files as listed, conservation holds")


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
    with pytest.raises(NotariusError, match="already holds files"):
        reprocess.run(job_argv(archive, out))
    with pytest.raises(NotariusError, match="root of its filesystem"):
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


# --- what the manifest claims: every output listed, rows against counts, any shape a verdict -----------

@pytest.fixture(scope="module")
def real_manifest(first_run) -> dict:
    """The manifest of a real run (all families, Avro), as read back from disk."""
    return orjson.loads((first_run / "manifest.json").read_bytes())


def intact(manifest: dict) -> tuple[dict, list[str]]:
    """What ``verify_run`` gets for an untouched folder: every listed file as listed, and those part files."""
    listed = listed_files(manifest)
    return dict(listed), list(listed)


def tampered(manifest: dict, change) -> dict:
    copy = orjson.loads(orjson.dumps(manifest))
    change(copy)
    return copy


def one_line_problems(verdict: Verdict) -> bool:
    return all(isinstance(p, str) and p and p.isprintable() for p in verdict.problems)


@pytest.mark.parametrize("deleted", [("evaluations", "retry_requests", "dead_letters"), ("artifacts/spells",),
                                     "every output"])
def test_a_run_whose_outputs_were_deleted_with_their_listing_does_not_verify(first_run, tmp_path, capsys, deleted):
    """Deleting an output's files and its ``files`` entry together used to verify ("verified: 13 files";
    ``files: {}`` with every part file gone: "verified: 0 files"): every output the run declares must
    be listed with at least one file."""
    out = tmp_path / "x"
    shutil.copytree(first_run, out)
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    outputs = list(manifest["files"]) if deleted == "every output" else list(deleted)
    for output in outputs:
        shutil.rmtree(out / output)
        del manifest["files"][output]
    (out / "manifest.json").write_bytes(orjson.dumps(manifest))
    assert verify.main([str(out)]) == 1
    printed = capsys.readouterr().out
    for output in outputs:
        assert f"missing output: {output}: the manifest lists no file of it" in printed
    assert "NOT VERIFIED" in printed and "unlisted: " not in printed and "altered: " not in printed


def _move_an_accepted_artifact(m):  # totals and outputs.artifacts still agree
    m["outcomes"]["spells"]["accepted"] -= 1
    m["outcomes"]["combat-turns"]["accepted"] += 1


def _one_more_retry(m):  # every count of retries agrees, the files do not
    m["outcomes"]["spells"]["retry"] += 1
    m["totals"]["retry"] += 1
    m["outputs"]["retry_requests"] += 1


def _one_more_refresh(m):  # a refresh run claiming a refresh request the files do not hold
    m["options"]["refresh_stale"] = m["refresh"]["refresh_stale"] = True
    for block in (m["refresh"], m["refresh"]["by_family"]["spells"], m["outputs"]):
        block["refresh_requests"] += 1


def _dead_letters_from_filtered(m):  # conservation still balances; outputs.dead_letters no longer is its sum
    m["conservation"]["dead_letters"] -= 1
    m["conservation"]["filtered"] += 1


def _unreadable_count_without_paths(m):
    m["unreadable_files"]["count"] = 1


def _unreadable_candidates_while_conservation_holds(m):
    m["unreadable_files"].update(count=1, paths=["/in/candidates-1.jsonl.gz"], by_input={"candidates": 1},
                                 conservation_not_provable_for=["candidates"], records_may_be_missing=True)


def _holds_while_unbalanced_totals(m):
    m["totals"]["accepted"] += 1


def _more_on_an_earlier_prompt_than_to_refresh(m):  # issue 42 item 4: a part of the slots to refresh
    for block in (m["refresh"], m["refresh"]["by_family"]["spells"]):
        block["slots_on_earlier_prompt"] += 1


TAMPERED_COUNTS = {
    "outcomes.<family>.accepted": (_move_an_accepted_artifact, [
        "artifacts/combat-turns: the files hold 0 rows, the manifest counts 1",
        "artifacts/spells: the files hold 2 rows, the manifest counts 1"]),
    "outcomes retry, totals.retry and outputs.retry_requests": (_one_more_retry, [
        "retry_requests: the files hold 3 rows, the manifest counts 4 (4 retry + 0 refresh + 0 judge requests)"]),
    "refresh.refresh_requests": (_one_more_refresh, [
        "retry_requests: the files hold 3 rows, the manifest counts 4 (3 retry + 1 refresh + 0 judge requests)"]),
    "outputs.evaluations": (lambda m: m["outputs"].__setitem__("evaluations", m["outputs"]["evaluations"] + 1), [
        "the manifest contradicts itself: outputs.evaluations 20 != conservation.evaluations 19"]),
    "outputs.retry_requests": (lambda m: m["outputs"].__setitem__("retry_requests", 4), [
        "retry_requests: the files hold 3 rows, the manifest counts 4 (4 retry + 0 refresh + 0 judge requests)",
        "the manifest contradicts itself: outputs.retry_requests 4 != the sum of outcomes.*.retry 3"]),
    "outputs.refresh_requests": (lambda m: m["outputs"].__setitem__("refresh_requests", 1), [
        "retry_requests: the files hold 3 rows, the manifest counts 4 (3 retry + 1 refresh + 0 judge requests)",
        "the manifest contradicts itself: outputs.refresh_requests 1 != refresh.refresh_requests 0"]),
    "conservation.dead_letters": (_dead_letters_from_filtered, [
        "the manifest contradicts itself: outputs.dead_letters 12 != the dead letters of the conservation blocks 11"]),
    "unreadable_files.count": (_unreadable_count_without_paths, [
        "the manifest contradicts itself: unreadable_files.count 1 != the number of unreadable_files.paths 0",
        "the manifest contradicts itself: unreadable_files.count 1 != the sum of unreadable_files.by_input 0",
        "the manifest contradicts itself: unreadable_files.records_may_be_missing is false with 1 unreadable file(s)"]),
    "unreadable_files against holds": (_unreadable_candidates_while_conservation_holds, [
        "conservation claims to hold, but 1 candidates file(s) could not be read to their end (unreadable_files)"]),
    "totals": (_holds_while_unbalanced_totals, [
        "the manifest contradicts itself: totals.accepted 9 != the sum of outcomes.*.accepted 8"]),
    "refresh.slots_on_earlier_prompt": (_more_on_an_earlier_prompt_than_to_refresh, [
        "the manifest contradicts itself: refresh.slots_on_earlier_prompt 2 > refresh.slots_to_refresh 1 (they are "
        "some of the slots to refresh)"]),
}


def test_a_run_written_before_slots_on_earlier_prompt_was_counted_still_verifies(real_manifest):
    found, part_files = intact(real_manifest)

    def without(m):
        for block in (m["refresh"], *m["refresh"]["by_family"].values()):
            del block["slots_on_earlier_prompt"]
    assert verify_run(tampered(real_manifest, without), found, part_files).ok


@pytest.mark.parametrize("claim", list(TAMPERED_COUNTS))
def test_each_count_the_manifest_claims_is_checked(real_manifest, claim):
    change, expected = TAMPERED_COUNTS[claim]
    found, part_files = intact(real_manifest)
    assert verify_run(real_manifest, found, part_files).ok
    assert sorted(verify_run(tampered(real_manifest, change), found, part_files).problems) == sorted(expected)


def test_the_real_runs_counts_are_what_the_tampering_cases_assume(real_manifest):
    """TAMPERED_COUNTS names the figures of the fixture archive's run; if the archive changes, change them."""
    assert real_manifest["outputs"] == {"artifacts": 8, "dead_letters": 12, "evaluations": 19, "refresh_requests": 0,
                                        "judge_requests": 0, "retry_requests": 3}
    assert (real_manifest["outcomes"]["spells"]["accepted"], real_manifest["outcomes"]["combat-turns"]["accepted"]) == (2, 0)
    assert real_manifest["refresh"]["refresh_stale"] is False


def _set(path, value):
    def change(m):
        node = m
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


EVALUATIONS_FILE = ("files", "evaluations", 0)
MALFORMED = {
    "rows a string": (_set((*EVALUATIONS_FILE, "rows"), "19"), 'evaluations/part-00000-of-00001.avro: rows is "19", not a count'),
    "rows null": (_set((*EVALUATIONS_FILE, "rows"), None), "rows is null, not a count"),
    "rows a list": (_set((*EVALUATIONS_FILE, "rows"), [19]), "rows is a list, not a count"),
    "bytes a bool": (_set((*EVALUATIONS_FILE, "bytes"), True), "bytes is true, not a count"),
    "bytes a float": (_set((*EVALUATIONS_FILE, "bytes"), 1812.0), "bytes is 1812.0, not a count"),
    "bytes negative": (_set((*EVALUATIONS_FILE, "bytes"), -1), "bytes is -1, not a count"),
    "sha256 not hex": (_set((*EVALUATIONS_FILE, "sha256"), "x" * 64), "not a SHA-256 hex digest"),
    "format not its name's": (_set((*EVALUATIONS_FILE, "format"), "jsonl"), 'format "jsonl" is not the format of its name'),
    "a file entry a list": (_set(EVALUATIONS_FILE, ["evaluations/part-00000-of-00001.avro"]),
                            'a file entry of "evaluations" is a list, not an object'),
    "a file entry a string": (_set(EVALUATIONS_FILE, "evaluations/part-00000-of-00001.avro"), "not an object"),
    "an output's files a string": (_set(("files", "evaluations"), "part-00000-of-00001.avro"), "not a list"),
    "files a list": (_set(("files",), []), "the manifest's files is a list, not an object"),
    "a path listed twice": (lambda m: m["files"]["evaluations"].append(m["files"]["evaluations"][0]), "twice"),
    "a file not a part file": (_set((*EVALUATIONS_FILE, "path"), "evaluations/rows.avro"), "not a part-* file"),
    "a path with a line break": (_set((*EVALUATIONS_FILE, "path"), "evaluations/part-0\n.avro"), "not a path inside"),
    "outputs a list": (_set(("outputs",), [8, 3, 0, 19, 12]), "manifest: outputs is a list, not an object"),
    "outputs missing": (lambda m: m.pop("outputs"), "manifest: outputs is missing"),
    "an output count a string": (_set(("outputs", "dead_letters"), "12"), 'manifest: outputs.dead_letters is "12", not a count'),
    "outcomes a list": (_set(("outcomes",), []), "manifest: outcomes is a list, not an object"),
    "an outcome null": (_set(("outcomes", "spells"), None), "manifest: outcomes.spells is null, not an object"),
    "holds a string": (_set(("conservation", "holds"), "true"), 'manifest: conservation.holds is "true", not true or false'),
    "a conservation block a number": (_set(("transcript_conservation",), 3), "transcript_conservation is 3, not an object"),
    "unreadable paths not names": (_set(("unreadable_files", "paths"), [1]), "unreadable_files.paths is a list, not a list of names"),
    "refresh a number": (_set(("refresh",), 0), "manifest: refresh is 0, not an object"),
    "options.families a family it does not count": (_set(("options", "families"), ["potions"]),
                                                    'options.families names "potions", which outcomes does not count'),
    "a count beyond 64 bits": (_set(("outputs", "artifacts"), 2**64), "not a count"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_manifest_is_a_problem_line_not_a_traceback(real_manifest, case):
    change, expected = MALFORMED[case]
    found, part_files = intact(real_manifest)
    verdict = verify_run(tampered(real_manifest, change), found, part_files)
    assert not verdict.ok and one_line_problems(verdict)
    assert any(expected in problem for problem in verdict.problems), verdict.problems


@pytest.mark.parametrize("manifest,expected", [
    ([], "manifest.json holds a list, not a JSON object"), (3, "manifest.json holds 3, not a JSON object"),
    ("files", 'manifest.json holds "files", not a JSON object'), (None, "manifest.json holds null, not a JSON object"),
    ({}, "the manifest lists no files"),
])
def test_a_manifest_that_is_not_an_object_is_one_problem(manifest, expected):
    verdict = verify_run(manifest, {}, [])
    assert len(verdict.problems) == 1 and verdict.problems[0].startswith(expected)


# Mutations of a real manifest: any place, any JSON value.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)
# What verify does not read: a mutation there must leave a verifying run verifying.
UNREAD = (("fingerprints",), ("runner",), ("endpoint_ordering",), ("invariant_failures",),
          ("inputs", "blank_lines_skipped"))
# What verify reads in part (options.families and refresh_stale): a mutation there may or may not matter.
PARTLY_READ = (("options",),)
# Blocks and keys a run made before them does not have: dropped, the manifest reads as such a run's (an empty
# verdict_usage says nothing a missing one does not; one that names judges is required while judges are named).
OPTIONAL_FOR_OLDER_RUNS = (("verdict_usage",), ("refresh", "slots_on_earlier_prompt"))


def tree_paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from tree_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from tree_paths(value, (*prefix, index))


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True)  # tells true from 1 and 1.0 from 1; any size of int


@st.composite
def mutated_manifests(draw, manifest: dict):
    """(a mutated copy of the manifest, the path of what changed)."""
    path = draw(st.sampled_from(list(tree_paths(manifest))))
    copy = orjson.loads(orjson.dumps(manifest))
    if not path:
        return draw(JSON_VALUES), path
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    old = parent[key]
    how = draw(st.sampled_from(["drop", "replace", "retype", "bump", "rename"]))
    if how == "drop":
        del parent[key]
    elif how == "replace":
        parent[key] = draw(JSON_VALUES)
    elif how == "retype":
        parent[key] = draw(st.sampled_from([str(old), [old], {"value": old}, None, bool(old),
                                            float(old) if isinstance(old, int) else 0.5]))
    elif how == "bump":
        parent[key] = (not old if isinstance(old, bool) else old + draw(st.sampled_from([-1, 1]))
                       if isinstance(old, int) else old + "x" if isinstance(old, str) else draw(JSON_VALUES))
    elif isinstance(parent, dict):
        new_key = draw(st.text(max_size=6).filter(lambda k: k not in parent))
        parent[new_key] = parent.pop(key)
    else:
        del parent[key]
    assume(canonical(copy) != canonical(manifest))
    return copy, path


def _absent(manifest, path) -> bool:
    node = manifest
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return True
        node = node[key]
    return not isinstance(node, dict) or path[-1] not in node


def _names_judges(manifest) -> bool:
    return bool(manifest.get("judges"))


def test_a_run_with_judges_needs_its_verdict_usage():
    from domain.run_integrity import _verdict_usage_problems, ManifestReader

    assert _verdict_usage_problems(ManifestReader({"judges": {"spell-cast": {}}})) == [
        "the manifest has no verdict_usage block, though it names judges (spell-cast)"]
    assert _verdict_usage_problems(ManifestReader({"judges": {}})) == []


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_any_mutation_of_a_real_manifest_is_a_verdict_and_one_that_matters_refuses(real_manifest, data):
    found, part_files = intact(real_manifest)
    mutated, path = data.draw(mutated_manifests(real_manifest))
    verdict = verify_run(mutated, found, part_files)
    assert isinstance(verdict, Verdict) and one_line_problems(verdict)
    dropped = tuple(path) in OPTIONAL_FOR_OLDER_RUNS and _absent(mutated, path)
    if any(path[:len(place)] == place for place in UNREAD):
        assert verdict.ok, (path, verdict.problems)
    elif dropped and not _names_judges(real_manifest):
        pass  # reads as a run made before the key: verify may accept it
    elif not any(path[:len(place)] == place for place in PARTLY_READ):
        assert not verdict.ok, path


@pytest.fixture(scope="module")
def folder_to_tamper(first_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("tamper") / "x"
    shutil.copytree(first_run, out)
    return out


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_manifest_file_gives_the_commands_a_one_line_answer(real_manifest, folder_to_tamper, data):
    """On disk: a mutated manifest, any JSON value or any bytes. ``verify`` answers with a verdict,
    and ``require_verified`` (report, retry economy) refuses with one line."""
    kind = data.draw(st.sampled_from(["mutated", "json", "bytes"]))
    if kind == "mutated":
        mutated, path = data.draw(mutated_manifests(real_manifest))
        content = canonical(mutated).encode()
    elif kind == "json":
        path, content = (), canonical(data.draw(JSON_VALUES)).encode()
    else:
        path, content = (), data.draw(st.binary(max_size=40) | st.just(b"\xff\xfe{}") | st.just(b'{"files": {'))
    (folder_to_tamper / "manifest.json").write_bytes(content)
    verdict = verify.verify_folder(str(folder_to_tamper))
    assert isinstance(verdict, Verdict) and one_line_problems(verdict)
    if not any(path[:len(place)] == place for place in (*UNREAD, *PARTLY_READ)):
        assert not verdict.ok, path
        with pytest.raises(verify.NotVerified) as refused:
            verify.require_verified(folder_to_tamper)
        assert "\n" not in str(refused.value) and "does not verify" in str(refused.value)


@pytest.mark.parametrize("manifest,expected", [
    ("a folder", "manifest.json cannot be read (IsADirectoryError"),
    (b"\xff\xfe{}", "manifest.json is not valid JSON (str is not valid UTF-8"),
    (b'{"files": {', "manifest.json is not valid JSON"),
    (b"[1, 2]", "manifest.json holds a list, not a JSON object"),
    (b"42", "manifest.json holds 42, not a JSON object"),
])
def test_a_manifest_that_cannot_be_read_is_a_verdict_for_every_command(first_run, tmp_path, capsys, manifest, expected):
    out = tmp_path / "x"
    shutil.copytree(first_run, out)
    (out / "manifest.json").unlink()
    if manifest == "a folder":
        (out / "manifest.json").mkdir()
    else:
        (out / "manifest.json").write_bytes(manifest)
    assert verify.main([str(out)]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"  {expected}") and printed[1].endswith("NOT VERIFIED: 1 problem(s)")
    with pytest.raises(NotariusError, match=f"does not verify \\({expected[:20]}") as refused:
        retry_economy.load_figures(out)
    assert "\n" not in str(refused.value)


def test_a_run_with_refresh_requests_verifies(archive, tmp_path):
    """retry_requests/ holds the retries and the refresh requests: a well-formed run with both verifies."""
    out = tmp_path / "x"
    assert reprocess.main(job_argv(archive, out, "--refresh-stale", "--output-format", "jsonl")) == 0
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["outputs"]["refresh_requests"] > 0 and manifest["outputs"]["retry_requests"] > 0
    assert verify.verify_folder(str(out)).ok
