"""The same archive gives the same outputs on every runner path we can run here."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from fixture_archive import run_job, write_archive
from output_reader import canonical


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on port {port}")


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return write_archive(tmp_path_factory.mktemp("archive"))


@pytest.fixture(scope="module")
def reference(archive, tmp_path_factory):
    return run(archive, tmp_path_factory.mktemp("in-process"))


def run(archive, out: Path, *extra) -> dict:
    return run_job(archive, out, "--output-format", "jsonl", *extra)[1]


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert canonical(a[name]) == canonical(b[name]), name


def test_rerun_is_identical(archive, reference, tmp_path):
    assert_same(reference, run(archive, tmp_path / "again"))


def test_multi_processing_matches_in_process(archive, reference, tmp_path):
    out = run(archive, tmp_path / "mp", "--direct_num_workers=2", "--direct_running_mode=multi_processing")
    assert_same(reference, out)


def test_portable_runner_with_external_worker_pool_matches(archive, reference, tmp_path):
    """Beam's portable path (job service + EXTERNAL worker pool): the Fn API Flink and Dataflow use."""
    job_port, pool_port = free_port(), free_port()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    procs = [
        subprocess.Popen([sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main",
                          "--port", str(job_port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        # The pool starts workers with a bare `python`: it must be this environment's.
        subprocess.Popen([sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
                          "--service_port", str(pool_port)], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL),
    ]
    try:
        wait_for_port(job_port)
        wait_for_port(pool_port)
        out = run(archive, tmp_path / "portable", "--runner=PortableRunner", f"--job_endpoint=localhost:{job_port}",
                  "--environment_type=EXTERNAL", f"--environment_config=localhost:{pool_port}")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert_same(reference, out)
    manifest = orjson.loads((tmp_path / "portable" / "manifest.json").read_bytes())
    assert manifest["conservation"]["holds"] and manifest["runner"] == "PortableRunner"
