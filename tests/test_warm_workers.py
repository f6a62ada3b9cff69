"""Warm workers: a zygote forks the DirectRunner's multi-processing workers (runners.warm_workers)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runners import warm_workers
from runners.warm_workers import looks_multi_processing, runner_with_warm_workers, start_zygote

TESTS = Path(__file__).parent


@pytest.fixture
def entries_importable(monkeypatch):
    """The zygote imports its entry from tests/warm_entry.py."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))


def zygote_running(entry: str, preload=()):
    zygote = start_zygote(tuple(preload), entry=f"warm_entry:{entry}")
    return zygote


@pytest.fixture
def recording_zygote(entries_importable):
    zygote = zygote_running("record", preload=("colorsys",))
    yield zygote
    zygote.close()


def launch(command: str, **env) -> subprocess.CompletedProcess:
    """As Beam's runner launches a worker: through the shell, with its own variables added."""
    return subprocess.run(command, shell=True, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_a_worker_is_forked_from_the_zygote_with_the_launchers_environment(recording_zygote, tmp_path):
    out = tmp_path / "worker.json"
    done = launch(recording_zygote.worker_command, WARM_OUT=str(out), WARM_MARKER="first", WARM_STATUS="3")
    assert done.returncode == 3, done.stderr
    seen = json.loads(out.read_text())
    assert seen["ppid"] == recording_zygote.process.pid
    assert seen["marker"] == "first"
    assert seen["preloaded"]  # imported once in the zygote, before the request
    # Ctrl-C: the worker falls silent and ends after the runner, which reports it (tests/test_guards.py)
    assert seen["on_sigint"] == "_end_quietly"


def test_ctrl_c_leaves_the_zygote_to_end_with_the_runner(recording_zygote, tmp_path):
    """The terminal's SIGINT reaches the whole process group; only the runner reports it."""
    out = tmp_path / "worker.json"
    assert launch(recording_zygote.worker_command, WARM_OUT=str(out)).returncode == 0  # the zygote is serving
    os.kill(recording_zygote.process.pid, signal.SIGINT)
    assert launch(recording_zygote.worker_command, WARM_OUT=str(out)).returncode == 0
    assert json.loads(out.read_text())["ppid"] == recording_zygote.process.pid  # still serving, not cold


def test_workers_launched_together_are_forked_apart(recording_zygote, tmp_path):
    launched = [subprocess.Popen(recording_zygote.worker_command, shell=True,
                                 env={**os.environ, "WARM_OUT": str(tmp_path / f"{n}.json"), "WARM_MARKER": str(n)})
                for n in range(3)]
    assert [p.wait(timeout=120) for p in launched] == [0, 0, 0]
    seen = [json.loads((tmp_path / f"{n}.json").read_text()) for n in range(3)]
    assert [s["marker"] for s in seen] == ["0", "1", "2"]
    assert len({s["pid"] for s in seen}) == 3
    assert {s["ppid"] for s in seen} == {recording_zygote.process.pid}


@pytest.mark.parametrize(("entry", "env", "status"), [("fail", {}, 1), ("exit_with", {"WARM_STATUS": "5"}, 5),
                                                      ("killed", {}, 1)])
def test_the_worker_status_reaches_the_runner(entries_importable, entry, env, status, capfd):
    zygote = zygote_running(entry)
    try:
        done = launch(zygote.worker_command, **env)
    finally:
        zygote.close()
    assert done.returncode == status
    if entry == "fail":  # the worker's traceback, on the stderr it shares with the runner
        assert "the worker broke" in capfd.readouterr().err
    if entry == "killed":
        assert "without reporting a status" in done.stderr


def test_without_a_zygote_the_client_runs_the_fallback_command(recording_zygote):
    command = recording_zygote.worker_command
    recording_zygote.close()
    assert not os.path.exists(recording_zygote.folder)
    fallback = command.rpartition(" -- ")[0] + " -- sh -c 'exit 7'"
    assert launch(fallback).returncode == 7
    # Beam's own worker command is the fallback the runner gets.
    assert command.endswith(f" -- {sys.executable} -m apache_beam.runners.worker.sdk_worker_main")


def test_close_ends_the_zygote(recording_zygote):
    recording_zygote.close()
    assert recording_zygote.process.poll() == 0
    recording_zygote.close()  # twice is harmless


def test_the_zygote_ends_with_the_process_that_started_it(entries_importable):
    starter = subprocess.run(
        [sys.executable, "-c", "import os; from runners.warm_workers import start_zygote;"
                               "z = start_zygote((), entry='warm_entry:record'); print(z.process.pid, z.folder, flush=True);"
                               "os._exit(0)"], capture_output=True, text=True, timeout=60, check=True)
    pid, folder = starter.stdout.split()
    deadline = time.monotonic() + 30
    while alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(int(pid))
    # Its socket's folder stays behind (only close() removes it); clients there fall back.
    fallback = warm_workers.client_command(os.path.join(folder, "socket")).rpartition(" -- ")[0] + " -- true"
    assert launch(fallback).returncode == 0


OTHER = st.lists(st.sampled_from(["--output", "out", "--direct_num_workers=2", "--direct_num_workers", "2",
                                  "--progress-seconds", "0", "--overwrite"]), max_size=6)


@settings(max_examples=200, deadline=None)
@given(before=OTHER, after=OTHER, joined=st.booleans(), mode=st.sampled_from(["multi_processing", "in_memory",
                                                                               "multi_threading"]),
       runner=st.sampled_from([None, "FnApiRunner", "DirectRunner", "FlinkRunner"]))
def test_multi_processing_is_recognised_before_beam_is_imported(before, after, joined, mode, runner):
    def flag(name, value):
        return [f"{name}={value}"] if joined else [name, value]

    argv = before + flag("--direct_running_mode", mode) + after + (flag("--runner", runner) if runner else [])
    assert looks_multi_processing(argv) == (mode == "multi_processing" and runner in (None, "FnApiRunner"))
    assert not looks_multi_processing(before + after)


def test_beam_workers_are_the_zygotes_children(tmp_path):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    options = PipelineOptions(["--runner=FnApiRunner", "--direct_num_workers=2",
                               "--direct_running_mode=multi_processing"])
    runner, zygote = runner_with_warm_workers(options, ())
    try:
        with beam.Pipeline(runner=runner, options=options) as pipeline:
            (pipeline | beam.Create(range(20)) | beam.Map(lambda _: os.getppid()) | beam.Distinct()
             | beam.io.WriteToText(str(tmp_path / "ppid")))
    finally:
        zygote.close()
    parents = {int(line) for path in tmp_path.glob("ppid*") for line in path.read_text().split()}
    assert parents == {zygote.process.pid}


def test_other_running_modes_get_beams_own_runner():
    from apache_beam.options.pipeline_options import PipelineOptions

    warm_workers.start_early(["--direct_running_mode=multi_processing"], ())
    early = warm_workers._started
    assert early is not None
    # The parsed options decide: in-process, so the zygote started early is ended.
    assert runner_with_warm_workers(PipelineOptions(["--runner=FnApiRunner"]), ()) == (None, None)
    assert early.process.wait(timeout=30) == 0
    assert warm_workers._started is None


def test_a_zygote_with_threads_does_not_fork(entries_importable, capfd):
    zygote = zygote_running("record", preload=("warm_threaded",))
    try:
        fallback = zygote.worker_command.rpartition(" -- ")[0] + " -- sh -c 'exit 9'"
        assert launch(fallback).returncode == 9
    finally:
        zygote.close()
    assert "the workers start cold" in capfd.readouterr().err


def test_the_jobs_modules_leave_the_zygote_single_threaded():
    """What the job's zygote imports starts no thread once SINGLE_THREADED is set (else its workers start cold)."""
    done = subprocess.run([sys.executable, "-c", "import os, pipelines.reprocess; print(len(os.listdir('/proc/self/task')))"],
                          env={**warm_workers.SINGLE_THREADED, **os.environ}, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1"]


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process now."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            table[int(entry.name)] = (int(stat.rpartition(")")[2].split()[1]), command)
    return table


def test_the_job_on_two_workers_forks_them_from_its_zygote(tmp_path):
    """``python -m pipelines.reprocess`` with two workers: every worker is a child of the zygote it started."""
    from fixture_archive import write_archive

    archive = write_archive(tmp_path / "archive")
    job = subprocess.Popen([sys.executable, "-m", "pipelines.reprocess", "--transcripts", archive["transcripts"],
                            "--candidates", archive["candidates"], "--output", str(tmp_path / "out"),
                            "--output-format", "jsonl", "--direct_num_workers=2",
                            "--direct_running_mode=multi_processing"],
                           cwd=TESTS.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: set[tuple[int, int, str]] = set()  # every (pid, parent, command line) observed: parents change at exit
    while job.poll() is None:
        seen.update((pid, parent, command) for pid, (parent, command) in process_table().items())
        time.sleep(0.01)
    assert job.returncode == 0, job.stderr.read()[-3000:]
    zygotes = {pid for pid, parent, command in seen if parent == job.pid and "runners.warm_workers serve" in command}
    assert len(zygotes) == 1
    workers = {pid for pid, parent, _ in seen if parent in zygotes}
    assert len(workers) >= 2  # sampled every 10 ms: both lived for the whole run
    cold = [command for _, _, command in seen if "sdk_worker_main" in command and "warm_workers" not in command]
    assert not cold, "a worker started cold"


def test_a_zygote_that_cannot_start_leaves_the_run_to_cold_workers(monkeypatch, tmp_path, capsys):
    from apache_beam.options.pipeline_options import PipelineOptions

    deep = tmp_path / ("d" * 120)  # a Unix socket path beyond the system's limit (108 bytes on Linux)
    deep.mkdir()
    monkeypatch.setattr(warm_workers.tempfile, "tempdir", str(deep))
    options = PipelineOptions(["--runner=FnApiRunner", "--direct_running_mode=multi_processing"])
    assert runner_with_warm_workers(options, ()) == (None, None)
    assert "the workers start cold" in capsys.readouterr().err
    assert list(deep.iterdir()) == []  # no folder left behind


def test_a_run_refused_before_it_starts_leaves_no_zygote_behind(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pipelines.reprocess", "--transcripts", str(tmp_path / "none-*.jsonl"),
                           "--candidates", str(tmp_path / "none-*.jsonl"), "--output", str(tmp_path / "out"),
                           "--direct_num_workers=2", "--direct_running_mode=multi_processing"],
                          cwd=TESTS.parent, env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "--transcripts" in done.stderr  # refused by the preflight
    assert not list(tmp_path.glob("notarius-zygote-*"))


def test_a_clean_run_on_two_workers_prints_nothing_on_stderr(tmp_path):
    """Beam's workers log their start-up and end at INFO and WARNING, on their stderr and once more as the
    runner relays them: none of it reaches the command's stderr, which stays as empty as an in-process run's."""
    from fixture_archive import write_archive

    archive = write_archive(tmp_path / "archive")
    done = subprocess.run([sys.executable, "-m", "pipelines.reprocess", "--transcripts", archive["transcripts"],
                           "--candidates", archive["candidates"], "--output", str(tmp_path / "out"),
                           "--output-format", "jsonl", "--direct_num_workers=2",
                           "--direct_running_mode=multi_processing"],
                          cwd=TESTS.parent, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""
