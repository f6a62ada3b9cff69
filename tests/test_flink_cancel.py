"""A command that stops while its Flink job runs on a session cluster cancels that job first.

Beam's job server only watches a job it has submitted to a cluster. Before runners/flink_jobs.py, a
job server killed mid-run ended the command while the Flink job ran on: it could commit a run into the
folder after the command had cleaned it up and released its lock (docs/running.md). Here the job
server (the command's own, or the one kept beside the cluster) is SIGKILLed, or the command gets
Ctrl-C, while the Flink job runs: the command ends non-zero,
says it cancelled the job, Flink reports the job CANCELED, and nothing is committed, then or later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.procs import children_map
from flink_support import (
    ClusterError,
    flink_home,
    flink_pipeline_args,
    free_port,
    job_command,
    rest,
    session_cluster,
    simulated_archive,
    worker_pool,
)
from pipelines.verify import verify_folder

pytestmark = pytest.mark.flink_e2e

TIMEOUT_S = 600
# Large enough that the Flink job is still running seconds after it starts (about 20 s here).
CANDIDATES, SOURCES = 30_000, 60


@pytest.fixture(scope="module")
def setting(flink_jar, tmp_path_factory):
    try:
        flink_home()
    except ClusterError as e:
        pytest.fail(f"Flink runtime jars unavailable: {e}")
    work = tmp_path_factory.mktemp("cancel")
    archive = simulated_archive(work / "archive", CANDIDATES, SOURCES)
    with session_cluster(rest_port=free_port(), beam_jar=flink_jar, job_server=True) as cluster, \
            worker_pool(free_port(), log_file=work / "worker-pool.log") as pool:
        yield archive, cluster, pool, flink_jar


def _descendants(pid: int) -> list[int]:
    children = children_map()
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _job_servers_under(pid: int) -> list[int]:
    """The job server JVMs the command ``pid`` started (none when it submits to a kept one)."""
    found = []
    for child in _descendants(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"java" in cmdline and b"job-server" in cmdline:
            found.append(child)
    return found


def _job_server_of(pid: int) -> int:
    servers = _job_servers_under(pid)
    assert servers, f"no job server JVM under the command {pid}"
    return servers[0]


def _running_job(cluster, proc: subprocess.Popen, earlier: set[str], timeout_s: float = 240.0) -> dict:
    """The job the command submitted, once Flink runs it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the command ended before its Flink job ran"
        for job in rest(cluster, "/jobs/overview")["jobs"]:
            if job["jid"] not in earlier and job["state"] == "RUNNING":
                return job
        time.sleep(0.1)
    raise AssertionError("the Flink job never ran")


def _run_and_stop(setting, tmp_path, stop, kept_job_server: bool = False) -> tuple[int, str, dict, Path]:
    """Submit through a job server of the command's own, or the one kept beside the cluster (the launch
    docs/running.md gives), and ``stop`` the command once its Flink job runs."""
    archive, cluster, pool, jar = setting
    out = tmp_path / "out"
    earlier = {job["jid"] for job in rest(cluster, "/jobs/overview")["jobs"]}
    log_path = tmp_path / "job.log"
    endpoint = cluster.job_endpoint if kept_job_server else None
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(job_command(archive, out, *flink_pipeline_args(jar, cluster.flink_master,
                                                                                worker_pool=pool,
                                                                                job_endpoint=endpoint)),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            job = _running_job(cluster, proc, earlier)
            stop(proc)
            returncode = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return returncode, log_path.read_text(errors="replace"), job, out


def _assert_cancelled_and_nothing_committed(cluster, job: dict, output: str, out: Path) -> None:
    state = rest(cluster, f"/jobs/{job['jid']}")["state"]
    assert state == "CANCELED", f"the Flink job is {state} after the command ended"
    time.sleep(10)  # a job left running would have committed by now (the whole job takes seconds)
    assert not (out / "manifest.json").exists(), "a run was committed after the command stopped"
    assert not verify_folder(str(out)).ok
    assert f"the Flink job {job['jid']}" in output and "cancelled, it writes nothing more" in output, output[-3000:]


@pytest.mark.timeout(TIMEOUT_S)
def test_a_killed_job_server_leaves_no_flink_job_running(setting, tmp_path):
    def kill_job_server(proc):
        os.kill(_job_server_of(proc.pid), signal.SIGKILL)

    returncode, output, job, out = _run_and_stop(setting, tmp_path, kill_job_server)
    assert returncode not in (0, 130, 143), output[-3000:]
    _assert_cancelled_and_nothing_committed(setting[1], job, output, out)


@pytest.mark.timeout(TIMEOUT_S)
def test_ctrl_c_leaves_no_flink_job_running(setting, tmp_path):
    def ctrl_c(proc):
        os.killpg(proc.pid, signal.SIGINT)  # the terminal sends it to the whole foreground group

    returncode, output, job, out = _run_and_stop(setting, tmp_path, ctrl_c, kept_job_server=True)
    assert returncode == 130, output[-3000:]
    assert "interrupted: nothing committed" in output, output[-3000:]
    _assert_cancelled_and_nothing_committed(setting[1], job, output, out)


@pytest.mark.timeout(TIMEOUT_S)
def test_a_killed_kept_job_server_leaves_no_flink_job_running(setting, tmp_path):
    """Last in the module: the job server kept beside the cluster dies under a job submitted to it."""
    cluster = setting[1]

    def kill_kept_job_server(proc):
        assert _job_servers_under(proc.pid) == [], "the command started a job server of its own"
        os.kill(cluster.job_server_pid, signal.SIGKILL)

    returncode, output, job, out = _run_and_stop(setting, tmp_path, kill_kept_job_server, kept_job_server=True)
    assert returncode not in (0, 130, 143), output[-3000:]
    _assert_cancelled_and_nothing_committed(cluster, job, output, out)
