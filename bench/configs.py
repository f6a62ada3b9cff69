"""The configurations the benchmarks measure (the domain loop, the job in-process and on workers), how
each is launched, and one measured run of one: shared by ``bench.run``, ``bench.peers`` and
``bench.instructions`` (none of which imports another)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.archive import REPO, Archive
from bench.procs import Measured, job_failure, measure

PY = sys.executable


@dataclass(frozen=True)
class Config:
    key: str
    label: str
    job: bool  # the Beam job (else the domain loop)
    extra: tuple[str, ...] = ()


CONFIGS = {
    "loop": Config("loop", "domain loop (process_source per source, 1 process)", False),
    "loop-gc": Config("loop-gc", "domain loop, garbage collector not paused", False, ("--gc", "auto")),
    "direct": Config("direct", "job, DirectRunner in-process (FnApiRunner)", True),
    "direct-quiet": Config("direct-quiet", "job in-process, progress logging off (`--progress-seconds 0`)", True,
                           ("--progress-seconds", "0")),
    "direct-mp2": Config("direct-mp2", "job, 2 workers (multi_processing)", True,
                         ("--direct_num_workers=2", "--direct_running_mode=multi_processing")),
    "direct-mp1": Config("direct-mp1", "job, 1 worker (multi_processing)", True,
                         ("--direct_num_workers=1", "--direct_running_mode=multi_processing")),
}
# Configurations that cannot run here, with why (label, reason). Flink has its own section (bench.flink).
NOT_MEASURABLE: dict[str, tuple[str, str]] = {}


def command(config: Config, archive: Archive, output: Path, fmt: str) -> list[str]:
    common = ["--transcripts", archive.transcripts_glob, "--candidates", archive.candidates_glob,
              "--output", str(output), "--output-format", fmt]
    if config.job:
        return [PY, "-m", "pipelines.reprocess", *common, *config.extra]
    return [PY, "-m", "bench.loop", *common, *config.extra]


def run_once(config: Config, archive: Archive, fmt: str, scratch: Path) -> dict:
    output = scratch / f"{config.key}-{fmt}"
    shutil.rmtree(output, ignore_errors=True)
    m: Measured = measure(command(config, archive, output, fmt), cwd=str(REPO))
    if m.returncode != 0:
        raise SystemExit(job_failure(f"{config.key} ({fmt})", output, m.returncode, m.stderr[-3000:]))
    row = {"wall_s": m.wall_s, "cpu_s": m.cpu_s, "tree_peak_rss_mb": m.tree_peak_rss_mb,
           "max_process_rss_mb": m.max_process_rss_mb, "processes": m.peak_processes,
           "rate": archive.candidates_in / m.wall_s, "load1_after": os.getloadavg()[0]}
    if config.job:
        manifest = json.loads((output / "manifest.json").read_bytes())
        c = manifest["conservation"]
        if not c["holds"] or c["candidates_in"] != archive.candidates_in:
            raise SystemExit(f"{config.key} ({fmt}): conservation does not hold: {c}")
        row["evaluations"] = c["evaluations"]
    else:
        detail = json.loads(m.stdout.strip().splitlines()[-1])
        row.update(evaluations=detail["evaluations"], loop=detail)
    shutil.rmtree(output, ignore_errors=True)
    return row


