"""Small statistics and table helpers for the benchmark report."""

from __future__ import annotations

import statistics
from typing import Mapping, Sequence


def summary(values: Sequence[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """Least-squares ``y = a + b x``: (a, b), or None with fewer than two distinct x."""
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    marks = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def round_order(names: Sequence[str], round_no: int) -> list[str]:
    """The configurations in the order of round ``round_no`` (from 1): as given, then reversed
    every other round (A B C, C B A, ...). The machine's speed drifts within a round too, so
    over two rounds each configuration runs early and late alike; and neighbours stay neighbours."""
    return list(names) if round_no % 2 else list(reversed(names))


def spread(s: dict, fmt: str = "{:,.0f}") -> str:
    """'median (min–max)'."""
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"


def check_same_evaluations(rows_by_config: Mapping[str, Sequence[dict]], where: str = "") -> None:
    """Every configuration must have evaluated the same archive alike: one evaluation count for all runs."""
    counts = {row["evaluations"] for rows in rows_by_config.values() for row in rows}
    if len(counts) > 1:
        raise SystemExit(f"configurations disagree on the number of evaluations{where}: {sorted(counts)}")
