"""A job server named by --job_endpoint that does not answer ends the command after a bounded wait, in one
line naming the endpoint, before anything is written (runners/job_service.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from concurrent import futures
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from fixture_archive import write_archive
from pipelines.options import JobServiceOptions, OptionsError, beam_options, help_text
from runners.job_service import DEFAULT_WAIT_S, JobServiceUnreachable, external_job_endpoint, wait_for_job_service

ROOT = Path(__file__).resolve().parent.parent


def closed_port() -> int:
    """A port nothing listens on: bound, read, closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return write_archive(tmp_path_factory.mktemp("archive"))


@pytest.mark.parametrize("runner, extra", [
    ("PortableRunner", []),
    # docs/running.md's launch on a session cluster, its job server not started.
    ("FlinkRunner", ["--flink_master=localhost:1", "--flink_version=1.20"]),
])
def test_a_job_endpoint_nobody_answers_ends_the_command_in_one_line(archive, tmp_path, runner, extra):
    endpoint = f"localhost:{closed_port()}"
    out = tmp_path / "out"
    # Beam alone waited 300 s without a word, then died in a traceback: the timeout fails that.
    done = subprocess.run([sys.executable, "-m", "pipelines.reprocess", "--transcripts", archive["transcripts"],
                           "--candidates", archive["candidates"], "--output", str(out), f"--runner={runner}",
                           f"--job_endpoint={endpoint}", "--job-endpoint-wait", "1", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert endpoint in lines[0] and "--job_endpoint" in lines[0] and "--job-endpoint-wait" in lines[0], lines
    assert lines[0].startswith("notarius-reprocess: ")
    assert not out.exists()  # refused before the output folder was claimed: nothing written, nothing committed


def test_every_beam_command_waits_the_same_way():
    """The shared options path of the other commands (compare, export-batch, ...)."""
    endpoint = f"localhost:{closed_port()}"
    with pytest.raises(OptionsError) as refused:
        beam_options("notarius-x", ["--runner=PortableRunner", f"--job_endpoint={endpoint}",
                                    "--job-endpoint-wait=1"], [], "FnApiRunner")
    assert refused.value.line("notarius-x").startswith(f"notarius-x: no job server answered at {endpoint}")


def test_the_wait_is_bounded_by_default_and_said():
    assert PipelineOptions([]).view_as(JobServiceOptions).job_endpoint_wait == DEFAULT_WAIT_S == 30
    assert "--job-endpoint-wait" in help_text("notarius-reprocess")


@pytest.mark.parametrize("wait", ["0", "-5", "nan"])
def test_a_wait_that_cannot_end_well_is_refused(wait):
    with pytest.raises(OptionsError) as refused:
        beam_options("notarius-x", ["--runner=PortableRunner", "--job_endpoint=localhost:1",
                                    f"--job-endpoint-wait={wait}"], [], "FnApiRunner")
    assert "--job-endpoint-wait" in str(refused.value)


@pytest.mark.parametrize("args, expected", [
    (["--runner=PortableRunner", "--job_endpoint=localhost:8099"], "localhost:8099"),
    (["--runner=apache_beam.runners.portability.flink_runner.FlinkRunner", "--job_endpoint=h:1"], "h:1"),
    (["--runner=PortableRunner", "--job_endpoint=embed"], None),  # in-process job service
    (["--runner=FlinkRunner"], None),  # the FlinkRunner starts its own job server
    (["--runner=DirectRunner", "--job_endpoint=localhost:8099"], None),  # not read by this runner
    ([], None),
])
def test_only_a_runner_that_submits_to_the_endpoint_waits_for_it(args, expected):
    assert external_job_endpoint(PipelineOptions(args)) == expected


def test_a_job_server_that_answers_is_not_refused():
    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("localhost:0")
    server.start()
    try:
        wait_for_job_service(f"localhost:{port}", DEFAULT_WAIT_S)  # returns: the channel became ready
    finally:
        server.stop(0)
    with pytest.raises(JobServiceUnreachable, match=f"localhost:{port}"):
        wait_for_job_service(f"localhost:{port}", 1)
