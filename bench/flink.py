"""Flink beside the DirectRunner: the job on embedded Flink and on a session cluster.

    .venv/bin/python -m bench.flink                          # 100k candidates, 3 rounds
    .venv/bin/python -m bench.flink --sizes 100000,1000000 --runs 1
    (``make bench`` runs this as its "Flink" section.)

Configurations, each run as its own child process on the same cached
archive, rounds interleaved so machine load drifts over all of them alike:

- ``direct``, ``direct-mp2``: the DirectRunner in-process and with two
  multi-processing workers (the same as bench.run's, measured again here so
  the comparison is side by side);
- ``flink-local``: ``--flink_master=[local] --parallelism=2
  --environment_type=LOOPBACK``, the job server JVM with its embedded
  mini-cluster as a child of the job, Python work in the job's process;
- ``flink-local-ext``: the same with the Python workers out of process
  (EXTERNAL, a loopback worker pool, ``--sdk_worker_parallelism=2``);
- ``flink-session``: a standalone session cluster (JobManager and TaskManager
  JVMs, started once for the section and not counted in the wall time: its
  start is reported on its own) with the worker pool: the launch
  docs/running.md gives for real runs.

Wall time is the job's process from start to exit. CPU time and peak RSS
are of the whole process tree, JVMs included: the job and its descendants
(wait4 and /proc sampling, bench.procs) plus, for the configurations that use
them, the long-lived JobManager, TaskManager and worker pool (CPU as the
difference of their /proc counters, children they reaped included; RSS
sampled together with the job's tree). Peak RSS is also broken down by
process kind, to show what Flink holds and how it grows with the input.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.archive import REPO, Archive, ArchiveSpec, ensure_archive
from bench.procs import SAMPLE_SECONDS, _children_map, _rss_kb, job_failure
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


CONFIGS = {c.key: c for c in (
    FlinkConfig("direct", "DirectRunner in-process (FnApiRunner)", "direct"),
    FlinkConfig("direct-mp2", "DirectRunner, 2 workers (multi_processing)", "direct",
                extra=("--direct_num_workers=2", "--direct_running_mode=multi_processing")),
    FlinkConfig("flink-local", "Flink `[local]` p=2, LOOPBACK", "local"),
    FlinkConfig("flink-local-ext", "Flink `[local]` p=2, worker pool (EXTERNAL)", "local", pool=True),
    FlinkConfig("flink-session", "Flink session cluster p=2, worker pool (EXTERNAL)", "session", pool=True),
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


class _Sampler(threading.Thread):
    """Peak RSS of the job's tree plus the long-lived roots, in total and per process kind."""

    def __init__(self, job_pid: int, roots: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.job_pid, self.roots = job_pid, roots
        self.peak_total_kb = 0
        self.peak_kb = {kind: 0 for kind in KINDS}
        self.job_ticks: dict[int, int] = {}  # last seen own CPU of every process of the job's tree
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE_SECONDS):
            children = _children_map()
            kb = dict.fromkeys(KINDS, 0)
            for pid in _tree(self.job_pid, children):
                kind = KINDS[1] if _is_java(pid) else KINDS[0]
                kb[kind] += _rss_kb(pid)
                self.job_ticks[pid] = max(self.job_ticks.get(pid, 0), _own_ticks(pid))
            for kind, root in self.roots.items():
                kb[kind] += sum(_rss_kb(pid) for pid in _tree(root, children))
            self.peak_total_kb = max(self.peak_total_kb, sum(kb.values()))
            for kind, value in kb.items():
                self.peak_kb[kind] = max(self.peak_kb[kind], value)


def measure(argv: list[str], roots: dict[str, int], timeout_s: float | None = None) -> dict:
    """Run argv; wall, CPU and peak RSS of its tree plus the given long-lived roots."""
    import tempfile

    before = {kind: _cpu_ticks(pid) for kind, pid in roots.items()}
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        sampler = _Sampler(proc.pid, roots)
        sampler.start()
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if timeout_s is not None and time.perf_counter() - started > timeout_s:
                proc.kill()
            time.sleep(0.02)
        wall = time.perf_counter() - started
        sampler.done.set()
        sampler.join()
        out.seek(0)
        tail = out.read()[-4000:].decode("utf-8", "replace")
    # wait4 counts the job and the descendants it reaped; a job server JVM that
    # outlives its parent's wait is missed there but not by the sampler (which
    # in turn misses up to one sampling interval per process): take the larger.
    cpu = max(usage.ru_utime + usage.ru_stime, sum(sampler.job_ticks.values()) / _CLK)
    cpu += sum(_cpu_ticks(pid) - before[kind] for kind, pid in roots.items()) / _CLK
    return {"returncode": os.waitstatus_to_exitcode(status), "wall_s": wall, "cpu_s": cpu,
            "tree_peak_rss_mb": sampler.peak_total_kb / 1024,
            "peak_rss_mb_by_kind": {k: v / 1024 for k, v in sampler.peak_kb.items() if v},
            "output_tail": tail}


# ------------------------------------------------------------------ setting --


@dataclass
class Flink:
    """What the Flink configurations share: the jar, and (once started) a cluster and a pool."""

    jar: str
    version: str
    route: str
    work: Path
    cluster: object | None = None
    cluster_start_s: float | None = None
    pool_port: int | None = None
    pool_pid: int | None = None
    taskmanager_memory: str | None = None  # the session cluster's TaskManager process size; None: its default
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def args(self, config: FlinkConfig) -> list[str]:
        master = "[local]" if config.kind == "local" else self.cluster.flink_master
        args = ["--runner=FlinkRunner", f"--flink_master={master}", f"--flink_version={self.version}",
                f"--flink_job_server_jar={self.jar}", "--parallelism=2"]
        if config.pool:
            return [*args, "--environment_type=EXTERNAL", f"--environment_config=localhost:{self.pool_port}",
                    "--sdk_worker_parallelism=2"]
        return [*args, "--environment_type=LOOPBACK"]

    def roots(self, config: FlinkConfig) -> dict[str, int]:
        roots = {}
        if config.kind == "session":
            roots[KINDS[2]] = self.cluster.jobmanager_pid
            roots[KINDS[3]] = self.cluster.taskmanager_pid
        if config.pool:
            roots[KINDS[4]] = self.pool_pid
        return roots

    def ensure_pool(self) -> None:
        if self.pool_pid is None:
            pool = _load_flink_script("worker_pool")
            cluster_mod = _load_flink_script("session_cluster")
            self.pool_port = cluster_mod._free_port()
            self._stack.enter_context(pool.worker_pool(self.pool_port, log_file=self.work / "worker-pool.log"))
            # The pool process is the one listening; find it among our children.
            self.pool_pid = next(pid for pid in _children_map().get(os.getpid(), [])
                                 if "worker_pool.py" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"))

    def ensure_cluster(self) -> None:
        if self.cluster is None:
            cluster_mod = _load_flink_script("session_cluster")
            started = time.perf_counter()
            self.cluster = self._stack.enter_context(
                cluster_mod.session_cluster(rest_port=cluster_mod._free_port(), flink_version=self.version,
                                            **({"taskmanager_memory": self.taskmanager_memory}
                                               if self.taskmanager_memory else {})))
            self.cluster_start_s = time.perf_counter() - started

    def close(self) -> None:
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


def command(config: FlinkConfig, archive: Archive, output: Path, flink: Flink | None) -> list[str]:
    argv = [PY, "-m", "pipelines.reprocess", "--transcripts", archive.transcripts_glob,
            "--candidates", archive.candidates_glob, "--output", str(output), "--output-format", "jsonl",
            *config.extra]
    return argv + (flink.args(config) if config.kind != "direct" else [])


def run_once(config: FlinkConfig, archive: Archive, scratch: Path, flink: Flink | None) -> dict:
    output = scratch / config.key
    shutil.rmtree(output, ignore_errors=True)
    if config.pool:
        flink.ensure_pool()
    if config.kind == "session":
        flink.ensure_cluster()
    m = measure(command(config, archive, output, flink), flink.roots(config) if flink and config.kind != "direct" else {})
    if m["returncode"] != 0:
        raise SystemExit(job_failure(config.key, output, m["returncode"], m["output_tail"]))
    manifest = json.loads((output / "manifest.json").read_bytes())
    c = manifest["conservation"]
    if not c["holds"] or c["candidates_in"] != archive.candidates_in:
        raise SystemExit(f"{config.key}: conservation does not hold: {c}")
    shutil.rmtree(output, ignore_errors=True)
    del m["output_tail"], m["returncode"]
    return {**m, "rate": archive.candidates_in / m["wall_s"], "evaluations": c["evaluations"],
            "load1_after": os.getloadavg()[0]}


def run(sizes: list[int], configs: list[str], runs: int, cache: Path, scratch: Path, log,
        large: int = 500_000, taskmanager_memory: str | None = None) -> dict:
    """Every size, every configuration, interleaved rounds (sizes >= large run once)."""
    scratch.mkdir(parents=True, exist_ok=True)
    needs_flink = any(CONFIGS[c].kind != "direct" for c in configs)
    flink = obtain_flink(scratch, log, taskmanager_memory) if needs_flink else None
    if isinstance(flink, str):
        log(f"flink: not measurable here: {flink}")
        return {"unavailable": flink}
    result: dict = {"points": [], "flink": None}
    try:
        for size in sizes:
            archive = ensure_archive(ArchiveSpec.at_density(size), cache, log)
            rows: dict[str, list[dict]] = {c: [] for c in configs}
            for round_no in range(1, (runs if size < large else 1) + 1):
                for key in round_order(configs, round_no):
                    try:
                        row = run_once(CONFIGS[key], archive, scratch, flink)
                    except SystemExit as e:  # one failed run is a finding, not the end of the section
                        result.setdefault("failures", []).append(
                            {"size": size, "config": key, "round": round_no, "error": str(e)[-1500:]})
                        log(f"  flink bench {size:>9,} round {round_no} {key:<16} FAILED: {str(e)[-300:]}")
                        continue
                    rows[key].append(row)
                    log(f"  flink bench {size:>9,} round {round_no} {key:<16} {row['wall_s']:8.2f}s "
                        f"CPU {row['cpu_s']:7.1f}s tree RSS {row['tree_peak_rss_mb']:7,.0f} MB "
                        f"load {os.getloadavg()[0]:.2f}")
            rows = {key: rs for key, rs in rows.items() if rs}
            check_same_evaluations(rows, f" at {size}")
            for key, rs in rows.items():
                result["points"].append({
                    "size": size, "candidates": archive.candidates_in, "sources": archive.sources,
                    "config": key, "runs": len(rs),
                    **{m: summary([r[m] for r in rs]) for m in ("wall_s", "cpu_s", "rate", "tree_peak_rss_mb")},
                    "peak_rss_mb_by_kind": {k: max(r["peak_rss_mb_by_kind"].get(k, 0) for r in rs)
                                            for k in KINDS if any(k in r["peak_rss_mb_by_kind"] for r in rs)},
                    "load1_after": [r["load1_after"] for r in rs]})
        if flink is not None:
            result["flink"] = {"version": flink.version, "jar": flink.jar, "route": flink.route,
                               "cluster_start_s": flink.cluster_start_s,
                               "taskmanager_memory": flink.taskmanager_memory}
    finally:
        if flink is not None:
            flink.close()
    return result


# ------------------------------------------------------------------ report --


def tables(result: dict) -> str:
    if "unavailable" in result:
        return f"Flink not measurable on this machine: {result['unavailable']}"
    rows, kinds = [], []
    by_size: dict[int, dict[str, dict]] = {}
    for p in result["points"]:
        by_size.setdefault(p["candidates"], {})[p["config"]] = p
    for candidates, points in by_size.items():
        direct = points.get("direct")
        for key, p in points.items():
            ratio = f"{p['wall_s']['median'] / direct['wall_s']['median']:.2f}" if direct else "-"
            rows.append([f"{candidates:,}", CONFIGS[key].label, spread(p["wall_s"], "{:.1f}"), p["runs"], ratio,
                         f"{p['rate']['median']:,.0f}", f"{p['cpu_s']['median']:.1f}",
                         spread(p["tree_peak_rss_mb"])])
            kinds.append([f"{candidates:,}", CONFIGS[key].label,
                          *[f"{p['peak_rss_mb_by_kind'][k]:,.0f}" if k in p["peak_rss_mb_by_kind"] else "-"
                            for k in KINDS]])
    main = markdown_table(["candidates", "configuration", "wall s, median (min–max)", "runs", "x DirectRunner wall",
                           "candidates/s", "CPU s (tree, JVMs incl.)", "peak RSS of the tree, MB"], rows, "llrrrrrr")
    per_kind = markdown_table(["candidates", "configuration", *[f"{k}, peak MB" for k in KINDS]], kinds,
                              "ll" + "r" * len(KINDS))
    f = result.get("flink") or {}
    notes = [f"Flink {f.get('version')} job server jar: {f.get('route')}."] if f else []
    if f.get("cluster_start_s") is not None:
        notes.append(f"Session cluster start (JobManager + TaskManager until the slots register), once for the "
                     f"section, not in the wall times: {f['cluster_start_s']:.1f} s; TaskManager process size "
                     f"{f.get('taskmanager_memory') or 'the default of scripts/flink/session_cluster.py'}.")
    for failure in result.get("failures", []):
        error = " ".join(failure["error"].split())[-400:]
        notes.append(f"FAILED: {CONFIGS[failure['config']].label} at {failure['size']:,}, round {failure['round']}: "
                     f"...{error}")
    loads = [x for p in result["points"] for x in p["load1_after"]]
    if loads:
        notes.append(f"1-minute load average after each run: {min(loads):.2f}–{max(loads):.2f} on "
                     f"{os.cpu_count()} cores.")
    return (main + "\n\nPeak RSS by process kind (each kind's own peak; they need not coincide):\n\n" + per_kind
            + "\n\n" + "\n".join(f"- {n}" for n in notes))


def section(sizes: list[int], configs: list[str], runs: int, cache: Path, scratch: Path, report: dict, log,
            taskmanager_memory: str | None = None) -> str:
    log(f"flink side by side over {sizes}: {', '.join(configs)}")
    result = run(sizes, configs, runs, cache, scratch / "flink", log, taskmanager_memory=taskmanager_memory)
    report["flink"] = result
    return "## Flink beside the DirectRunner (JSON Lines outputs)\n\n" + tables(result)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.flink", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="100000", help="candidate counts, e.g. 100000,1000000")
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"of {', '.join(CONFIGS)}")
    p.add_argument("--runs", type=int, default=3, help="interleaved rounds (sizes of 500,000 or more run once)")
    p.add_argument("--cache", type=Path, default=REPO / "out" / "bench" / "cache")
    p.add_argument("--results", type=Path, default=REPO / "out" / "bench")
    p.add_argument("--taskmanager-memory", help="the session cluster's TaskManager process size (e.g. 6g); "
                   "default: scripts/flink/session_cluster.py's")
    args = p.parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configuration(s) {unknown}; known: {', '.join(CONFIGS)}")
    report: dict = {"load_before": os.getloadavg()}
    text = section([int(s) for s in args.sizes.split(",") if s.strip()], configs, args.runs, args.cache,
                   args.results / "scratch", report, log, args.taskmanager_memory)
    report["load_after"] = os.getloadavg()
    args.results.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (args.results / f"flink-{stamp}.json").write_text(json.dumps(report, indent=1, default=str))
    (args.results / "flink-latest.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
