"""Smoke tests: a tiny Create -> Map -> GroupByKey -> WriteToText pipeline on Flink.

They need Java and Beam's Flink job server jar (see scripts/flink/); without
them they skip and say exactly which is missing. The session-cluster test also
needs the Flink runtime jars from PyPI (apache-flink-libraries sdist).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

try:  # tests/ on sys.path (pytest's default rootdir-less layout) ...
    from flink_support import (
        ClusterError,
        ensure_job_server_jar,
        flink_home,
        flink_pipeline_args,
        flink_version,
        free_port,
        session_cluster,
    )
except ImportError:  # ... or tests/ as a package
    from tests.flink_support import (
        ClusterError,
        ensure_job_server_jar,
        flink_home,
        flink_pipeline_args,
        flink_version,
        free_port,
        session_cluster,
    )

_F = TypeVar("_F", bound=Callable[..., Any])

# Escape hatch for machines where even the cluster test is unwanted.
pytestmark = pytest.mark.skipif(
    bool(os.environ.get("NOTARIUS_SKIP_FLINK")), reason="NOTARIUS_SKIP_FLINK is set"
)

N = 300
KEYS = 7

# A wedged Flink job must fail the test, not eat CI's time budget; the marker
# comes from pytest-timeout (test extra) and is skipped if it is not installed.
try:
    import pytest_timeout  # noqa: F401

    _timeout = pytest.mark.timeout
except ImportError:  # pragma: no cover

    def _timeout(seconds: int) -> Callable[[_F], _F]:
        return lambda f: f


def _expected() -> set[str]:
    return {f"{k},{len(range(k, N, KEYS))},{sum(range(k, N, KEYS))}" for k in range(KEYS)}


def _format(key: int, values: Iterable[int]) -> str:
    vals = list(values)  # a GroupByKey iterable may be single-pass
    return f"{key},{len(vals)},{sum(vals)}"


def run_smoke_pipeline(args: list[str], out_dir: Path) -> set[str]:
    """Run the pipeline with the given options; return the written lines."""
    with beam.Pipeline(options=PipelineOptions(args)) as p:
        _ = (
            p
            | beam.Create(list(range(N)))
            | beam.Map(lambda i: (i % KEYS, i))
            | beam.GroupByKey()
            | beam.MapTuple(_format)
            | beam.io.WriteToText(str(out_dir / "out"), file_name_suffix=".txt")
        )
    lines = [
        line
        for f in sorted(out_dir.glob("out*.txt"))
        for line in f.read_text().splitlines()
        if line
    ]
    assert len(lines) == len(set(lines)), f"duplicate output lines: {lines}"
    return set(lines)


def _job_server_jar() -> str:
    jar, reason = ensure_job_server_jar()
    if jar is None:
        pytest.skip(f"Beam Flink job server jar unavailable: {reason}")
    return jar


def _require_flink_runtime() -> None:
    try:
        flink_home()
    except ClusterError as e:
        pytest.skip(f"Flink runtime jars unavailable: {e}")


@_timeout(300)
def test_pipeline_on_embedded_flink(tmp_path: Path) -> None:
    jar = _job_server_jar()
    lines = run_smoke_pipeline(flink_pipeline_args(jar, "[local]", parallelism=2), tmp_path)
    assert lines == _expected()


@_timeout(300)
def test_pipeline_on_session_cluster(tmp_path: Path) -> None:
    jar = _job_server_jar()
    _require_flink_runtime()
    with session_cluster(rest_port=free_port()) as cluster:
        lines = run_smoke_pipeline(
            flink_pipeline_args(jar, cluster.flink_master, parallelism=2), tmp_path
        )
        jobs = cluster.overview()
    assert lines == _expected()
    assert jobs["jobs-finished"] == 1 and jobs["jobs-failed"] == 0, jobs


@_timeout(300)
def test_session_cluster_starts_and_stops() -> None:
    """The cluster itself, independent of Beam: TM registered, then fully gone."""
    _require_flink_runtime()
    port = free_port()
    with session_cluster(rest_port=port) as cluster:
        overview = cluster.overview()
        pids = (cluster.jobmanager_pid, cluster.taskmanager_pid)
    assert overview["taskmanagers"] == 1 and overview["slots-total"] == 2, overview
    assert overview["flink-version"].startswith(flink_version() + "."), overview
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid), f"pid {pid} still running"
    with pytest.raises(OSError):
        cluster.overview()


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True
