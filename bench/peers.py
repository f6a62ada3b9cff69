"""The job beside a peer engine: PySpark ``local[2]`` doing the same domain work.

    .venv/bin/python -m bench.peers                            # 100k candidates, 3 rounds
    .venv/bin/python -m bench.peers --sizes 100000,1000000 --runs 1
    (``make bench`` runs this as its "Peers" section; ``make bench-peers`` alone.)

Configurations, each its own child process on the same cached archive, rounds
interleaved so machine load drifts over all of them alike:

- ``loop``, ``direct``, ``direct-mp2``: the domain loop and the job in-process
  and on two multi-processing workers (bench.run's configurations, measured
  again here so the comparison is side by side);
- ``spark-p<N>``: ``bench.spark_peer`` in the peers' own environment
  (``.venv-peers``, bench/requirements-peers.txt): PySpark ``local[2]``, RDD
  ``cogroup`` by source into N partitions, one domain call per source, JSON
  Lines out. Several N are run; the peer is credited with its best.

Wall time and CPU time are of the whole process tree (the driver, its JVM and
the Python workers the JVM starts); peak RSS is the sum over that tree
(bench.procs). The peer's environment is installed on demand: without it,
this section says how to install it instead of failing the whole bench.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from bench.archive import REPO, Archive, ArchiveSpec, ensure_archive
from bench.procs import measure
from bench.stats import check_same_evaluations, markdown_table, round_order, spread, summary
from bench.targets import BEAM_TARGET, beam_part_of, beam_part_row, pyspark_row

PEERS_PY = REPO / ".venv-peers" / "bin" / "python"
INSTALL_HINT = "`make bench-peers` (or `make peers-env`) installs PySpark into .venv-peers"
JOB_CONFIGS = ("loop", "direct", "direct-mp2")


def spark_available() -> str | None:
    """None when the peer can run, else why not."""
    if not PEERS_PY.exists():
        return f"no peers environment at {PEERS_PY.parent.parent.name}: {INSTALL_HINT}"
    if shutil.which("java") is None:
        return "PySpark needs Java 17 on PATH"
    return None


def spark_command(archive: Archive, output: Path, partitions: int) -> list[str]:
    return [str(PEERS_PY), "-m", "bench.spark_peer", "--transcripts", archive.transcripts_glob,
            "--candidates", archive.candidates_glob, "--output", str(output), "--master", "local[2]",
            "--partitions", str(partitions)]


def run_spark(archive: Archive, name: str, scratch: Path) -> dict:
    """``name`` is ``spark-p<N>``: N cogroup partitions."""
    partitions = int(name[len("spark-p"):])
    output = scratch / name
    shutil.rmtree(output, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    m = measure(spark_command(archive, output, partitions), cwd=str(REPO), env=env)
    if m.returncode != 0:
        raise SystemExit(f"{name} failed with exit code {m.returncode}:\n{m.stderr[-3000:]}")
    detail = json.loads(m.stdout.strip().splitlines()[-1])
    if detail["candidates"] != archive.candidates_in:
        raise SystemExit(f"{name} saw {detail['candidates']} candidates, the archive holds {archive.candidates_in}")
    shutil.rmtree(output, ignore_errors=True)
    return {"wall_s": m.wall_s, "cpu_s": m.cpu_s, "tree_peak_rss_mb": m.tree_peak_rss_mb,
            "max_process_rss_mb": m.max_process_rss_mb, "processes": m.peak_processes,
            "rate": archive.candidates_in / m.wall_s, "load1_after": os.getloadavg()[0],
            "evaluations": detail["evaluations"], "spark": detail}


def run(sizes: list[int], configs: list[str], partitions: list[int], runs: int, cache: Path, scratch: Path,
        log) -> dict:
    from bench.configs import CONFIGS, run_once

    missing = spark_available()
    points = []
    for size in sizes:
        archive = ensure_archive(ArchiveSpec.at_density(size), cache, log)
        names = [c for c in configs if c in JOB_CONFIGS] + ([] if missing else [f"spark-p{n}" for n in partitions])
        rows: dict[str, list[dict]] = {name: [] for name in names}
        for round_no in range(1, (runs if size < 500_000 else 1) + 1):
            for name in round_order(names, round_no):
                if name.startswith("spark-p"):
                    row = run_spark(archive, name, scratch)
                else:
                    row = run_once(CONFIGS[name], archive, "jsonl", scratch)
                rows[name].append(row)
                log(f"  peers {size:>9,} round {round_no} {name:<11} {row['wall_s']:7.2f}s "
                    f"{row['rate']:8,.0f} cand/s  tree RSS {row['tree_peak_rss_mb']:7,.0f} MB  "
                    f"load {os.getloadavg()[0]:.2f}")
        check_same_evaluations(rows, f" at {size}")
        summaries = {name: {metric: summary([r[metric] for r in rs])
                            for metric in ("wall_s", "cpu_s", "rate", "tree_peak_rss_mb", "load1_after")}
                     | {"processes": max(r["processes"] for r in rs)}
                     for name, rs in rows.items()}
        points.append({"size": size, "candidates": archive.candidates_in, "sources": archive.sources,
                       "summaries": summaries, "raw": rows})
    return {"points": points, "not_measurable": missing}


LABELS = {
    "loop": "domain loop (1 process)",
    "direct": "job, in-process (FnApiRunner)",
    "direct-mp2": "job, 2 workers (multi_processing)",
}


def label(name: str) -> str:
    return LABELS.get(name) or f"PySpark `local[2]`, cogroup into {name[len('spark-p'):]} partitions"


def best_spark(summaries: dict) -> str | None:
    """The fastest PySpark configuration."""
    sparks = [name for name in summaries if name.startswith("spark-p")]
    return max(sparks, key=lambda name: summaries[name]["rate"]["median"]) if sparks else None


def tables(result: dict) -> str:
    parts = []
    for point in result["points"]:
        s = point["summaries"]
        best = best_spark(s)
        rows = []
        for name, m in s.items():
            text = label(name) + (" (best)" if name == best else "")
            ratio = f"{m['rate']['median'] / s[best]['rate']['median']:.2f}" if best else "-"
            # PySpark's JVM and its Python workers are not reaped by the driver: wait4 cannot see their CPU.
            cpu = "n/a" if name.startswith("spark-p") else f"{m['cpu_s']['median']:.1f}"
            rows.append([text, spread(m["wall_s"], "{:.2f}"), spread(m["rate"]), ratio, cpu,
                         spread(m["tree_peak_rss_mb"]), m["processes"], f"{m['load1_after']['median']:.2f}"])
        parts.append(f"{point['candidates']:,} candidates, {point['sources']} sources, "
                     f"{len(next(iter(point['raw'].values())))} interleaved round(s), JSON Lines outputs.\n\n"
                     + markdown_table(["configuration", "wall s, median (min–max)", "candidates/s",
                                       "x best PySpark", "CPU s", "peak RSS of the tree, MB", "processes",
                                       "1-min load after"], rows, "lrrrrrrr"))
    parts.append("CPU s is user + system time of the process and the descendants it reaped (n/a for PySpark, "
                 "whose JVM and Python workers the driver does not reap). Peak RSS is the sum over the whole "
                 "process tree, JVM included.")
    if result["not_measurable"]:
        parts.append(f"PySpark not measured: {result['not_measurable']}.")
    return "\n\n".join(parts)


def round_ratios(raw: dict, numerator: str, denominator: str) -> list[float]:
    """Rate of ``numerator`` over ``denominator`` in each round: the machine's speed drifts between
    rounds, so a ratio within one round compares runs made minutes apart, not a quarter hour."""
    return [a["rate"] / b["rate"] for a, b in zip(raw[numerator], raw[denominator])]


def ratio_text(point: dict, numerator: str, denominator: str) -> tuple[float, str]:
    """The ratio of the two median rates (what the targets are judged on), and as text with the
    range of the same ratio within each round when there were several."""
    s = point["summaries"]
    r = s[numerator]["rate"]["median"] / s[denominator]["rate"]["median"]
    within = round_ratios(point["raw"], numerator, denominator)
    extra = f" (within rounds {min(within):.2f}–{max(within):.2f}x)" if len(within) > 1 else ""
    return r, f"{r:.3f}x{extra}"  # three places: 0.848x is not met, where "0.85x" would read as met


def targets(result: dict, beam_part: tuple[float, float] | None = None) -> list[list[str]]:
    """The targets in force (bench.targets; JSON Lines, medians of this section's interleaved rounds), and the
    ratios they replaced as figures only. ``beam_part``: (Beam's own part, the loop's) instructions per
    candidate, from the instruction section when it ran."""
    rows = []
    for point in result["points"]:
        s = point["summaries"]
        loop, direct, mp2 = JOB_CONFIGS
        best = best_spark(s)
        at = f"at {point['candidates']:,}"
        if best and mp2 in s:
            r, text = ratio_text(point, mp2, best)
            rows.append(pyspark_row(r, point["candidates"], text))
        if direct in s and mp2 in s:
            rows.append([f"job on 2 workers vs in-process {at}", ratio_text(point, mp2, direct)[1], "-"])
        if loop in s and direct in s:
            rows.append([f"job in-process vs the domain loop {at}", ratio_text(point, direct, loop)[1], "-"])
        if best and direct in s:
            rows.append([f"job in-process vs best PySpark {at}", ratio_text(point, direct, best)[1], "-"])
    rows.append(beam_part_row(*beam_part) if beam_part else
                [BEAM_TARGET, "in make bench's instruction section (bench.instructions)", "-"])
    return rows


def section(sizes: list[int], configs: list[str], partitions: list[int], runs: int, cache: Path, scratch: Path,
            report: dict, log) -> str:
    log(f"peers over {sizes}")
    result = run(sizes, configs, partitions, runs, cache, scratch, log)
    report["peers"] = result
    text = "## Peers: PySpark beside the job\n\n" + tables(result)
    rows = targets(result, beam_part_of(report))
    if rows:
        text += "\n\n" + markdown_table(["target", "measured", "met"], rows, "lll")
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="100000")
    p.add_argument("--configs", default=",".join(JOB_CONFIGS), help="of loop, direct, direct-mp2")
    p.add_argument("--partitions", default="2,4,8", help="PySpark cogroup partition counts to try")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--cache", type=Path, default=REPO / "out" / "bench" / "cache")
    p.add_argument("--results", type=Path, default=REPO / "out" / "bench")
    args = p.parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    scratch = args.results / "scratch-peers"
    scratch.mkdir(parents=True, exist_ok=True)
    report: dict = {"load_before": os.getloadavg()}
    text = section([int(s) for s in args.sizes.split(",") if s.strip()], [c for c in args.configs.split(",") if c],
                   [int(n) for n in args.partitions.split(",") if n.strip()], args.runs, args.cache, scratch, report,
                   log)
    report["load_after"] = os.getloadavg()
    text += (f"\n\nLoad average (1/5/15 min) before {'/'.join(f'{x:.2f}' for x in report['load_before'])}, "
             f"after {'/'.join(f'{x:.2f}' for x in report['load_after'])}.")
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "peers-latest.md").write_text(text + "\n")
    (args.results / "peers-latest.json").write_text(json.dumps(report, indent=1, default=str))
    shutil.rmtree(scratch, ignore_errors=True)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
