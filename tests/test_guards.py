"""The guards every command shares (pipelines.guards, transforms.files): links resolved before paths
are compared, --overwrite all or nothing and never through a link, one writer per folder, Ctrl-C
as one line, bounded options, and a run that could use nothing says so.

Each test here reproduces a finding of issue 29 on the code before its fix."""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import NotariusError
from fixture_archive import write_archive
from pipelines import reprocess, verify
from pipelines.guards import claimed_output
from transforms.files import dangling_links, matching_files
from pipelines.folders import LOCK_NAME, FolderLock, FolderLockedError, remove_folder_contents
from transforms.files import resolved_pattern

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def archive(tmp_path):
    return write_archive(tmp_path / "archive")


def job_argv(archive, out, *extra):
    return ["--transcripts", archive["transcripts"], "--candidates", archive["candidates"], "--output", str(out), *extra]


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def cli(*args, cwd=ROOT, timeout=300, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, **kwargs)


# --- 1. links: an output through a link is compared as the folder it leads to --------------------------

def test_overwrite_through_a_link_to_the_inputs_deletes_nothing(archive, tmp_path):
    folder = tmp_path / "archive"
    before = tree(folder)
    link = tmp_path / "link"
    link.symlink_to(folder)
    with pytest.raises(NotariusError, match="holds input files of --candidates"):
        reprocess.run(job_argv(archive, link, "--overwrite"))
    assert tree(folder) == before


def test_inputs_read_through_a_link_may_not_reach_the_output(archive, tmp_path):
    folder = tmp_path / "archive"
    alink = tmp_path / "alink"
    alink.symlink_to(folder)
    argv = ["--transcripts", str(alink / "**"), "--candidates", archive["candidates"],
            "--output", str(folder / "out1")]
    with pytest.raises(NotariusError, match="within reach of --transcripts"):
        reprocess.run(argv)
    assert not (folder / "out1").exists()


def test_a_link_to_an_earlier_run_is_not_emptied_through(archive, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "keep.txt").write_text("an earlier run")
    link = tmp_path / "runlink"
    link.symlink_to(run)
    with pytest.raises(NotariusError, match="never deletes through a link"):
        reprocess.run(job_argv(archive, link, "--overwrite"))
    assert (run / "keep.txt").read_text() == "an earlier run"


def test_writing_through_a_link_to_an_empty_folder_writes_the_folder(archive, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "outlink"
    link.symlink_to(real)
    manifest = reprocess.run(job_argv(archive, link))
    assert manifest["options"]["output"] == str(real)
    assert verify.verify_folder(str(real)).ok


def test_a_patterns_fixed_part_is_resolved(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "l").symlink_to(tmp_path / "real")
    assert resolved_pattern(str(tmp_path / "l" / "sub" / ".." / "*.jsonl")) == str(tmp_path / "real" / "*.jsonl")
    assert resolved_pattern(str(tmp_path / "l" / "**")) == str(tmp_path / "real" / "**")
    assert resolved_pattern(str(tmp_path / "l")) == str(tmp_path / "real")


# --- 12. --overwrite: all or nothing, names taken literally -----------------------------------------

def test_overwrite_removes_entries_whose_names_look_like_patterns(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("[ab]", "a", "*", "manifest.json"):
        (out / name).write_text(name)
    remove_folder_contents(str(out), [str(out / "manifest.json")])
    assert os.listdir(out) == []


def test_overwrite_that_cannot_remove_everything_removes_nothing(tmp_path, monkeypatch):
    out = tmp_path / "out"
    (out / "locked").mkdir(parents=True)
    (out / "locked" / "f").write_text("x")
    (out / "manifest.json").write_text("{}")
    real_access = os.access
    # A folder whose entries we may not remove (root may remove anything, so the permission is simulated).
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path) == str(out / "locked")
                        else real_access(path, mode))
    with pytest.raises(OSError, match="nothing was removed"):
        remove_folder_contents(str(out), [str(out / "manifest.json")])
    assert sorted(os.listdir(out)) == ["locked", "manifest.json"]
    assert (out / "locked" / "f").read_text() == "x"


def test_a_failed_move_puts_everything_back(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("a", "b", "manifest.json"):
        (out / name).write_text(name)
    real_rename = os.rename
    calls = []

    def failing_rename(src, dst):
        calls.append(src)
        if len(calls) == 3:
            raise OSError("simulated")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(OSError, match="simulated"):
        remove_folder_contents(str(out), [str(out / "manifest.json")])
    monkeypatch.undo()
    assert sorted(os.listdir(out)) == ["a", "b", "manifest.json"]


# --- 5. one writer per folder ----------------------------------------------------------------------

def test_a_second_claim_on_a_folder_is_refused(tmp_path):
    out = tmp_path / "out"
    with claimed_output("first", str(out), inputs={}, writes=[], overwrite=False) as folder:
        assert os.path.exists(os.path.join(folder, LOCK_NAME))
        with pytest.raises(NotariusError, match="is in use: .* is being written by first"):
            with claimed_output("second", str(out), inputs={}, writes=[], overwrite=True):
                pass
    assert not os.path.exists(out / LOCK_NAME)
    with claimed_output("third", str(out), inputs={}, writes=[], overwrite=False):
        pass


def test_the_lock_is_released_when_its_holder_dies(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, %r)\n"
        "from pipelines.folders import FolderLock\n"
        "FolderLock.acquire(%r, 'holder'); print('locked', flush=True); time.sleep(60)") % (str(ROOT), str(out))],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(FolderLockedError):
            FolderLock.acquire(str(out), "me")
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        FolderLock.acquire(str(out), "me").release()  # the kernel released the dead holder's lock
    finally:
        holder.kill()


def test_two_runs_started_together_into_one_folder(archive, tmp_path):
    """Two real processes, one empty folder: exactly one runs, the other is refused with one line, and
    the folder verifies with the winner's files."""
    out = tmp_path / "out"
    out.mkdir()
    procs = [subprocess.Popen([sys.executable, "-m", "pipelines.cli", *job_argv(archive, out)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(300), p.stdout.read(), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 1], results
    refused = next(err for code, _, err in results if code == 1)
    assert refused.strip().count("\n") == 0 and ("is in use" in refused or "already holds files" in refused)
    assert verify.verify_folder(str(out)).ok


# --- 11. an output that cannot be created fails first ------------------------------------------------

@pytest.mark.parametrize("output,message", [
    ("{tmp}/" + "x" * 300, "cannot be created"),
    ("/proc/notarius-out", "cannot be created"),
])
def test_an_output_that_cannot_be_created_is_refused_before_any_work(archive, tmp_path, output, message):
    proc = cli(*job_argv(archive, output.format(tmp=tmp_path)))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("notarius-reprocess: --output") and message in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr


def test_a_folder_given_as_candidates_is_refused(archive, tmp_path):
    with pytest.raises(NotariusError, match="names a folder; give a pattern of its files"):
        reprocess.run(["--transcripts", archive["transcripts"], "--candidates", str(tmp_path / "archive"),
                       "--output", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


# --- 9. options within what the outputs can hold ------------------------------------------------------

@pytest.mark.parametrize("extra,message", [
    (["--max-attempts", str(2**64)], "--max-attempts must be at most 2147483647"),
    (["--max-attempts", str(2**31)], "--max-attempts must be at most 2147483647"),
    (["--max-record-bytes", str(2**64)], "--max-record-bytes must be at most 9223372036854775807"),
    (["--progress-seconds", "nan"], "--progress-seconds must be a finite number"),
    (["--progress-seconds", "inf"], "--progress-seconds must be a finite number"),
])
def test_numbers_beyond_what_the_outputs_hold_are_refused(archive, tmp_path, extra, message):
    with pytest.raises(NotariusError, match=message):
        reprocess.run(job_argv(archive, tmp_path / "out", *extra))
    assert not (tmp_path / "out").exists()


def test_the_largest_attempt_budget_is_accepted(archive, tmp_path):
    manifest = reprocess.run(job_argv(archive, tmp_path / "out", "--max-attempts", str(2**31 - 1)))
    assert manifest["options"]["max_attempts"] == 2**31 - 1


# --- 14. a run that could use nothing says so ---------------------------------------------------------

def test_a_run_whose_every_candidate_is_a_dead_letter_warns(archive, tmp_path, capsys):
    argv = ["--transcripts", archive["transcripts"], "--candidates", str(tmp_path / "archive" / "transcripts-1.jsonl"),
            "--output", str(tmp_path / "out")]
    assert reprocess.main(argv) == 0
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert last.startswith("warning: every candidate (1) is a dead letter: nothing was evaluated from it; "
                           "most common reason (1x): ")


def test_a_normal_run_has_no_warning(archive, tmp_path, capsys):
    assert reprocess.main(job_argv(archive, tmp_path / "out")) == 0
    assert "warning:" not in capsys.readouterr().out


# --- 13. Ctrl-C --------------------------------------------------------------------------------------

def _signal_mid_run(archive, out: Path, *extra: str, signum=signal.SIGINT, group: bool = True
                    ) -> subprocess.CompletedProcess:
    """Start the job, wait until its writers have made their temporary folder, then send ``signum`` (to the
    process group, as a terminal's Ctrl-C does, or to the command alone)."""
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", *job_argv(archive, out, *extra)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.is_dir() and any(name.startswith(".temp-") for name in os.listdir(out)):
            break
        time.sleep(0.02)
    (os.killpg if group else os.kill)(proc.pid, signum)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("workers", [[], ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]],
                         ids=["in-process", "two-workers"])
def test_ctrl_c_is_one_line_and_leaves_no_temporary_files(archive, tmp_path, workers):
    out = tmp_path / "out"
    done = _signal_mid_run(archive, out, *workers)
    assert done.returncode == 130, done.stderr[-3000:]  # 0 would mean the run ended before the signal: a failure
    # The one line and nothing else: no traceback from the runner, a worker or its client, and none of the
    # workers' own log lines (they log through the runner, which shows their failures only).
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert said == [f"notarius-reprocess: interrupted: nothing committed in {out}"], done.stderr[-3000:]
    assert not [name for name in os.listdir(out) if name.startswith(".temp-") or name == LOCK_NAME]
    assert not (out / "manifest.json").exists()


# --- export-batch and import-batch share the guards ----------------------------------------------------

@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A committed run with retry requests, and its archive."""
    root = tmp_path_factory.mktemp("exports")
    archive = write_archive(root / "archive")
    out = root / "run1"
    assert reprocess.main(job_argv(archive, out, "--output-format", "jsonl", "--refresh-stale")) == 0
    return {"root": root, "archive": archive, "run": out}


def export_argv(run, archive, out, *extra):
    return ["--retry-requests", str(run / "retry_requests" / "part-*"), "--transcripts", archive["transcripts"],
            "--provider", "openai-chat", "--model", "gpt-4.1-mini", "--output", str(out), *extra]


def test_export_into_a_run_folder_is_refused_and_the_run_still_verifies(finished_run):
    run = finished_run["run"]
    before = tree(run)
    from pipelines import batch_export

    with pytest.raises(NotariusError, match="holds input files of --re"):
        batch_export.run(export_argv(run, finished_run["archive"], run))
    with pytest.raises(NotariusError, match="holds input files of --re"):
        batch_export.run(export_argv(run, finished_run["archive"], run, "--overwrite"))
    assert tree(run) == before and verify.verify_folder(str(run)).ok


def test_export_twice_into_one_folder_needs_overwrite(finished_run):
    batch = finished_run["root"] / "batch1"
    first = cli("export-batch", *export_argv(finished_run["run"], finished_run["archive"], batch))
    assert first.returncode == 0, first.stderr[-2000:]
    exported = tree(batch)
    again = cli("export-batch", *export_argv(finished_run["run"], finished_run["archive"], batch))
    assert again.returncode == 1 and "already holds files" in again.stderr and again.stderr.count("\n") == 1
    assert tree(batch) == exported
    replaced = cli("export-batch", *export_argv(finished_run["run"], finished_run["archive"], batch, "--overwrite"))
    assert replaced.returncode == 0, replaced.stderr[-2000:]
    assert tree(batch) == exported  # the same export, written afresh: byte for byte
    assert not [name for name in os.listdir(batch) if name.startswith(".")]


def test_export_into_a_folder_named_with_glob_characters_is_refused(finished_run):
    from pipelines import batch_export

    with pytest.raises(NotariusError, match=r"contains \[ \]"):
        batch_export.run(export_argv(finished_run["run"], finished_run["archive"], finished_run["root"] / "batch[1]"))


def test_export_reads_only_a_run_folder_that_verifies(finished_run, tmp_path):
    from pipelines import batch_export

    forged = tmp_path / "forged"
    shutil_copy(finished_run["run"], forged)
    (forged / "manifest.json").unlink()
    with pytest.raises(NotariusError, match="does not verify .*no manifest.json") as refused:
        batch_export.run(export_argv(forged, finished_run["archive"], tmp_path / "b1"))
    assert refused.value.line("another command").startswith("notarius-reprocess export-batch: ")  # named for export
    shutil_copy(finished_run["run"], tmp_path / "tampered")
    part = next((tmp_path / "tampered" / "retry_requests").glob("part-*"))
    row = orjson.loads(part.read_bytes().splitlines()[0])
    part.write_bytes(part.read_bytes() + orjson.dumps({**row, "request_id": "r-forged"}) + b"\n")
    with pytest.raises(NotariusError, match="does not verify"):
        batch_export.run(export_argv(tmp_path / "tampered", finished_run["archive"], tmp_path / "b2"))
    loose = tmp_path / "loose.jsonl"
    loose.write_bytes(part.read_bytes())
    with pytest.raises(NotariusError, match="does not name a run's retry requests"):
        batch_export.run(["--retry-requests", str(loose), *export_argv(finished_run["run"], finished_run["archive"],
                                                                      tmp_path / "b3")[2:]])
    assert not any((tmp_path / name).exists() for name in ("b1", "b2", "b3"))


def shutil_copy(source: Path, target: Path) -> None:
    import shutil

    shutil.copytree(source, target, symlinks=True)


@pytest.mark.parametrize("extra,message", [
    (["--max-output-tokens", str(2**64)], "--max-output-tokens must be at most 2147483647"),
    (["--temperature", "nan"], "--temperature must be a finite number"),
    (["--temperature", "-5"], "--temperature must be at least 0"),
    (["--temperature", "2.5"], "--temperature must be at most 2"),
    (["--model", ""], "--model must not be empty"),
    (["--model", "  "], "--model must not be empty"),
    (["--only-request-ids", "{tmp}/missing.txt"], "no such file"),
    (["--only-request-ids", "{tmp}"], "is a folder; name a file"),
    (["--only-request-ids", "{tmp}/latin1.txt"], "is not UTF-8 text"),
    (["--max-lines-per-file", "0"], "--max-lines-per-file must be at least 1"),
])
def test_export_options_are_checked_before_any_work(finished_run, tmp_path, extra, message):
    (tmp_path / "latin1.txt").write_bytes(b"r-caf\xe9\n")
    extra = [part.format(tmp=tmp_path) for part in extra]
    argv = export_argv(finished_run["run"], finished_run["archive"], tmp_path / "out", *extra)
    if "--model" in extra:  # the last --model wins
        argv = [a for a in argv[:argv.index("--model")]] + argv[argv.index("--model") + 2:]
    proc = cli("export-batch", *argv)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith("notarius-reprocess export-batch: ") and message in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stdout == ""
    assert not (tmp_path / "out").exists()


def test_export_to_an_output_that_names_a_file_is_one_line(finished_run, tmp_path):
    (tmp_path / "afile").write_text("x")
    proc = cli("export-batch", *export_argv(finished_run["run"], finished_run["archive"], tmp_path / "afile"))
    assert proc.returncode == 1 and "is a file, not a folder" in proc.stderr and proc.stderr.count("\n") == 1


@pytest.fixture(scope="module")
def exported(finished_run):
    batch = finished_run["root"] / "batch-for-import"
    done = cli("export-batch", *export_argv(finished_run["run"], finished_run["archive"], batch))
    assert done.returncode == 0, done.stderr[-2000:]
    results = finished_run["root"] / "results"
    results.mkdir()
    (results / "output.jsonl").write_bytes(b"")  # nothing answered yet: every request is missing
    return {"batch": batch, "results": results}


def import_argv(exported, out, *extra):
    return ["--provider", "openai-chat", "--results", str(exported["results"] / "*"),
            "--requests", str(exported["batch"] / "requests-*"), "--output", str(out), *extra]


def test_import_into_the_folder_of_its_results_is_refused(exported):
    from pipelines import batch_import

    before = tree(exported["results"])
    for extra in ([], ["--overwrite"]):
        with pytest.raises(NotariusError, match="holds input files of --results"):
            batch_import.run(import_argv(exported, exported["results"], *extra))
    assert tree(exported["results"]) == before


def test_import_twice_into_one_folder_needs_overwrite(exported, tmp_path):
    from pipelines import batch_import

    out = tmp_path / "import"
    first = batch_import.run(import_argv(exported, out))
    written = tree(out)
    assert sorted(written) == ["candidates.jsonl", "import_manifest.json", "ledger.jsonl", "not_imported.txt", "verdicts.jsonl"]
    assert first["conservation"]["missing"] == first["conservation"]["exported"] > 0
    with pytest.raises(NotariusError, match="already holds files"):
        batch_import.run(import_argv(exported, out))
    assert tree(out) == written
    batch_import.run(import_argv(exported, out, "--overwrite"))
    assert tree(out) == written


@pytest.mark.parametrize("results,output,message", [
    ("{results}", "{tmp}/out", "names a folder; give a pattern of its files"),
    ("{results}/*", "{results}/output.jsonl", "is a file, not a folder"),
    ("{tmp}/nothing-*", "{tmp}/out", "matches no files"),
])
def test_import_mistakes_are_one_line(exported, tmp_path, results, output, message):
    argv = import_argv(exported, tmp_path / "unused")
    argv[argv.index("--results") + 1] = results.format(results=exported["results"], tmp=tmp_path)
    argv[argv.index("--output") + 1] = output.format(results=exported["results"], tmp=tmp_path)
    proc = cli("import-batch", *argv)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("notarius-reprocess import-batch: ") and message in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_report_writes_into_a_folder_it_creates(finished_run, tmp_path):
    from pipelines import report

    html = tmp_path / "new" / "deeper" / "report.html"
    assert report.main(["--output", str(finished_run["run"]), "--html", str(html)]) == 0
    assert html.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("module,extra,message", [
    ("pipelines.report", ["--truth", "{tmp}/missing.jsonl"], "--truth '{tmp}/missing.jsonl': no such file"),
    ("pipelines.report", ["--html", "{tmp}"], "--html '{tmp}' is a folder; name the file to write"),
    ("pipelines.retry_economy", ["--truth", "{tmp}"], "--truth '{tmp}' is a folder; name a file"),
])
def test_report_mistakes_are_one_line(finished_run, tmp_path, module, extra, message):
    extra = [part.format(tmp=tmp_path) for part in extra]
    if module.endswith("retry_economy") and "--truth" not in extra:
        extra += ["--truth", str(tmp_path / "t.jsonl")]
    proc = subprocess.run([sys.executable, "-m", module, "--output", str(finished_run["run"]), *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and message.format(tmp=tmp_path) in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1


def test_the_printed_verify_command_runs_as_printed(archive, tmp_path):
    """The summary's last line names a command that works from where the user is, venv active or not."""
    proc = cli(*job_argv(archive, tmp_path / "out"), env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    command = proc.stdout.strip().splitlines()[-1].split("check them with: ", 1)[1]
    done = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and "verified:" in done.stdout, (command, done.stderr[-2000:])


# --- the independent adversarial check's findings (second round) ----------------------------------------

def test_inputs_read_through_a_link_inside_the_output_are_inside_it(archive, tmp_path):
    out = tmp_path / "out3"
    out.mkdir()
    (out / "inlink").symlink_to(tmp_path / "archive")
    argv = ["--transcripts", str(out / "inlink" / "transcripts-*"), "--candidates", str(out / "inlink" / "candidates-*"),
            "--output", str(out), "--overwrite"]
    with pytest.raises(NotariusError, match="holds input files of --candidates"):
        reprocess.run(argv)
    assert (out / "inlink").is_symlink() and tree(tmp_path / "archive")


def test_an_output_inside_a_committed_run_is_refused(finished_run):
    from pipelines import batch_export

    run = finished_run["run"]
    with pytest.raises(NotariusError, match="lies inside the committed folder"):
        batch_export.run(export_argv(run, finished_run["archive"], run / "batch"))
    with pytest.raises(NotariusError, match="lies inside the committed folder"):
        reprocess.run(job_argv(finished_run["archive"], run / "nested"))
    assert verify.verify_folder(str(run)).ok


def test_verify_does_not_read_a_pipe_or_a_device(finished_run, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(finished_run["run"], copy)
    part = next((copy / "evaluations").glob("part-*"))
    part.unlink()
    os.mkfifo(part)
    other = next((copy / "dead_letters").glob("part-*"))
    other.unlink()
    other.symlink_to("/dev/zero")
    proc = cli("verify", copy, timeout=60)
    assert proc.returncode == 1
    assert proc.stdout.count("not a regular file") == 2, proc.stdout


@pytest.mark.parametrize("pattern,message", [("{archive}", "names a folder"), ("{tmp}/nothing-*", "matches no files")])
def test_prior_registries_given_must_name_files(archive, tmp_path, pattern, message):
    with pytest.raises(NotariusError, match=f"--prior-registries .*{message}"):
        reprocess.run(job_argv(archive, tmp_path / "out", "--prior-registries",
                               pattern.format(archive=tmp_path / "archive", tmp=tmp_path)))


@pytest.mark.parametrize("link_name", ["candidates-9.jsonl", "deeper/candidates-9.jsonl"])
def test_a_link_to_a_missing_file_stops_the_job_by_name(archive, tmp_path, link_name):
    """Beam's match leaves a dangling link out: the run would read the other files and exit 0 with an input
    lost. The job names the link before anything is written; without the link the same pattern runs."""
    link = tmp_path / "archive" / link_name
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(tmp_path / "moved-away.jsonl")
    pattern = str(tmp_path / "archive" / "**candidates-*")
    with pytest.raises(NotariusError, match=f"--candidates .*1 link.*{link.name}"):
        reprocess.run(job_argv({**archive, "candidates": pattern}, tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    assert dangling_links(pattern) == [str(link)]
    link.unlink()
    assert dangling_links(pattern) == [] and matching_files(pattern)


def test_a_deletion_refused_past_the_check_puts_what_remains_back(tmp_path, monkeypatch):
    import shutil

    out = tmp_path / "out"
    out.mkdir()
    for name in ("a", "b", "manifest.json"):
        (out / name).write_text(name)
    real_rmtree = shutil.rmtree

    def refusing_rmtree(path, *args, **kwargs):  # removes one entry, then the system refuses (an immutable file)
        os.unlink(os.path.join(path, "a"))
        raise PermissionError(1, "Operation not permitted", os.path.join(path, "b"))

    monkeypatch.setattr(shutil, "rmtree", refusing_rmtree)
    with pytest.raises(OSError, match="back in place"):
        remove_folder_contents(str(out), [str(out / "manifest.json")])
    monkeypatch.setattr(shutil, "rmtree", real_rmtree)
    assert sorted(os.listdir(out)) == ["b", "manifest.json"]  # nothing hidden in a staging folder


def test_import_refuses_a_received_at_that_is_not_a_time(exported, tmp_path):
    from pipelines import batch_import

    with pytest.raises(NotariusError, match="--received-at 'bogus' is not a time"):
        batch_import.run(import_argv(exported, tmp_path / "imp", "--received-at", "bogus"))
    assert not (tmp_path / "imp").exists()


def test_the_demo_claims_its_folder_like_every_command(tmp_path):
    mine = tmp_path / "myproject"
    (mine / "run1").mkdir(parents=True)
    (mine / "run1" / "notes.txt").write_text("precious")
    for output, message in ((mine, "holds files that are not an earlier demo's"), ("/", "root of its filesystem"),
                            ("/proc/notarius-demo", "cannot be created"), (tmp_path / "x[1]", "contains [ ]")):
        proc = subprocess.run([sys.executable, "-m", "pipelines.demo", "--output", str(output), "--candidates", "50"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1 and message in proc.stderr and proc.stderr.count("\n") == 1, (output, proc.stderr)
    assert (mine / "run1" / "notes.txt").read_text() == "precious"
    assert not (tmp_path / "x[1]").exists()


def test_an_empty_candidates_file_is_said(archive, tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert reprocess.main(["--transcripts", archive["transcripts"], "--candidates", str(empty),
                           "--output", str(tmp_path / "out")]) == 0
    assert "warning: no candidate was read: the files --candidates matched hold no record" in capsys.readouterr().out


def _signal_after(argv: list, delay: float, signum=signal.SIGINT, module="pipelines.cli",
                  after_importing: str | None = None) -> subprocess.CompletedProcess:
    """Signal the command ``delay`` seconds after it starts, or after the interpreter has imported the
    package ``after_importing`` (read from ``-X importtime``): a signal while Python itself starts up,
    before any of the command's code runs, is Python's to report, not the command's."""
    flags = ["-X", "importtime"] if after_importing else []
    proc = subprocess.Popen([sys.executable, *flags, "-m", module, *map(str, argv)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    early = []
    if after_importing:
        for line in proc.stderr:
            early.append(line)
            if line.rstrip().endswith(f"| {after_importing}"):
                break
    time.sleep(delay)
    os.killpg(proc.pid, signum)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, "".join(early) + stderr)


def _said(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if line.strip() and not line.startswith(("INFO:apache_beam", "WARNING:apache_beam", "import time:"))]


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.25, 0.35, 0.4])
def test_ctrl_c_while_the_command_starts_is_one_line(archive, tmp_path, delay):
    """Before the folder is held (Beam half imported, options being read): one line, exit 130. The clock
    starts once the command's entry has taken the signals (pipelines.entry), which it does before it imports
    anything of the command's: from the first of those, pipelines.interruption."""
    done = _signal_after(job_argv(archive, tmp_path / "out"), delay, after_importing="pipelines.interruption")
    assert done.returncode == 130, "\n".join(_said(done.stderr))[-3000:]
    (line,) = _said(done.stderr)
    assert re.fullmatch(r"notarius-reprocess: interrupted: nothing committed( in .*)?", line), line


def test_ctrl_c_in_the_report_is_one_line(finished_run):
    done = _signal_after(["--output", finished_run["run"]], 0.3, module="pipelines.report")
    assert done.returncode == 130, done.stderr[-3000:]
    assert _said(done.stderr) == ["python -m pipelines.report: interrupted: nothing committed"]


def test_sigterm_mid_run_is_one_line_and_leaves_no_temporary_files(archive, tmp_path):
    out = tmp_path / "out"
    done = _signal_mid_run(archive, out, signum=signal.SIGTERM, group=False)
    assert done.returncode == 143, done.stderr[-3000:]
    assert _said(done.stderr) == [f"notarius-reprocess: terminated: nothing committed in {out}"]
    assert not [n for n in os.listdir(out) if n.startswith(".temp-") or n == LOCK_NAME]


def test_a_thread_that_never_ends_cannot_keep_an_interrupted_command_alive(tmp_path):
    """After the one line, a library thread that is not a daemon (Beam's state sampler caught between
    starting and being marked started) would keep the interpreter waiting forever: a watchdog ends it."""
    script = ("import sys, threading, time; sys.path.insert(0, %r)\n"
              "from pipelines.interruption import interrupted\n"
              "threading.Thread(target=lambda: time.sleep(3600)).start()\n"
              "raise interrupted('prog', None)\n") % str(ROOT)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130 and done.stderr.strip() == "prog: interrupted: nothing committed"
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("command,extra,message", [
    ("job", ["--candidates", "{archive}/candidates-1.jsonl"], "--candidates is given 2 times"),
    ("job", ["--max-attempts=2", "--max-attempts", "3"], "--max-attempts is given 2 times"),
    ("export", ["--model", "other"], "--model is given 2 times"),
])
def test_an_option_given_twice_is_refused(finished_run, tmp_path, command, extra, message):
    """argparse keeps the last of a repeated option without a word: the run read half of what was meant."""
    from pipelines import batch_export

    extra = [part.format(archive=tmp_path) for part in extra]
    with pytest.raises(NotariusError, match=message):
        if command == "job":
            reprocess.run(job_argv(finished_run["archive"], tmp_path / "out", *extra))
        else:
            batch_export.run(export_argv(finished_run["run"], finished_run["archive"], tmp_path / "out", *extra))
    assert not (tmp_path / "out").exists()


def test_verify_checks_a_comparison_folder_against_its_own_manifest(finished_run, tmp_path):
    out = tmp_path / "cmp"
    done = cli("compare", finished_run["run"], finished_run["run"], "--output", out)
    assert done.returncode == 0, done.stderr[-2000:]
    checked = cli("verify", out)
    assert checked.returncode == 0 and "verified:" in checked.stdout, checked.stdout
    (out / "compare.json").write_bytes((out / "compare.json").read_bytes() + b" ")
    altered = cli("verify", out)
    assert altered.returncode == 1 and "compare.json" in altered.stdout, altered.stdout


# --- issue 38: a folder inside another command's folder, and what --overwrite removes besides a run -----

def _paused_job_writing(archive, out: Path) -> subprocess.Popen:
    """A real job into ``out``, stopped (SIGSTOP) once its writers have made their temporary folder: it holds
    ``out``'s lock for as long as the test needs, and goes on with SIGCONT."""
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", *job_argv(archive, out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    while proc.poll() is None and not (out.is_dir() and any(n.startswith(".temp-") for n in os.listdir(out))):
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()  # still running: the writers' folder is there
    os.killpg(proc.pid, signal.SIGSTOP)
    return proc


def _resumed(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    os.killpg(proc.pid, signal.SIGCONT)
    stdout, stderr = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_overwrite_of_a_folder_holding_a_running_commands_folder_is_refused(archive, tmp_path):
    """Command A writes x/inner; B with --output x --overwrite would move A's lock and temporary files
    away and commit x while A still writes into it: B is refused in one line, A finishes, x/inner verifies."""
    x = tmp_path / "x"
    a = _paused_job_writing(archive, x / "inner")
    try:
        b = cli(*job_argv(archive, x, "--overwrite"))
        assert b.returncode == 1, b.stderr[-2000:]
        assert b.stderr.count("\n") == 1 and f"holds {x / 'inner'}, which is being written by notarius-reprocess" \
            in b.stderr and "--overwrite removed nothing" in b.stderr, b.stderr
    finally:
        done = _resumed(a)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert sorted(os.listdir(x)) == ["inner"]  # B left nothing behind, not even its lock file
    assert verify.verify_folder(str(x / "inner")).ok


def test_a_folder_inside_one_another_command_writes_is_refused(archive, tmp_path):
    """The other way round: B writes x; A asks for x/inner (its files would land unlisted among B's, or be
    moved by B's --overwrite): A is refused in one line and leaves nothing; B's x verifies."""
    x = tmp_path / "x"
    b = _paused_job_writing(archive, x)
    try:
        a = cli(*job_argv(archive, x / "inner"))
        assert a.returncode == 1, a.stderr[-2000:]
        assert a.stderr.count("\n") == 1 and re.search(
            rf"lies inside {re.escape(str(x))}, which is being written by notarius-reprocess \(pid \d+\)", a.stderr), a.stderr
        assert not (x / "inner").exists()
    finally:
        done = _resumed(b)
    assert done.returncode == 0, done.stderr[-2000:]
    assert verify.verify_folder(str(x)).ok


def test_a_command_may_write_inside_a_folder_its_own_process_holds(tmp_path):
    """The demo runs its commands into its own folder: a folder inside one this process holds is allowed,
    and an overwrite of the outer folder is still refused while the inner one is held."""
    out = tmp_path / "out"
    with claimed_output("outer", str(out), inputs={}, writes=[], overwrite=False):
        with claimed_output("inner", str(out / "inner"), inputs={}, writes=[], overwrite=False):
            (out / "inner" / "f").write_text("x")
    with claimed_output("inner", str(out / "inner"), inputs={}, writes=[], overwrite=True):
        (out / "inner" / "f").write_text("y")
        with pytest.raises(NotariusError, match="which is being written by inner"):
            with claimed_output("outer", str(out), inputs={}, writes=[], overwrite=True):
                pass
        assert (out / "inner" / "f").read_text() == "y"


def test_overwrite_names_what_the_earlier_run_had_not_written(archive, tmp_path):
    """A report written into a run's folder (and anything else the run did not write) goes with the
    --overwrite, named in one line; the run's own files are not named."""
    out = tmp_path / "run"
    assert reprocess.main(job_argv(archive, out)) == 0
    (out / "report.html").write_text("<!DOCTYPE html>")
    (out / "notes").mkdir()
    (out / "notes" / "a.txt").write_text("mine")
    (out / "evaluations" / "kept.txt").write_text("mine")
    again = cli(*job_argv(archive, out, "--overwrite"))
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stderr.splitlines() == [f"notarius-reprocess: --overwrite also removed what the earlier run in "
                                         f"{out} had not written: evaluations/kept.txt, notes/, report.html"]
    assert verify.verify_folder(str(out)).ok
    quiet = cli(*job_argv(archive, out, "--overwrite"))
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from("abc"), min_size=1, max_size=3), st.booleans()),
                min_size=1, max_size=12))
def test_what_was_not_written_is_named_by_its_outermost_entry(files):
    """Every file present and not written is under exactly one name given; no name given holds a written file."""
    import tempfile

    from pipelines.guards import not_written

    paths = {}
    for parts, is_written in files:
        rel = "/".join(parts) + ".f"  # files end in .f, folders never do: no path is both
        paths[rel] = paths.get(rel, False) or is_written
    written = {rel for rel, is_written in paths.items() if is_written}
    with tempfile.TemporaryDirectory() as folder:
        for rel in paths:
            os.makedirs(os.path.join(folder, os.path.dirname(rel)), exist_ok=True)
            Path(folder, rel).write_text(rel)
        named = not_written(folder, written)
    for rel in set(paths) - written:
        assert sum(rel == name or (name.endswith("/") and rel.startswith(name)) for name in named) == 1, (rel, named)
    for name in named:
        assert not any(rel == name or (name.endswith("/") and rel.startswith(name)) for rel in written), name


# --- a full disk: one line, exit 1, nothing half-written left (issue 38) ---------------------------------

FULL_DISK = ROOT / "tests" / "full_disk.py"  # runs a command on a disk that fills up (injected, or a real tmpfs)
TWO_WORKERS = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]


@pytest.fixture(scope="module")
def compared(finished_run):
    out = finished_run["root"] / "compared"
    done = cli("compare", finished_run["run"], finished_run["run"], "--output", out)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def imported(exported, finished_run):
    out = finished_run["root"] / "imported"
    done = cli("import-batch", *import_argv(exported, out))
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def full_disk_command(request, command: str):
    """(the command line writing into a given folder, a folder the same command wrote whole)."""
    run, archive = request.getfixturevalue("finished_run")["run"], request.getfixturevalue("finished_run")["archive"]
    if command == "job":
        return lambda out: job_argv(archive, out, "--output-format", "jsonl", "--refresh-stale"), run
    if command == "compare":
        return lambda out: ["compare", run, run, "--output", out], request.getfixturevalue("compared")
    exported = request.getfixturevalue("exported")
    if command == "export-batch":
        return lambda out: ["export-batch", *export_argv(run, archive, out)], exported["batch"]
    return lambda out: ["import-batch", *import_argv(exported, out)], request.getfixturevalue("imported")


def files_of(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and p.name != LOCK_NAME]


def no_space_said(command: str, out: Path, what: str = "the folder is removed (this command made it)") -> str:
    prog = "notarius-reprocess" if command == "job" else f"notarius-reprocess {command}"
    return f"{prog}: no space left on {out}: nothing committed, {what}; free some space and run it again"


def on_a_full_disk(mode: list[str], listing: Path, argv: list, *, wrap: Sequence[str] = (),
                   module: str = "pipelines.cli"):
    done = subprocess.run([*wrap, sys.executable, str(FULL_DISK), *mode, str(listing), "--", module,
                           *map(str, argv)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    return done, orjson.loads(listing.read_bytes())


@pytest.mark.parametrize("command", ["job", "compare", "export-batch", "import-batch"])
def test_a_disk_that_fills_up_is_one_line_and_leaves_nothing_written(request, tmp_path, command):
    """Every write through Beam's local filesystem shares the room of half what the command writes: some files
    are written whole, then one fails with ENOSPC (in this process: the default in-process runner)."""
    argv, whole = full_disk_command(request, command)
    disk = tmp_path / "disk"
    disk.mkdir()
    room = sum(p.stat().st_size for p in files_of(whole)) // 2
    done, left = on_a_full_disk(["inject", str(room), str(disk)], tmp_path / "left.json", argv(disk / "out"))
    assert done.returncode == 1, done.stderr[-3000:]
    assert _said(done.stderr) == [no_space_said(command, disk / "out")], done.stderr[-3000:]
    assert left == []  # the folder it made is gone: no slots/, no requests file, no part-* file


def test_a_full_disk_empties_a_folder_it_was_given_and_keeps_it(finished_run, tmp_path):
    disk = tmp_path / "disk"
    out = disk / "out"
    out.mkdir(parents=True)
    (out / "earlier.txt").write_text("an earlier export\n")
    argv = ["export-batch", *export_argv(finished_run["run"], finished_run["archive"], out, "--overwrite")]
    done, left = on_a_full_disk(["inject", "0", str(disk)], tmp_path / "left.json", argv)
    assert done.returncode == 1, done.stderr[-3000:]
    assert _said(done.stderr) == [no_space_said("export-batch", out, "what this command wrote there is removed")]
    assert left == ["out"]  # emptied by --overwrite as asked, and nothing of this export left in it


def test_a_report_on_a_full_disk_is_one_line_and_leaves_no_half_written_page(finished_run, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    argv = ["--output", finished_run["run"], "--html", disk / "report.html"]
    done, left = on_a_full_disk(["inject", "100", str(disk)], tmp_path / "left.json", argv, module="pipelines.report")
    assert done.returncode == 1, done.stderr[-3000:]
    assert _said(done.stderr) == ["python -m pipelines.report: no space left on the disk it writes to"], done.stderr
    assert left == []  # neither report.html nor the half of it written aside


def test_a_disk_too_full_for_the_lock_leaves_neither_lock_file_nor_folder(tmp_path, monkeypatch):
    import types

    import pipelines.folders as folders

    def write(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(folders, "os", types.SimpleNamespace(**{**vars(os), "write": write}))  # the lock's holder line
    out = tmp_path / "out"
    with pytest.raises(NotariusError) as refused:
        with claimed_output("prog", str(out), inputs={}, writes=[], overwrite=False):
            pass
    assert re.fullmatch(r"prog: --output .* cannot be written: No space left on device", refused.value.line("prog"))
    assert not out.exists()


def test_a_worker_out_of_room_empties_an_object_store_folder_and_says_where(tmp_path):
    from memory_filesystem import MemoryFileSystem

    store = MemoryFileSystem.objects
    store.clear()
    out = "memtest://bucket/runs/x"
    store["memtest://bucket/runs/xy/keep"] = b"a neighbour"
    with pytest.raises(NotariusError) as ended:
        with claimed_output("prog", out, inputs={}, writes=[], overwrite=False, commit_record="manifest.json"):
            store[f"{out}/evaluations/part-00000-of-00001.avro"] = b"written whole"
            raise RuntimeError(f"Pipeline failed: ... OSError: [Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)} ...")
    assert ended.value.line("prog") == ("prog: no space left on a worker's disk: nothing committed in memtest://bucket/runs/x, "
                                "what this command wrote there is removed; free some space and run it again")
    assert store == {"memtest://bucket/runs/xy/keep": b"a neighbour"}


def test_a_full_disk_removes_nothing_from_a_folder_whose_contents_are_the_commands_own(tmp_path):
    """The demo (keep_contents): it puts its earlier state back itself, and the user's files beside it stay."""
    out = tmp_path / "demo"
    out.mkdir()
    (out / "notes.txt").write_text("the user's\n")
    with pytest.raises(NotariusError) as ended:
        with claimed_output("prog", str(out), inputs={}, writes=[], overwrite=False, keep_contents=True):
            (out / "run1").mkdir()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert ended.value.line("prog") == f"prog: no space left on {out}; free some space and run it again"
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "run1"]


def test_a_full_disk_is_recognised_however_it_reaches_the_command():
    from runners.no_space import no_space_left

    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert no_space_left(full) == (True, None)
    assert no_space_left(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), "/data/out/x")) == (True, "/data/out/x")
    try:  # Beam in-process: a RuntimeError raised while handling the OSError
        try:
            raise full
        except OSError:
            raise RuntimeError("OSError: [Errno 28] No space left on device [while running 'Write']")
    except RuntimeError as beam_error:
        assert no_space_left(beam_error) == (True, None)
    relayed = RuntimeError(f"Pipeline failed:\n  ...\nOSError: [Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}\n")
    assert no_space_left(relayed)[0]  # a worker's error, as text
    looped = RuntimeError("a loop")
    looped.__context__ = ValueError("no")
    looped.__context__.__context__ = looped
    assert no_space_left(looped) == (False, None)
    assert no_space_left(OSError(errno.EACCES, "Permission denied")) == (False, None)


def test_a_worker_falls_silent_at_its_first_report_of_a_full_disk():
    """What a local worker (runners.warm_workers) does: Beam prints the failed bundle's traceback whatever
    the logging setup, so the worker stops speaking once a full disk is reported; the runner says it."""
    script = ("import logging, os, sys\n"
              "sys.path.insert(0, %r)\n"
              "from runners.no_space import fall_silent_when_out_of_space\n"
              "logging.basicConfig()\n"
              "fall_silent_when_out_of_space()\n"
              "log = logging.getLogger('apache_beam.runners.common')\n"
              "log.error('an ordinary failure')\n"
              "try:\n"
              "    raise OSError(28, os.strerror(28))\n"
              "except OSError as error:\n"
              "    log.exception(RuntimeError('OSError: [Errno 28] No space left on device [while running W]'))\n"
              "print('a traceback Beam prints', file=sys.stderr)\n") % str(ROOT)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "ERROR:apache_beam.runners.common:an ordinary failure\n"


def tmpfs_mountable(folder: Path) -> bool:
    """Can this user mount a tmpfs in a mount namespace of its own (root, or user namespaces allowed)?"""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.mark.parametrize("command, extra", [("job", []), ("job", TWO_WORKERS), ("compare", []), ("export-batch", [])],
                         ids=["job", "job-two-workers", "compare", "export-batch"])
def test_a_full_tmpfs_is_one_line_and_leaves_nothing_written(request, tmp_path, command, extra):
    """The issue's case on a real filesystem: a 3 MiB tmpfs with half of what the command writes left free."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if not tmpfs_mountable(mount):
        pytest.skip("no tmpfs can be mounted here (unshare -rm mount -t tmpfs refused); "
                    "test_a_disk_that_fills_up_is_one_line_and_leaves_nothing_written covers the same with ENOSPC injected")
    argv, whole = full_disk_command(request, command)
    free_kib = sum(-(-p.stat().st_size // 4096) for p in files_of(whole)) * 4 // 2  # tmpfs counts 4 KiB pages
    done, left = on_a_full_disk(["tmpfs", str(mount), str(free_kib)], tmp_path / "left.json",
                                [*argv(mount / "out"), *extra], wrap=["unshare", "-rm"])
    assert done.returncode == 1, done.stderr[-3000:]
    said = [line for line in _said(done.stderr) if not line.startswith(("INFO:", "WARNING:"))]
    assert said == [no_space_said(command, mount / "out")], done.stderr[-3000:]
    assert left == []
