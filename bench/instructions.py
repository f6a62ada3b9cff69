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

DEFAULT_CONFIGS = "loop,direct"
_SUMMARY = re.compile(rb"^(?:summary|totals):\s*(\d+)", re.MULTILINE)


def instructions_of(callgrind_output: bytes) -> int:
    """The total instruction count of a callgrind output file (its ``summary:`` line)."""
    found = _SUMMARY.search(callgrind_output)
    if found is None:
        raise ValueError("no 'summary:' or 'totals:' line: not a callgrind output file")
    return int(found.group(1))


def counted(argv: list[str], cwd: Path, env: dict | None) -> int:
    """Instructions ``argv`` executes (its own process; Beam's multi-processing workers are not followed)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv], cwd=cwd, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode != 0:
            tail = done.stderr.decode("utf-8", "replace")[-2000:]
            raise SystemExit(f"{' '.join(argv[:3])} ... failed under callgrind (exit {done.returncode}):\n{tail}")
        return instructions_of(out.read_bytes())


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


def count_configuration(config, archive, checkout: Path = REPO) -> int:
    """Instructions one run of ``config`` executes on ``archive`` (JSON Lines outputs)."""
    with tempfile.TemporaryDirectory() as output:
        env = environment_for(checkout)
        env = {**env, **REPEATABLE_ENV, "PYTHONPATH": os.pathsep.join([str(SEEDED), env["PYTHONPATH"]])}
        return counted(command(config, archive, Path(output) / "out", "jsonl"), checkout, env)


def refuse_multi_processing(configs) -> None:
    multi = [c.key for c in configs if any("multi_processing" in option for option in c.extra)]
    if multi:
        raise SystemExit(f"{multi}: callgrind counts one process; multi-processing workers would be missed")


def fixed_and_marginal(points: list[tuple[int, int]]) -> tuple[float, float] | None:
    """(fixed part, instructions per further candidate) of a configuration counted at
    (candidates, instructions) points: the least-squares line; None with fewer than two sizes."""
    return linear_fit([n for n, _ in points], [i for _, i in points])


def section(sizes: list[int], config_keys: list[str], cache: Path, report: dict, log) -> str:
    """The instruction counts of ``config_keys`` at each archive size, as a report section."""
    title = "## Instructions (callgrind)\n\n"
    if shutil.which("valgrind") is None:
        return title + "Not counted: valgrind is not installed here (`apt install valgrind`)."
    configs = [CONFIGS[key] for key in config_keys]
    refuse_multi_processing(configs)
    archives = [ensure_archive(ArchiveSpec.at_density(n), cache, log) for n in sizes]
    checkout_bytecode(REPO)
    result: dict[str, dict] = {}
    for config in configs:
        points = []
        for archive in archives:
            log(f"  instructions {config.key} at {archive.candidates_in:,} candidates")
            points.append((archive.candidates_in, count_configuration(config, archive)))
        fit = fixed_and_marginal(points)
        result[config.key] = {"points": points, "fixed": fit and fit[0], "per_candidate": fit and fit[1]}
    report["instructions"] = result
    rows = []
    for config in configs:
        r = result[config.key]
        counted_at = ", ".join(f"{i / 1e9:.3f} G at {n:,}" for n, i in r["points"])
        fit = ("-", "-") if r["fixed"] is None else (f"{r['fixed'] / 1e9:.2f}", f"{r['per_candidate'] / 1e3:.1f}")
        rows.append([config.label, counted_at, *fit])
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
    return text


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
