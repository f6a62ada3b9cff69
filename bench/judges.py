"""Judges at scale: the job with every judge and a verdict for every judge request, beside the job without.

    .venv/bin/python -m bench.judges                                  # 100k candidates, 3 rounds
    .venv/bin/python -m bench.judges --sizes 100000,1000000           # and the 1M row (runs once)
    .venv/bin/python -m bench.judges --instructions 5000 --baseline ../base   # judges off, counted on both

The archive is the bench archive with the producer's semantic defects (``--judge-defects``: attempts that
pass every rule, some of which a judge fails). Built once per size, not measured: the first run
(``--judges all``) writes a judge request for each slot's first rule-passing attempt; ``export-batch
--kinds judge`` exports them; the simulated judge (``sample.simulated_judge``, error rates that would
leave a verdict unusable set to 0) answers every one; ``import-batch`` turns the answers into verdicts.

Then in interleaved rounds, each its own child process on the same archive: the job without judges
(``off``), and the job with ``--judges all --verdicts`` the verdicts (``on``). Reported: CPU per candidate
of each, what the judges add per candidate and per verdict applied (the run's manifest counts them:
every verdict must be applied, or the bench stops), wall and peak RSS of the tree.

``--instructions N`` counts the job under callgrind on the archive of N candidates, judges off and on
(bench.instructions' repeatable environment): the judges' cost in instructions, which the machine's
speed does not move. With ``--baseline DIR`` the job with judges off is counted on that checkout too,
on the same archive: judges off must cost what it costs there, within the counter's noise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from bench.archive import JUDGE_TRUTH, REPO, Archive, ArchiveSpec, ensure_archive
from bench.procs import Measured, code_version, job_failure, measure
from bench.stats import markdown_table, round_order, spread, summary

PY = sys.executable
PROVIDER, MODEL = "openai-chat", "sim-2"  # what the simulated judge plays
OUTPUT_FORMAT = "avro"  # the job's default
LARGE = 500_000  # sizes this big run once
OFF, ON = "off", "on"
LABELS = {OFF: "job in-process, judges off", ON: "job in-process, `--judges all` and every verdict"}
# The simulated judge's errors that leave a verdict unusable: none here, so every request gets a usable verdict.
NO_UNUSABLE = ("--rate", "malformed=0", "--rate", "unusable=0")
NOISE = 0.001  # the counter's run-to-run noise in the repeatable environment is ~0.03% (issue 30); 0.1% allowed


def judged_archive(size: int, cache: Path, log) -> Archive:
    return ensure_archive(ArchiveSpec.at_density(size, judge_defects=True), cache, log)


def job_argv(archive: Archive, output: Path, *extra: str) -> list[str]:
    return [PY, "-m", "pipelines.reprocess", "--transcripts", archive.transcripts_glob, "--candidates",
            archive.candidates_glob, "--output", str(output), "--output-format", OUTPUT_FORMAT, "--progress-seconds",
            "0", *extra]


def checked(name: str, argv: list[str], written: Path, code: Path = REPO) -> Measured:
    m = measure(argv, cwd=str(code), env={**os.environ, "PYTHONPATH": str(code)})
    if m.returncode != 0:
        raise SystemExit(job_failure(name, written, m.returncode, (m.stdout + m.stderr)[-3000:]))
    return m


def manifest_of(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_bytes())


def first_round(archive: Archive, work: Path, log) -> dict:
    """``work/import/verdicts.jsonl``: a verdict for every judge request of a first run; what it took."""
    started = time.perf_counter()
    cli = [PY, "-m", "pipelines.cli"]
    checked("first run (--judges all)", job_argv(archive, work / "run1", "--judges", "all"), work / "run1")
    requests = manifest_of(work / "run1")["outputs"]["judge_requests"]
    checked("export-batch --kinds judge",
            [*cli, "export-batch", "--retry-requests", str(work / "run1" / "retry_requests" / "part-*"),
             "--transcripts", archive.transcripts_glob, "--provider", PROVIDER, "--model", MODEL, "--kinds", "judge",
             "--output", str(work / "batch")], work / "batch")
    answers = work / "answers"
    answers.mkdir(parents=True, exist_ok=True)
    checked("simulated judge", [PY, "-m", "sample.simulated_judge", "--requests", str(work / "batch" / "requests-*"),
                                "--truth", str(archive.folder / JUDGE_TRUTH), "--results-out",
                                str(answers / "judge_output.jsonl"), "--answers-out",
                                str(answers / "judge_answers.jsonl"), *NO_UNUSABLE], answers)
    checked("import-batch", [*cli, "import-batch", "--provider", PROVIDER, "--results",
                             str(answers / "judge_output.jsonl"), "--requests", str(work / "batch" / "requests-*"),
                             "--output", str(work / "import")], work / "import")
    verdicts = sum(1 for line in (work / "import" / "verdicts.jsonl").read_bytes().splitlines() if line.strip())
    shutil.rmtree(work / "run1", ignore_errors=True)
    shutil.rmtree(work / "answers", ignore_errors=True)
    facts = {"judge_requests": requests, "verdicts": verdicts, "built_in_s": round(time.perf_counter() - started, 1)}
    log(f"  judges: {requests:,} judge requests in the first run, {verdicts:,} verdicts in {facts['built_in_s']} s")
    if verdicts != requests:
        raise SystemExit(f"{requests} judge requests got {verdicts} verdicts: every request must get one")
    return facts


def applied_verdicts(manifest: dict) -> dict:
    """The run's verdict conservation (contract §3.3): what became of every verdict it read."""
    return manifest["verdict_conservation"]


def run_config(config: str, archive: Archive, work: Path) -> tuple[Measured, dict]:
    output = work / f"out-{config}"
    shutil.rmtree(output, ignore_errors=True)
    extra = ("--judges", "all", "--verdicts", str(work / "import" / "verdicts.jsonl")) if config == ON else ()
    m = checked(LABELS[config], job_argv(archive, output, *extra), output)
    manifest = manifest_of(output)
    shutil.rmtree(output, ignore_errors=True)
    return m, manifest


def judges_at(size: int, runs: int, cache: Path, scratch: Path, log) -> dict:
    archive = judged_archive(size, cache, log)
    work = scratch / f"judges-{size}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    facts = first_round(archive, work, log)
    rounds: list[dict] = []
    for round_no in range(1, (runs if size < LARGE else 1) + 1):
        row = {}
        for config in round_order((OFF, ON), round_no):
            m, manifest = run_config(config, archive, work)
            row[config] = {"wall_s": m.wall_s, "cpu_s": m.cpu_s, "rss_mb": max(m.tree_peak_rss_mb, m.max_process_rss_mb),
                           "candidates": manifest["conservation"]["candidates_in"], "load1": os.getloadavg()[0]}
            if config == ON:
                row[config]["verdicts"] = applied_verdicts(manifest)
            log(f"  judges {archive.candidates_in:>9,} round {round_no} {config:<4} {m.wall_s:8.2f}s CPU {m.cpu_s:7.1f}s "
                f"RSS {row[config]['rss_mb']:7,.0f} MB  load {os.getloadavg()[0]:.2f}")
        rounds.append(row)
    shutil.rmtree(work, ignore_errors=True)
    return {"size": size, **point_of(archive.candidates_in, facts, rounds)}


def point_of(candidates: int, facts: dict, rounds: list[dict]) -> dict:
    """The judges' cost from measured rounds: per candidate and per verdict applied, medians over the rounds.
    Stops when a round did not apply every verdict of the first run (then it measured something else)."""
    for row in rounds:
        v = row[ON]["verdicts"]
        if v["applied"] != facts["verdicts"] or v["verdicts_in"] != facts["verdicts"]:
            raise SystemExit(f"{facts['verdicts']} verdicts given, the run applied {v['applied']} of "
                             f"{v['verdicts_in']} read: {v}")
    extra_cpu = [r[ON]["cpu_s"] - r[OFF]["cpu_s"] for r in rounds]
    point = {"candidates": candidates, "runs": len(rounds), **facts,
             "configs": {c: {m: summary([r[c][m] for r in rounds]) for m in ("wall_s", "cpu_s", "rss_mb", "load1")}
                         for c in (OFF, ON)}}
    point["cpu_us_per_candidate"] = {c: point["configs"][c]["cpu_s"]["median"] / candidates * 1e6 for c in (OFF, ON)}
    point["extra_cpu_us_per_candidate"] = summary([x / candidates * 1e6 for x in extra_cpu])
    point["extra_cpu_share"] = summary([x / r[OFF]["cpu_s"] for x, r in zip(extra_cpu, rounds)])
    point["cpu_us_per_verdict"] = summary([x / facts["verdicts"] * 1e6 for x in extra_cpu]) if facts["verdicts"] else None
    point["extra_rss_mb"] = summary([r[ON]["rss_mb"] - r[OFF]["rss_mb"] for r in rounds])
    return point


def table(points: list[dict]) -> str:
    rows = []
    for p in points:
        for config in (OFF, ON):
            s = p["configs"][config]
            rows.append([f"{p['candidates']:,}", LABELS[config], p["runs"], spread(s["wall_s"], "{:.2f}"),
                         f"{s['cpu_s']['median']:.1f}", f"{p['cpu_us_per_candidate'][config]:.1f}", spread(s["rss_mb"])])
    text = markdown_table(["candidates", "configuration", "runs", "wall s, median (min–max)", "CPU s (tree)",
                           "CPU µs per candidate", "peak RSS of the tree, MB"], rows, "rlrrrrr")
    lines = []
    for p in points:
        per_verdict = (f"{p['cpu_us_per_verdict']['median']:.0f} µs per verdict applied"
                       if p["cpu_us_per_verdict"] else "no verdict")
        lines.append(f"- at {p['candidates']:,}: {p['verdicts']:,} verdicts, every one applied (a verdict for every "
                     f"judge request of the first run); the judges add "
                     f"{spread(p['extra_cpu_us_per_candidate'], '{:+.1f}')} µs CPU per candidate "
                     f"({p['extra_cpu_share']['median']:+.0%}), {per_verdict}, "
                     f"{spread(p['extra_rss_mb'], '{:+,.0f}')} MB of peak RSS")
    return text + "\n\n" + "\n".join(lines)


def counts_text(counted: dict) -> str:
    """The instruction counts of :func:`count_instructions` as report text."""
    n = counted["candidates"]
    rows = [[label, f"{counted[key] / 1e9:.3f}", f"{counted[key] / n / 1e3:.1f}"]
            for key, label in (("off", LABELS[OFF]), ("on", LABELS[ON]), ("baseline_off", "judges off, baseline"))
            if key in counted]
    text = (f"Instructions under callgrind on the judges' archive of {n:,} candidates "
            f"({counted['verdicts']:,} verdicts):\n\n"
            + markdown_table(["configuration", "instructions, G", "k per candidate (fixed part included)"], rows, "lrr"))
    text += (f"\n\n- the judges add {(counted['on'] - counted['off']) / n / 1e3:.1f} k instructions per candidate, "
             f"{(counted['on'] - counted['off']) / max(counted['verdicts'], 1) / 1e3:.0f} k per verdict")
    if "baseline_off" in counted:
        moved = counted["off"] / counted["baseline_off"] - 1
        text += (f"\n- judges off against the baseline ({counted['baseline']}): {moved:+.3%} "
                 f"({'within' if abs(moved) <= NOISE else 'beyond'} the counter's noise, {NOISE:.1%})")
    return text


def count_instructions(size: int, cache: Path, scratch: Path, log, baseline: Path | None = None) -> dict:
    """The job judges off and on counted under callgrind (and judges off on ``baseline``)."""
    from bench.configs import CONFIGS
    from bench.instructions import count_parts

    archive = judged_archive(size, cache, log)
    work = scratch / f"judges-count-{size}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    facts = first_round(archive, work, log)
    verdicts = ("--judges", "all", "--verdicts", str(work / "import" / "verdicts.jsonl"))
    counted = {"candidates": archive.candidates_in, "verdicts": facts["verdicts"]}
    log(f"  judges: instructions at {archive.candidates_in:,}, judges off and on")
    counted["off"] = count_parts(CONFIGS["direct"], archive)["total"]
    counted["on"] = count_parts(CONFIGS["direct"], archive, extra=verdicts)["total"]
    if baseline is not None:
        counted["baseline"] = str(baseline)
        counted["baseline_off"] = count_parts(CONFIGS["direct"], archive, baseline)["total"]
    shutil.rmtree(work, ignore_errors=True)
    return counted


def section(sizes: list[int], runs: int, cache: Path, scratch: Path, report: dict, log,
            instruction_size: int | None = None, baseline: Path | None = None) -> str:
    log(f"judges over {sizes}")
    points = [judges_at(size, runs, cache, scratch, log) for size in sizes]
    report["judges"] = {"points": points}
    text = "## Judges: every verdict applied, beside the job without judges"
    if points:
        text += ("\n\nThe bench archive with semantic defects only a judge sees; the verdicts answer every judge "
                 "request of a first run with `--judges all` (simulated judge). CPU is of the process tree.\n\n"
                 + table(points))
    if instruction_size:
        if shutil.which("valgrind") is None:
            text += "\n\nInstructions not counted: valgrind is not installed here."
        else:
            report["judges"]["instructions"] = counted = count_instructions(instruction_size, cache, scratch, log,
                                                                            baseline)
            text += "\n\n" + counts_text(counted)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.judges", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="100000", help="candidate counts (1M and more run once)")
    p.add_argument("--runs", type=int, default=3, help="rounds below 500k candidates")
    p.add_argument("--instructions", type=int, default=0,
                   help="also count judges off and on under callgrind at this many candidates (0: not)")
    p.add_argument("--baseline", type=Path, help="with --instructions: count judges off on this checkout too")
    p.add_argument("--cache", type=Path, default=REPO / "out" / "bench" / "cache")
    p.add_argument("--results", type=Path, default=REPO / "out" / "bench")
    args = p.parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    report: dict = {"load_before": os.getloadavg(), "code": code_version()}
    text = section([int(s) for s in args.sizes.split(",") if s.strip()], args.runs, args.cache.resolve(),
                   args.results.resolve() / "scratch-judges", report, log, args.instructions or None,
                   args.baseline.resolve() if args.baseline else None)
    report["load_after"] = os.getloadavg()
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"judges-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(report, indent=1, default=str))
    (args.results / "judges-latest.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
