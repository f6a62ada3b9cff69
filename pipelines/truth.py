"""``--truth``: a run measured against the simulated producer's ground truth, read from its file.

A ground-truth file (``--truth-out`` of ``sample.simulated_producer`` or ``sample.simulated_batch``)
is JSON Lines, optionally gzipped. Its first line says what its producer's defect kinds mean
(``analysis.ground_truth.vocabulary_record``: which kinds are benign, which endpoint ordering
repairs, which hide the others, and the reason codes each blocking kind is reported under); every
other line is one candidate's truth (``parse_truth_row``). Files joined end to end (the demo joins
the producer's and the batch's) keep each one's vocabulary line, and those must agree.

The commands that accept ``--truth`` (``python -m pipelines.retry_economy``, ``python -m
pipelines.report``, the demo) take the words from the file, so none of them imports the simulator
(``tests/test_layers.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import orjson

from analysis.ground_truth import (DefectVocabulary, TruthRow, is_vocabulary_record, parse_truth_row,
                                   parse_vocabulary_record)
from domain.errors import NotariusError
from pipelines.outputs import open_input


class TruthFileError(NotariusError, ValueError):
    """A ``--truth`` file that cannot be read as ground truth; the message is one line naming the file."""


@dataclass(frozen=True)
class GroundTruth:
    """A ground-truth file and the words its producer counts defects in: its defect kinds as the domain
    computations need them (``vocabulary``), and the evaluations' reason codes each blocking kind is
    reported under (``reason_codes``: the ground truth counts defects by kind, the evaluations issues by
    code; benign kinds have none)."""

    path: Path
    vocabulary: DefectVocabulary
    reason_codes: Mapping[str, tuple[str, ...]]


def ground_truth(path: str | os.PathLike | None) -> GroundTruth | None:
    """The ground truth in ``path`` with the vocabulary its first line declares; None without a path."""
    if not path:
        return None
    with open_input(str(path)) as stream:
        first = next((line for line in stream if line.strip()), b"")
    try:
        vocabulary, reason_codes = parse_vocabulary_record(orjson.loads(first) if first else {})
    except (orjson.JSONDecodeError, ValueError) as error:
        raise TruthFileError(f"--truth {path}: not a ground-truth file of the simulated producer: its first line "
                             f"declares no defect vocabulary ({error})") from None
    return GroundTruth(Path(path), vocabulary, reason_codes)


def read_truth(truth: GroundTruth) -> list[TruthRow]:
    """Every candidate row of the ground-truth file; its vocabulary lines must all say what the first says."""
    rows = []
    with open_input(str(truth.path)) as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
                if is_vocabulary_record(record):
                    if parse_vocabulary_record(record) != (truth.vocabulary, truth.reason_codes):
                        raise ValueError("a defect vocabulary other than the first line's")
                else:
                    rows.append(parse_truth_row(record))
            except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as error:
                raise TruthFileError(f"--truth {truth.path}: line {number} is not ground truth "
                                     f"({type(error).__name__}: {error})") from None
    return rows


def uncovered(truth: GroundTruth, rows: list[TruthRow], evaluations: list[Mapping], out: str) -> str | None:
    """One line naming what of the run in ``out`` the ground truth has no row for (its evaluated candidates
    by source, and the first of them), or None when it covers the run: figures from a truth that misses
    candidates would count them as if they had no defect."""
    known = {row.candidate_id for row in rows}
    missing = [row for row in evaluations if row["candidate_id"] not in known]
    if not missing:
        return None
    by_source: dict[str, int] = {}
    for row in missing:
        by_source[row["source_id"]] = by_source.get(row["source_id"], 0) + 1
    sources = ", ".join(f"{source} {count:,}" for source, count in sorted(by_source.items())[:MISSING_SHOWN])
    sources += f" and {len(by_source) - MISSING_SHOWN} more sources" if len(by_source) > MISSING_SHOWN else ""
    first = ", ".join(sorted(row["candidate_id"] for row in missing)[:MISSING_SHOWN])
    return (f"--truth {truth.path} does not cover the run in {out}: {len(missing):,} of {len(evaluations):,} "
            f"evaluated candidates have no ground truth (by source: {sources}; first: {first}); give the "
            "ground truth of every candidate file the run read (files joined end to end)")


MISSING_SHOWN = 3  # sources and candidate ids named in the line
