"""Benchmarks: how fast, how big, and how cost grows - side by side in one run.

    .venv/bin/python -m bench.run                      # the default run (see docs/benchmarks.md)
    .venv/bin/python -m bench.run --runs 5 --scaling 10000,100000,1000000

1. Side by side, on one cached synthetic archive (default 100,000 candidates
   over 200 sources of 3,000-6,000 units, the producer's default defect mix):
   the domain loop (``bench.loop``), the job in-process (FnApiRunner, the
   DirectRunner's engine) and the job with two (and one) multi-processing
   workers, each for JSON Lines and Avro outputs. Every configuration runs as
   its own child process (start-up and imports included), rounds interleave
   the configurations so machine load drifts over all of them alike, and
   each is reported as median (min-max) over ``--runs``.
2. Scaling: the same at several sizes at the same density (sources grow with
   candidates); per-candidate time, peak RSS, and a linear fit.
3. The report against the job that wrote its folder: for each size in
   ``--report-sizes`` and each output format, the job in-process writes a
   folder, then ``python -m pipelines.report`` reads it; both measured.
4. The loop's commands beside the job (``bench.backfill``), then the judges:
   the job with every judge and every verdict beside the job without
   (``bench.judges``).
5. Micro-benchmarks of the hot path (``bench.micro``), in this process.
6. Instructions: the loop and the job in-process counted under callgrind at
   two small sizes (``bench.instructions``), the one measure the machine's
   speed does not move, and the job's extra split into SHA-256, zstd and
   Beam's own part. Then Flink (``bench.flink``) and PySpark (``bench.peers``).
   The targets in force (``bench.targets``) close the report.

Writes ``<results>/results-<time>.json`` and ``<results>/latest.md`` and prints the tables.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from bench.archive import REPO, Archive, ArchiveSpec, ensure_archive
from bench.configs import CONFIGS, NOT_MEASURABLE, PY, command, run_once
from bench.procs import code_version, measure
from bench.stats import check_same_evaluations, linear_fit, markdown_table, round_order, spread, summary
from bench.targets import (INSTRUCTION_BASELINE, INSTRUCTION_CUT, beam_part_of, beam_part_row, instruction_cut_of,
                           instruction_cut_row, pyspark_row)

LARGE = 500_000  # scaling points this big run once, whatever --scaling-runs says


REPORT_RSS_LIMIT_MB = 500  # the report's memory target at 1M candidates


def report_vs_job(sizes: list[int], formats: list[str], runs: int, base: ArchiveSpec, cache: Path, scratch: Path,
                  log) -> list[dict]:
    """Job then report on the same folder, per size and format, rounds interleaved over the formats."""
    points = []
    for size in sizes:
        archive = ensure_archive(ArchiveSpec.at_density(size, min_units=base.min_units, max_units=base.max_units,
                                                        seed=base.seed, shards=base.shards), cache, log)
        rows: dict[str, list[dict]] = {fmt: [] for fmt in formats}
        for _ in range(runs if size < LARGE else 1):
            for fmt in formats:
                output = scratch / f"report-{size}-{fmt}"
                shutil.rmtree(output, ignore_errors=True)
                job = measure(command(CONFIGS["direct"], archive, output, fmt), cwd=str(REPO))
                if job.returncode != 0:
                    raise SystemExit(f"job ({fmt}, {size}) failed:\n{job.stderr[-3000:]}")
                rep_ = measure([PY, "-m", "pipelines.report", "--output", str(output)], cwd=str(REPO))
                if rep_.returncode != 0:
                    raise SystemExit(f"report ({fmt}, {size}) failed:\n{rep_.stderr[-3000:]}")
                rows[fmt].append({"job_wall_s": job.wall_s, "job_cpu_s": job.cpu_s, "job_rss_mb": job.tree_peak_rss_mb,
                                  "report_wall_s": rep_.wall_s, "report_cpu_s": rep_.cpu_s,
                                  "report_rss_mb": rep_.tree_peak_rss_mb,
                                  "report_max_rss_mb": rep_.max_process_rss_mb, "load1": os.getloadavg()[0]})
                log(f"  report {size:>9,} {fmt:<7} job {job.wall_s:7.2f}s {job.tree_peak_rss_mb:6,.0f} MB | report "
                    f"{rep_.wall_s:7.2f}s {rep_.max_process_rss_mb:5,.0f} MB  load {os.getloadavg()[0]:.2f}")
                shutil.rmtree(output, ignore_errors=True)
        for fmt, measured in rows.items():
            point = {"size": size, "candidates": archive.candidates_in, "format": fmt, "runs": len(measured)}
            for metric in ("job_wall_s", "job_cpu_s", "job_rss_mb", "report_wall_s", "report_cpu_s", "report_rss_mb",
                           "report_max_rss_mb", "load1"):
                point[metric] = summary([m[metric] for m in measured])
            points.append(point)
    return points


def report_table(points: list[dict]) -> str:
    rows = [[f"{p['candidates']:,}", p["format"], p["runs"], spread(p["job_wall_s"], "{:.2f}"),
             f"{p['job_cpu_s']['median']:.1f}", spread(p["job_rss_mb"]), spread(p["report_wall_s"], "{:.2f}"),
             f"{p['report_cpu_s']['median']:.1f}", spread(p["report_max_rss_mb"]),
             f"{p['report_wall_s']['median'] / p['job_wall_s']['median']:.2f}",
             spread(p["load1"], "{:.1f}")] for p in points]
    return markdown_table(
        ["candidates", "output", "runs", "job wall s", "job CPU s", "job peak RSS (tree), MB", "report wall s",
         "report CPU s", "report peak RSS, MB", "report / job (wall)", "1-min load"], rows, "rlrrrrrrrrr")


def import_floor(runs: int) -> dict:
    """Start-up alone: a Python that imports Beam and the job, then exits."""
    walls = [measure([PY, "-c", "import pipelines.reprocess"], cwd=str(REPO)).wall_s for _ in range(runs)]
    return summary(walls)


def side_by_side(archive: Archive, configs: list[str], formats: list[str], runs: int, scratch: Path, log) -> dict:
    results: dict[str, list[dict]] = {f"{c}/{f}": [] for c in configs for f in formats}
    for round_no in range(1, runs + 1):
        for fmt in formats:
            for key in round_order(configs, round_no):
                row = run_once(CONFIGS[key], archive, fmt, scratch)
                results[f"{key}/{fmt}"].append(row)
                log(f"  round {round_no}/{runs} {key:<11} {fmt:<5} {row['wall_s']:7.2f}s "
                    f"{row['rate']:8,.0f} cand/s  tree RSS {row['tree_peak_rss_mb']:7,.0f} MB  "
                    f"load {os.getloadavg()[0]:.2f}")
    check_same_evaluations(results)
    return results


def summarize(results: dict[str, list[dict]]) -> dict:
    out = {}
    for name, rows in results.items():
        out[name] = {metric: summary([r[metric] for r in rows])
                     for metric in ("wall_s", "cpu_s", "rate", "tree_peak_rss_mb", "max_process_rss_mb")}
        out[name]["processes"] = max(r["processes"] for r in rows)
        loops = [r["loop"] for r in rows if "loop" in r]
        if loops:
            out[name]["step_peak_extra_mb"] = summary([l["step_peak_extra_mb"] for l in loops])
            out[name]["rss_read_mb"] = summary([l["rss_read_mb"] for l in loops])
    return out


def side_by_side_table(summaries: dict, formats: list[str], configs: list[str]) -> str:
    rows = []
    for fmt in formats:
        loop = summaries.get(f"loop/{fmt}")
        for key in configs:
            s = summaries[f"{key}/{fmt}"]
            ratio = f"{s['rate']['median'] / loop['rate']['median']:.2f}" if loop else "-"
            rows.append([CONFIGS[key].label, fmt, spread(s["wall_s"], "{:.2f}"), spread(s["rate"]), ratio,
                         f"{s['cpu_s']['median']:.1f}", spread(s["tree_peak_rss_mb"]),
                         f"{s['max_process_rss_mb']['median']:,.0f}", s["processes"]])
    for label, reason in NOT_MEASURABLE.values():
        rows.append([label, "-", "not measurable", "-", "-", "-", "-", "-", "-"])
    return markdown_table(
        ["configuration", "output", "wall s, median (min–max)", "candidates/s, median (min–max)", "x domain loop",
         "CPU s", "peak RSS of the process tree, MB", "largest process, MB", "processes"],
        rows, "llrrrrrrr")


def ratios(summaries: dict, formats: list[str]) -> list[str]:
    lines = []
    for fmt in formats:
        rate = {key: summaries[f"{key}/{fmt}"]["rate"]["median"] for key in CONFIGS if f"{key}/{fmt}" in summaries}
        if "direct-mp2" in rate and "direct" in rate:
            lines.append(f"{fmt}: 2 workers / in-process = {rate['direct-mp2'] / rate['direct']:.2f}x")
        if "direct-mp2" in rate and "direct-mp1" in rate:
            lines.append(f"{fmt}: 2 workers / 1 worker (multi_processing) = {rate['direct-mp2'] / rate['direct-mp1']:.2f}x")
    return lines


def scaling(sizes: list[int], configs: list[str], fmt: str, runs: int, base: ArchiveSpec, cache: Path,
            scratch: Path, log) -> dict:
    points = []
    for size in sizes:
        archive = ensure_archive(ArchiveSpec.at_density(size, min_units=base.min_units, max_units=base.max_units,
                                                        seed=base.seed, shards=base.shards), cache, log)
        for key in configs:
            rows = []
            for _ in range(runs if size < LARGE else 1):
                rows.append(run_once(CONFIGS[key], archive, fmt, scratch))
                log(f"  scaling {size:>9,} {key:<11} {rows[-1]['wall_s']:8.2f}s "
                    f"{rows[-1]['wall_s'] / archive.candidates_in * 1e6:6.1f} µs/cand  "
                    f"tree RSS {rows[-1]['tree_peak_rss_mb']:7,.0f} MB  load {os.getloadavg()[0]:.2f}")
            point = {"size": size, "config": key, "candidates": archive.candidates_in,
                     "sources": archive.sources, "input_mb": archive.input_bytes / 2**20,
                     "largest_source_mb": archive.largest_source_bytes / 2**20,
                     "wall_s": summary([r["wall_s"] for r in rows]),
                     "tree_peak_rss_mb": summary([r["tree_peak_rss_mb"] for r in rows]),
                     "max_process_rss_mb": summary([r["max_process_rss_mb"] for r in rows])}
            point["us_per_candidate"] = point["wall_s"]["median"] / archive.candidates_in * 1e6
            if not CONFIGS[key].job:
                point["step_peak_extra_mb"] = summary([r["loop"]["step_peak_extra_mb"] for r in rows])
            points.append(point)
    fits = {}
    for key in configs:
        pts = [p for p in points if p["config"] == key]
        fit = linear_fit([p["candidates"] for p in pts], [p["wall_s"]["median"] for p in pts])
        if fit:
            fits[key] = {"fixed_s": fit[0], "us_per_candidate": fit[1] * 1e6}
    return {"format": fmt, "points": points, "fits": fits}


def marginal_us(previous: dict | None, point: dict) -> float | None:
    """µs per added candidate between two sizes: the slope, free of the fixed start-up cost."""
    if previous is None:
        return None
    return ((point["wall_s"]["median"] - previous["wall_s"]["median"])
            / (point["candidates"] - previous["candidates"]) * 1e6)


def scaling_table(result: dict) -> str:
    rows = []
    for key in dict.fromkeys(p["config"] for p in result["points"]):
        previous = None
        for p in (q for q in result["points"] if q["config"] == key):
            marginal = marginal_us(previous, p)
            rows.append([f"{p['candidates']:,}", p["sources"], CONFIGS[key].label, f"{p['input_mb']:,.0f}",
                         f"{p['largest_source_mb']:.2f}", spread(p["wall_s"], "{:.2f}"), p["wall_s"]["n"],
                         f"{p['us_per_candidate']:.1f}", "-" if marginal is None else f"{marginal:.1f}",
                         spread(p["tree_peak_rss_mb"]),
                         spread(p["step_peak_extra_mb"], "{:.1f}") if "step_peak_extra_mb" in p else "-"])
            previous = p
    table = markdown_table(
        ["candidates", "sources", "configuration", "input MB", "largest source MB", "wall s", "runs",
         "µs/candidate", "marginal µs/candidate (from the size above)", "peak RSS of the tree, MB",
         "per-source step extra RSS, MB"], rows, "rrlrrrrrrrr")
    fits = [f"- {CONFIGS[k].label}: wall = {f['fixed_s']:.2f} s + {f['us_per_candidate']:.1f} µs x candidates"
            for k, f in result["fits"].items()]
    return table + ("\n\nLeast-squares fit over the sizes:\n" + "\n".join(fits) if fits else "")


def machine() -> dict:
    mem_kb = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    versions = {name: importlib.metadata.version(name)
                for name in ("apache-beam", "orjson", "pydantic", "jsonschema", "fastavro")}
    return {"cores": os.cpu_count(), "memory_gb": round(mem_kb / 2**20, 1), "cpu": cpu,
            "python": platform.python_version(), "platform": platform.platform(), "code": code_version(), **versions}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    p.add_argument("--candidates", type=int, default=100_000, help="size of the side-by-side archive")
    p.add_argument("--sources", type=int, default=200)
    p.add_argument("--min-units", type=int, default=3000)
    p.add_argument("--max-units", type=int, default=6000)
    p.add_argument("--shards", type=int, default=4, help="files per input (transcripts-*, candidates-*)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--runs", type=int, default=3, help="rounds of the side-by-side comparison")
    p.add_argument("--configs", default="loop,direct,direct-quiet,direct-mp2,direct-mp1",
                   help=f"of {', '.join(CONFIGS)}")
    p.add_argument("--formats", default="jsonl,avro")
    p.add_argument("--scaling", default="10000,100000",
                   help="candidate counts for the scaling run ('' to skip); add 1000000 for the 1M point")
    p.add_argument("--scaling-configs", default="loop,direct,direct-mp2")
    p.add_argument("--scaling-runs", type=int, default=3, help=f"runs per scaling point (points of {LARGE:,} or more run once)")
    p.add_argument("--report-sizes", default="100000,1000000",
                   help="candidate counts for the report-vs-job run ('' to skip; points of 500k or more run once)")
    p.add_argument("--report-formats", default="jsonl,avro,parquet")
    p.add_argument("--loop-sizes", default="10000,100000,1000000",
                   help="candidate counts for the loop's commands beside the job (bench.backfill; '' to skip; "
                        "points of 500k or more run once)")
    p.add_argument("--loop-runs", type=int, default=3, help="rounds of the loop section below 500k candidates")
    p.add_argument("--judge-sizes", default="100000",
                   help="candidate counts for the judges section (bench.judges; '' to skip); add 1000000 for 1M")
    p.add_argument("--judge-runs", type=int, default=3, help="rounds of the judges section below 500k candidates")
    p.add_argument("--judge-instructions", type=int, default=5000,
                   help="count the job judges off and on under callgrind at this many candidates (0: not)")
    p.add_argument("--judge-baseline", type=Path,
                   help="a checkout the job with judges off is counted on too (judges off must not move)")
    p.add_argument("--no-micro", action="store_true")
    p.add_argument("--flink-sizes", default="100000",
                   help="candidate counts for the Flink section (bench.flink; '' to skip); add 1000000 for 1M")
    p.add_argument("--flink-configs", default="direct,direct-mp2,flink-local,flink-session")
    p.add_argument("--flink-runs", type=int, default=3, help="rounds of the Flink section (1M runs once)")
    p.add_argument("--peer-sizes", default="100000",
                   help="candidate counts for the PySpark peer section (bench.peers; '' to skip); add 1000000 for 1M")
    p.add_argument("--peer-partitions", default="2,4,8", help="PySpark cogroup partition counts to try")
    p.add_argument("--peer-runs", type=int, default=3, help="rounds of the peer section (1M runs once)")
    p.add_argument("--instruction-sizes", default="5000,10000",
                   help="archive sizes the loop and the job are counted at under callgrind (bench.instructions; '' to skip)")
    p.add_argument("--instruction-configs", default="loop,direct")
    p.add_argument("--instruction-baseline", default=INSTRUCTION_BASELINE,
                   help="a commit (or a folder) the job in-process is counted on too, for the cut against it "
                        f"(issue 43: {INSTRUCTION_CUT:.2f}x {INSTRUCTION_BASELINE}'s per further candidate; '' not)")
    p.add_argument("--skip-side-by-side", action="store_true")
    p.add_argument("--cache", type=Path, default=REPO / "out" / "bench" / "cache")
    p.add_argument("--results", type=Path, default=REPO / "out" / "bench")
    return p.parse_args(argv)


def targets(report: dict) -> str:
    """The issue's targets against this run's medians (JSON Lines outputs)."""
    from bench.peers import best_spark, ratio_text  # bench.peers only reads figures here

    rows = []
    sbs = report.get("side_by_side", {})
    rate = {name.split("/")[0]: s["rate"]["median"] for name, s in sbs.items() if name.endswith("/jsonl")}
    # The targets in force (bench.targets): the job on 2 workers against the best PySpark, Beam's own part of
    # the job's instructions. The loop's 20,000 candidates/s and the in-process ratio to the loop are retired.
    in_force = []
    for point in report.get("peers", {}).get("points", []):
        best = best_spark(point["summaries"])
        if best and "direct-mp2" in point["summaries"]:
            ratio, text = ratio_text(point, "direct-mp2", best)
            in_force.append(pyspark_row(ratio, point["candidates"], text))
    if beam_part_of(report):
        in_force.append(beam_part_row(*beam_part_of(report)))
    if instruction_cut_of(report):
        in_force.append(instruction_cut_row(*instruction_cut_of(report)))
    rows += [[target, measured, ok == "yes"] for target, measured, ok in in_force]
    if "direct-mp2" in rate and "direct-mp1" in rate:
        r = rate["direct-mp2"] / rate["direct-mp1"]
        rows.append(["two workers >= 1.4x one worker", f"{r:.2f}x (vs in-process {rate['direct-mp2'] / rate['direct']:.2f}x)"
                     if "direct" in rate else f"{r:.2f}x", r >= 1.4])
    for key in ("loop", "direct", "direct-mp2"):
        pts = [p for p in report.get("scaling", {}).get("points", []) if p["config"] == key]
        if len(pts) >= 3:
            first, last = pts[0], pts[-1]
            raw = last["us_per_candidate"] / first["us_per_candidate"] - 1
            slopes = [marginal_us(a, b) for a, b in zip(pts, pts[1:])]
            drift = slopes[-1] / slopes[0] - 1
            rows.append([f"{CONFIGS[key].label}: cost linear, {last['candidates']:,} vs {first['candidates']:,}",
                         f"per candidate {raw:+.0%}; marginal {drift:+.0%}", abs(drift) <= 0.2])
    for p in report.get("report_vs_job", []):
        ratio = p["report_wall_s"]["median"] / p["job_wall_s"]["median"]
        rows.append([f"report faster than the job ({p['format']}, {p['candidates']:,})", f"{ratio:.2f}x the job's wall time",
                     ratio < 1])
        if p["size"] >= 1_000_000:
            rss = p["report_max_rss_mb"]["max"]
            rows.append([f"report peak RSS < {REPORT_RSS_LIMIT_MB} MB ({p['format']}, {p['candidates']:,})",
                         f"{rss:,.0f} MB", rss < REPORT_RSS_LIMIT_MB])
    cpu = {name.split("/")[0]: s["cpu_s"]["median"] for name, s in sbs.items() if name.endswith("/jsonl")}
    if "direct-quiet" in cpu and "direct" in cpu:
        # CPU time, not wall time: on a shared machine the wall time swings with other load far more
        # than any per-source tally could move it.
        r = cpu["direct"] / cpu["direct-quiet"]
        rows.append(["progress logging costs nothing measurable (in-process CPU s, progress on / off)",
                     f"{r:.3f}x (wall {rate['direct-quiet'] / rate['direct']:.2f}x)", r <= 1.03])
    loop_pts = [p for p in report.get("scaling", {}).get("points", []) if p["config"] == "loop"]
    if loop_pts:
        extra = ", ".join(f"{p['step_peak_extra_mb']['median']:.0f} MB at {p['candidates']:,}" for p in loop_pts)
        flat = max(p["step_peak_extra_mb"]["median"] for p in loop_pts) <= 2 * min(p["step_peak_extra_mb"]["median"]
                                                                                    for p in loop_pts) + 8
        rows.append(["per-source step's peak RSS bounded by the largest source", extra, flat])
    return markdown_table(["target", "measured", "met"], [[t, m, "yes" if ok else "no"] for t, m, ok in rows], "lll")


def side_by_side_section(args, base: ArchiveSpec, configs: list[str], formats: list[str], scratch: Path,
                         report: dict, log) -> str:
    archive = ensure_archive(base, args.cache, log)
    log(f"side by side on {archive.folder.name}: {archive.candidates_in:,} candidates, "
        f"{archive.input_bytes / 2**20:,.0f} MB of input, {args.runs} rounds")
    floor = import_floor(args.runs)
    results = side_by_side(archive, configs, formats, args.runs, scratch, log)
    summaries = summarize(results)
    report.update(archive={**asdict(archive), "folder": str(archive.folder)}, import_floor_s=floor,
                  side_by_side=summaries, raw=results)
    loads = [r["load1_after"] for rows in results.values() for r in rows]
    notes = [f"{label}: {reason}" for label, reason in NOT_MEASURABLE.values()]
    return ("## Side by side\n\n"
            + f"{archive.candidates_in:,} candidates, {archive.sources} sources, "
            f"{archive.input_bytes / 2**20:,.0f} MB of input (largest source {archive.largest_source_bytes / 2**20:.2f} MB), "
            f"{args.shards} files per input; {args.runs} interleaved rounds.\n\n"
            + side_by_side_table(summaries, formats, configs)
            + f"\n\n1-minute load average after each run: {min(loads):.2f}–{max(loads):.2f} "
            f"(median {summary(loads)['median']:.2f}) on {os.cpu_count()} cores. "
            f"Start-up alone (Python + importing Beam and the job): {spread(floor, '{:.2f}')} s.\n\n"
            + "\n".join(f"- {line}" for line in ratios(summaries, formats) + notes))


def scaling_section(args, base: ArchiveSpec, sizes: list[int], scratch: Path, report: dict, log) -> str:
    log(f"scaling over {sizes}")
    result = scaling(sizes, [c for c in args.scaling_configs.split(",") if c], "jsonl", args.scaling_runs,
                     base, args.cache, scratch, log)
    report["scaling"] = result
    return "## Scaling (JSON Lines outputs)\n\n" + scaling_table(result)


def micro_section(args, base: ArchiveSpec, report: dict, log) -> str:
    from bench import micro  # imports the domain: only when asked for

    archive = ensure_archive(base, args.cache, log)
    log("micro-benchmarks")
    report["micro"] = micro.run(archive)
    return "## Hot path micro-benchmarks\n\n" + micro.table(report["micro"])


def write_report(report: dict, sections: list[str], results: Path) -> str:
    m = report["machine"]
    header = (f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gb']} GB, Python {m['python']}, "
              f"Beam {m['apache-beam']}; code {m['code']}. Load average before "
              f"{'/'.join(f'{x:.2f}' for x in report['load_before'])}, after "
              f"{'/'.join(f'{x:.2f}' for x in report['load_after'])} (1/5/15 min).")
    text = header + "\n\n" + "\n\n".join(sections + ["## Targets\n\n" + targets(report)]) + "\n"
    results.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    (results / f"results-{stamp}.json").write_text(json.dumps(report, indent=1, default=str))
    (results / "latest.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    configs = [c for c in args.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configuration(s) {unknown}; known: {', '.join(CONFIGS)}")
    formats = [f for f in args.formats.split(",") if f]
    sizes = [int(s) for s in args.scaling.split(",") if s.strip()]
    scratch = args.results.resolve() / "scratch"  # absolute: the loop's run 2 links into it (bench.backfill)
    scratch.mkdir(parents=True, exist_ok=True)
    report: dict = {"started": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine(),
                    "argv": sys.argv[1:] if argv is None else argv, "load_before": os.getloadavg()}
    base = ArchiveSpec(args.candidates, args.sources, args.min_units, args.max_units, args.seed, args.shards)
    sections = []
    if not args.skip_side_by_side:
        sections.append(side_by_side_section(args, base, configs, formats, scratch, report, log))
    if sizes:
        sections.append(scaling_section(args, base, sizes, scratch, report, log))
    report_sizes = [int(s) for s in args.report_sizes.split(",") if s.strip()]
    if report_sizes:
        log(f"report vs job over {report_sizes}")
        points = report_vs_job(report_sizes, [f for f in args.report_formats.split(",") if f], args.runs, base,
                               args.cache, scratch, log)
        report["report_vs_job"] = points
        sections.append("## The report against the job (in-process) that wrote its folder\n\n" + report_table(points))
    loop_sizes = [int(s) for s in args.loop_sizes.split(",") if s.strip()]
    if loop_sizes:
        from bench import backfill

        log(f"the loop's commands over {loop_sizes}")
        sections.append(backfill.section(loop_sizes, args.loop_runs, args.cache, scratch, report, log))
    judge_sizes = [int(s) for s in args.judge_sizes.split(",") if s.strip()]
    if judge_sizes:
        from bench import judges

        sections.append(judges.section(judge_sizes, args.judge_runs, args.cache, scratch, report, log,
                                       args.judge_instructions or None,
                                       args.judge_baseline.resolve() if args.judge_baseline else None))
    if not args.no_micro:
        sections.append(micro_section(args, base, report, log))
    instruction_sizes = [int(s) for s in args.instruction_sizes.split(",") if s.strip()]
    if instruction_sizes:
        from bench import instructions

        log(f"instructions over {instruction_sizes}")
        sections.append(instructions.section(instruction_sizes, [c for c in args.instruction_configs.split(",") if c],
                                             args.cache, report, log, args.instruction_baseline or None))
    flink_sizes = [int(s) for s in args.flink_sizes.split(",") if s.strip()]
    if flink_sizes:
        from bench import flink

        sections.append(flink.section(flink_sizes, [c for c in args.flink_configs.split(",") if c],
                                      args.flink_runs, args.cache, scratch, report, log))
    peer_sizes = [int(s) for s in args.peer_sizes.split(",") if s.strip()]
    if peer_sizes:
        from bench import peers

        sections.append(peers.section(peer_sizes, list(peers.JOB_CONFIGS),
                                      [int(n) for n in args.peer_partitions.split(",") if n.strip()],
                                      args.peer_runs, args.cache, scratch, report, log))
    report["load_after"] = os.getloadavg()
    text = write_report(report, sections, args.results)
    shutil.rmtree(scratch, ignore_errors=True)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
