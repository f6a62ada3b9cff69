"""Progress of a long per-key step, through logging (stderr), on any runner.

Generic: the pipeline names what a key is ("sources") and which inputs to
count ("candidates"). Each worker process keeps its own tally and logs a line
at most once per ``interval_s``: no line at all for a run shorter than that,
and never anything on stdout. A tally costs one clock read per key. Where the
input's size is known before the step starts (a read lists its files first),
a line says how much of it the worker has done: "reading candidates: 3 of 8
files, 49,152 records, 41% of 1.2 GB in 6.0 s (8,192 records/s)".

Every runner runs the DoFn in some Python process; :func:`ensure_handler`
gives the ``notarius.progress`` logger a stderr handler in that process when
nothing else would print it (the driver, in-process runners, the direct
runner's worker processes). On a remote runner (Dataflow, Flink) the lines
go to the worker's stderr, which the runner's logs collect.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

LOGGER_NAME = "notarius.progress"
DEFAULT_INTERVAL_S = 5.0
FORMAT = "%(asctime)s progress (pid %(process)d): %(message)s"


def ensure_handler() -> logging.Logger:
    """The progress logger, printing INFO lines to stderr once per process."""
    logger = logging.getLogger(LOGGER_NAME)
    if not any(getattr(h, "_notarius_progress", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT, "%H:%M:%S"))
        handler._notarius_progress = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False  # one line, not one more through Beam's or the root logger's handlers
    return logger


@dataclass(frozen=True)
class ProgressSpec:
    """What to count and how often to say it (picklable: it travels with the DoFn)."""

    unit: str = "keys"  # what one key is, plural ("sources")
    counted: tuple[str, ...] = ()  # input names whose records are counted ("candidates",)
    interval_s: float = DEFAULT_INTERVAL_S  # 0 or less: never log
    # What a line says the worker is doing, and has done: ("reading candidates", "read candidates").
    activity: tuple[str, str] = ("processing", "processed")
    # The whole input's size, where it is known before the step starts (its files listed): how many keys
    # and how many bytes. A line then says "of" them and the share of the bytes done. None: not known.
    total_keys: int | None = None
    total_bytes: int | None = None

    def tracker(self, clock: Callable[[], float] = time.monotonic,
                emit: Callable[[str], None] | None = None) -> "ProgressTracker":
        if emit is None:
            logger = ensure_handler()
            emit = logger.info
        return ProgressTracker(self, clock, emit)


@dataclass
class ProgressTracker:
    """One process's tally; logs when ``interval_s`` has passed since the last line."""

    spec: ProgressSpec
    clock: Callable[[], float]
    emit: Callable[[str], None]
    keys: int = 0
    records: dict[str, int] = field(default_factory=dict)
    done_bytes: int = 0  # of ``total_bytes``
    lines: int = 0

    def __post_init__(self) -> None:
        self.started = self.clock()
        self.last = self.latest = self.started

    def add(self, sizes: Mapping[str, int], keys: int = 1, done_bytes: int = 0) -> None:
        """``keys`` keys done (0: records of a key still in progress), with their records per input and the
        bytes of the input they took (counted toward ``total_bytes``)."""
        self.keys += keys
        self.done_bytes += done_bytes
        for name in self.spec.counted:
            self.records[name] = self.records.get(name, 0) + sizes.get(name, 0)
        if self.spec.interval_s <= 0:
            return
        now = self.latest = self.clock()
        if now - self.last >= self.spec.interval_s:
            self.last = now
            self.lines += 1
            self.emit(self.line(now))

    def finish(self) -> None:
        """A closing line, only when progress was shown at all (a short run stays silent)."""
        if self.lines:
            self.lines += 1
            self.emit(self.line(self.latest, done=True))

    def line(self, now: float, done: bool = False) -> str:
        elapsed = max(now - self.started, 1e-9)
        total = self.spec.total_keys
        parts = [f"{self.keys:,} {self.spec.unit}" if total is None else f"{self.keys:,} of {total:,} {self.spec.unit}"]
        parts += [f"{self.records.get(name, 0):,} {name}" for name in self.spec.counted]
        if self.spec.total_bytes:  # of the whole input: each worker's line says its own part
            share = min(self.done_bytes / self.spec.total_bytes, 1.0)
            parts.append(f"{share:.0%} of {size_text(self.spec.total_bytes)}")
        rate_of = self.spec.counted[0] if self.spec.counted else self.spec.unit
        rate = (self.records.get(rate_of, 0) if self.spec.counted else self.keys) / elapsed
        head = self.spec.activity[1] if done else f"{self.spec.activity[0]}:"
        return f"{head} {', '.join(parts)} in {elapsed:,.1f} s ({rate:,.0f} {rate_of}/s)"


def size_text(size: int) -> str:
    """``1234567`` -> ``1.2 MB`` (decimal units)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size} B"


def sizes_of(records: Mapping[str, Iterable]) -> dict[str, int]:
    return {name: len(values) for name, values in records.items()}  # type: ignore[arg-type]
