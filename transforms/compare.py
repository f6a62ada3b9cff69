"""compare's transforms (contract §6.3): both runs' rows read per source, and each source compared.

Wiring only: every rule of a comparison is ``analysis.compare``'s; ``pipelines.compare`` builds the job from
these and writes its documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import apache_beam as beam
import orjson

from analysis.compare import (COMPARED_OUTPUTS, OUTPUT_ARTIFACTS, OUTPUT_EVALUATIONS, OUTPUT_REQUESTS, READ_FIELDS,
                              RUN_A, RUNS, compare_source, facts_of)
from analysis.cost import comparison_counts
from analysis.compare_folder import input_name
from analysis.slots import RowError
from transforms.files import literal_pattern
from transforms.raw_records import decode_block
from transforms.read import COUNTS, KEYED, KeyedInput, ReadKeyedInputs
from transforms.write import join_path

# A row of a verified run is read whole, however large its raw response (the job bounds its inputs).
READ_LIMIT = 2**31 - 1
# Blocks holding a row of the wrong type are tallied under this key (no more output of the reading stage: on
# Flink, each costs one more copy of that stage's whole output).
REFUSED_TALLY = ("refused_blocks",)


def run_pattern(folder: str, output: str) -> str:
    """The part files of one output of a run (every family's, for artifacts); the folder read as named."""
    if output == OUTPUT_ARTIFACTS:
        return join_path(literal_pattern(folder), OUTPUT_ARTIFACTS, "*", "part-*")
    return join_path(literal_pattern(folder), output, "part-*")


@dataclass(frozen=True)
class SourceComparison:
    """One source's part of the comparison: its changed slots' rows (in slot order), its share of every
    count of compare.json (with ``REFUSED_TALLY``: blocks holding a row of the wrong type, which keep the
    comparison from being committed) and of its ``cost`` (``analysis.cost.comparison_counts``)."""

    source_id: str
    rows: tuple[dict, ...]
    tally: Mapping[tuple, int]
    cost: Mapping[tuple, int]


def compare_source_blocks(element) -> SourceComparison:
    """``(source, [(input name, block)])``: every block both runs wrote of one source -> its comparison.

    Per source, not per slot: a slot names its source, and grouping the runs' rows by slot made one element
    per slot and run for the runner to encode, hold and group (at 101k candidates two thirds of compare's
    time, and its peak memory grew with the runs)."""
    source_id, named_blocks = element
    parts, refused = [], 0
    evaluations: dict[str, list] = {run: [] for run in RUNS}
    requests_a: list = []
    for name, block in named_blocks:
        run, output = name.split(".", 1)
        rows = list(map(orjson.loads, decode_block(block)))
        try:
            parts.append((run, output, facts_of(output, rows)))
        except RowError:
            # Possible in a run that verifies (a JSON Lines file edited and listed anew): nothing of the block
            # is compared and the comparison is not committed; the command names the file and the row.
            refused += 1
            continue
        if output == OUTPUT_EVALUATIONS:  # what the runs cost, from the same rows (read once)
            evaluations[run] += rows
        elif output == OUTPUT_REQUESTS and run == RUN_A:
            requests_a += rows
    comparisons = compare_source(parts)
    tally: dict[tuple, int] = {}
    for comparison in comparisons:
        comparison.tally_into(tally)
    if refused:
        tally[REFUSED_TALLY] = refused
    return SourceComparison(source_id, tuple(row for c in comparisons if (row := c.row()) is not None), tally,
                            comparison_counts(evaluations, requests_a))


class ReadRuns(beam.PTransform):
    """Both runs' evaluations, requests and artifacts -> ``(source, (input name, block))`` per source and file,
    and the reading step's counts (rows read, rows not readable, per run and output)."""

    def __init__(self, runs: Mapping[str, str]) -> None:
        super().__init__()
        self.runs = dict(runs)

    def expand(self, pbegin):
        inputs = tuple(KeyedInput(run_pattern(self.runs[run], output), input_name(run, output), "source_id",
                                  READ_LIMIT, fields=READ_FIELDS[output])
                       for run in RUNS for output in COMPARED_OUTPUTS)
        read = pbegin | "Read" >> ReadKeyedInputs(inputs)
        return read[KEYED], read[COUNTS]


class CompareSources(beam.PTransform):
    """``(source, (input name, block))`` -> one ``SourceComparison`` per source of A or B."""

    def expand(self, blocks):
        return blocks | "GroupBySource" >> beam.GroupByKey() | "Compare" >> beam.Map(compare_source_blocks)
