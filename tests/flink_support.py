"""Helpers for tests that run pipelines on Flink (no tests in here).

    jar, reason = ensure_job_server_jar()
    if jar is None:
        pytest.skip(reason)
    run(flink_pipeline_args(jar) + [...])

    with session_cluster(rest_port=free_port()) as cluster:
        run(flink_pipeline_args(jar, flink_master=cluster.flink_master) + [...])

The real work lives in scripts/flink/ (also used by the Makefile/CI); this
module only loads it by path, since scripts/ is not an importable package.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import socket
import sys
from pathlib import Path
from types import ModuleType

_SCRIPTS = Path(__file__).resolve().parent.parent / "scripts" / "flink"

# Point at a prebuilt job server jar, bypassing Beam's cache and Maven.
JOB_SERVER_JAR_ENV = "NOTARIUS_FLINK_JOB_SERVER_JAR"


def _load(name: str) -> ModuleType:
    module_name = f"_notarius_flink_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, _SCRIPTS / f"{name}.py")
    assert spec and spec.loader, f"cannot load {_SCRIPTS / name}.py"
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


_cluster = _load("session_cluster")
_fetch = _cluster._fjs

# Re-exports for tests.
session_cluster = _cluster.session_cluster
SessionCluster = _cluster.SessionCluster
ClusterError = _cluster.ClusterError
flink_home = _cluster.flink_home


def flink_version() -> str:
    """The Flink line used by both the job server and the session cluster."""
    return str(_fetch.resolve_flink_version())


@functools.cache
def ensure_job_server_jar() -> tuple[str | None, str]:
    """(path to Beam's Flink job server jar, how it was found) or (None, why not).

    Tries, in order: $NOTARIUS_FLINK_JOB_SERVER_JAR, Beam's jar cache, a Maven
    fetch into Beam's jar cache. Cached per process so a failing Maven lookup
    is paid once per test session, not once per test.
    """
    override = os.environ.get(JOB_SERVER_JAR_ENV)
    if override:
        if Path(override).is_file():
            return override, f"from ${JOB_SERVER_JAR_ENV}"
        return None, f"${JOB_SERVER_JAR_ENV}={override} does not exist"
    try:
        version = _fetch.resolve_flink_version()
        cached = _fetch.jar_path(version)
        if cached.is_file():
            return str(cached), f"cached at {cached}"
        if _fetch.find_java() is None:
            return None, "Java not found (no $JAVA_HOME/bin/java, no java on PATH)"
        return str(_fetch.fetch(version)), "fetched with Maven"
    except _fetch.FetchError as e:
        return None, str(e)


def free_port() -> int:
    """A currently free TCP port on loopback (for a test's own cluster)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def flink_pipeline_args(
    job_server_jar: str, flink_master: str = "[local]", parallelism: int = 2
) -> list[str]:
    """Pipeline options for FlinkRunner with Python workers in this process.

    LOOPBACK: the SDK harness runs inside the submitting (pytest) process, so
    neither Docker nor the Go boot binary of PROCESS is needed.
    """
    return [
        "--runner=FlinkRunner",
        f"--flink_master={flink_master}",
        f"--flink_version={flink_version()}",
        f"--flink_job_server_jar={job_server_jar}",
        f"--parallelism={parallelism}",
        "--environment_type=LOOPBACK",
    ]
