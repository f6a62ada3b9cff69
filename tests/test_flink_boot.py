"""Beam's boot program with --setup_file: workers started the way Dataflow starts them (issue 32, item 5).

The fixture archive on a session cluster (one TaskManager, two slots) with
``--environment_type=PROCESS``: the TaskManager runs
``scripts/flink/process_worker.sh``, which runs Beam's Go boot program (the
``container`` binary of Beam's SDK images); the boot program fetches the files
the job staged, makes a venv over a Python installation that has Beam and
nothing of this project, pip-installs the sdist that ``--setup_file
./setup.py`` built into it, and starts the SDK harness there. The rows equal
the DirectRunner's, the folder verifies, the SDK harnesses (seen in /proc
while the job runs) are the boot program's children, each in a venv of its
own that holds the staged sdist installed and no Beam of its own, and the
installation is as clean after the run as before.

``scripts/flink/boot_env.py`` prepares the boot program and the installation
(``make reliability`` runs it first; here it finds its cache). One
TaskManager: the boot program's venv is
/opt/apache/beam-venv/beam-venv-worker-<worker id>, and every TaskManager
numbers its workers 1-1, 1-2, ... (docs/running.md). The boot program removes
a venv left there by an earlier run before it makes its own.

30-50 s on two cores once prepared (each worker pip-installs the project's
missing dependencies from the package index, which it must reach): ``make
reliability``, not ``make test``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
from pathlib import Path

import pytest

from fixture_archive import run_job, write_archive
from flink_support import (
    BootEnvError,
    ClusterError,
    assert_same_as_direct,
    flink_home,
    flink_pipeline_args,
    free_port,
    latest_job,
    prepare_boot_env,
    session_cluster,
)
from pipelines.verify import verify_folder

pytestmark = [pytest.mark.flink_e2e, pytest.mark.reliability]

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 900


@pytest.fixture(scope="module")
def boot_env():
    try:
        return prepare_boot_env(log=lambda message: print(message, file=sys.stderr))
    except BootEnvError as e:
        pytest.fail(f"cannot prepare Beam's boot program and its Python (scripts/flink/boot_env.py): {e}")


def _require_sdist_tools() -> None:
    """--setup_file builds the sdist with this environment's setuptools (no isolation): the PEP 639
    license needs setuptools 77, and Beam's stager wants wheel (make install puts both in .venv)."""
    import importlib.metadata

    try:
        setuptools, _ = importlib.metadata.version("setuptools"), importlib.metadata.version("wheel")
    except importlib.metadata.PackageNotFoundError as e:
        pytest.fail(f"{e.name} missing from {sys.prefix}: pip install 'setuptools>=77' wheel (make install)")
    if int(setuptools.split(".")[0]) < 77:
        pytest.fail(f"setuptools {setuptools} in {sys.prefix} cannot build this project's sdist "
                    "(PEP 639 license): pip install 'setuptools>=77' wheel (make install)")


@pytest.mark.timeout(TIMEOUT_S)
def test_fixture_archive_with_the_boot_program_and_setup_file(flink_jar, boot_env, tmp_path):
    import apache_beam

    assert boot_env.beam_version == apache_beam.__version__
    _require_sdist_tools()
    # The workers' Python has this Beam and not the project: only the staged sdist can bring it.
    beam = boot_env.run("-c", "import apache_beam; print(apache_beam.__version__)", cwd=tmp_path)
    assert beam.returncode == 0 and beam.stdout.strip() == apache_beam.__version__, beam
    clean = boot_env.run("-c", "import pipelines", cwd=tmp_path)
    assert clean.returncode != 0 and "No module named 'pipelines'" in clean.stderr, clean

    try:
        flink_home()
    except ClusterError as e:
        pytest.fail(f"Flink runtime jars unavailable: {e}")
    archive = write_archive(tmp_path / "archive")
    reference = run_job(archive, tmp_path / "direct", "--output-format", "jsonl")
    out = tmp_path / "flink-boot"
    # docs/running.md's launch: submitted to the job server kept beside the cluster.
    with session_cluster(rest_port=free_port(), taskmanagers=1, beam_jar=flink_jar, job_server=True) as cluster, \
            watch_workers(boot_env.boot) as workers:
        result = run_job(archive, out, "--output-format", "jsonl",
                         *flink_pipeline_args(flink_jar, cluster.flink_master, parallelism=2,
                                              process_environment=boot_env.environment_config(),
                                              job_endpoint=cluster.job_endpoint),
                         f"--setup_file={ROOT / 'setup.py'}", "--experiments=pip_use_build_isolation")
        job = latest_job(cluster)
        overview = cluster.overview()
    assert_same_as_direct(reference, result, "FlinkRunner")
    verdict = verify_folder(str(out))
    assert verdict.ok, verdict.problems
    assert job["state"] == "FINISHED", job
    assert overview["jobs-finished"] == 1 and overview["jobs-failed"] == 0 and overview["taskmanagers"] == 1
    # The workers came from the boot program: SDK harnesses it started, each in a venv of its own under
    # /opt/apache/beam-venv, where pip installed the sdist the job staged (workflow.tar.gz, fetched into
    # the worker's semi-persistent directory) and left Beam where it was (the installation's user site).
    print(f"{len(workers)} worker(s) from the boot program: "
          + "; ".join(f"{seen['venv']} ({seen['project_from']})" for seen in workers.values()))
    assert len(workers) >= 2, workers  # --sdk_worker_parallelism=2: two workers on the one TaskManager
    for pid, seen in workers.items():
        assert seen["venv"].startswith("/opt/apache/beam-venv/beam-venv-worker-"), (pid, seen)
        assert seen["staged"], (pid, seen)
        assert seen["project"] and seen["project_from"].endswith("/staged/workflow.tar.gz"), (pid, seen)
        assert not seen["beam_in_venv"], (pid, seen)
    # ...and nothing of it in the installation (the venv took it all): still clean for the next run.
    clean = boot_env.run("-c", "import pipelines", cwd=tmp_path)
    assert clean.returncode != 0 and "No module named 'pipelines'" in clean.stderr, clean


@contextlib.contextmanager
def watch_workers(boot: Path, interval_s: float = 0.2):
    """Yields {pid: what was seen} for every SDK harness the boot program ``boot`` started while the
    block ran, sampled from /proc (the boot program removes its venv and staging folder when it ends)."""
    seen: dict[int, dict] = {}
    stop = threading.Event()

    def sample() -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) in seen and seen[int(entry.name)]["project"]:
                continue
            try:
                if b"sdk_worker_main" not in Path(entry.path, "cmdline").read_bytes():
                    continue
                status = Path(entry.path, "status").read_text()
                ppid = re.search(r"^PPid:\s*(\d+)", status, re.M).group(1)
                if os.readlink(f"/proc/{ppid}/exe") != str(boot):
                    continue
                environ = dict(item.split("=", 1) for item in
                               Path(entry.path, "environ").read_bytes().decode(errors="replace").split("\0") if "=" in item)
            except (OSError, AttributeError):
                continue
            venv, semi = environ.get("VIRTUAL_ENV", ""), environ.get("SEMI_PERSISTENT_DIRECTORY", "")
            site = next(Path(venv).glob("lib/python*/site-packages"), None) if venv else None
            dist = next(site.glob("notarius_reprocess-*.dist-info"), None) if site else None
            origin = dist / "direct_url.json" if dist else None
            seen[int(entry.name)] = {
                "venv": venv,
                "staged": bool(semi) and Path(semi, "staged", "workflow.tar.gz").is_file(),
                "project": dist is not None and Path(site, "pipelines", "reprocess.py").is_file(),
                "project_from": json.loads(origin.read_text()).get("url", "") if origin and origin.is_file() else "",
                "beam_in_venv": bool(site) and any(site.glob("apache_beam*")),
            }

    def loop() -> None:
        while not stop.wait(interval_s):
            sample()

    thread = threading.Thread(target=loop, name="watch-boot-workers", daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()
