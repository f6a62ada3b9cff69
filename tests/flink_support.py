"""Helpers for tests that run pipelines on Flink (no tests in here).

    jar, route, unavailable = job_server_jar()
    if jar is None:
        pytest.skip(route) if unavailable else pytest.fail(route)
    run(flink_pipeline_args(jar) + [...])

    with session_cluster(rest_port=free_port()) as cluster:
        run(flink_pipeline_args(jar, flink_master=cluster.flink_master) + [...])

    job = latest_job(cluster)                       # what Flink's REST API says about the run
    subtasks_per_taskmanager(cluster, job["jid"])   # [(vertex name, {TaskManager id: subtasks})]

The real work lives in scripts/flink/ (also used by the Makefile/CI); this
module only loads it by path, since scripts/ is not an importable package.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

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
_boot = _load("boot_env")

# Re-exports for tests.
session_cluster = _cluster.session_cluster
SessionCluster = _cluster.SessionCluster
ClusterError = _cluster.ClusterError
flink_home = _cluster.flink_home
worker_pool = _pool.worker_pool
FetchError = _fetch.FetchError
prepare_boot_env = _boot.prepare  # Beam's boot program and a Python with Beam for PROCESS workers
BootEnvError = _boot.BootEnvError


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
    workers_per_taskmanager: int | None = None,
    process_environment: str | None = None,
    job_endpoint: str | None = None,
) -> list[str]:
    """Pipeline options for FlinkRunner.

    Without ``worker_pool``: LOOPBACK, the SDK harness runs inside the
    submitting (pytest) process, so neither Docker nor the Go boot binary of
    PROCESS is needed. With it (``localhost:PORT`` of ``worker_pool()``):
    EXTERNAL, ``workers_per_taskmanager`` Python worker processes per
    TaskManager (``--sdk_worker_parallelism``; default ``parallelism``, one per
    slot of a TaskManager that runs every subtask; with the subtasks spread over
    N TaskManagers, parallelism / N suffices). With ``process_environment``
    (an ``--environment_config`` JSON of a command and its env, e.g.
    scripts/flink/boot_env.py's): PROCESS, each TaskManager starts its
    workers by running that command. With ``job_endpoint`` (a job server kept
    beside the cluster, ``session_cluster(job_server=True)``): submitted there
    instead of through a job server of its own.
    """
    args = [
        "--runner=FlinkRunner",
        f"--flink_master={flink_master}",
        f"--flink_version={flink_version()}",
        f"--flink_job_server_jar={job_server_jar}",
        f"--parallelism={parallelism}",
    ]
    if flink_master != "[local]":
        # What docs/running.md's launch adds for a session cluster started with the job server jar
        # on its TaskManagers (session_cluster(beam_jar=...)): workers kept from stage to stage.
        args += (_cluster.ENVIRONMENT_CACHE_OPTIONS if job_endpoint else _cluster.BEAM_JOB_OPTIONS)
    if job_endpoint is not None:
        args.append(f"--job_endpoint={job_endpoint}")
    if process_environment is not None:
        return [*args, "--environment_type=PROCESS", f"--environment_config={process_environment}",
                f"--sdk_worker_parallelism={workers_per_taskmanager or parallelism}"]
    if worker_pool is None:
        return [*args, "--environment_type=LOOPBACK"]
    return [
        *args,
        "--environment_type=EXTERNAL",
        f"--environment_config={worker_pool}",
        f"--sdk_worker_parallelism={workers_per_taskmanager or parallelism}",
    ]


# ------------------------------------------------------------ comparing runs --


def assert_same_as_direct(reference: tuple[dict, dict], result: tuple[dict, dict], runner: str) -> None:
    """``result`` (manifest, outputs) has the DirectRunner's ``reference`` rows, row for row (canonically
    sorted), the same conservation and outcomes, and says it ran on ``runner``."""
    from output_reader import canonical

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


# ------------------------------------------------------------ Flink's REST API --


def rest(cluster, path: str) -> Any:
    """GET ``path`` from the cluster's REST API (JSON)."""
    return _cluster._get_json(f"{cluster.rest_url}{path}", timeout_s=30.0)


def latest_job(cluster) -> dict:
    """The most recently started job of the cluster (REST /jobs/overview)."""
    jobs = rest(cluster, "/jobs/overview")["jobs"]
    assert jobs, "the cluster ran no job"
    return max(jobs, key=lambda job: job["start-time"])


def subtasks_per_taskmanager(cluster, jid: str) -> list[tuple[str, dict[str, int]]]:
    """``(vertex name, {TaskManager id: subtasks})`` for every vertex of the job, in the job's order.

    From ``/jobs/<jid>/vertices/<vid>/taskmanagers``: each vertex's subtasks
    (their current attempts) grouped by the TaskManager that ran them.
    """
    result = []
    for vertex in rest(cluster, f"/jobs/{jid}")["vertices"]:
        detail = rest(cluster, f"/jobs/{jid}/vertices/{vertex['id']}/taskmanagers")
        result.append((vertex["name"], {tm["taskmanager-id"]: sum(tm["status-counts"].values())
                                        for tm in detail["taskmanagers"]}))
    return result


def exception_history(cluster, jid: str) -> list[dict]:
    """Every failure the job recovered from or died of, with the exceptions concurrent to each (flattened)."""
    history = rest(cluster, f"/jobs/{jid}/exceptions?maxExceptions=50").get("exceptionHistory", {})
    flat = []
    for entry in history.get("entries", []):
        flat.append(entry)
        flat.extend(entry.get("concurrentExceptions", []))
    return flat


# ------------------------------------------- a larger archive for the kill test --


def simulated_archive(folder: Path, candidates: int, sources: int, shards: int = 4) -> dict:
    """The simulated producer's archive (sample.simulated_producer), candidates in ``shards`` files and
    transcripts in two, so both TaskManagers read; returns globs as ``fixture_archive.write_archive`` does."""
    folder.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).resolve().parent.parent
    raw = folder / "raw"
    raw.mkdir()
    subprocess.run(
        [sys.executable, "-m", "sample.simulated_producer",
         "--transcripts", str(repo / "sample" / "data" / "crd3-sample.transcripts.jsonl.gz"),
         "--transcripts-out", str(raw / "transcripts.jsonl"), "--candidates-out", str(raw / "candidates.jsonl"),
         "--truth-out", str(raw / "truth.jsonl"), "--seed", "32", "--sources", str(sources),
         "--candidates", str(candidates)],
        check=True, cwd=repo, capture_output=True, timeout=300)
    counts = {}
    for name, files in (("candidates", shards), ("transcripts", 2)):
        lines = (raw / f"{name}.jsonl").read_bytes().splitlines(keepends=True)
        counts[name] = len(lines)
        for index in range(files):
            (folder / f"{name}-{index}.jsonl").write_bytes(b"".join(lines[index::files]))
    for path in raw.iterdir():
        path.unlink()
    raw.rmdir()
    return {"transcripts": str(folder / "transcripts-*"), "candidates": str(folder / "candidates-*"),
            "candidates_in": counts["candidates"], "transcripts_in": counts["transcripts"]}


def job_command(archive: dict, out: Path, *extra: str) -> list[str]:
    """The job as a command of its own (``python -m pipelines.reprocess``), JSON Lines out."""
    return [sys.executable, "-m", "pipelines.reprocess", "--transcripts", archive["transcripts"],
            "--candidates", archive["candidates"], "--output", str(out), "--output-format", "jsonl", *extra]


def kill_taskmanager_mid_stage(cluster, proc: subprocess.Popen, output: Path, stage: str,
                               timeout_s: float = 300.0) -> dict:
    """SIGKILL one TaskManager while the stage named ``stage`` writes its outputs (``stage``: for the record).

    Waits until the job runs (REST API), then polls the output folder until a
    temporary output file appears (the per-source step's writers open theirs
    with their first rows: its data is flowing) and kills (SIGKILL) the
    TaskManager with the highest id. Every stage runs a subtask on each
    TaskManager (``taskmanager.load-balance.mode: SLOTS``), so the victim runs
    one of the writing stage; the REST API cannot say so in time, its view of
    a job's vertices being up to ``web.refresh-interval`` (3 s) old while the
    stage lasts a few seconds. The caller checks in the job's exception
    history that a ``stage`` subtask on the victim failed. Returns what it saw:
    victim, its pid, the job id, seconds from the call to the kill, temporary
    files at the kill.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    jid = None
    last_rest = 0.0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the job ended (exit {proc.returncode}) before a TaskManager was killed")
        if jid is None and time.monotonic() - last_rest > 0.3:
            last_rest = time.monotonic()
            jobs = [job for job in rest(cluster, "/jobs/overview")["jobs"] if job["state"] == "RUNNING"]
            if jobs:
                jid = max(jobs, key=lambda job: job["start-time"])["jid"]
        if jid is not None:
            temp = list(output.glob(".temp-write-*/*"))
            if temp:
                victim = max(tm["id"] for tm in cluster.taskmanagers())
                pid = cluster.pid_of_taskmanager(victim)
                os.kill(pid, signal.SIGKILL)
                return {"victim": victim, "pid": pid, "jid": jid, "stage": stage,
                        "after_s": round(time.monotonic() - started, 1), "temporary_files": len(temp)}
        time.sleep(0.02)
    raise AssertionError(f"{stage!r} never wrote an output file within {timeout_s:.0f}s")


# ------------------------------------------------------- listening sockets --

_TCP_LISTEN = "0A"  # the state column of /proc/net/tcp{,6}


@dataclass(frozen=True)
class ListeningSocket:
    """A TCP socket in the listen state, held by ``pid`` (``command``: its first argument, for messages)."""

    pid: int
    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    port: int
    command: str

    @property
    def loopback(self) -> bool:
        mapped = getattr(self.address, "ipv4_mapped", None)  # ::ffff:127.0.0.1, a dual-stack socket's view
        return self.address.is_loopback or (mapped is not None and mapped.is_loopback)

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command}) listens on {self.address}:{self.port}"


def _kernel_address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp's address column: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def _listening_by_inode() -> dict[int, tuple[Any, int]]:
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue  # no IPv6 on this machine
        for line in lines:
            fields = line.split()
            if fields[3] == _TCP_LISTEN:
                address, port = fields[1].split(":")
                found[int(fields[9])] = (_kernel_address(address), int(port, 16))
    return found


def process_tree(roots: Iterable[int]) -> set[int]:
    """``roots`` and every process below them."""
    from bench.procs import children_map

    children = children_map()
    found, stack = set(), [root for root in roots if root > 0]
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, []))
    return found


def listening_sockets(roots: Iterable[int]) -> list[ListeningSocket]:
    """Every TCP socket listening in the process trees of ``roots`` (read from /proc/net/tcp and tcp6)."""
    listening = _listening_by_inode()
    found = []
    for pid in sorted(process_tree(roots)):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue  # ended meanwhile
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and int(target[8:-1]) in listening:
                address, port = listening[int(target[8:-1])]
                found.append(ListeningSocket(pid, address, port, command))
    return found


@contextlib.contextmanager
def watched_listening_sockets(roots: Iterable[int], every_s: float = 0.1) -> Iterator[set[ListeningSocket]]:
    """Every socket that listened in the trees of ``roots`` while the block ran (a set, filled as it runs)."""
    roots = list(roots)
    seen: set[ListeningSocket] = set()
    stop = threading.Event()

    def watch() -> None:
        while True:
            seen.update(listening_sockets(roots))
            if stop.wait(every_s):
                return

    thread = threading.Thread(target=watch, name="socket-watch", daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()
        seen.update(listening_sockets(roots))
