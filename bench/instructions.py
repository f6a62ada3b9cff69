"""Instructions, not seconds: each configuration counted under callgrind on a small archive.

    .venv/bin/python -m bench.instructions                                   # the loop and the job in-process
    .venv/bin/python -m bench.instructions --configs loop,direct --checkouts .,../base   # a change against a base

This machine's speed moves by 25-40% within an hour, so a change worth a few
percent cannot be seen in wall times without many interleaved rounds. The
number of instructions a run executes does not move: valgrind's callgrind
counts them exactly (about 50x slower than a plain run, so the archive is
small, 5,000 candidates by default). Fixed costs (interpreter, imports,
Beam's graph and runner) are counted once per run, so compare a
configuration with itself across checkouts; between the loop and the job the
difference is mostly the job's fixed part.

``--checkouts`` runs the configurations on other checkouts of this repository
(e.g. ``git worktree add ../base HEAD~1``), each on its own sources. Linux
with valgrind installed (``apt install valgrind``).

``make bench`` (``bench.run``) adds the section of :func:`section`: the loop and
the job counted at two archive sizes, so the fixed part (start-up, imports,
graph) and the instructions each further candidate costs come apart.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.archive import REPO, ArchiveSpec, ensure_archive
from bench.procs import checkout_bytecode
from bench.configs import CONFIGS, command
from bench.stats import linear_fit, markdown_table
from bench.targets import beam_part_row, instruction_cut_of, instruction_cut_row

DEFAULT_CONFIGS = "loop,direct"
_SUMMARY = re.compile(rb"^(?:summary|totals):\s*(\d+)", re.MULTILINE)


def instructions_of(callgrind_output: bytes) -> int:
    """The total instruction count of a callgrind output file (its ``summary:`` line)."""
    found = _SUMMARY.search(callgrind_output)
    if found is None:
        raise ValueError("no 'summary:' or 'totals:' line: not a callgrind output file")
    return int(found.group(1))


# The job's extra instructions over the loop's, split by the object file that executes them (issue 43):
# a part whose object file name holds one of these marks.
PART_OBJECTS = {
    # The manifest's SHA-256 of every output byte: Python's hashlib runs OpenSSL (valgrind's CPU model has no
    # SHA extensions, so OpenSSL's AVX2 path is what is counted).
    "sha256": ("libcrypto", "_hashlib"),
    # The shuffle's zstd (transforms/raw_records.py): the zstandard extension and any system libzstd.
    "zstd": ("zstd", "zstandard"),
}
PART_REASONS = {
    "sha256": "SHA-256 of every output byte (the manifest's per-file hash)",
    "zstd": "the shuffle's zstd (kept for memory: at 100k in-process, 298 MB peak against 913 MB uncompressed)",
    "beam": "Beam's own part (the rest: the runner, coders, bundles, per-element calls)",
}


def cost_by_object(callgrind_output: str) -> dict[str, int]:
    """Exclusive instructions (the first event) per object file of a callgrind output file.

    A cost line belongs to the function of the last ``fn=`` and so to the object of the last ``ob=``;
    the cost line right after a ``calls=`` line is the callee's inclusive cost and is not counted here.
    Names are compressed: ``ob=(3) /lib/x.so`` defines id 3 (on an ``ob=`` or a ``cob=`` line), ``ob=(3)``
    refers back to it."""
    names: dict[str, str] = {}
    totals: dict[str, int] = {}
    positions = 1
    current = "???"
    after_calls = False
    for line in callgrind_output.splitlines():
        if not line:
            continue
        first = line[0]
        if first.isdigit() or first in "+-*":
            if after_calls:
                after_calls = False
                continue
            fields = line.split()
            if len(fields) > positions:
                totals[current] = totals.get(current, 0) + int(fields[positions])
        elif line.startswith("calls="):
            after_calls = True
        elif line.startswith(("ob=", "cob=")):
            reference = line.split("=", 1)[1]
            name = reference
            if reference.startswith("("):
                close = reference.index(")")
                key, rest = reference[1:close], reference[close + 1:].strip()
                name = names.setdefault(key, rest) if rest else names.get(key, reference)
            if line.startswith("ob="):
                current = name
        elif line.startswith("positions:"):
            positions = len(line.split(":", 1)[1].split())
    return totals


def parts_of(callgrind_output: str) -> dict[str, int]:
    """The run's instructions: ``total`` (the summary line) and the ``sha256`` and ``zstd`` parts (PART_OBJECTS)."""
    by_object = cost_by_object(callgrind_output)
    parts = {"total": instructions_of(callgrind_output.encode())}
    for part, marks in PART_OBJECTS.items():
        parts[part] = sum(n for name, n in by_object.items() if any(mark in name for mark in marks))
    return parts


def split_extra(loop: dict[str, float], job: dict[str, float]) -> dict[str, float]:
    """The job's instructions per candidate over the loop's, in three parts: the SHA-256 and zstd parts (each the
    job's minus the loop's, whose domain hashes too) and Beam's own part, the rest. ``loop`` and ``job``:
    instructions per candidate as :func:`parts_of` names them."""
    extra = job["total"] - loop["total"]
    sha256, zstd = job["sha256"] - loop["sha256"], job["zstd"] - loop["zstd"]
    return {"loop": loop["total"], "job": job["total"], "extra": extra, "sha256": sha256, "zstd": zstd,
            "beam": extra - sha256 - zstd}


def counted_parts(argv: list[str], cwd: Path, env: dict | None) -> dict[str, int]:
    """Instructions ``argv`` executes, with their parts (its own process; Beam's multi-processing workers are
    not followed)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv], cwd=cwd, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode != 0:
            tail = done.stderr.decode("utf-8", "replace")[-2000:]
            raise SystemExit(f"{' '.join(argv[:3])} ... failed under callgrind (exit {done.returncode}):\n{tail}")
        return parts_of(out.read_text("utf-8", "replace"))


def counted(argv: list[str], cwd: Path, env: dict | None) -> int:
    """Instructions ``argv`` executes (its own process; Beam's multi-processing workers are not followed)."""
    return counted_parts(argv, cwd, env)["total"]


def environment_for(checkout: Path) -> dict:
    """A configuration on ``checkout``: its own sources, nothing from the working directory."""
    return {**os.environ, "PYTHONPATH": str(checkout), "PYTHONSAFEPATH": "1"}


# A fixed environment for a count that repeats (issue 30: within about 0.03% run to run).
SEEDED = Path(__file__).resolve().parent / "seeded"  # sitecustomize.py: Python's random seeded
REPEATABLE_ENV = {
    "PYTHONHASHSEED": "0",  # the same set and dict orders in every run
    "OPENBLAS_NUM_THREADS": "1",  # an idle OpenBLAS thread costs instructions that follow valgrind's own speed
    "OMP_NUM_THREADS": "1",
}


def count_parts(config, archive, checkout: Path = REPO, extra: tuple[str, ...] = ()) -> dict[str, int]:
    """Instructions one run of ``config`` (and ``extra`` options) executes on ``archive`` (JSON Lines outputs),
    with their parts (:func:`parts_of`)."""
    with tempfile.TemporaryDirectory() as output:
        env = environment_for(checkout)
        env = {**env, **REPEATABLE_ENV, "PYTHONPATH": os.pathsep.join([str(SEEDED), env["PYTHONPATH"]])}
        return counted_parts([*command(config, archive, Path(output) / "out", "jsonl"), *extra], checkout, env)


def count_configuration(config, archive, checkout: Path = REPO) -> int:
    """Instructions one run of ``config`` executes on ``archive`` (JSON Lines outputs)."""
    return count_parts(config, archive, checkout)["total"]


def refuse_multi_processing(configs) -> None:
    multi = [c.key for c in configs if any("multi_processing" in option for option in c.extra)]
    if multi:
        raise SystemExit(f"{multi}: callgrind counts one process; multi-processing workers would be missed")


def fixed_and_marginal(points: list[tuple[int, int]]) -> tuple[float, float] | None:
    """(fixed part, instructions per further candidate) of a configuration counted at
    (candidates, instructions) points: the least-squares line; None with fewer than two sizes."""
    return linear_fit([n for n, _ in points], [i for _, i in points])


def baseline_checkout(revision: str, cache: Path) -> Path:
    """``revision`` of this repository as a source tree under ``cache`` (``git archive``, made once): a
    checkout the job is counted on beside this one. A folder is taken as it is."""
    if Path(revision).is_dir():
        return Path(revision).resolve()
    found = subprocess.run(["git", "rev-parse", "--verify", f"{revision}^{{commit}}"], cwd=REPO, text=True,
                           capture_output=True)
    if found.returncode != 0:
        raise ValueError(f"instruction baseline {revision!r} is neither a folder nor a commit of this repository")
    commit = found.stdout.strip()
    target = cache.resolve() / "checkouts" / commit[:12]
    if not (target / ".complete").exists():
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
        (target / ".complete").write_text(revision)
    return target


def section(sizes: list[int], config_keys: list[str], cache: Path, report: dict, log,
            baseline: str | None = None) -> str:
    """The instruction counts of ``config_keys`` at each archive size, as a report section; with
    ``baseline`` (a commit or a folder), the job in-process counted on it too, and the cut against it."""
    title = "## Instructions (callgrind)\n\n"
    if shutil.which("valgrind") is None:
        return title + "Not counted: valgrind is not installed here (`apt install valgrind`)."
    configs = [CONFIGS[key] for key in config_keys]
    refuse_multi_processing(configs)
    archives = [ensure_archive(ArchiveSpec.at_density(n), cache, log) for n in sizes]
    checkout_bytecode(REPO)
    result: dict[str, dict] = {}
    for config in configs:
        counts = []
        for archive in archives:
            log(f"  instructions {config.key} at {archive.candidates_in:,} candidates")
            counts.append((archive.candidates_in, count_parts(config, archive)))
        points = [(n, parts["total"]) for n, parts in counts]
        fit = fixed_and_marginal(points)
        per_part = {part: fixed_and_marginal([(n, parts[part]) for n, parts in counts]) for part in counts[0][1]}
        result[config.key] = {"points": points, "fixed": fit and fit[0], "per_candidate": fit and fit[1],
                              "parts": [{"candidates": n, **parts} for n, parts in counts],
                              "parts_per_candidate": None if fit is None else
                              {part: f[1] for part, f in per_part.items()}}
    report["instructions"] = result
    rows = [count_row(config.label, result[config.key]) for config in configs]
    missing = ""
    try:
        checkout = baseline_checkout(baseline, cache) if baseline is not None and "direct" in result else None
    except ValueError as exc:  # e.g. a shallow clone: the rest of the section still stands
        checkout, missing = None, f"\n\nNot counted against a baseline: {exc}."
    if checkout is not None:
        checkout_bytecode(checkout)
        points = []
        for archive in archives:
            log(f"  instructions direct at {archive.candidates_in:,} candidates on {baseline}")
            points.append((archive.candidates_in, count_configuration(CONFIGS["direct"], archive, checkout)))
        fit = fixed_and_marginal(points)
        counted = report["instructions_baseline"] = {"revision": baseline, "points": points, "fixed": fit and fit[0],
                                                     "per_candidate": fit and fit[1]}
        rows.append(count_row(f"{CONFIGS['direct'].label} at {baseline}", counted))
    text = (title + "Instructions each run executes under valgrind's callgrind (one process, PYTHONHASHSEED=0): "
            "the same code on the same archive gives the same count, whatever the machine's speed. The line "
            "through the sizes splits a run into its fixed part and what each further candidate costs.\n\n"
            + markdown_table(["configuration", "counted", "fixed part, G", "k instructions per further candidate"],
                             rows, "lrrr"))
    loop, job = result.get("loop"), result.get("direct")
    if loop and job and loop["per_candidate"] and job["per_candidate"]:
        text += (f"\n\n- per further candidate, the job in-process executes "
                 f"{job['per_candidate'] / loop['per_candidate']:.3f}x the loop's instructions; its fixed part is "
                 f"{(job['fixed'] - loop['fixed']) / 1e9:.2f} G more")
        split = split_extra(loop["parts_per_candidate"], job["parts_per_candidate"])
        report["instructions_split"] = split
        text += "\n\n" + split_text(split)
    text += missing
    cut = instruction_cut_of(report)
    if cut is not None:
        text += ("\n\nThe cut asked of the job in-process (issue 43), against its count at the baseline:\n\n"
                 + markdown_table(["target", "measured", "met"], [instruction_cut_row(*cut)], "lll"))
    return text


def count_row(label: str, counted: dict) -> list[str]:
    """A configuration's row of the section's table: where it was counted, its fixed part and its cost per
    further candidate (``counted``: its ``points``, ``fixed`` and ``per_candidate``)."""
    counted_at = ", ".join(f"{i / 1e9:.3f} G at {n:,}" for n, i in counted["points"])
    if counted["fixed"] is None:
        return [label, counted_at, "-", "-"]
    return [label, counted_at, f"{counted['fixed'] / 1e9:.2f}", f"{counted['per_candidate'] / 1e3:.1f}"]


def split_rows(split: dict[str, float]) -> list[list[str]]:
    """The job's extra per candidate, part by part with its reason, as table rows."""
    rows = [[PART_REASONS[part], f"{split[part] / 1e3:.1f}", f"{split[part] / split['loop']:.1%}"]
            for part in ("sha256", "zstd", "beam")]
    return rows + [["the job's extra over the loop", f"{split['extra'] / 1e3:.1f}", f"{split['extra'] / split['loop']:.1%}"]]


def split_text(split: dict[str, float]) -> str:
    """The split of the job's extra and the target on Beam's own part (bench.targets), as report text."""
    return ("The job's instructions per further candidate over the loop's, by the object file that executes "
            "them (callgrind's exclusive cost per object; each part the job's minus the loop's):\n\n"
            + markdown_table(["part", "k instructions per candidate", "of the loop's"], split_rows(split), "lrr")
            + "\n\n" + markdown_table(["target", "measured", "met"],
                                       [beam_part_row(split["beam"], split["loop"])], "lll"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.split("\n")[0])
    p.add_argument("--candidates", type=int, default=5_000)
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help="of loop, direct")
    p.add_argument("--checkouts", default=".", help="comma-separated checkouts to count the configurations on")
    p.add_argument("--cache", type=Path, default=REPO / "out" / "bench" / "cache")
    args = p.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("bench.instructions needs valgrind (apt install valgrind)")
    configs = [CONFIGS[c] for c in args.configs.split(",") if c]
    refuse_multi_processing(configs)
    checkouts = [(REPO / c).resolve() for c in args.checkouts.split(",") if c]
    archive = ensure_archive(ArchiveSpec.at_density(args.candidates), args.cache)
    for checkout in checkouts:
        checkout_bytecode(checkout)  # as an installed package has it (bench.procs)
    rows: list[list[str]] = []
    first: dict[str, int] = {}  # per configuration, the count on the first checkout
    for config in configs:
        for checkout in checkouts:
            n = count_configuration(config, archive, checkout)
            base = first.setdefault(config.key, n)
            print(f"  {config.key:<18} {checkout}  {n / 1e9:7.3f} G instructions", file=sys.stderr, flush=True)
            rows.append([config.label, str(checkout), f"{n / 1e9:.3f}", f"{n / archive.candidates_in / 1e3:.1f}",
                         f"{n / base:.4f}"])
    print(f"{archive.candidates_in:,} candidates, {archive.sources} sources; JSON Lines outputs.\n")
    print(markdown_table(["configuration", "checkout", "instructions, G", "k per candidate (fixed part included)",
                          "x the first checkout"], rows, "llrrr"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
