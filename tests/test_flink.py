"""Beam on Flink, for real: the fixture archive on Flink equals the DirectRunner's outputs.

Two Flink runs, both at parallelism 2, each compared row for row (after
canonical sorting) with the DirectRunner on the same archive:

- embedded Flink (``--flink_master=[local]``), Python workers in this process
  (LOOPBACK);
- a standalone session cluster (JobManager and TaskManager as separate JVMs on
  loopback, started and stopped by this module), Python workers as separate
  processes from a worker pool (EXTERNAL): the launch docs/running.md gives
  for real runs.

They need Java and the job server jar, which ``make test`` obtains first
(scripts/flink/prepare.py: a cache, the released jar, or a build from
../shared/vendor). They SKIP only when the machine cannot have it at all (no
Java, or neither a served release nor the vendored sources), with the reason;
every other failure to obtain it fails them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fixture_archive import run_job, write_archive
from flink_support import (
    ClusterError,
    flink_home,
    flink_pipeline_args,
    flink_version,
    free_port,
    job_server_jar,
    session_cluster,
    worker_pool,
)
from output_reader import canonical

pytestmark = pytest.mark.flink_e2e

# A wedged Flink job must fail the test, not eat CI's time budget. Generous:
# the first test of the module also starts the cluster on a loaded 2-core box.
TIMEOUT_S = 600


@pytest.fixture(scope="module")
def jar() -> str:
    path, route, unavailable = job_server_jar()
    if path is None:
        if unavailable:
            pytest.skip(f"Flink unavailable on this machine: {route}")
        pytest.fail(f"could not obtain the Flink job server jar: {route}")
    return path


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return write_archive(tmp_path_factory.mktemp("archive"))


@pytest.fixture(scope="module")
def reference(archive, tmp_path_factory):
    """The DirectRunner (in-process) on the same archive."""
    return run_job(archive, tmp_path_factory.mktemp("direct"), "--output-format", "jsonl")


@pytest.fixture(scope="module")
def cluster(jar, tmp_path_factory):
    try:
        flink_home()
    except ClusterError as e:
        pytest.fail(f"Flink runtime jars unavailable: {e}")
    with session_cluster(rest_port=free_port()) as running:
        yield running


def assert_same_as_direct(reference, result, runner: str) -> None:
    (ref_manifest, ref_outputs), (manifest, outputs) = reference, result
    assert outputs.keys() == ref_outputs.keys()
    for name in ref_outputs:
        assert canonical(outputs[name]) == canonical(ref_outputs[name]), name
    assert sum(len(rows) for rows in outputs.values()) > 0
    assert manifest["runner"] == runner
    for block in ("conservation", "transcript_conservation", "prior_registry_conservation"):
        assert manifest[block]["holds"], (block, manifest[block])
        assert manifest[block] == ref_manifest[block], block
    assert manifest["outcomes"] == ref_manifest["outcomes"]


@pytest.mark.timeout(TIMEOUT_S)
def test_fixture_archive_on_embedded_flink(jar, archive, reference, tmp_path):
    result = run_job(archive, tmp_path / "flink-local", "--output-format", "jsonl",
                     *flink_pipeline_args(jar, "[local]", parallelism=2))
    assert_same_as_direct(reference, result, "FlinkRunner")


@pytest.mark.timeout(TIMEOUT_S)
def test_fixture_archive_on_session_cluster_with_worker_processes(jar, archive, reference, cluster, tmp_path):
    pool_log = tmp_path / "worker-pool.log"
    with worker_pool(free_port(), log_file=pool_log) as pool:
        result = run_job(archive, tmp_path / "flink-cluster", "--output-format", "jsonl",
                         *flink_pipeline_args(jar, cluster.flink_master, parallelism=2, worker_pool=pool))
    assert_same_as_direct(reference, result, "FlinkRunner")
    overview = cluster.overview()
    assert overview["jobs-finished"] == 1 and overview["jobs-failed"] == 0, overview
    assert overview["flink-version"].startswith(flink_version() + "."), overview
    # Python ran out of process, two workers per environment (one per slot).
    workers = set(re.findall(r'worker_id="([^"]+)"', pool_log.read_text()))
    assert len(workers) >= 2, pool_log.read_text()[-2000:]


@pytest.mark.timeout(120)
def test_session_cluster_stops_both_processes(cluster):
    """Last in the module: stop() leaves neither JVM running (the fixture's own stop is then a no-op)."""
    assert cluster.overview()["taskmanagers"] == 1
    pids = (cluster.jobmanager_pid, cluster.taskmanager_pid)
    cluster.stop()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid), f"pid {pid} still running"
    with pytest.raises(OSError):
        cluster.overview()


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True
