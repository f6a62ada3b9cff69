"""Helpers for tests that run pipelines on Flink (no tests in here).

    jar, route, unavailable = job_server_jar()
    if jar is None:
        pytest.skip(route) if unavailable else pytest.fail(route)
    run(flink_pipeline_args(jar) + [...])

    with session_cluster(rest_port=free_port()) as cluster:
        run(flink_pipeline_args(jar, flink_master=cluster.flink_master) + [...])

The real work lives in scripts/flink/ (also used by the Makefile/CI); this
module only loads it by path, since scripts/ is not an importable package.
"""

from __future__ import annotations

import functools
import importlib.util
import socket
import sys
from pathlib import Path
from types import ModuleType

_SCRIPTS = Path(__file__).resolve().parent.parent / "scripts" / "flink"


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


def shared_path(*parts: str) -> Path:
    """``shared/<parts>`` of the workplace, found as the vendored Flink sources are (beside this
    checkout, or beside the local checkout it was cloned from); the usual place when absent."""
    relative = Path("shared", *parts)
    found = _fetch.find_beside_repository(relative)
    return found if found is not None else Path(__file__).resolve().parents[2] / relative
_pool = _load("worker_pool")

# Re-exports for tests.
session_cluster = _cluster.session_cluster
SessionCluster = _cluster.SessionCluster
ClusterError = _cluster.ClusterError
flink_home = _cluster.flink_home
worker_pool = _pool.worker_pool
FetchError = _fetch.FetchError


def flink_version() -> str:
    """The Flink line used by both the job server and the session cluster."""
    return str(_fetch.resolve_flink_version())


@functools.cache
def job_server_jar() -> tuple[str | None, str, bool]:
    """(jar, route, unavailable): the jar and how it was obtained, or None and why not.

    The same routes as ``make flink-jar`` (given jar, Beam's cache, the
    vendored build's cache, a served release, a build from the vendored
    sources). ``unavailable`` is True only when the machine cannot have the
    jar at all (no Java, or neither a served release nor the vendored
    sources): the only case a Flink test may skip. Cached per process, so a
    failure is paid once per test session.
    """
    try:
        jar, route = _fetch.obtain(flink_version(), log=lambda m: print(m, file=sys.stderr))
        return str(jar), route, False
    except _fetch.FetchError as e:
        return None, str(e), bool(e.unavailable)


def free_port() -> int:
    """A currently free TCP port on loopback (for a test's own cluster)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def flink_pipeline_args(
    job_server_jar: str,
    flink_master: str = "[local]",
    parallelism: int = 2,
    worker_pool: str | None = None,
) -> list[str]:
    """Pipeline options for FlinkRunner.

    Without ``worker_pool``: LOOPBACK, the SDK harness runs inside the
    submitting (pytest) process, so neither Docker nor the Go boot binary of
    PROCESS is needed. With it (``localhost:PORT`` of ``worker_pool()``):
    EXTERNAL, one Python worker process per slot.
    """
    args = [
        "--runner=FlinkRunner",
        f"--flink_master={flink_master}",
        f"--flink_version={flink_version()}",
        f"--flink_job_server_jar={job_server_jar}",
        f"--parallelism={parallelism}",
    ]
    if worker_pool is None:
        return [*args, "--environment_type=LOOPBACK"]
    return [
        *args,
        "--environment_type=EXTERNAL",
        f"--environment_config={worker_pool}",
        f"--sdk_worker_parallelism={parallelism}",
    ]
