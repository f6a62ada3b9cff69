"""The whole loop at archive scale: every command an operator runs around the job after a prompt
revision, measured beside the job on the same archive in the same rounds.

    .venv/bin/python -m bench.backfill                               # 10k, 100k (3 rounds) and 1M (once)
    .venv/bin/python -m bench.backfill --sizes 100000 --runs 3
    .venv/bin/python -m bench.backfill --sizes 100000 --baseline /tmp/base   # A/B: another checkout's commands too

The archive is the bench archive of a prompt revision (``bench.archive``, ``revised_family``): the
simulated producer's default defect mix, the first attempts of one family made under its earlier
prompt, billed usage on every attempt. Each round runs, as its own child process each, measured:

1. ``job``: the job in-process with ``--refresh-stale`` (run 1: retries and refreshes);
2. ``export-batch``: run 1's every request (``openai-chat``);
3. ``import-batch``: an answer for every exported request, SDK-shaped (the simulated batch provider
   answers what it can, an empty object the rest; built once per size, not measured);
4. ``job, run 2``: the job over the archive and the imported answers;
5. ``compare``: run 1 beside run 2 (the revision's two runs);
6. ``verify`` of run 1, and 7. the report of run 1 (``pipelines.report``).

Wall time, CPU of the process tree and its peak RSS (``bench.procs``); each command's ratio to the
job of run 1 in the same round; the least-squares fit over the sizes (fixed part + µs per candidate).
``--baseline DIR`` runs ``--baseline-commands`` (default export-batch and compare) from another
checkout too, in the same rounds on the same inputs, and checks that both wrote the same bytes.
"""

from __future__ import annotations

import argparse
import filecmp
import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path

import orjson

from bench.archive import (GZIP_LEVEL, REPLICATE_UNIT, REPO, Archive, ArchiveSpec, ensure_archive, ensure_archive_at,
                           replicated_archive)
from bench.procs import Measured, code_version, job_failure, measure
from bench.stats import linear_fit, markdown_table, spread, summary

PY = sys.executable
REVISED_FAMILY = "spells"  # the family whose earlier prompt sample/prompts/ keeps
PROVIDER, MODEL = "openai-chat", "sim-2"  # what the simulated batch provider plays (sample.simulated_batch)
OUTPUT_FORMAT = "avro"  # the job's default
LARGE = 500_000  # sizes this big run once
TARGET_RSS_MB = 1024  # each command's peak RSS at 1M (issue 43)
TARGET_FROM = 1_000_000  # the targets are judged at this size and above

JOB, EXPORT, IMPORT, JOB2, COMPARE, VERIFY, REPORT = ("job", "export-batch", "import-batch", "job, run 2", "compare",
                                                      "verify", "report")
STEPS = (JOB, EXPORT, IMPORT, JOB2, COMPARE, VERIFY, REPORT)
LABELS = {JOB: "job in-process, run 1 (`--refresh-stale`)", EXPORT: "export-batch (openai-chat, every request)",
          IMPORT: "import-batch (an answer for every request)", JOB2: "job in-process, run 2 (with the answers)",
          COMPARE: "compare run 1 with run 2", VERIFY: "verify run 1", REPORT: "report of run 1"}
COMMANDS = (EXPORT, IMPORT, COMPARE, VERIFY, REPORT)  # the loop's commands, judged against the job


def revision_archive(size: int, cache: Path, log) -> Archive:
    return ensure_archive(ArchiveSpec.at_density(size, revised_family=REVISED_FAMILY), cache, log)


def argv_of(step: str, archive: Archive, work: Path) -> list[str]:
    """The command line of one step, as an operator types it (``notarius-reprocess CMD``)."""
    cli = [PY, "-m", "pipelines.cli"]
    if step in (JOB, JOB2):
        candidates = archive.candidates_glob if step == JOB else str(work / "after" / "candidates*")
        return [*cli, "--transcripts", archive.transcripts_glob, "--candidates", candidates, "--output",
                str(work / ("run1" if step == JOB else "run2")), "--output-format", OUTPUT_FORMAT, "--refresh-stale",
                "--progress-seconds", "0"]
    if step == EXPORT:
        return [*cli, "export-batch", "--retry-requests", str(work / "run1" / "retry_requests" / "part-*"),
                "--transcripts", archive.transcripts_glob, "--provider", PROVIDER, "--model", MODEL,
                "--output", str(work / "batch")]
    if step == IMPORT:
        return [*cli, "import-batch", "--provider", PROVIDER, "--results", str(work / "answers" / "batch_output.jsonl"),
                "--requests", str(work / "batch" / "requests-*"), "--output", str(work / "import")]
    if step == COMPARE:
        return [*cli, "compare", str(work / "run1"), str(work / "run2"), "--output", str(work / "compare")]
    if step == VERIFY:
        return [*cli, "verify", str(work / "run1")]
    if step == REPORT:
        return [PY, "-m", "pipelines.report", "--output", str(work / "run1"), "--html", str(work / "report.html")]
    raise ValueError(step)


WRITES = {JOB: "run1", EXPORT: "batch", IMPORT: "import", JOB2: "run2", COMPARE: "compare", REPORT: "report.html"}


def run_step(step: str, archive: Archive, work: Path, code: Path = REPO) -> Measured:
    written = work / WRITES[step] if step in WRITES else None
    if written is not None:
        shutil.rmtree(written, ignore_errors=True) if written.is_dir() else written.unlink(missing_ok=True)
    m = measure(argv_of(step, archive, work), cwd=str(code))
    if m.returncode != 0:
        raise SystemExit(job_failure(f"{step} ({code})", written or work, m.returncode, (m.stdout + m.stderr)[-3000:]))
    return m


def answer_every_request(archive: Archive, work: Path, log) -> dict:
    """``work/answers/batch_output.jsonl``: the simulated batch provider's answers to the export in
    ``work/batch``, and an empty object for each request it does not answer (registry-bound families):
    every request gets a line, as a provider returns. Built once per size (the export is deterministic)."""
    from sample.simulated_batch import result_line

    answers = work / "answers"
    results = answers / "batch_output.jsonl"
    if results.exists():
        return json.loads((answers / "answers.json").read_text())
    answers.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    simulated = measure([PY, "-m", "sample.simulated_batch", "--requests", str(work / "batch" / "requests-*"),
                         "--transcripts", archive.transcripts_glob, "--results-out", str(results) + ".building",
                         "--truth-out", str(answers / "truth.jsonl")], cwd=str(REPO))
    if simulated.returncode != 0:
        raise SystemExit(f"simulated batch failed:\n{simulated.stderr[-3000:]}")
    with open(str(results) + ".building", "rb") as handle:
        answered = {orjson.loads(line)["custom_id"] for line in handle if line.strip()}
    simulated_lines = n = len(answered)
    with open(str(results) + ".building", "ab") as out:
        for index_path in sorted((work / "batch").glob("requests-*.index.jsonl")):
            with open(index_path, "rb") as handle:
                for raw in handle:
                    row = orjson.loads(raw)
                    if row["kind"] == "judge" or row["wire_id"] in answered:
                        continue
                    n += 1
                    out.write(orjson.dumps(result_line(n, row["wire_id"], row["model"], "{}")) + b"\n")
    os.replace(str(results) + ".building", results)
    facts = {"answers": n, "simulated": simulated_lines, "empty": n - simulated_lines,
             "built_in_s": round(time.perf_counter() - started, 1),
             "simulator_peak_rss_mb": round(max(simulated.tree_peak_rss_mb, simulated.max_process_rss_mb))}
    (answers / "answers.json").write_text(json.dumps(facts))
    log(f"  answers: {n:,} ({simulated_lines:,} simulated, {n - simulated_lines:,} empty) in "
        f"{facts['built_in_s']} s, simulator peak RSS {facts['simulator_peak_rss_mb']:,} MB")
    return facts


def link_run2_inputs(archive: Archive, work: Path) -> None:
    """``work/after/``: the archive's candidate files and the imported answers, under one glob."""
    after = work / "after"
    shutil.rmtree(after, ignore_errors=True)
    after.mkdir()
    for path in sorted(archive.folder.glob("candidates-*.jsonl.gz")):
        (after / path.name).symlink_to(path)
    # absolute: a link's relative target is read from the link's own folder, and a dangling link is an empty input
    (after / "candidates-backfill.jsonl").symlink_to((work / "import" / "candidates.jsonl").resolve(strict=True))


def after_archive(size: int, cache: Path, scratch: Path, log) -> Archive:
    """The revision's archive after its backfill: the archive of ``size`` and, as one more candidate file, the
    answers import-batch made of run 1's every request (built once, cached beside the archive; above
    REPLICATE_UNIT, copies of the REPLICATE_UNIT one, as ``bench.archive.sized_archive`` copies the job's).
    Run 2 of the loop, at any size: what ``bench.flink --compare`` sets beside run 1."""
    if size > REPLICATE_UNIT and size % REPLICATE_UNIT == 0:
        return replicated_archive(after_archive(REPLICATE_UNIT, cache, scratch, log), size // REPLICATE_UNIT, cache,
                                  log)
    before = revision_archive(size, cache, log)
    folder = before.folder.with_name(before.folder.name + "-after-v1")
    if not (folder / "meta.json").exists():
        log(f"building archive {folder.name} (run 1's requests answered and imported)...")
        work = scratch / f"after-{size}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        for step in (JOB, EXPORT):
            run_step(step, before, work)
        answer_every_request(before, work, log)
        run_step(IMPORT, before, work)
        staging = folder.with_name(folder.name + ".building")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        for path in sorted(before.folder.glob("*.jsonl.gz")):
            (staging / path.name).symlink_to(path)
        answers = (work / "import" / "candidates.jsonl").read_bytes()
        with gzip.open(staging / "candidates-backfill.jsonl.gz", "wb", compresslevel=GZIP_LEVEL) as out:
            out.write(answers)
        meta = json.loads((before.folder / "meta.json").read_text())
        lines = sum(1 for line in answers.splitlines() if line.strip())
        meta.update(candidates_in=meta["candidates_in"] + lines, input_bytes=meta["input_bytes"] + len(answers),
                    backfill_of=before.folder.name, backfill_candidates=lines)
        (staging / "meta.json").write_text(json.dumps(meta, indent=2))
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
        shutil.rmtree(work, ignore_errors=True)
    return ensure_archive_at(folder)


def revision_sized(size: int, cache: Path, log) -> Archive:
    """The revision's archive of ``size`` before its backfill (above REPLICATE_UNIT: copies)."""
    if size > REPLICATE_UNIT and size % REPLICATE_UNIT == 0:
        return replicated_archive(revision_archive(REPLICATE_UNIT, cache, log), size // REPLICATE_UNIT, cache, log)
    return revision_archive(size, cache, log)


def items(work: Path) -> dict:
    """What the round's commands worked on, from their own manifests."""
    run1 = json.loads((work / "run1" / "manifest.json").read_bytes())
    export = json.loads((work / "batch" / "export_manifest.json").read_bytes())
    imported = json.loads((work / "import" / "import_manifest.json").read_bytes())
    compared = json.loads((work / "compare" / "compare.json").read_bytes())
    return {"candidates": run1["conservation"]["candidates_in"], "evaluations": run1["conservation"]["evaluations"],
            "requests_exported": export["conservation"]["exported"],
            "exported_by_kind": export.get("exported_by_kind"), "request_files": len(export["files"]),
            "request_bytes": sum(f["bytes"] for f in export["files"]),
            "answers_imported": imported.get("requests", {}).get("imported"),
            "slots_compared": compared["total"]["conservation"]["slots_in_a_or_b"],
            "slots_changed": compared["total"]["changed_slots"]}


def same_bytes(a: Path, b: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """Relative paths whose bytes differ between two folders (or that one lacks); ``skip``: names not compared."""
    names = {p.relative_to(a) for p in a.rglob("*") if p.is_file()} | {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    return sorted(str(n) for n in names if n.name not in skip
                  and not ((a / n).is_file() and (b / n).is_file() and filecmp.cmp(a / n, b / n, shallow=False)))


# What differs between two checkouts' outputs by design: the manifests name the folder and the runner's options.
IDENTITY_SKIP = ("export_manifest.json", "manifest.json", "import_manifest.json")


def loop_at(size: int, runs: int, cache: Path, scratch: Path, log, baseline: Path | None = None,
            baseline_steps: tuple[str, ...] = ()) -> dict:
    archive = revision_archive(size, cache, log)
    work = scratch / f"loop-{size}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rounds: list[dict] = []
    answers = None
    for round_no in range(1, (runs if size < LARGE else 1) + 1):
        row: dict = {}
        for step in STEPS:
            if step == IMPORT and answers is None:
                answers = answer_every_request(archive, work, log)
            if step == JOB2:
                link_run2_inputs(archive, work)
            versions = [("", REPO)] + ([("baseline ", baseline)] if baseline and step in baseline_steps else [])
            if round_no % 2 == 0:
                versions.reverse()  # every other round the baseline first: drift hits both alike
            for prefix, code in versions:
                if prefix:  # the baseline writes beside, then its bytes are held against this checkout's
                    m = run_step_into(step, archive, work, code)
                else:
                    m = run_step(step, archive, work)
                row[prefix + step] = {"wall_s": m.wall_s, "cpu_s": m.cpu_s,
                                      "rss_mb": max(m.tree_peak_rss_mb, m.max_process_rss_mb),
                                      "load1": os.getloadavg()[0]}
                log(f"  loop {archive.candidates_in:>9,} round {round_no} {prefix + step:<22} {m.wall_s:8.2f}s "
                    f"CPU {m.cpu_s:7.1f}s RSS {row[prefix + step]['rss_mb']:7,.0f} MB  load {os.getloadavg()[0]:.2f}")
            if baseline and step in baseline_steps:
                differ = baseline_differs(step, work)
                if differ:
                    raise SystemExit(f"{step}: the baseline wrote other bytes than this checkout: {differ[:5]}")
        row["items"] = items(work)
        rounds.append(row)
    point = {"size": size, "candidates": archive.candidates_in, "sources": archive.sources,
             "input_mb": archive.input_bytes / 2**20, "runs": len(rounds), "items": rounds[-1]["items"],
             "answers": answers, "steps": {}}
    for name in rounds[0]:
        if name == "items":
            continue
        point["steps"][name] = {metric: summary([r[name][metric] for r in rounds]) for metric in ("wall_s", "cpu_s",
                                                                                                  "rss_mb", "load1")}
        point["steps"][name]["wall_x_job"] = summary([r[name]["wall_s"] / r[JOB]["wall_s"] for r in rounds])
        point["steps"][name]["cpu_x_job"] = summary([r[name]["cpu_s"] / r[JOB]["cpu_s"] for r in rounds])
    shutil.rmtree(work, ignore_errors=True)
    return point


def run_step_into(step: str, archive: Archive, work: Path, code: Path) -> Measured:
    """One step from another checkout, writing beside this checkout's output (``<name>.baseline``)."""
    argv = argv_of(step, archive, work)
    if step in WRITES:
        mine, theirs = str(work / WRITES[step]), str(work / (WRITES[step] + ".baseline"))
        argv = [theirs if arg == mine else arg for arg in argv]
        shutil.rmtree(theirs, ignore_errors=True) if Path(theirs).is_dir() else Path(theirs).unlink(missing_ok=True)
    m = measure(argv, cwd=str(code), env={**os.environ, "PYTHONPATH": str(code)})
    if m.returncode != 0:
        raise SystemExit(f"baseline {step} ({code}) failed:\n{(m.stdout + m.stderr)[-3000:]}")
    return m


def baseline_differs(step: str, work: Path) -> list[str]:
    if step not in WRITES:
        return []
    mine, theirs = work / WRITES[step], work / (WRITES[step] + ".baseline")
    if mine.is_file():
        return [] if filecmp.cmp(mine, theirs, shallow=False) else [mine.name]
    if step != COMPARE:
        return same_bytes(mine, theirs, IDENTITY_SKIP)
    # compare's slots/ rows are in the runner's order (a source's in slot order since issue 43): the same rows,
    # and every document byte for byte.
    differ = [name for name in same_bytes(mine, theirs, IDENTITY_SKIP) if not name.startswith("slots/")]
    return differ + ([] if slot_rows(mine) == slot_rows(theirs) else ["slots/ (rows)"])


def slot_rows(folder: Path) -> list[bytes]:
    """Every row of a comparison's slots/ files (Avro or JSON Lines) as canonical JSON, sorted."""
    import fastavro

    rows = []
    for path in sorted((folder / "slots").glob("part-*")):
        if path.suffix == ".avro":
            with open(path, "rb") as handle:
                rows += [orjson.dumps(r, option=orjson.OPT_SORT_KEYS) for r in fastavro.reader(handle)]
        else:
            rows += [orjson.dumps(orjson.loads(line), option=orjson.OPT_SORT_KEYS)
                     for line in path.read_bytes().splitlines() if line.strip()]
    return sorted(rows)


# What each step's cost grows with: the item its fit is per (a key of :func:`items`, and its name).
ITEM_OF = {JOB: ("candidates", "candidate"), JOB2: ("candidates", "candidate"),
           EXPORT: ("requests_exported", "request"), IMPORT: ("answers_imported", "answer"),
           COMPARE: ("slots_compared", "slot"), VERIFY: ("candidates", "candidate"), REPORT: ("candidates", "candidate")}


def fits(points: list[dict]) -> dict:
    """Per step: wall and CPU = fixed part + µs x its items (ITEM_OF: candidates, requests, answers or slots),
    and peak RSS = fixed + MB per million items; least squares over the sizes of one run. Steps measured at
    fewer than two item counts have no fit."""
    out = {}
    names = dict.fromkeys(name for p in points for name in p["steps"])
    for name in names:
        key, noun = ITEM_OF[name.removeprefix("baseline ")]
        pts = [p for p in points if name in p["steps"] and p["items"].get(key) is not None]
        xs = [p["items"][key] for p in pts]
        wall = linear_fit(xs, [p["steps"][name]["wall_s"]["median"] for p in pts])
        cpu = linear_fit(xs, [p["steps"][name]["cpu_s"]["median"] for p in pts])
        rss = linear_fit(xs, [p["steps"][name]["rss_mb"]["median"] for p in pts])
        if wall:
            out[name] = {"item": noun, "fixed_s": wall[0], "us_per_item": wall[1] * 1e6, "cpu_fixed_s": cpu[0],
                         "cpu_us_per_item": cpu[1] * 1e6, "rss_fixed_mb": rss[0], "rss_mb_per_million": rss[1] * 1e6}
    return out


def fit_lines(fitted: dict) -> list[str]:
    """One line per step of :func:`fits`."""
    lines = []
    for name, f in fitted.items():
        label = LABELS[name.removeprefix("baseline ")] + (" — baseline" if name.startswith("baseline ") else "")
        lines.append(f"- {label}: wall = {f['fixed_s']:.2f} s + {f['us_per_item']:.1f} µs x {f['item']}s; CPU = "
                     f"{f['cpu_fixed_s']:.2f} s + {f['cpu_us_per_item']:.1f} µs x {f['item']}s; peak RSS = "
                     f"{f['rss_fixed_mb']:,.0f} MB + {f['rss_mb_per_million']:,.0f} MB per million {f['item']}s")
    return lines


def table(result: dict) -> str:
    rows = []
    for p in result["points"]:
        for name, s in p["steps"].items():
            step = name.removeprefix("baseline ")
            label = LABELS[step] + (" — baseline" if name != step else "")
            rows.append([f"{p['candidates']:,}", label, spread(s["wall_s"], "{:.2f}"), p["runs"],
                         "1.00" if name == JOB else spread(s["wall_x_job"], "{:.2f}"), f"{s['cpu_s']['median']:.1f}",
                         "1.00" if name == JOB else f"{s['cpu_x_job']['median']:.2f}", spread(s["rss_mb"])])
    text = markdown_table(["candidates", "command", "wall s, median (min–max)", "runs", "x job (wall)", "CPU s (tree)",
                           "x job (CPU)", "peak RSS of the tree, MB"], rows, "llrrrrrr")
    lines = fit_lines(result["fits"])
    if lines:
        text += ("\n\nLeast-squares fit over the sizes of this run (fixed part + per item, each command's own "
                 "items):\n\n" + "\n".join(lines))
    work = []
    for p in result["points"]:
        i = p["items"]
        kinds = ", ".join(f"{n:,} {k}" for k, n in (i.get("exported_by_kind") or {}).items() if n)
        work.append([f"{p['candidates']:,}", p["sources"], f"{p['input_mb']:,.0f}", f"{i['evaluations']:,}",
                     f"{i['requests_exported']:,} ({kinds})", f"{i['request_bytes'] / 2**20:,.0f}",
                     f"{i['answers_imported']:,}" if i.get("answers_imported") is not None else "-",
                     f"{i['slots_compared']:,}" if i.get("slots_compared") is not None else "-",
                     f"{i['slots_changed']:,}" if i.get("slots_changed") is not None else "-"])
    text += "\n\nWhat each size's commands worked on:\n\n" + markdown_table(
        ["candidates", "sources", "input MB", "evaluations (run 1)", "requests exported", "request files MB",
         "answers imported", "slots compared", "slots changed"], work, "rrrrrrrrr")
    return text


def targets(result: dict) -> list[list]:
    """At TARGET_FROM candidates and above: each command's wall at most the job's, peak RSS at most 1 GB."""
    rows = []
    for p in result["points"]:
        if p["candidates"] < TARGET_FROM:
            continue
        for name in COMMANDS:
            s = p["steps"].get(name)
            if s is None:
                continue
            ratio, rss = s["wall_x_job"]["median"], s["rss_mb"]["max"]
            rows.append([f"{name} at {p['candidates']:,}: wall ≤ the job's", f"{ratio:.2f}x", ratio <= 1])
            rows.append([f"{name} at {p['candidates']:,}: peak RSS of the tree ≤ {TARGET_RSS_MB:,} MB",
                         f"{rss:,.0f} MB", rss <= TARGET_RSS_MB])
    return rows


def run(sizes: list[int], runs: int, cache: Path, scratch: Path, log, baseline: Path | None = None,
        baseline_steps: tuple[str, ...] = (EXPORT, COMPARE)) -> dict:
    points = []
    for size in sizes:
        log(f"the loop at {size:,}")
        points.append(loop_at(size, runs, cache, scratch, log, baseline, baseline_steps))
    return {"points": points, "fits": fits(points), "baseline": str(baseline) if baseline else None}


def section(sizes: list[int], runs: int, cache: Path, scratch: Path, report: dict, log, **kwargs) -> str:
    result = run(sizes, runs, cache, scratch, log, **kwargs)
    report["loop"] = result
    checks = targets(result)
    text = "## The loop: every command beside the job\n\n" + table(result)
    if checks:
        text += "\n\n" + markdown_table(["target", "measured", "met"],
                                        [[t, m, "yes" if ok else "no"] for t, m, ok in checks], "lll")
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.backfill", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="10000,100000,1000000", help="candidate counts (1M and more run once)")
    p.add_argument("--runs", type=int, default=3, help="rounds below 500k candidates")
    p.add_argument("--baseline", type=Path, help="another checkout whose commands run too, in the same rounds")
    p.add_argument("--baseline-commands", default=f"{EXPORT},{COMPARE}", help=f"of {', '.join(STEPS)}")
    p.add_argument("--cache", type=Path, default=REPO / "out" / "bench" / "cache")
    p.add_argument("--results", type=Path, default=REPO / "out" / "bench")
    args = p.parse_args(argv)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    steps = tuple(s.strip() for s in args.baseline_commands.split(",") if s.strip())
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        raise SystemExit(f"unknown command(s) {unknown}; known: {', '.join(STEPS)}")

    report: dict = {"load_before": os.getloadavg(), "code": code_version()}
    text = section([int(s) for s in args.sizes.split(",") if s.strip()], args.runs, args.cache.resolve(),
                   args.results.resolve() / "scratch", report, log, baseline=args.baseline.resolve() if args.baseline else None,
                   baseline_steps=steps)
    report["load_after"] = os.getloadavg()
    args.results.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (args.results / f"loop-{stamp}.json").write_text(json.dumps(report, indent=1, default=str))
    (args.results / "loop-latest.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
