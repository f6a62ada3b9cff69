#!/usr/bin/env python3
"""A local Flink standalone session cluster, JobManager + TaskManager(s), on loopback.

Why not the Flink distribution tarball: it is not reachable here; PyPI is. The
source distribution of ``apache-flink-libraries`` carries the same runtime jars
(``deps/lib/flink-dist-*.jar`` and friends, plus ``deps/bin/bash-java-utils.jar``)
but not the shell scripts, so this module does what ``bin/start-cluster.sh``
does: compute JVM memory flags with Flink's own BashJavaUtils, then start
``StandaloneSessionClusterEntrypoint`` and one ``TaskManagerRunner`` per
TaskManager as separate ``java`` processes, everything bound to localhost only:
Flink's addresses and bind hosts in its config, and Beam's gRPC servers in the
TaskManagers and the kept job server through a copy of Beam's server factory
that listens on the address it is given (``loopback_beam.py``; Beam's own
listens on every interface).
With several TaskManagers (``--taskmanagers N``), each has its own slots and
Flink spreads a job's slots evenly over them (``taskmanager.load-balance.mode:
SLOTS``), so parallelism N puts one subtask of every task on each.

The Flink minor line must equal the one of the Beam job server that submits to
it (``beam-runners-flink-<F>-job-server``); it is resolved by the same rule as
``fetch_job_server.py``: argument, ``$NOTARIUS_FLINK_VERSION``, the project's
line (1.20).

Network memory: Flink batch jobs use the sort shuffle, which by default asks
for 512 network buffers (32 KiB each) per result partition
(``taskmanager.network.sort-shuffle.min-buffers``). Beam fuses this job into
stages with many outputs, and with Flink's default network memory (10% of
Flink's memory, ~100 MB for a 1.5 GB TaskManager) the job fails with "Insufficient number of network
buffers: required 512". The cluster therefore sets min-buffers to 64 (still
enough to sort-spill efficiently at these data sizes) and gives the network
a fixed 512 MB (256 MB sufficed until the job gained more output stages:
"required 64, but only 15 available" of 8192) (``taskmanager.memory.network.min/max``), taken from managed
memory, which Beam's portable batch jobs barely use
(``taskmanager.memory.managed.fraction`` 0.2 instead of 0.4).

Cost per job (docs/benchmarks.md, "Flink beside the DirectRunner"): the JobManager
and TaskManagers run with the C1 compiler only (JVM_OPTIONS), and, given
the Beam job server jar (``beam_jar``; the CLI's ``start`` obtains it as
``make flink-jar`` does), every TaskManager has it on its classpath,
resolved parent-first, so Beam keeps a job's Python workers from stage to
stage for the jobs that ask for it (BEAM_JOB_OPTIONS, the options the
launch of docs/running.md adds).

CLI (with the project venv's python, which has pip and apache-beam):

    python scripts/flink/session_cluster.py fetch             # only download jars
    python scripts/flink/session_cluster.py [--rest-port 8081] start [--worker-pool-port 50000] \
        [--taskmanagers 2] [--restart-attempts 3] [--beam-jar JAR|none]
    python scripts/flink/session_cluster.py [--rest-port 8081] add-taskmanager
    python scripts/flink/session_cluster.py [--rest-port 8081] status
    python scripts/flink/session_cluster.py [--rest-port 8081] stop

``start --worker-pool-port P`` also starts a Python SDK worker pool on
localhost:P (scripts/flink/worker_pool.py), for
``--environment_type=EXTERNAL --environment_config=localhost:P``; ``stop``
stops it with the cluster. ``start --job-server-port J`` also keeps Beam's
job server on localhost:J (``start_job_server``), for
``--job_endpoint=localhost:J``. ``--restart-attempts N`` (N > 0) gives the cluster
Flink's fixed-delay restart strategy (N attempts, ``--restart-delay`` apart)
instead of none: a job that loses a TaskManager restarts on the slots left
(docs/running.md, "Restart strategy").

Library:

    with session_cluster(rest_port=8081) as cluster:
        run_pipeline(["--runner=FlinkRunner", f"--flink_master={cluster.flink_master}", ...])
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

# Newest patch release on PyPI of apache-flink-libraries for each Flink line
# Beam publishes a job server for. Pinned (not "latest") so every machine runs
# the same bits; patch releases within a line are wire compatible.
FLINK_PATCH_RELEASES: dict[str, str] = {
    "1.19": "1.19.3",
    "1.20": "1.20.5",
    "2.0": "2.0.2",
    "2.1": "2.1.3",
    "2.2": "2.2.1",
}
# Network memory of the TaskManager and the sort shuffle's per-partition
# buffer demand (module docstring); both overridable per cluster.
NETWORK_MEMORY = "512mb"
SORT_SHUFFLE_MIN_BUFFERS = 64
MANAGED_FRACTION = 0.2
# Beam's Fn API data plane (gRPC on Netty) in the TaskManager allocates direct
# memory that Flink counts as task off-heap, 0 by default: without it a second
# job on the same cluster failed with "OutOfMemoryError: Direct buffer memory".
TASK_OFF_HEAP = "256m"
# Process size that leaves the task heap ~600 MB after the network, managed
# and off-heap memory above (1.5 GB left it ~100 MB).
TASKMANAGER_MEMORY = "2560m"
# Restart strategy: none by default (a failed job fails at once); with
# attempts > 0, fixed-delay with this delay between attempts.
RESTART_DELAY = "10 s"
# JVM options of the JobManager and the TaskManagers, beyond the memory flags Flink computes:
# C1 only (no C2). The C2 compiler threads were the largest CPU item of each JVM in a Beam
# batch job (at 1M candidates: TaskManager 5.6 CPU-s, JobManager 2.2 of their 12.6 and 5.2),
# while the code they compile (Flink's shuffle, Beam's gRPC data plane) runs a few seconds
# in all: C1's code is good enough for that (docs/benchmarks.md, "Flink beside the DirectRunner").
JVM_OPTIONS: tuple[str, ...] = ("-XX:TieredStopAtLevel=1",)
# Beam's runner classes on the TaskManagers' classpath (the job server jar given as
# ``beam_jar``), resolved parent-first: Beam then keeps a job's Python workers from one stage
# to the next for --environment_cache_millis (BEAM_JOB_OPTIONS) instead of stopping them
# whenever no task of the job runs (it releases a job's environments at once when its classes
# came from the job's own class loader: FlinkExecutableStageContextFactory), and the
# TaskManager loads and compiles Beam's classes once, not once per job.
BEAM_CLASSES_SETTINGS: dict[str, Any] = {"classloader.resolve-order": "parent-first"}
# Beam pipeline options that go with this cluster (docs/running.md gives them in the launch):
# keep a job's workers for 10 s after their last bundle (longer than the gap between two
# stages; a worker start costs ~0.5 CPU-s), and the per-job job server JVM with C1 only.
ENVIRONMENT_CACHE_MS = 10_000
ENVIRONMENT_CACHE_OPTIONS: tuple[str, ...] = (f"--environment_cache_millis={ENVIRONMENT_CACHE_MS}",)
JOB_SERVER_JVM_OPTIONS: tuple[str, ...] = ("--job_server_jvm_properties=-XX:TieredStopAtLevel=1",)
BEAM_JOB_OPTIONS: tuple[str, ...] = ENVIRONMENT_CACHE_OPTIONS + JOB_SERVER_JVM_OPTIONS

JOBMANAGER_CLASS = "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"
TASKMANAGER_CLASS = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"
BASH_JAVA_UTILS_CLASS = "org.apache.flink.runtime.util.bash.BashJavaUtils"
BASH_JAVA_UTILS_PREFIX = "BASH_JAVA_UTILS_EXEC_RESULT:"

# What Flink's shipped config.yaml puts in env.java.opts.all for Java 17: Flink
# (Kryo, Pekko/Netty, memory utils) reflects into these JDK internals.
JAVA17_MODULE_OPTS: tuple[str, ...] = (
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.text=ALL-UNNAMED",
    "--add-opens=java.base/java.time=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED",
)

LOG4J_PROPERTIES = """\
# Written by session_cluster.py: everything to the file named by -Dlog.file.
monitorInterval = 0
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = MainAppender
appender.main.name = MainAppender
appender.main.type = File
appender.main.append = true
appender.main.fileName = ${sys:log.file}
appender.main.layout.type = PatternLayout
appender.main.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
logger.pekko.name = org.apache.pekko
logger.pekko.level = WARN
logger.netty.name = org.apache.flink.shaded.netty4
logger.netty.level = WARN
"""


class ClusterError(RuntimeError):
    """The cluster could not be set up, started or reached."""


def _load_sibling(name: str) -> ModuleType:
    """``name``.py from this directory (scripts/ is not a package)."""
    path = Path(__file__).resolve().with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_notarius_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_fjs = _load_sibling("fetch_job_server")
_pool = _load_sibling("worker_pool")
_loopback = _load_sibling("loopback_beam")
CACHE_ROOT: Path = _fjs.CACHE_ROOT


def resolve_flink_version(requested: str | None = None) -> str:
    """The Flink minor line, by the same rule the job server fetch uses."""
    try:
        return str(_fjs.resolve_flink_version(requested))
    except _fjs.FetchError as e:
        raise ClusterError(str(e)) from e


def patch_release(flink_version: str) -> str:
    try:
        return FLINK_PATCH_RELEASES[flink_version]
    except KeyError:
        raise ClusterError(
            f"no pinned apache-flink-libraries release for Flink {flink_version}; "
            f"known: {', '.join(FLINK_PATCH_RELEASES)}"
        ) from None


# ---------------------------------------------------------------- Flink jars --


def flink_home(flink_version: str | None = None, *, quiet: bool = False) -> Path:
    """Directory with ``lib/*.jar`` and ``bin/bash-java-utils.jar`` for the line.

    Downloads the apache-flink-libraries sdist (~230 MB) once with pip, keeps
    only the jars (~200 MB), drops the tarball. Safe against concurrent callers
    (work in a temp dir, then an atomic rename).
    """
    release = patch_release(resolve_flink_version(flink_version))
    home = CACHE_ROOT / release
    if (home / "lib" / f"flink-dist-{release}.jar").is_file():
        return home
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE_ROOT, prefix=f".{release}-") as tmp:
        tmp_path = Path(tmp)
        if not quiet:
            print(
                f"downloading apache-flink-libraries=={release} sdist from PyPI ...",
                file=sys.stderr,
            )
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--disable-pip-version-check",
            f"apache-flink-libraries=={release}",
            "-d",
            str(tmp_path / "sdist"),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        sdists = find_sdists(tmp_path / "sdist")
        if proc.returncode != 0 or not sdists:
            raise ClusterError(
                f"pip could not download apache-flink-libraries=={release}: "
                f"{(proc.stderr or proc.stdout).strip()[-800:]}"
            )
        staged = tmp_path / "home"
        _extract_jars(sdists[0], staged)
        if not (staged / "lib" / f"flink-dist-{release}.jar").is_file():
            raise ClusterError(f"{sdists[0].name} has no deps/lib/flink-dist-{release}.jar")
        try:
            staged.rename(home)
        except OSError:
            if not (home / "lib" / f"flink-dist-{release}.jar").is_file():
                raise  # Not a lost race with another caller: a real error.
    return home


def find_sdists(folder: Path) -> list[Path]:
    """apache-flink-libraries source distributions in folder.

    The file name differs by release: apache_flink_libraries-1.20.5.tar.gz
    (underscores, newer setuptools) but apache-flink-libraries-1.19.3.tar.gz.
    """
    return sorted(
        p
        for p in folder.glob("apache*flink*libraries-*.tar.gz")
        if p.name.replace("-", "_").startswith("apache_flink_libraries_")
    )


def _extract_jars(sdist: Path, dest: Path) -> None:
    """Copy deps/lib/*.jar and deps/bin/bash-java-utils.jar out of the sdist."""
    (dest / "lib").mkdir(parents=True)
    (dest / "bin").mkdir()
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar:
            parts = Path(member.name).parts
            if not member.isfile() or len(parts) != 4 or parts[1] != "deps":
                continue
            _, _, sub, name = parts
            if (sub == "lib" and name.endswith(".jar")) or (sub, name) == (
                "bin",
                "bash-java-utils.jar",
            ):
                src = tar.extractfile(member)
                assert src is not None
                with src, open(dest / sub / name, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)


def _classpath(home: Path, extra: Sequence[str] = ()) -> str:
    # As bin/config.sh builds it: the other lib jars first, flink-dist last; then ``extra`` (after
    # flink-dist, so Flink's own classes win over copies of them in an extra jar).
    jars = sorted(p for p in (home / "lib").glob("*.jar") if not p.name.startswith("flink-dist"))
    jars += sorted((home / "lib").glob("flink-dist*.jar"))
    return os.pathsep.join([*(str(p) for p in jars), *extra])


# ------------------------------------------------------------------ cluster --


@dataclass
class SessionCluster:
    """A running cluster: where to reach it and how to stop it."""

    flink_version: str
    flink_release: str
    rest_port: int
    rpc_port: int
    slots: int
    run_dir: str
    jobmanager_pid: int
    taskmanager_pid: int  # the first TaskManager (all of them: taskmanager_pids)
    worker_pool_pid: int = -1
    worker_pool_port: int = -1
    taskmanager_pids: list[int] = field(default_factory=list)
    # Flink's resource id of each TaskManager (tm-1, tm-2, ...), as the REST API names it.
    taskmanager_ids: list[str] = field(default_factory=list)
    # JVM options of the JobManager and every TaskManager beyond Flink's memory flags (JVM_OPTIONS).
    jvm_options: list[str] = field(default_factory=list)
    # Jars on every TaskManager's classpath after Flink's own (the Beam job server jar: Beam's runner
    # classes loaded once per TaskManager, not per job).
    taskmanager_classpath: list[str] = field(default_factory=list)
    # A Beam job server kept beside the cluster (start_job_server), for --job_endpoint; -1: none.
    job_server_pid: int = -1
    job_server_port: int = -1
    job_server_jar: str = ""
    # A jar of Beam's server factory changed to listen on the address it is given (loopback_beam.py), ahead
    # of the job server jar on the TaskManagers' classpath; "": none (no Beam jar, or its class needs none).
    loopback_jar: str = ""

    def __post_init__(self) -> None:
        if not self.taskmanager_pids and self.taskmanager_pid > 0:  # a state file of one TaskManager
            self.taskmanager_pids = [self.taskmanager_pid]

    def pid_of_taskmanager(self, resource_id: str) -> int:
        """The pid of the TaskManager the REST API calls ``resource_id``."""
        try:
            return self.taskmanager_pids[self.taskmanager_ids.index(resource_id)]
        except ValueError:
            raise ClusterError(f"no TaskManager {resource_id!r} started by this cluster") from None

    @property
    def rest_url(self) -> str:
        return f"http://localhost:{self.rest_port}"

    @property
    def flink_master(self) -> str:
        """Value for Beam's ``--flink_master``."""
        return f"localhost:{self.rest_port}"

    @property
    def job_endpoint(self) -> str:
        """Value for Beam's ``--job_endpoint`` (the job server kept beside the cluster)."""
        if self.job_server_port <= 0:
            raise ClusterError("this cluster has no job server of its own (start_job_server)")
        return f"localhost:{self.job_server_port}"

    def overview(self) -> dict[str, Any]:
        return _get_json(f"{self.rest_url}/overview")

    def log_tail(self, lines: int = 40) -> str:
        out = []
        for log in sorted(Path(self.run_dir, "log").glob("*")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log} ---\n" + "\n".join(text))
        return "\n".join(out)

    def taskmanagers(self) -> list[dict[str, Any]]:
        """REST /taskmanagers: the registered TaskManagers (id, slots, ...)."""
        return list(_get_json(f"{self.rest_url}/taskmanagers").get("taskmanagers", []))

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop the job server, worker pool, TaskManagers, JobManager; SIGKILL whatever ignores SIGTERM."""
        if self.job_server_pid > 0:
            _terminate(self.job_server_pid, Path(self.job_server_jar).name, timeout_s)
        if self.worker_pool_pid > 0:
            _terminate(self.worker_pool_pid, "worker_pool.py", timeout_s)
        for pid in self.taskmanager_pids or [self.taskmanager_pid]:
            _terminate(pid, TASKMANAGER_CLASS, timeout_s)
        _terminate(self.jobmanager_pid, JOBMANAGER_CLASS, timeout_s)


def _get_json(url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    # No proxies: the cluster is on loopback, and a proxy from the environment
    # must not get in the way.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout_s) as resp:
        data: dict[str, Any] = json.load(resp)
        return data


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _is_our_process(pid: int, main_class: str) -> bool:
    """True if pid is alive and still the Flink JVM we started (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    marker = main_class.encode()
    return any(arg == marker or arg.endswith(b"/" + marker) for arg in cmdline)


def _terminate(pid: int, main_class: str, timeout_s: float) -> None:
    if not _is_our_process(pid, main_class):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)  # Flink shuts down cleanly on SIGTERM.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _reap(pid)
        if not _is_our_process(pid, main_class):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _reap(pid, block=True)


def _reap(pid: int, block: bool = False) -> None:
    """Collect our own zombie child so /proc no longer shows it alive."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0 if block else os.WNOHANG)


def _java() -> str:
    java = _fjs.find_java()
    if java is None:
        raise ClusterError("Java not found (neither $JAVA_HOME/bin/java nor java on PATH)")
    return str(java)


def loopback_jar(jar: str) -> str:
    """The jar to put ahead of ``jar`` on a classpath so that Beam's gRPC servers listen on loopback,
    not on every interface (scripts/flink/loopback_beam.py); "" when the jar's own class does so."""
    try:
        found = _loopback.loopback_jar(jar, CACHE_ROOT / "loopback")
    except (_loopback.LoopbackPatchError, OSError) as e:
        raise ClusterError(f"cannot keep Beam's gRPC servers on localhost with {jar}: {e}") from None
    return str(found) if found is not None else ""


def _write_conf(
    conf_dir: Path,
    run_dir: Path,
    rest_port: int,
    rpc_port: int,
    slots: int,
    jobmanager_memory: str,
    taskmanager_memory: str,
    network_memory: str = NETWORK_MEMORY,
    sort_shuffle_min_buffers: int = SORT_SHUFFLE_MIN_BUFFERS,
    restart_attempts: int = 0,
    restart_delay: str = RESTART_DELAY,
    extra_settings: dict[str, Any] | None = None,
) -> None:
    conf_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        # Loopback only, for every listening socket.
        "jobmanager.rpc.address": "localhost",
        "jobmanager.rpc.port": rpc_port,
        "jobmanager.bind-host": "localhost",
        "taskmanager.host": "localhost",
        "taskmanager.bind-host": "localhost",
        "rest.address": "localhost",
        "rest.bind-address": "localhost",
        "rest.port": rest_port,
        # Sized for a 2-core CI box; one TM with a slot per core.
        "jobmanager.memory.process.size": jobmanager_memory,
        "taskmanager.memory.process.size": taskmanager_memory,
        "taskmanager.numberOfTaskSlots": slots,
        "parallelism.default": slots,
        # Enough network buffers for Beam's many-output batch stages (module
        # docstring); without these the job fails with "Insufficient number
        # of network buffers: required 512".
        "taskmanager.memory.network.min": network_memory,
        "taskmanager.memory.network.max": network_memory,
        "taskmanager.network.sort-shuffle.min-buffers": sort_shuffle_min_buffers,
        "taskmanager.memory.managed.fraction": MANAGED_FRACTION,
        "taskmanager.memory.task.off-heap.size": TASK_OFF_HEAP,
        "io.tmp.dirs": str(run_dir / "tmp"),
        "web.tmpdir": str(run_dir / "tmp"),
        "blob.storage.directory": str(run_dir / "tmp"),
        # Flink's 10 s RPC timeout is too short on a loaded 2-core machine:
        # deploying a Beam task (and starting its SDK workers) can keep the
        # TaskManager from answering for longer, and the job then fails with
        # an AskTimeoutException although nothing is wrong.
        "pekko.ask.timeout": "60 s",
        # A killed TaskManager refuses the heartbeat RPCs sent to it; after
        # rpc-failure-threshold (2) refused ones it is declared dead: with
        # Flink's 10 s interval that took up to 20 s, and a restart in the
        # meantime was deployed onto the dead TaskManager's slots and failed
        # again. 2 s finds it within 4 s. Refusal, not slowness, counts: a
        # loaded but live TaskManager still has heartbeat.timeout (50 s).
        "heartbeat.interval": 2000,
        # Several TaskManagers: a job's slots spread evenly over them (the one
        # with the fewest allocated slots first), not packed onto the first.
        "taskmanager.load-balance.mode": "SLOTS",
        # A Beam job that fails must fail the test, not be retried for minutes;
        # unless asked for restarts (a lost TaskManager), which then are
        # fixed-delay and bounded (docs/running.md, "Restart strategy").
        **(
            {
                "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": restart_attempts,
                "restart-strategy.fixed-delay.delay": restart_delay,
            }
            if restart_attempts > 0
            else {"restart-strategy.type": "none"}
        ),
        # An OutOfMemoryError or other uncaught error in a TaskManager thread
        # (Beam's gRPC data plane runs in its own threads) must end the
        # process, so the job fails with a cause; Flink's default (LOG) only
        # logs it, the dead thread's data never arrives and the job hangs.
        "cluster.uncaught-exception-handling": "FAIL",
        "taskmanager.jvm-exit-on-oom": True,
        **(extra_settings or {}),
    }
    # Flat keys in config.yaml are valid for both Flink 1.19/1.20 and 2.x.
    (conf_dir / "config.yaml").write_text(
        "".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items())
    )
    (conf_dir / "log4j.properties").write_text(LOG4J_PROPERTIES)
    (conf_dir / "log4j-console.properties").write_text(LOG4J_PROPERTIES)


def _resource_params(
    java: str, home: Path, conf_dir: Path, command: str
) -> tuple[list[str], list[str]]:
    """(JVM flags, -D dynamic properties) that Flink computes from the memory config."""
    cp = os.pathsep.join([str(home / "bin" / "bash-java-utils.jar"), _classpath(home)])
    proc = subprocess.run(
        [java, "-cp", cp, BASH_JAVA_UTILS_CLASS, command, "--configDir", str(conf_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    results = [
        line[len(BASH_JAVA_UTILS_PREFIX) :]
        for line in proc.stdout.splitlines()
        if line.startswith(BASH_JAVA_UTILS_PREFIX)
    ]
    if proc.returncode != 0 or len(results) < 2:
        output = (proc.stdout + proc.stderr).splitlines()
        causes = [
            ln.strip() for ln in output if "Exception" in ln and not ln.lstrip().startswith("at ")
        ]
        raise ClusterError(
            f"BashJavaUtils {command} rejected the Flink config: "
            + ("\n".join(causes) or "\n".join(output[-15:]))
        )
    return shlex.split(results[-2]), shlex.split(results[-1])


def _launch(
    java: str,
    home: Path,
    conf_dir: Path,
    log_dir: Path,
    name: str,
    main_class: str,
    jvm_flags: list[str],
    dynamic: list[str],
    classpath: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    log_file = log_dir / f"{name}.log"
    cmd = [
        java,
        *jvm_flags,
        *JAVA17_MODULE_OPTS,
        f"-Dlog.file={log_file}",
        f"-Dlog4j.configurationFile=file:{conf_dir / 'log4j.properties'}",
        "-cp",
        _classpath(home, classpath),
        main_class,
        "--configDir",
        str(conf_dir),
        *dynamic,
    ]
    run_dir = conf_dir.parent
    # No plugins are shipped; an empty dir keeps Flink from probing ./plugins
    # of whatever directory the caller happens to be in.
    (run_dir / "plugins").mkdir(exist_ok=True)
    env = dict(os.environ, FLINK_CONF_DIR=str(conf_dir), FLINK_PLUGINS_DIR=str(run_dir / "plugins"))
    with open(log_dir / f"{name}.out", "wb") as out:
        # Own session: a Ctrl-C in the caller's terminal does not hit the JVMs
        # half-way, and stop() addresses each JVM by its pid.
        return subprocess.Popen(
            cmd,
            cwd=run_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def start_cluster(
    rest_port: int = 8081,
    *,
    flink_version: str | None = None,
    slots: int = 2,
    taskmanagers: int = 1,
    jobmanager_memory: str = "1024m",
    taskmanager_memory: str = TASKMANAGER_MEMORY,
    network_memory: str = NETWORK_MEMORY,
    sort_shuffle_min_buffers: int = SORT_SHUFFLE_MIN_BUFFERS,
    restart_attempts: int = 0,
    restart_delay: str = RESTART_DELAY,
    startup_timeout_s: float = 120.0,
    run_dir: Path | None = None,
    jvm_options: Sequence[str] = JVM_OPTIONS,
    settings: dict[str, Any] | None = None,
    beam_jar: str | None = None,
) -> SessionCluster:
    """Start a JobManager and ``taskmanagers`` TaskManagers (``slots`` each); return once every slot is registered.

    ``beam_jar``: the Beam job server jar the jobs are submitted with, put on every
    TaskManager's classpath (BEAM_CLASSES_SETTINGS); ``settings``: more config.yaml entries.
    On any failure every process started is stopped before the error propagates.
    """
    if taskmanagers < 1 or slots < 1:
        raise ClusterError(f"need at least one TaskManager and one slot each (got {taskmanagers}, {slots})")
    version = resolve_flink_version(flink_version)
    release = patch_release(version)
    java = _java()
    home = flink_home(version)
    if _port_in_use(rest_port):
        raise ClusterError(
            f"port {rest_port} on localhost is already in use "
            "(another Flink cluster? `session_cluster.py stop`)"
        )
    if run_dir is None:
        (CACHE_ROOT / "run").mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix=f"{release}-{rest_port}-", dir=CACHE_ROOT / "run"))
    conf_dir, log_dir = run_dir / "conf", run_dir / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "tmp").mkdir(exist_ok=True)
    # A free RPC port rather than Flink's fixed 6123, so two clusters (or a
    # leftover one) on one machine do not collide; the TM learns it from config.
    rpc_port = _free_port()
    loopback = ""
    if beam_jar:
        if not Path(beam_jar).is_file():
            raise ClusterError(f"the Beam job server jar {beam_jar} does not exist")
        settings = {**BEAM_CLASSES_SETTINGS, **(settings or {})}
        loopback = loopback_jar(beam_jar)
    _write_conf(
        conf_dir,
        run_dir,
        rest_port,
        rpc_port,
        slots,
        jobmanager_memory,
        taskmanager_memory,
        network_memory,
        sort_shuffle_min_buffers,
        restart_attempts,
        restart_delay,
        settings,
    )

    jm_jvm, jm_dyn = _resource_params(java, home, conf_dir, "GET_JM_RESOURCE_PARAMS")
    jm = _launch(java, home, conf_dir, log_dir, "jobmanager", JOBMANAGER_CLASS, [*jm_jvm, *jvm_options], jm_dyn)
    cluster = SessionCluster(version, release, rest_port, rpc_port, slots, str(run_dir), jm.pid, -1,
                             jvm_options=list(jvm_options),
                             taskmanager_classpath=[str(Path(beam_jar).resolve())] if beam_jar else [],
                             loopback_jar=loopback)
    procs: dict[str, subprocess.Popen[bytes]] = {"jobmanager": jm}
    try:
        for _ in range(taskmanagers):
            name, tm = _launch_taskmanager(cluster, java, home)
            procs[name] = tm
        _wait_ready(cluster, procs, startup_timeout_s)
    except BaseException:
        cluster.stop()
        for proc in procs.values():
            proc.wait()
        raise
    (run_dir / "cluster.json").write_text(json.dumps(asdict(cluster), indent=2))
    return cluster


def _launch_taskmanager(
    cluster: SessionCluster, java: str, home: Path
) -> tuple[str, subprocess.Popen[bytes]]:
    """One more TaskManager JVM for the cluster (recorded in its pids); returns (log name, process)."""
    conf_dir, log_dir = Path(cluster.run_dir, "conf"), Path(cluster.run_dir, "log")
    tm_jvm, tm_dyn = _resource_params(java, home, conf_dir, "GET_TM_RESOURCE_PARAMS")
    index = len(cluster.taskmanager_pids)
    # The first keeps the name a one-TaskManager cluster always had.
    name = "taskmanager" if index == 0 else f"taskmanager-{index + 1}"
    # A resource id of our own instead of Flink's random host:port-hex, so the REST API's
    # TaskManager ids map to these processes (and read well in the UI and logs).
    resource_id = f"tm-{index + 1}"
    tm_dyn = [*tm_dyn, "-D", f"taskmanager.resource-id={resource_id}"]
    # The loopback class first: the TaskManager loads it instead of the Beam jar's (loopback_jar).
    classpath = [*filter(None, [cluster.loopback_jar]), *cluster.taskmanager_classpath]
    tm = _launch(java, home, conf_dir, log_dir, name, TASKMANAGER_CLASS, [*tm_jvm, *cluster.jvm_options], tm_dyn,
                 classpath)
    cluster.taskmanager_pids.append(tm.pid)
    cluster.taskmanager_ids.append(resource_id)
    if cluster.taskmanager_pid <= 0:
        cluster.taskmanager_pid = tm.pid
    return name, tm


def add_taskmanager(cluster: SessionCluster, startup_timeout_s: float = 120.0) -> int:
    """Start one more TaskManager (e.g. to replace a lost one); return its pid once its slots are registered.

    Waits until the REST API counts as many TaskManagers as are alive, so a
    lost one that Flink has not yet declared dead (heartbeat) is not mistaken
    for the new one.
    """
    java = _java()
    home = flink_home(cluster.flink_version, quiet=True)
    name, tm = _launch_taskmanager(cluster, java, home)
    alive = [pid for pid in cluster.taskmanager_pids if _is_our_process(pid, TASKMANAGER_CLASS)]
    _wait_ready(cluster, {name: tm}, startup_timeout_s, taskmanagers=len(alive))
    Path(cluster.run_dir, "cluster.json").write_text(json.dumps(asdict(cluster), indent=2))
    return tm.pid


def start_job_server(cluster: SessionCluster, jar: str, port: int = 0, timeout_s: float = 60.0) -> None:
    """A Beam job server for this cluster, kept running beside it; jobs then submit with
    ``--job_endpoint=cluster.job_endpoint`` (and still ``--flink_master``, which the command uses to
    cancel a job it leaves behind).

    Why: Beam's FlinkRunner otherwise starts a job server JVM for every job, 2.8 CPU-s of a job at 1M
    candidates (start, class loading, JIT); a warm one translates and submits for ~0.5
    (docs/benchmarks.md, "Flink beside the DirectRunner"). C1 only, as the cluster's JVMs; no
    expansion service (this job uses no cross-language transform); each job's staged artifacts
    under the cluster's run dir, removed when the job ends. Its job and artifact staging services
    listen on localhost only: Beam's own server factory would listen on every interface whatever
    ``--job-host`` says, so the loopback copy of it (``loopback_jar``) comes first."""
    if not Path(jar).is_file():
        raise ClusterError(f"the Beam job server jar {jar} does not exist")
    port = port or _free_port()
    if _port_in_use(port):
        raise ClusterError(f"port {port} on localhost is already in use (another job server?)")
    run_dir = Path(cluster.run_dir)
    first = loopback_jar(jar)
    try:
        launch = _loopback.jar_command(jar, Path(first) if first else None)
    except _loopback.LoopbackPatchError as e:
        raise ClusterError(str(e)) from None
    cmd = [_java(), *cluster.jvm_options, *launch,
           "--flink-master", cluster.flink_master, "--job-host", "localhost", "--job-port", str(port),
           "--artifact-port", "0", "--expansion-port", "-1", "--artifacts-dir", str(run_dir / "artifacts")]
    with open(run_dir / "log" / "job-server.log", "wb") as out:
        proc = subprocess.Popen(cmd, cwd=run_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    cluster.job_server_pid, cluster.job_server_port, cluster.job_server_jar = proc.pid, port, str(Path(jar).resolve())
    deadline = time.monotonic() + timeout_s
    while not _port_in_use(port):
        if proc.poll() is not None or time.monotonic() >= deadline:
            _terminate(proc.pid, Path(jar).name, 5.0)
            cluster.job_server_pid = cluster.job_server_port = -1
            raise ClusterError(f"the job server did not come up on localhost:{port}\n{cluster.log_tail()}")
        time.sleep(0.2)
    Path(cluster.run_dir, "cluster.json").write_text(json.dumps(asdict(cluster), indent=2))


def _wait_ready(
    cluster: SessionCluster,
    procs: dict[str, subprocess.Popen[bytes]],
    timeout_s: float,
    taskmanagers: int | None = None,
) -> None:
    """Poll /overview until ``taskmanagers`` TaskManagers (default: every one started) with all their slots are registered."""
    expected = len(cluster.taskmanager_pids) if taskmanagers is None else taskmanagers
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise ClusterError(
                    f"Flink {name} exited with code {proc.returncode} during "
                    f"startup\n{cluster.log_tail()}"
                )
        try:
            overview = cluster.overview()
            last = overview
            if (
                overview.get("taskmanagers", 0) >= expected
                and overview.get("slots-total", 0) >= cluster.slots * expected
            ):
                return
        except (urllib.error.URLError, OSError, ValueError) as e:
            last = e
        time.sleep(0.5)
    raise ClusterError(
        f"Flink cluster not ready after {timeout_s:.0f}s (last: {last!r})\n{cluster.log_tail()}"
    )


@contextlib.contextmanager
def session_cluster(
    rest_port: int = 8081,
    *,
    keep_logs: bool = False,
    job_server: bool = False,
    **start: Any,
) -> Iterator[SessionCluster]:
    """Run a session cluster for the duration of the block; always stop it. ``start``: the keywords of
    ``start_cluster`` (its one signature); ``job_server``: with a Beam job server kept beside it
    (``start_job_server``, the ``beam_jar``).

    Logs stay under the run dir when the block raised (or keep_logs is set),
    and are removed otherwise.
    """
    beam_jar = start.get("beam_jar")
    cluster = start_cluster(rest_port, **start)
    failed = False
    try:
        if job_server:
            if not beam_jar:
                raise ClusterError("a job server beside the cluster needs the Beam job server jar (beam_jar)")
            start_job_server(cluster, beam_jar)
        yield cluster
    except BaseException:
        failed = True
        raise
    finally:
        cluster.stop()
        for pid in (*cluster.taskmanager_pids, cluster.jobmanager_pid, cluster.job_server_pid):
            _reap(pid, block=False)
        if not failed and not keep_logs:
            shutil.rmtree(cluster.run_dir, ignore_errors=True)


# ---------------------------------------------------------------------- CLI --


def _state_file(rest_port: int) -> Path:
    return CACHE_ROOT / "run" / f"cluster-{rest_port}.json"


def _beam_jar(args: argparse.Namespace) -> str | None:
    """The job server jar for the TaskManagers' classpath: given, none, or obtained as make flink-jar does."""
    if args.beam_jar == "none":
        return None
    if args.beam_jar:
        return str(args.beam_jar)
    try:
        jar, _route = _fjs.obtain(resolve_flink_version(args.flink_version),
                                  log=lambda m: print(m, file=sys.stderr))
    except _fjs.FetchError as e:
        raise ClusterError(f"no Beam job server jar for the TaskManagers' classpath: {e} "
                           "(--beam-jar none starts the cluster without it)") from e
    return str(jar)


def _cli_start(args: argparse.Namespace) -> int:
    cluster = start_cluster(
        args.rest_port,
        flink_version=args.flink_version,
        slots=args.slots,
        taskmanagers=args.taskmanagers,
        taskmanager_memory=args.taskmanager_memory,
        restart_attempts=args.restart_attempts,
        restart_delay=args.restart_delay,
        startup_timeout_s=args.timeout,
        beam_jar=_beam_jar(args),
        settings={"taskmanager.memory.task.off-heap.size": args.task_off_heap} if args.task_off_heap else None,
    )
    try:
        if args.worker_pool_port:
            _start_worker_pool(cluster, args.worker_pool_port)
        if args.job_server_port:
            if not cluster.taskmanager_classpath:
                raise ClusterError("--job-server-port needs the Beam job server jar (not --beam-jar none)")
            start_job_server(cluster, cluster.taskmanager_classpath[0], args.job_server_port)
    except BaseException:
        cluster.stop()
        raise
    _state_file(args.rest_port).write_text(json.dumps(asdict(cluster), indent=2))
    print(
        f"Flink {cluster.flink_release} session cluster up: {cluster.rest_url} "
        f"(JobManager pid {cluster.jobmanager_pid}, "
        f"TaskManager pid{'s' if len(cluster.taskmanager_pids) > 1 else ''} "
        f"{', '.join(map(str, cluster.taskmanager_pids))} with {cluster.slots} slots each, "
        f"logs {cluster.run_dir}/log)",
        file=sys.stderr,
    )
    if cluster.taskmanager_classpath:
        submit = (f"the job server below and {' '.join(ENVIRONMENT_CACHE_OPTIONS)}" if args.job_server_port
                  else f"that jar and {' '.join(BEAM_JOB_OPTIONS)}")
        print(f"Beam's classes on the TaskManagers: {cluster.taskmanager_classpath[0]}; submit with {submit}",
              file=sys.stderr)
    if cluster.worker_pool_pid > 0:
        print(
            f"Python SDK worker pool: localhost:{cluster.worker_pool_port} "
            f"(pid {cluster.worker_pool_pid}; --environment_type=EXTERNAL "
            f"--environment_config=localhost:{cluster.worker_pool_port})",
            file=sys.stderr,
        )
    if cluster.job_server_pid > 0:
        print(
            f"Beam job server: localhost:{cluster.job_server_port} (pid {cluster.job_server_pid}; submit with "
            f"--runner=FlinkRunner --flink_master={cluster.flink_master} --job_endpoint={cluster.job_endpoint})",
            file=sys.stderr,
        )
    print(cluster.flink_master)
    return 0


def _start_worker_pool(cluster: SessionCluster, port: int, timeout_s: float = 60.0) -> None:
    """A detached worker_pool.py on localhost:port, logging into the cluster's log dir."""
    if _port_in_use(port):
        raise ClusterError(f"port {port} on localhost is already in use (another worker pool?)")
    with open(Path(cluster.run_dir) / "log" / "worker-pool.log", "wb") as out:
        proc = _pool.launch(port, out, own_session=True)
    cluster.worker_pool_pid, cluster.worker_pool_port = proc.pid, port
    try:
        _pool.wait_for_port(port, proc, timeout_s)
    except RuntimeError:
        raise ClusterError(f"the worker pool did not come up on localhost:{port}\n{cluster.log_tail()}") from None


def _load_state(rest_port: int) -> SessionCluster | None:
    try:
        return SessionCluster(**json.loads(_state_file(rest_port).read_text()))
    except FileNotFoundError:
        return None


def _cli_stop(args: argparse.Namespace) -> int:
    cluster = _load_state(args.rest_port)
    if cluster is None:
        print(f"no cluster started by this script on port {args.rest_port}", file=sys.stderr)
        return 0
    cluster.stop()
    _state_file(args.rest_port).unlink(missing_ok=True)
    print(
        f"stopped Flink cluster on port {args.rest_port} (logs kept in {cluster.run_dir}/log)",
        file=sys.stderr,
    )
    return 0


def _cli_add_taskmanager(args: argparse.Namespace) -> int:
    cluster = _load_state(args.rest_port)
    if cluster is None:
        print(f"no cluster started by this script on port {args.rest_port}", file=sys.stderr)
        return 1
    pid = add_taskmanager(cluster, startup_timeout_s=args.timeout)
    _state_file(args.rest_port).write_text(json.dumps(asdict(cluster), indent=2))
    print(f"TaskManager pid {pid} registered with the cluster on port {args.rest_port}", file=sys.stderr)
    return 0


def _cli_status(args: argparse.Namespace) -> int:
    cluster = _load_state(args.rest_port)
    if cluster is None:
        print(f"no cluster started by this script on port {args.rest_port}")
        return 1
    try:
        print(json.dumps(cluster.overview()))
        return 0
    except (urllib.error.URLError, OSError) as e:
        print(f"cluster on port {args.rest_port} not answering: {e}")
        return 1


def _cli_fetch(args: argparse.Namespace) -> int:
    print(flink_home(args.flink_version))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Local Flink session cluster on loopback.")
    parser.add_argument(
        "--flink-version", help="Flink minor line (default: as fetch_job_server.py)"
    )
    parser.add_argument("--rest-port", type=int, default=8081)
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start in the background; print the --flink_master value")
    start.add_argument("--slots", type=int, default=2, help="task slots per TaskManager (default 2)")
    start.add_argument(
        "--taskmanagers",
        type=int,
        default=1,
        help="TaskManager JVMs, each with its own slots (default 1)",
    )
    start.add_argument(
        "--restart-attempts",
        type=int,
        default=0,
        help="fixed-delay restarts of a failed job (default 0: restart-strategy none)",
    )
    start.add_argument(
        "--restart-delay",
        default=RESTART_DELAY,
        help=f"delay between restarts (default {RESTART_DELAY!r})",
    )
    start.add_argument("--timeout", type=float, default=120.0)
    start.add_argument(
        "--taskmanager-memory",
        default=TASKMANAGER_MEMORY,
        help=f"the TaskManager's process size (default {TASKMANAGER_MEMORY}; docs/running.md sizes it)",
    )
    start.add_argument(
        "--task-off-heap",
        help=f"the TaskManagers' task off-heap memory (default {TASK_OFF_HEAP}; 1g for 10M candidates at "
        "two slots each: docs/running.md sizes it)",
    )
    start.add_argument(
        "--beam-jar",
        help="the Beam job server jar the jobs are submitted with, on the TaskManagers' classpath "
        "(default: the one make flink-jar gives; 'none': without, each job ships its own)",
    )
    start.add_argument(
        "--worker-pool-port",
        type=int,
        default=0,
        help="also start a Python SDK worker pool on localhost:PORT (for EXTERNAL environments)",
    )
    start.add_argument(
        "--job-server-port",
        type=int,
        default=0,
        help="also keep a Beam job server on localhost:PORT beside the cluster (jobs then submit with "
        "--job_endpoint=localhost:PORT instead of starting one each)",
    )
    start.set_defaults(func=_cli_start)
    sub.add_parser("stop", help="stop a cluster started with `start`").set_defaults(func=_cli_stop)
    add = sub.add_parser(
        "add-taskmanager", help="start one more TaskManager (e.g. to replace a lost one)"
    )
    add.add_argument("--timeout", type=float, default=120.0)
    add.set_defaults(func=_cli_add_taskmanager)
    sub.add_parser("status", help="print the REST /overview").set_defaults(func=_cli_status)
    sub.add_parser("fetch", help="only download the Flink jars").set_defaults(func=_cli_fetch)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ClusterError as e:
        print(f"session_cluster: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
