"""Run one measured command as a child process: wall time, CPU time, peak RSS of its tree.

Peak memory is taken two ways, because neither alone is right for a
multi-process job:

* ``tree_peak_rss``: every ``SAMPLE_SECONDS`` the sampler walks ``/proc`` for
  the child and all its descendants (Beam's multi-processing workers are
  separate ``python`` processes started by the runner) and sums their
  ``VmRSS``; the peak of that sum is reported. It sees the whole tree at
  once, but can miss a spike shorter than the sampling interval.
* ``max_process_rss``: ``os.wait4`` returns the kernel's ``ru_maxrss`` for
  the child, which on Linux is the maximum over the child and every
  descendant it reaped. It is exact and sees every spike, but it is the
  largest *single* process, not the sum.

For a one-process configuration the two agree (up to the sampler's miss);
for a multi-process one the sum is the number that matters and the kernel
figure is its lower bound. Linux only (``/proc``); no third-party package.
"""

from __future__ import annotations

import compileall
import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SAMPLE_SECONDS = 0.1
REPO = Path(__file__).resolve().parent.parent
SOURCE_PACKAGES = ("domain", "transforms", "pipelines", "runners", "bench")
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float  # user + system of the child and its reaped descendants
    tree_peak_rss_mb: float
    max_process_rss_mb: float
    peak_processes: int
    returncode: int
    stdout: str
    stderr: str


def children_map() -> dict[int, list[int]]:
    """ppid -> [pid] for every process visible in /proc (one cheap pass)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # exited between listdir and open
        # The command name (field 2) may hold spaces and ')': split after the last ')'.
        fields = stat[stat.rfind(b")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(name))
    return children


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE_KB
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss_kb(root: int) -> tuple[int, int]:
    """(sum of RSS in KiB, number of processes) over ``root`` and its descendants."""
    children = children_map()
    total, count, todo = 0, 0, [root]
    while todo:
        pid = todo.pop()
        total += _rss_kb(pid)
        count += 1
        todo.extend(children.get(pid, ()))
    return total, count


class _Sampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kb = 0
        self.peak_processes = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE_SECONDS):
            kb, count = tree_rss_kb(self.pid)
            self.peak_kb = max(self.peak_kb, kb)
            self.peak_processes = max(self.peak_processes, count)


@cache
def checkout_bytecode(repo: Path = REPO) -> None:
    """The checkout's modules compiled to bytecode once, before anything is measured.

    An installed package has its bytecode (pip compiles it at install); an
    editable install writes it on first import, unless PYTHONDONTWRITEBYTECODE
    is set (as on this workplace's machines), when every run compiles every
    module again: about 0.1 s more for the job than for the loop, a cost no
    deployed run pays.
    """
    for package in SOURCE_PACKAGES:
        compileall.compile_dir(repo / package, quiet=1)


def measure(argv: list[str], *, cwd: str | None = None, env: dict | None = None, timeout: float | None = None) -> Measured:
    """Run ``argv`` to completion and measure it (stdout/stderr captured to temp files)."""
    import tempfile

    checkout_bytecode()

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err)
        sampler = _Sampler(proc.pid)
        sampler.start()
        deadline = None if timeout is None else started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.perf_counter() > deadline:
                proc.kill()
            time.sleep(0.02)
        wall = time.perf_counter() - started
        sampler.done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Measured(
            wall_s=wall,
            cpu_s=usage.ru_utime + usage.ru_stime,
            tree_peak_rss_mb=sampler.peak_kb / 1024,
            max_process_rss_mb=usage.ru_maxrss / 1024,
            peak_processes=sampler.peak_processes,
            returncode=proc.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
        )


def job_failure(label: str, output, returncode: int, tail: str) -> str:
    """Why a job run failed, for the bench's log: exit status 2 with a manifest is the job
    saying its conservation does not hold (the figures say what went missing)."""
    manifest_path = Path(output) / "manifest.json"
    if returncode == 2 and manifest_path.exists():
        manifest = json.loads(manifest_path.read_bytes())
        return (f"{label}: conservation does not hold: {manifest['conservation']}; transcripts: "
                f"{manifest['transcript_conservation']} (outputs kept in {output})")
    return f"{label} failed with exit code {returncode}:\n{tail}"


def code_version() -> str:
    """The commit measured, and whether the tree had uncommitted changes."""
    checkout = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=checkout, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return commit + (" with uncommitted changes" if dirty.strip() else "")
