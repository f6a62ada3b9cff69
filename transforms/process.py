"""Join keyed inputs and hand each key's records to one pure function.

Generic: the function (a domain entry point, chosen by the pipeline) decides
everything; this module only groups, calls, and routes what comes back to
tagged outputs and metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import apache_beam as beam
from apache_beam.metrics import Metrics

COUNTS = "counts"

# fn(key, {input name: [record bytes]}) -> ({output tag: [rows]}, {counter: n})
PerKeyFn = Callable[[str, Mapping[str, list]], tuple[Mapping[str, Sequence[dict]], Mapping[str, int]]]


class _ApplyPerKey(beam.DoFn):
    def __init__(self, fn: PerKeyFn) -> None:
        self.fn = fn

    def process(self, element):
        key, grouped = element
        outputs, counts = self.fn(key, {name: list(values) for name, values in grouped.items()})
        for tag, rows in outputs.items():
            for row in rows:
                yield beam.pvalue.TaggedOutput(tag, row)
        for name, value in counts.items():
            Metrics.counter("job", name).inc(value)
        yield beam.pvalue.TaggedOutput(COUNTS, dict(counts))


@dataclass
class JoinAndApply(beam.PTransform):
    """``{input name: PCollection[(key, bytes)]}`` -> CoGroupByKey -> ``fn`` per key.

    Returns tagged outputs ``output_tags`` plus ``counts`` (one dict per key).
    """

    fn: PerKeyFn
    output_tags: tuple[str, ...]

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, keyed_inputs):
        return (
            keyed_inputs
            | "Join" >> beam.CoGroupByKey()
            | "Apply" >> beam.ParDo(_ApplyPerKey(self.fn)).with_outputs(COUNTS, *self.output_tags)
        )


class SumCounts(beam.CombineFn):
    """Adds up counter dicts; exact on every runner."""

    def create_accumulator(self):
        return {}

    def add_input(self, acc, counts):
        for name, value in counts.items():
            acc[name] = acc.get(name, 0) + value
        return acc

    def merge_accumulators(self, accs):
        merged: dict = {}
        for acc in accs:
            self.add_input(merged, acc)
        return merged

    def extract_output(self, acc):
        return dict(sorted(acc.items()))
