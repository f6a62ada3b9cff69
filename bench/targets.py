"""The speed targets in force (issue 43), judged on given figures: one definition for every section that prints them.

Retired, and printed nowhere: 20,000 candidates/s for the domain loop on one core, and the job
in-process at 0.85x (earlier 0.5x) the loop's rate. What replaced the in-process ratio is the split of
the job's extra instructions (``bench.instructions``): the target is on Beam's own part of it.
"""

from __future__ import annotations

PYSPARK_FACTOR = 2.0  # the job on 2 workers, against the best PySpark `local[2]` configuration
PYSPARK_FACTOR_FROM = 500_000  # at this size and above the job only has to be ahead
BEAM_SHARE = 0.06  # Beam's own part of the job's instructions per candidate, as a share of the loop's
# Issue 43: the job in-process's instructions per further candidate, against its count at this commit.
INSTRUCTION_BASELINE = "868435c"
INSTRUCTION_CUT = 0.90

PYSPARK_TARGET = "job on 2 workers >= 2x the best PySpark"
BEAM_TARGET = "Beam's own part <= 6% of the loop's instructions per candidate"


def met(ok: bool) -> str:
    return "yes" if ok else "no"


def pyspark_row(ratio: float, candidates: int, measured: str | None = None) -> list[str]:
    """[target, measured, met] for the job on 2 workers at ``ratio`` times the best PySpark's rate."""
    ahead_only = candidates >= PYSPARK_FACTOR_FROM
    goal = "ahead" if ahead_only else f"{PYSPARK_FACTOR:g}x"
    ok = ratio > 1 if ahead_only else ratio >= PYSPARK_FACTOR
    return [f"job on 2 workers vs the best PySpark at {candidates:,}: {goal}", measured or f"{ratio:.2f}x", met(ok)]


def beam_part_row(beam_per_candidate: float, loop_per_candidate: float) -> list[str]:
    """[target, measured, met] for Beam's own part of the job's extra (instructions per candidate)."""
    share = beam_per_candidate / loop_per_candidate
    return [BEAM_TARGET, f"{beam_per_candidate / 1e3:.1f} k = {share:.1%} of the loop's "
                         f"{loop_per_candidate / 1e3:.1f} k", met(share <= BEAM_SHARE)]


def instruction_cut_row(per_candidate: float, base_per_candidate: float, baseline: str) -> list[str]:
    """[target, measured, met] for the job in-process's instructions per further candidate against ``baseline``'s."""
    ratio = per_candidate / base_per_candidate
    return [f"job in-process's instructions per further candidate <= {INSTRUCTION_CUT:.2f}x {baseline}'s",
            f"{per_candidate / 1e3:.1f} k against {base_per_candidate / 1e3:.1f} k = {ratio:.3f}x",
            met(ratio <= INSTRUCTION_CUT)]


def instruction_cut_of(report: dict) -> tuple[float, float, str] | None:
    """(the job's, the baseline's instructions per further candidate, the baseline) from a report whose
    instruction section counted a baseline (``instructions_baseline``), or None."""
    base = report.get("instructions_baseline")
    job = report.get("instructions", {}).get("direct")
    if not base or not job or not job.get("per_candidate") or not base.get("per_candidate"):
        return None
    return job["per_candidate"], base["per_candidate"], base["revision"]


def beam_part_of(report: dict) -> tuple[float, float] | None:
    """(Beam's own part, the loop's) instructions per candidate from a report the instruction section wrote
    (``instructions_split``, bench.instructions), or None when it did not run."""
    split = report.get("instructions_split")
    return (split["beam"], split["loop"]) if split else None
