"""Flink beside the DirectRunner: the job on embedded Flink and on a session cluster.

    .venv/bin/python -m bench.flink                          # 100k candidates, 3 rounds
    .venv/bin/python -m bench.flink --sizes 100000,1000000 --runs 1
    .venv/bin/python -m bench.flink --sizes 1000000,10000000 --configs flink-session-2tm --runs 1
    (``make bench`` runs this as its "Flink" section; ``make bench FLINK_10M=1`` adds the last line.)

Configurations, each run as its own child process on the same cached
archive (above 1M: copies of the 1M archive, bench.archive.sized_archive),
rounds interleaved so machine load drifts over all of them alike:

- ``direct``, ``direct-mp2``: the DirectRunner in-process and with two
  multi-processing workers (the same as bench.run's, measured again here so
  the comparison is side by side);
- ``flink-local``: ``--flink_master=[local] --parallelism=2
  --environment_type=LOOPBACK``, the job server JVM with its embedded
  mini-cluster as a child of the job, Python work in the job's process;
- ``flink-local-ext``: the same with the Python workers out of process
  (EXTERNAL, a loopback worker pool, ``--sdk_worker_parallelism=2``);
- ``flink-session``: a standalone session cluster (JobManager and TaskManager
  JVMs, and a Beam job server kept beside them, started for the section and
  not counted in the wall time: its start is reported on its own) with the
  worker pool: the launch docs/running.md gives for real runs
  (scripts/flink/session_cluster.py's JVM options, the job server jar on the
  TaskManagers, ``--job_endpoint``, ``--environment_cache_millis``);
- ``flink-session-2tm``: the same with two TaskManagers (one subtask of each
  task on each, one Python worker per TaskManager): the 10M run's;
- opt-in, the ablation of the cost cuts: ``flink-session-own-js`` (a job
  server started by each job, as the FlinkRunner does without
  ``--job_endpoint``; the cuts below kept), ``flink-session-untuned`` (the
  launch before the cuts), ``flink-session-c1`` (C1-only JVMs alone),
  ``flink-session-shared`` (the shared Beam classes and kept workers alone).

Wall time is the job's process from start to exit. CPU time and peak RSS
are of the whole process tree, JVMs included: the job and its descendants
(wait4 and /proc sampling, bench.procs) plus, for the configurations that use
them, the long-lived JobManager, TaskManager(s), kept job server and worker pool (CPU as the
difference of their /proc counters, children they reaped included; RSS
sampled together with the job's tree). CPU and peak RSS are also given per
process kind, the Python workers the pool started counted; ``--threads``
adds the CPU of every JVM thread group (JIT compilers, GC, Flink's tasks,
gRPC). For session clusters the peak disk use of their io.tmp.dirs (sort
spills, shuffle files) is sampled, and every run's output folder measured.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.archive import REPO, Archive, sized_archive
from bench.procs import SAMPLE_SECONDS, children_map, _rss_kb, job_failure
from bench.stats import check_same_evaluations, markdown_table, round_order, spread, summary

PY = sys.executable
_CLK = os.sysconf("SC_CLK_TCK")


def _load_flink_script(name: str):
    module_name = f"_notarius_flink_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, REPO / "scripts" / "flink" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class FlinkConfig:
    key: str
    label: str
    kind: str  # direct | local | session
    pool: bool = False
    extra: tuple[str, ...] = ()
    # Session clusters: TaskManagers, Python workers each asks the pool for, and which of the
    # cost cuts of docs/benchmarks.md ("Flink beside the DirectRunner") are on: the JVMs with C1 only
    # (cluster and job server), Beam's classes shared by the TaskManagers with the job's
    # workers kept from stage to stage. The launch docs/running.md gives has both.
    taskmanagers: int = 1
    workers_per_taskmanager: int = 2
    c1_jvms: bool = True
    shared_beam: bool = True
    parallelism: int = 2
    settings: tuple[tuple[str, str], ...] = ()  # more config.yaml entries of its cluster
    # A job server kept beside the cluster (--job_endpoint) instead of one started by each job.
    job_server: bool = False

    @property
    def cluster_variant(self) -> tuple:
        return (self.taskmanagers, self.c1_jvms, self.shared_beam, self.settings, self.job_server)


CONFIGS = {c.key: c for c in (
    FlinkConfig("direct", "DirectRunner in-process (FnApiRunner)", "direct"),
    FlinkConfig("direct-mp2", "DirectRunner, 2 workers (multi_processing)", "direct",
                extra=("--direct_num_workers=2", "--direct_running_mode=multi_processing")),
    FlinkConfig("flink-local", "Flink `[local]` p=2, LOOPBACK", "local"),
    FlinkConfig("flink-local-ext", "Flink `[local]` p=2, worker pool (EXTERNAL)", "local", pool=True),
    FlinkConfig("flink-session", "Flink session cluster p=2, worker pool (EXTERNAL), job server kept beside it",
                "session", pool=True, job_server=True),
    # The 10M run's. Parallelism 4 (two subtasks per TaskManager): Beam's Flink runner holds a subtask's
    # whole output of a stage in the TaskManager's heap until the stage's one bundle ends, and waits for
    # ever beyond 100 data-plane messages (~1 GB); the read step's output is ~0.29 GB per million
    # candidates. 1 GB of task off-heap memory: what gRPC buffers while it sends a stage's input to the
    # Python workers (256 MB ran out at 10M). docs/running.md, "Memory per TaskManager".
    FlinkConfig("flink-session-2tm", "Flink session cluster, 2 TaskManagers, p=4, worker pool", "session",
                pool=True, taskmanagers=2, workers_per_taskmanager=2, parallelism=4, job_server=True,
                settings=(("taskmanager.memory.task.off-heap.size", "1g"),)),
    # The ablation of the cost cuts (opt-in): a job server started by each job; none of the cuts; each alone.
    FlinkConfig("flink-session-own-js", "Flink session cluster p=2, worker pool, a job server per job", "session",
                pool=True),
    FlinkConfig("flink-session-untuned", "Flink session cluster, before the cost cuts", "session", pool=True,
                c1_jvms=False, shared_beam=False),
    FlinkConfig("flink-session-c1", "Flink session cluster, C1-only JVMs alone", "session", pool=True,
                shared_beam=False),
    FlinkConfig("flink-session-shared", "Flink session cluster, shared Beam classes alone", "session", pool=True,
                c1_jvms=False),
)}
DEFAULT_CONFIGS = "direct,direct-mp2,flink-local,flink-session"

KINDS = ("job (python)", "job server + embedded Flink (JVM)", "JobManager (JVM)", "TaskManager (JVM)",
         "Python workers (pool)")


# ----------------------------------------------------------------- measure --


def _own_ticks(pid: int) -> int:
    """utime+stime of pid itself, in clock ticks (0 if gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return 0
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def _cpu_ticks(pid: int) -> int:
    """utime+stime+cutime+cstime of pid (children it reaped included), in clock ticks."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return 0
    fields = stat[stat.rfind(b")") + 2:].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14))


def _tree(root: int, children: dict[int, list[int]]) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _is_java(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "java"
    except OSError:
        return False


def _tree_ticks(roots: list[int], children: dict[int, list[int]]) -> dict[int, int]:
    """utime+stime+cutime+cstime of every process in the trees of ``roots``, by pid.

    The difference of two such sums is the CPU the trees spent in between,
    descendants that started and were reaped meanwhile included (their time
    moves into their parent's cutime when it waits for them)."""
    return {pid: _cpu_ticks(pid) for root in roots for pid in _tree(root, children)}


def _thread_ticks(pid: int) -> dict[int, tuple[str, int]]:
    """tid -> (thread name, utime+stime in ticks) of every thread of pid."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_bytes()
        except OSError:
            continue
        name = stat[stat.index(b"(") + 1:stat.rfind(b")")].decode(errors="replace")
        fields = stat[stat.rfind(b")") + 2:].split()
        out[int(tid)] = (name, int(fields[11]) + int(fields[12]))
    return out


_THREAD_NUMBER = re.compile(r"[#\-_ ]?\d+$")


def thread_group(name: str) -> str:
    """A JVM thread's name without its number: 'GC Thread#1' -> 'GC Thread', 'C2 CompilerThre' stays."""
    previous = None
    while previous != name:
        previous, name = name, _THREAD_NUMBER.sub("", name).rstrip()
    return name or "?"


SPILL_EVERY = 10  # sampling rounds (1 s): a walk of the spill folders costs more than a /proc pass


def spill_bytes(tmp: Path) -> int:
    """Bytes of the files under a Flink io.tmp.dir, its blob store (the jobs' jars) left out:
    what Flink's sort spills and the blocking shuffle's result partitions occupy."""
    total = 0
    try:
        tops = list(os.scandir(tmp))
    except OSError:
        return 0
    for top in tops:
        if top.name.startswith("blobStore"):
            continue
        for folder, _dirs, files in os.walk(top.path):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.stat(os.path.join(folder, name)).st_blocks * 512
    return total


class _Sampler(threading.Thread):
    """Peak RSS of the job's tree plus the long-lived roots, in total and per process kind;
    CPU of every process of the job's tree, and (``threads``) of every JVM thread."""

    def __init__(self, job_pid: int, roots: dict[str, list[int]], threads: bool = False,
                 spill_dirs: tuple[Path, ...] = ()) -> None:
        super().__init__(daemon=True)
        self.job_pid, self.roots, self.threads, self.spill_dirs = job_pid, roots, threads, spill_dirs
        self.peak_spill_bytes = 0  # io.tmp.dirs without Flink's blob store, sampled every SPILL_EVERY rounds
        self.peak_total_kb = 0
        self.peak_kb = {kind: 0 for kind in KINDS}
        self.job_ticks: dict[int, int] = {}  # last seen own CPU of every process of the job's tree
        self.job_kind: dict[int, str] = {}
        self.pool_pids: set[int] = set()  # every process seen under the worker pool (itself included)
        self.worker_seen: dict[int, list] = {}  # pool worker pid -> [first seen, last seen, own CPU ticks]
        # (kind, pid, tid) -> (thread name, last seen ticks), for the JVMs; first seen ticks of the roots'
        self.thread_last: dict[tuple[str, int, int], tuple[str, int]] = {}
        self.thread_first: dict[tuple[str, int, int], int] = {}
        self.done = threading.Event()
        self._round = 0
        if threads:
            self._sample_threads(children_map(), first=True)

    def _sample_threads(self, children: dict[int, list[int]], first: bool = False) -> None:
        jvms = [(KINDS[1], pid) for pid in _tree(self.job_pid, children) if _is_java(pid)] if not first else []
        jvms += [(kind, pid) for kind, pids in self.roots.items() for pid in pids if _is_java(pid)]
        for kind, pid in jvms:
            for tid, (name, ticks) in _thread_ticks(pid).items():
                key = (kind, pid, tid)
                if first:
                    self.thread_first[key] = ticks
                self.thread_last[key] = (name, ticks)

    def run(self) -> None:
        while not self.done.wait(SAMPLE_SECONDS):
            children = children_map()
            kb = dict.fromkeys(KINDS, 0)
            for pid in _tree(self.job_pid, children):
                kind = KINDS[1] if _is_java(pid) else KINDS[0]
                kb[kind] += _rss_kb(pid)
                self.job_ticks[pid] = max(self.job_ticks.get(pid, 0), _own_ticks(pid))
                self.job_kind[pid] = kind
            for kind, roots in self.roots.items():
                for root in roots:
                    tree = _tree(root, children)
                    kb[kind] += sum(_rss_kb(pid) for pid in tree)
                    if kind == KINDS[4]:
                        self.pool_pids.update(tree)
                        for pid in tree:
                            if pid != root:
                                seen = self.worker_seen.setdefault(pid, [time.perf_counter(), 0.0, 0])
                                seen[1], seen[2] = time.perf_counter(), max(seen[2], _own_ticks(pid))
            self.peak_total_kb = max(self.peak_total_kb, sum(kb.values()))
            for kind, value in kb.items():
                self.peak_kb[kind] = max(self.peak_kb[kind], value)
            self._round += 1
            if self.threads and self._round % 5 == 0:  # every 0.5 s: a JVM has ~100 threads
                self._sample_threads(children)
            if self.spill_dirs and self._round % SPILL_EVERY == 0:
                self.peak_spill_bytes = max(self.peak_spill_bytes, sum(map(spill_bytes, self.spill_dirs)))

    def thread_cpu(self) -> dict[str, dict[str, float]]:
        """CPU seconds per kind and thread group (JVM threads), largest first."""
        out: dict[str, dict[str, float]] = {}
        for (kind, pid, tid), (name, ticks) in self.thread_last.items():
            group = out.setdefault(kind, {})
            spent = (ticks - self.thread_first.get((kind, pid, tid), 0)) / _CLK
            group[thread_group(name)] = group.get(thread_group(name), 0.0) + spent
        return {kind: dict(sorted(((g, round(s, 2)) for g, s in groups.items() if s >= 0.05),
                                  key=lambda item: -item[1]))
                for kind, groups in out.items()}


def measure(argv: list[str], roots: dict[str, list[int]], timeout_s: float | None = None,
            threads: bool = False, spill_dirs: tuple[Path, ...] = ()) -> dict:
    """Run argv; wall, CPU and peak RSS of its tree plus the given long-lived roots, in total and per kind."""
    import tempfile

    children = children_map()
    before_by_kind = {kind: _tree_ticks(pids, children) for kind, pids in roots.items()}
    # Workers a previous job left (kept for --environment_cache_millis) are not this run's.
    earlier_workers = {pid for root in roots.get(KINDS[4], ()) for pid in _tree(root, children)}
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        sampler = _Sampler(proc.pid, roots, threads, spill_dirs)
        sampler.start()
        interrupted = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if timeout_s is not None and time.perf_counter() - started > timeout_s:
                # Ctrl-C first: the job then cancels its Flink job; SIGKILL a minute later.
                if time.perf_counter() - started > timeout_s + 60:
                    proc.kill()
                elif not interrupted:
                    proc.send_signal(signal.SIGINT)
                    interrupted = True
            time.sleep(0.02)
        wall = time.perf_counter() - started
        sampler.done.set()
        sampler.join()
        if threads:
            sampler._sample_threads(children_map())
        out.seek(0)
        tail = out.read()[-4000:].decode("utf-8", "replace")
    # wait4 counts the job and the descendants it reaped; a job server JVM that
    # outlives its parent's wait is missed there but not by the sampler (which
    # in turn misses up to one sampling interval per process): take the larger.
    cpu_by_kind = dict.fromkeys(KINDS, 0.0)
    for pid, ticks in sampler.job_ticks.items():
        cpu_by_kind[sampler.job_kind[pid]] += ticks / _CLK
    job_cpu = max(usage.ru_utime + usage.ru_stime, cpu_by_kind[KINDS[0]] + cpu_by_kind[KINDS[1]])
    children = children_map()
    for kind, pids in roots.items():
        after = _tree_ticks(pids, children)
        cpu_by_kind[kind] = (sum(after.values()) - sum(before_by_kind[kind].values())) / _CLK
    cpu = job_cpu + sum(cpu_by_kind[kind] for kind in roots)
    pool_workers = len(sampler.pool_pids - earlier_workers)
    workers = [{"seen_s": [round(first - started, 1), round(last - started, 1)], "cpu_s": ticks / _CLK}
               for pid, (first, last, ticks) in sampler.worker_seen.items() if pid not in earlier_workers]
    return {"returncode": os.waitstatus_to_exitcode(status), "wall_s": wall, "cpu_s": cpu,
            "cpu_s_by_kind": {k: round(v, 2) for k, v in cpu_by_kind.items() if v},
            "pool_workers_started": pool_workers if KINDS[4] in roots else None,
            **({"pool_workers": workers} if KINDS[4] in roots else {}),
            "tree_peak_rss_mb": sampler.peak_total_kb / 1024,
            "peak_rss_mb_by_kind": {k: v / 1024 for k, v in sampler.peak_kb.items() if v},
            **({"thread_cpu_s": sampler.thread_cpu()} if threads else {}),
            **({"peak_spill_mb": sampler.peak_spill_bytes / 2**20} if spill_dirs else {}),
            "output_tail": tail}


# ------------------------------------------------------------------ setting --


@dataclass
class Flink:
    """What the Flink configurations share: the jar, and (once started) a cluster and a pool.

    One session cluster runs at a time: a configuration that needs another kind of cluster
    (TaskManagers, JVM options, Beam's classes) stops the running one and starts its own."""

    jar: str
    version: str
    route: str
    work: Path
    cluster: object | None = None
    cluster_variant: tuple | None = None
    cluster_starts: list = field(default_factory=list)  # (config key, seconds) of every cluster started
    pool_port: int | None = None
    pool_pid: int | None = None
    taskmanager_memory: str | None = None  # the session cluster's TaskManager process size; None: its default
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _cluster_stack: contextlib.ExitStack | None = None

    def args(self, config: FlinkConfig) -> list[str]:
        master = "[local]" if config.kind == "local" else self.cluster.flink_master
        args = ["--runner=FlinkRunner", f"--flink_master={master}", f"--flink_version={self.version}",
                f"--flink_job_server_jar={self.jar}", f"--parallelism={config.parallelism}"]
        if config.kind == "session":
            cluster_mod = _load_flink_script("session_cluster")
            if config.job_server:
                args.append(f"--job_endpoint={self.cluster.job_endpoint}")
            args += [*(cluster_mod.JOB_SERVER_JVM_OPTIONS if config.c1_jvms and not config.job_server else ()),
                     *(cluster_mod.ENVIRONMENT_CACHE_OPTIONS if config.shared_beam else ())]
        if config.pool:
            return [*args, "--environment_type=EXTERNAL", f"--environment_config=localhost:{self.pool_port}",
                    f"--sdk_worker_parallelism={config.workers_per_taskmanager}"]
        return [*args, "--environment_type=LOOPBACK"]

    def roots(self, config: FlinkConfig) -> dict[str, list[int]]:
        roots = {}
        if config.kind == "session":
            if config.job_server:
                roots[KINDS[1]] = [self.cluster.job_server_pid]
            roots[KINDS[2]] = [self.cluster.jobmanager_pid]
            roots[KINDS[3]] = list(self.cluster.taskmanager_pids)
        if config.pool:
            roots[KINDS[4]] = [self.pool_pid]
        return roots

    def spill_dirs(self, config: FlinkConfig) -> list[Path]:
        """The session cluster's io.tmp.dirs (spill files, shuffle files, blobs)."""
        return [Path(self.cluster.run_dir) / "tmp"] if config.kind == "session" else []

    def ensure_pool(self) -> None:
        if self.pool_pid is None:
            pool = _load_flink_script("worker_pool")
            cluster_mod = _load_flink_script("session_cluster")
            self.pool_port = cluster_mod._free_port()
            self._stack.enter_context(pool.worker_pool(self.pool_port, log_file=self.work / "worker-pool.log"))
            # The pool process is the one listening; find it among our children.
            self.pool_pid = next(pid for pid in children_map().get(os.getpid(), [])
                                 if "worker_pool.py" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"))

    def ensure_cluster(self, config: FlinkConfig) -> None:
        if self.cluster is not None and self.cluster_variant == config.cluster_variant:
            return
        self.stop_cluster()
        cluster_mod = _load_flink_script("session_cluster")
        started = time.perf_counter()
        self._cluster_stack = contextlib.ExitStack()
        self.cluster = self._cluster_stack.enter_context(cluster_mod.session_cluster(
            rest_port=cluster_mod._free_port(), flink_version=self.version, taskmanagers=config.taskmanagers,
            jvm_options=cluster_mod.JVM_OPTIONS if config.c1_jvms else (),
            beam_jar=self.jar if config.shared_beam or config.job_server else None,
            job_server=config.job_server, settings=dict(config.settings),
            **({"taskmanager_memory": self.taskmanager_memory} if self.taskmanager_memory else {})))
        self.cluster_variant = config.cluster_variant
        self.cluster_starts.append((config.key, time.perf_counter() - started))

    def stop_cluster(self) -> None:
        if self._cluster_stack is not None:
            self._cluster_stack.close()
        self.cluster = self.cluster_variant = self._cluster_stack = None

    def close(self) -> None:
        self.stop_cluster()
        self._stack.close()


def obtain_flink(work: Path, log, taskmanager_memory: str | None = None) -> Flink | str:
    """The shared Flink setting, or why Flink cannot be measured on this machine."""
    fjs = _load_flink_script("fetch_job_server")
    try:
        version = fjs.resolve_flink_version()
        jar, route = fjs.obtain(version, log=log)
    except fjs.FetchError as e:
        return str(e)
    return Flink(str(jar), version, route, work, taskmanager_memory=taskmanager_memory)


# --------------------------------------------------------------------- run --


def command(config: FlinkConfig, archive: Archive, output: Path, flink: Flink | None,
            output_format: str = "jsonl") -> list[str]:
    argv = [PY, "-m", "pipelines.reprocess", "--transcripts", archive.transcripts_glob,
            "--candidates", archive.candidates_glob, "--output", str(output), "--output-format", output_format,
            *config.extra]
    return argv + (flink.args(config) if config.kind != "direct" else [])


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def run_once(config: FlinkConfig, archive: Archive, scratch: Path, flink: Flink | None,
             threads: bool = False, output_format: str = "jsonl", timeout_s: float | None = None) -> dict:
    output = scratch / config.key
    shutil.rmtree(output, ignore_errors=True)
    if config.pool:
        flink.ensure_pool()
    if config.kind == "session":
        flink.ensure_cluster(config)
    flinky = flink is not None and config.kind != "direct"
    m = measure(command(config, archive, output, flink, output_format), flink.roots(config) if flinky else {},
                timeout_s=timeout_s, threads=threads, spill_dirs=tuple(flink.spill_dirs(config)) if flinky else ())
    if m["returncode"] != 0:
        raise SystemExit(job_failure(config.key, output, m["returncode"], m["output_tail"]))
    manifest = json.loads((output / "manifest.json").read_bytes())
    c = manifest["conservation"]
    if not c["holds"] or c["candidates_in"] != archive.candidates_in:
        raise SystemExit(f"{config.key}: conservation does not hold: {c}")
    m["output_mb"] = folder_bytes(output) / 2**20
    shutil.rmtree(output, ignore_errors=True)
    del m["output_tail"], m["returncode"]
    return {**m, "rate": archive.candidates_in / m["wall_s"], "evaluations": c["evaluations"],
            "load1_after": os.getloadavg()[0]}


COMPARE_FORMAT = "avro"  # the runs compare reads: the job's default format (a tenth of JSON Lines' disk at 10M)


def compare_once(config: FlinkConfig, size: int, cache: Path, scratch: Path, flink: Flink | None, log,
                 timeout_s: float | None = None) -> dict:
    """The revision's two runs (bench.backfill: the archive before its backfill and after) on ``config``,
    then ``compare`` of them on the same launch; each measured (wall, CPU and peak RSS by process kind,
    spill). compare is a Beam pipeline: it runs where the job runs."""
    from bench.backfill import after_archive, revision_sized

    before, after = revision_sized(size, cache, log), after_archive(size, cache, scratch / "backfill", log)
    if config.pool:
        flink.ensure_pool()
    if config.kind == "session":
        flink.ensure_cluster(config)
    flinky = flink is not None and config.kind != "direct"
    roots = flink.roots(config) if flinky else {}
    spill = tuple(flink.spill_dirs(config)) if flinky else ()
    launch = [*config.extra, *(flink.args(config) if flinky else [])]
    folders = {"run A": scratch / "compare-run-a", "run B": scratch / "compare-run-b",
               "compare": scratch / "compare-out"}
    steps = {}
    for name, archive in (("run A", before), ("run B", after)):
        shutil.rmtree(folders[name], ignore_errors=True)
        m = measure([PY, "-m", "pipelines.reprocess", "--transcripts", archive.transcripts_glob, "--candidates",
                     archive.candidates_glob, "--output", str(folders[name]), "--output-format", COMPARE_FORMAT,
                     "--refresh-stale", *launch], roots, timeout_s=timeout_s, spill_dirs=spill)
        if m["returncode"] != 0:
            raise SystemExit(job_failure(f"{config.key} {name}", folders[name], m["returncode"], m["output_tail"]))
        c = json.loads((folders[name] / "manifest.json").read_bytes())["conservation"]
        if not c["holds"] or c["candidates_in"] != archive.candidates_in:
            raise SystemExit(f"{config.key} {name}: conservation does not hold: {c}")
        steps[name] = m
        log(f"  compare bench {size:>9,} {config.key:<16} {name:<8} {m['wall_s']:8.2f}s CPU {m['cpu_s']:7.1f}s "
            f"tree RSS {m['tree_peak_rss_mb']:7,.0f} MB")
    shutil.rmtree(folders["compare"], ignore_errors=True)
    m = measure([PY, "-m", "pipelines.cli", "compare", str(folders["run A"]), str(folders["run B"]), "--output",
                 str(folders["compare"]), *launch], roots, timeout_s=timeout_s, spill_dirs=spill)
    if m["returncode"] != 0:
        raise SystemExit(f"{config.key} compare failed with exit code {m['returncode']}:\n{m['output_tail']}")
    total = json.loads((folders["compare"] / "compare.json").read_bytes())["total"]
    if not total["conservation"]["holds"]:
        raise SystemExit(f"{config.key} compare: conservation does not hold: {total['conservation']}")
    steps["compare"] = m
    log(f"  compare bench {size:>9,} {config.key:<16} compare  {m['wall_s']:8.2f}s CPU {m['cpu_s']:7.1f}s "
        f"tree RSS {m['tree_peak_rss_mb']:7,.0f} MB" + (f"; spill peak {m['peak_spill_mb']:,.0f} MB" if spill else ""))
    for folder in folders.values():
        shutil.rmtree(folder, ignore_errors=True)
    for step in steps.values():
        del step["output_tail"], step["returncode"]
    return {"size": size, "candidates": before.candidates_in, "config": config.key, "steps": steps,
            "slots": total["conservation"]["slots_in_a_or_b"], "changed": total["changed_slots"],
            "load1_after": os.getloadavg()[0]}


def compare_table(points: list[dict]) -> str:
    rows, kinds = [], []
    for p in points:
        job = p["steps"]["run A"]
        for name, m in p["steps"].items():
            rows.append([f"{p['candidates']:,}", CONFIGS[p["config"]].label, name, f"{m['wall_s']:.1f}",
                         f"{m['wall_s'] / job['wall_s']:.2f}", f"{m['cpu_s']:.1f}", f"{m['tree_peak_rss_mb']:,.0f}",
                         f"{m['peak_spill_mb']:,.0f}" if "peak_spill_mb" in m else "-"])
            kinds.append([f"{p['candidates']:,}", name,
                          *[f"{m['cpu_s_by_kind'].get(k, 0):.1f} / {m['peak_rss_mb_by_kind'][k]:,.0f}"
                            if k in m["peak_rss_mb_by_kind"] else "-" for k in KINDS]])
    notes = [f"- {p['candidates']:,}: {p['slots']:,} slots compared, {p['changed']:,} changed" for p in points]
    return (markdown_table(["candidates", "configuration", "step", "wall s", "x run A (wall)", "CPU s (tree, JVMs incl.)",
                            "peak RSS of the tree, MB", "spill peak, MB"], rows, "lllrrrrr")
            + "\n\nCPU s / peak RSS MB by process kind:\n\n"
            + markdown_table(["candidates", "step", *KINDS], kinds, "ll" + "r" * len(KINDS)) + "\n\n" + "\n".join(notes))


def run(sizes: list[int], configs: list[str], runs: int, cache: Path, scratch: Path, log,
        large: int = 500_000, taskmanager_memory: str | None = None, threads: bool = False,
        output_format: str = "jsonl", timeout_s: float | None = None, compare_configs: tuple[str, ...] = ()) -> dict:
    """Every size, every configuration, interleaved rounds (sizes >= large run once); then, on each of
    ``compare_configs``, the revision's two runs and ``compare`` of them at every size (once)."""
    scratch.mkdir(parents=True, exist_ok=True)
    needs_flink = any(CONFIGS[c].kind != "direct" for c in (*configs, *compare_configs))
    flink = obtain_flink(scratch, log, taskmanager_memory) if needs_flink else None
    if isinstance(flink, str):
        log(f"flink: not measurable here: {flink}")
        return {"unavailable": flink}
    result: dict = {"points": [], "flink": None}
    try:
        for size in sizes:
            archive = sized_archive(size, cache, log)
            rows: dict[str, list[dict]] = {c: [] for c in configs}
            for round_no in range(1, (runs if size < large else 1) + 1):
                for key in round_order(configs, round_no):
                    try:
                        row = run_once(CONFIGS[key], archive, scratch, flink, threads, output_format, timeout_s)
                    except SystemExit as e:  # one failed run is a finding, not the end of the section
                        logs = None
                        if flink is not None and flink.cluster is not None and CONFIGS[key].kind == "session":
                            # The cluster's logs say why (they go with the cluster when it stops).
                            logs = scratch / f"failed-{key}-{size}-round{round_no}-logs"
                            shutil.rmtree(logs, ignore_errors=True)
                            shutil.copytree(Path(flink.cluster.run_dir) / "log", logs)
                        result.setdefault("failures", []).append(
                            {"size": size, "config": key, "round": round_no, "error": str(e)[-1500:],
                             "cluster_logs": str(logs) if logs else None})
                        log(f"  flink bench {size:>9,} round {round_no} {key:<16} FAILED: {str(e)[-300:]}")
                        continue
                    rows[key].append(row)
                    log(f"  flink bench {size:>9,} round {round_no} {key:<16} {row['wall_s']:8.2f}s "
                        f"CPU {row['cpu_s']:7.1f}s tree RSS {row['tree_peak_rss_mb']:7,.0f} MB "
                        f"load {os.getloadavg()[0]:.2f}; CPU by kind "
                        + ", ".join(f"{k} {v:.1f}" for k, v in row["cpu_s_by_kind"].items())
                        + (f"; spill peak {row['peak_spill_mb']:,.0f} MB" if "peak_spill_mb" in row else "")
                        + f"; output {row['output_mb']:,.0f} MB")
            rows = {key: rs for key, rs in rows.items() if rs}
            check_same_evaluations(rows, f" at {size}")
            for key, rs in rows.items():
                result["points"].append({
                    "size": size, "candidates": archive.candidates_in, "sources": archive.sources,
                    "config": key, "runs": len(rs),
                    **{m: summary([r[m] for r in rs]) for m in ("wall_s", "cpu_s", "rate", "tree_peak_rss_mb",
                                                                "output_mb")},
                    **({"peak_spill_mb": summary([r["peak_spill_mb"] for r in rs])}
                       if all("peak_spill_mb" in r for r in rs) else {}),
                    "input_mb": archive.input_bytes / 2**20,
                    "peak_rss_mb_by_kind": {k: max(r["peak_rss_mb_by_kind"].get(k, 0) for r in rs)
                                            for k in KINDS if any(k in r["peak_rss_mb_by_kind"] for r in rs)},
                    "cpu_s_by_kind": {k: summary([r["cpu_s_by_kind"].get(k, 0.0) for r in rs])["median"]
                                      for k in KINDS if any(k in r["cpu_s_by_kind"] for r in rs)},
                    "pool_workers_started": [r["pool_workers_started"] for r in rs],
                    "pool_workers": [r.get("pool_workers") for r in rs],
                    **({"thread_cpu_s": [r["thread_cpu_s"] for r in rs]} if threads else {}),
                    "load1_after": [r["load1_after"] for r in rs]})
        for key in compare_configs:
            for size in sizes:
                try:
                    result.setdefault("compare", []).append(compare_once(CONFIGS[key], size, cache, scratch, flink,
                                                                         log, timeout_s))
                except SystemExit as e:
                    result.setdefault("failures", []).append({"size": size, "config": key, "round": "compare",
                                                              "error": str(e)[-1500:], "cluster_logs": None})
                    log(f"  compare bench {size:>9,} {key:<16} FAILED: {str(e)[-300:]}")
        if flink is not None:
            result["flink"] = {"version": flink.version, "jar": flink.jar, "route": flink.route,
                               "cluster_starts": flink.cluster_starts,
                               "taskmanager_memory": flink.taskmanager_memory}
        result["output_format"] = output_format
    finally:
        if flink is not None:
            flink.close()
    return result


# ------------------------------------------------------------------ report --


def tables(result: dict) -> str:
    if "unavailable" in result:
        return f"Flink not measurable on this machine: {result['unavailable']}"
    rows, kinds, cpu_kinds, threads = [], [], [], []
    by_size: dict[int, dict[str, dict]] = {}
    for p in result["points"]:
        by_size.setdefault(p["candidates"], {})[p["config"]] = p
    for candidates, points in by_size.items():
        direct = points.get("direct")
        for key, p in points.items():
            ratio = f"{p['wall_s']['median'] / direct['wall_s']['median']:.2f}" if direct else "-"
            cpu_ratio = f"{p['cpu_s']['median'] / direct['cpu_s']['median']:.2f}" if direct else "-"
            rows.append([f"{candidates:,}", CONFIGS[key].label, spread(p["wall_s"], "{:.1f}"), p["runs"], ratio,
                         f"{p['rate']['median']:,.0f}", f"{p['cpu_s']['median']:.1f}", cpu_ratio,
                         spread(p["tree_peak_rss_mb"])])
            kinds.append([f"{candidates:,}", CONFIGS[key].label,
                          *[f"{p['peak_rss_mb_by_kind'][k]:,.0f}" if k in p["peak_rss_mb_by_kind"] else "-"
                            for k in KINDS]])
            by_kind = p.get("cpu_s_by_kind", {})
            workers = [n for n in p.get("pool_workers_started", []) if n is not None]
            cpu_kinds.append([f"{candidates:,}", CONFIGS[key].label,
                              *[f"{by_kind[k]:.1f}" if k in by_kind else "-" for k in KINDS],
                              f"{max(workers)}" if workers else "-"])
            for run_threads in p.get("thread_cpu_s", [])[-1:]:
                for kind, groups in run_threads.items():
                    top = ", ".join(f"{g} {v:.1f}" for g, v in list(groups.items())[:12])
                    threads.append([f"{candidates:,}", CONFIGS[key].label, kind,
                                    f"{sum(groups.values()):.1f}", top])
    main = markdown_table(["candidates", "configuration", "wall s, median (min–max)", "runs", "x DirectRunner wall",
                           "candidates/s", "CPU s (tree, JVMs incl.)", "x DirectRunner CPU",
                           "peak RSS of the tree, MB"], rows, "llrrrrrrr")
    per_kind = markdown_table(["candidates", "configuration", *[f"{k}, peak MB" for k in KINDS]], kinds,
                              "ll" + "r" * len(KINDS))
    cpu_per_kind = markdown_table(["candidates", "configuration", *[f"{k}, CPU s" for k in KINDS],
                                   "Python workers started"], cpu_kinds, "ll" + "r" * (len(KINDS) + 1))
    sizes_rows, growth = [], []
    by_config: dict[str, list[dict]] = {}
    for p in result["points"]:
        by_config.setdefault(p["config"], []).append(p)
        if "peak_spill_mb" in p:
            sizes_rows.append([f"{p['candidates']:,}", CONFIGS[p["config"]].label, f"{p['input_mb']:,.0f}",
                               f"{p['peak_spill_mb']['median']:,.0f}", f"{p['output_mb']['median']:,.0f}"])
    for key, points in by_config.items():
        if len(points) > 1 and CONFIGS[key].kind == "session":
            small, large = min(points, key=lambda p: p["candidates"]), max(points, key=lambda p: p["candidates"])
            x = lambda a, b: f"{b / a:.1f}x" if a else "-"  # noqa: E731
            kinds_growth = ", ".join(f"{k.split(' (')[0]} {x(small['peak_rss_mb_by_kind'][k], v)}"
                                     for k, v in large["peak_rss_mb_by_kind"].items()
                                     if k in small["peak_rss_mb_by_kind"])
            growth.append([CONFIGS[key].label, f"{small['candidates']:,} → {large['candidates']:,}",
                           x(small["candidates"], large["candidates"]),
                           x(small["wall_s"]["median"], large["wall_s"]["median"]),
                           x(small["cpu_s"]["median"], large["cpu_s"]["median"]),
                           x(small["tree_peak_rss_mb"]["median"], large["tree_peak_rss_mb"]["median"]), kinds_growth,
                           x(small.get("peak_spill_mb", {}).get("median", 0),
                             large.get("peak_spill_mb", {}).get("median", 0)),
                           x(small["output_mb"]["median"], large["output_mb"]["median"])])
    f = result.get("flink") or {}
    notes = [f"Flink {f.get('version')} job server jar: {f.get('route')}."] if f else []
    if f.get("cluster_starts"):
        starts = ", ".join(f"{s:.1f} s ({CONFIGS[key].label})" for key, s in f["cluster_starts"])
        notes.append(f"Session cluster starts (JobManager + TaskManagers until the slots register), not in the "
                     f"wall times; one cluster runs at a time, started for the first configuration that needs it "
                     f"and kept for the next rounds: {starts}. TaskManager process size "
                     f"{f.get('taskmanager_memory') or 'the default of scripts/flink/session_cluster.py'}.")
    for failure in result.get("failures", []):
        error = " ".join(failure["error"].split())[-400:]
        notes.append(f"FAILED: {CONFIGS[failure['config']].label} at {failure['size']:,}, round {failure['round']}: "
                     f"...{error}")
    if result.get("compare"):
        text_compare = compare_table(result["compare"])
    loads = [x for p in result["points"] for x in p["load1_after"]]
    if loads:
        notes.append(f"1-minute load average after each run: {min(loads):.2f}–{max(loads):.2f} on "
                     f"{os.cpu_count()} cores.")
    text = (main + "\n\nCPU by process kind (median over the runs; the job's process tree by sampling, the "
            "long-lived JVMs and the worker pool with the workers it started as the difference of their /proc "
            "counters):\n\n" + cpu_per_kind
            + "\n\nPeak RSS by process kind (each kind's own peak; they need not coincide):\n\n" + per_kind)
    if sizes_rows:
        text += ("\n\nDisk (MB): the archive's uncompressed input; the peak of the session cluster's io.tmp.dirs "
                 "(sort spills and blocking-shuffle files; the blob store with the jobs' jars left out), sampled "
                 "every second; the output folder (" + result.get("output_format", "jsonl") + "):\n\n"
                 + markdown_table(["candidates", "configuration", "input (uncompressed)", "spill + shuffle, peak",
                                   "output"], sizes_rows, "llrrr"))
    if growth:
        text += ("\n\nGrowth with the input, same configuration (largest size over smallest):\n\n"
                 + markdown_table(["configuration", "candidates", "input", "wall", "CPU", "peak RSS of the tree",
                                   "peak RSS by kind", "spill peak", "output"], growth, "llrrrrlrr"))
    if threads:
        text += ("\n\nCPU by JVM thread group (the last run; threads named alike summed, numbers dropped):\n\n"
                 + markdown_table(["candidates", "configuration", "JVM", "CPU s", "largest thread groups, CPU s"],
                                  threads, "lllrl"))
    if result.get("compare"):
        text += ("\n\ncompare of the revision's two runs (bench.backfill's archive before and after its backfill, "
                 f"{COMPARE_FORMAT} runs), on the same launch as the job:\n\n" + text_compare)
    return text + "\n\n" + "\n".join(f"- {n}" for n in notes)


FORMAT_NAMES = {"jsonl": "JSON Lines", "avro": "Avro", "parquet": "Parquet"}


def section(sizes: list[int], configs: list[str], runs: int, cache: Path, scratch: Path, report: dict, log,
            taskmanager_memory: str | None = None, threads: bool = False, output_format: str = "jsonl",
            timeout_s: float | None = None, single_run_from: int = 500_000,
            compare_configs: tuple[str, ...] = ()) -> str:
    log(f"flink side by side over {sizes}: {', '.join(configs)}")
    result = run(sizes, configs, runs, cache, scratch / "flink", log, large=single_run_from,
                 taskmanager_memory=taskmanager_memory, threads=threads, output_format=output_format,
                 timeout_s=timeout_s, compare_configs=compare_configs)
    report["flink"] = result
    return f"## Flink beside the DirectRunner ({FORMAT_NAMES[output_format]} outputs)\n\n" + tables(result)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.flink", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="100000", help="candidate counts, e.g. 100000,1000000")
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"of {', '.join(CONFIGS)}")
    p.add_argument("--runs", type=int, default=3, help="interleaved rounds (sizes from --single-run-from run once)")
    p.add_argument("--single-run-from", type=int, default=500_000,
                   help="sizes from this many candidates run once, whatever --runs says (default 500,000)")
    p.add_argument("--cache", type=Path, default=REPO / "out" / "bench" / "cache")
    p.add_argument("--results", type=Path, default=REPO / "out" / "bench")
    p.add_argument("--taskmanager-memory", help="the session cluster's TaskManager process size (e.g. 6g); "
                   "default: scripts/flink/session_cluster.py's")
    p.add_argument("--output-format", default="jsonl", choices=sorted(FORMAT_NAMES),
                   help="the job's output format (default jsonl)")
    p.add_argument("--timeout", type=float, help="seconds a run may take before it is killed and recorded as "
                   "failed (a Flink job whose stage output outgrows Beam's data plane waits for ever)")
    p.add_argument("--threads", action="store_true",
                   help="also CPU per JVM thread group (JIT compilers, GC, Flink tasks, gRPC): where a JVM's CPU goes")
    p.add_argument("--compare-configs", default="",
                   help="also, on each of these configurations, the revision's two runs and compare of them at every "
                        "size, once (bench.backfill's archives; make bench-10m: flink-session-2tm)")
    args = p.parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    configs = [c for c in args.configs.split(",") if c]
    compare_configs = tuple(c for c in args.compare_configs.split(",") if c)
    unknown = [c for c in (*configs, *compare_configs) if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configuration(s) {unknown}; known: {', '.join(CONFIGS)}")
    report: dict = {"load_before": os.getloadavg()}
    text = section([int(s) for s in args.sizes.split(",") if s.strip()], configs, args.runs, args.cache,
                   args.results / "scratch", report, log, args.taskmanager_memory, args.threads,
                   args.output_format, args.timeout, args.single_run_from, compare_configs)
    report["load_after"] = os.getloadavg()
    args.results.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (args.results / f"flink-{stamp}.json").write_text(json.dumps(report, indent=1, default=str))
    (args.results / "flink-latest.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
