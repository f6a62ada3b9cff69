"""Join keyed inputs and hand each key's records to one pure function.

Generic: the function (a domain entry point, chosen by the pipeline) decides
everything; this module only groups, calls, and routes what comes back to
tagged outputs and metrics.

Inputs arrive as one collection of ``(key, (input name, block))`` pairs, a
block holding several records (``decode`` unpacks it; by default the blocks
``transforms.read.ReadKeyedInputs`` makes), and
outputs leave as one ``(label, block)`` element per key and label (a block: a
sequence of rows), all in one collection, never one element per record or row:
Beam's cost is per element, and the per-key call already holds every row of
its key. Counts leave as one small dict per key, which the job adds up where it
reads them (``summed_counts``) rather than through a combine. One collection rather
than one per label, because the runner sizes a sample of every collection's
elements by encoding them: with few keys per label almost every block of a
per-label collection is sampled, and a second step to label them was sampled
again (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import apache_beam as beam
from apache_beam.metrics import Metrics

from runners.collector import collector_paused, tune_collector
from transforms.progress import ProgressSpec, sizes_of
from transforms.raw_records import decode_block

COUNTS = "counts"
BLOCKS = "blocks"
# The first part of a rider's key, a tuple: never a record's key (``key_record`` gives strings, and
# ``JoinAndApply``'s keys for ``fn`` are strings).
RIDER = "rider"

# fn(key, {input name: [record bytes]}) -> ({output label: [rows]}, {counter: n})
PerKeyFn = Callable[[str, Mapping[str, list]], tuple[Mapping[str, Sequence[dict]], Mapping[str, int]]]
# One input block -> its records.
DecodeFn = Callable[[object], list]


class LabelledBlock(tuple):
    """``(label, rows)``: one key's rows of one output, as ``JoinAndApply`` emits them (its coder: ``BlockCoder``)."""

    __slots__ = ()


class BlockCoder(beam.coders.Coder):
    """``LabelledBlock``'s coder: FastPrimitivesCoder's bytes, and a size estimate that does not encode the block.

    Why: a runner samples its collections' element sizes for its metrics by encoding the sampled
    elements (the first ten of every collection, then about 10/N); a block is a whole source's rows
    of one output, and the blocks never leave the step that writes them. Encoding sampled blocks
    cost the job ~3k instructions per candidate (docs/benchmarks.md). The estimate is the first
    row's encoded size times the row count."""

    def __init__(self) -> None:
        self._rows = beam.coders.FastPrimitivesCoder()

    def encode(self, value) -> bytes:
        return self._rows.encode(tuple(value))

    def decode(self, encoded: bytes) -> "LabelledBlock":
        return LabelledBlock(self._rows.decode(encoded))

    def estimate_size(self, value) -> int:
        label, rows = value
        return len(label) + (len(rows) * len(self._rows.encode(rows[0])) if rows else 0)


beam.coders.registry.register_coder(LabelledBlock, BlockCoder)


def rider(origin: tuple, tag: str, payload) -> tuple:
    """An element that rides the join to ``JoinAndApply``'s outputs without meeting a record: ``payload``
    leaves as a ``blocks`` element (``(label, rows)``) or a ``counts`` one, as ``tag`` says. Its key
    (``origin``: unique per rider, e.g. its file and a number) groups it with nothing else.

    Why: the step before the join then has one output. Flink's batch translation ships a stage's
    whole output to each consumer, so dead letters and counts as outputs of their own cost the
    read stage's output written three times (transforms/read.py)."""
    return (RIDER, *origin), (tag, payload)


class _ApplyPerKey(beam.DoFn):
    def __init__(self, fn: PerKeyFn, decode: DecodeFn, labels: tuple[str, ...],
                 progress: ProgressSpec | None = None) -> None:
        self.fn = fn
        self.decode = decode
        self.labels = frozenset(labels)
        self.progress = progress
        self.tracker = None

    def setup(self):
        tune_collector()
        self.counters: dict = {}  # counter name -> its Metrics counter
        if self.progress is not None:
            self.tracker = self.progress.tracker()

    def teardown(self):
        if self.tracker is not None:
            self.tracker.finish()

    def process(self, element):
        key, named_blocks = element
        if type(key) is tuple and key[0] == RIDER:  # riders (``rider``): their payloads leave as they came
            for tag, payload in named_blocks:
                if tag == COUNTS:
                    yield beam.pvalue.TaggedOutput(COUNTS, payload)
                else:
                    yield self._checked(key, *payload)
            return
        decode = self.decode
        records: dict[str, list] = {}
        for name, block in named_blocks:
            records.setdefault(name, []).extend(decode(block))
        with collector_paused():
            outputs, counts = self.fn(key, records)
        if self.tracker is not None:
            self.tracker.add(sizes_of(records))
        for label, rows in outputs.items():
            if rows:
                yield self._checked(key, label, rows)
        counters = self.counters
        for name, value in counts.items():
            counter = counters.get(name)
            if counter is None:  # made once per name: a source's dozens of counts would each build one
                counter = counters[name] = Metrics.counter("job", name)
            counter.inc(value)
        # One small dict per key (a source), summed where they are read (``summed_counts``): not summed per
        # bundle in the DoFn, whose state a runner that retries or splits bundles (the BundleBasedDirectRunner)
        # does not keep apart from other bundles' (tests/test_bundle_retry.py).
        yield beam.pvalue.TaggedOutput(COUNTS, dict(counts))

    def _checked(self, key, label: str, rows) -> tuple:
        if label not in self.labels:  # a label no writer knows would lose its rows
            raise ValueError(f"{key!r}: output {label!r} is not one of {sorted(self.labels)}")
        return LabelledBlock((label, rows))


@dataclass
class JoinAndApply(beam.PTransform):
    """``PCollection[(key, (input name, block))]`` -> GroupByKey -> ``fn`` once per key, with
    ``{input name: [record]}`` (an input with no record for the key is absent). Riders
    (``rider``) pass through to the outputs without a call.

    Returns ``blocks``: ``(label, rows)``, one key's non-empty block of rows per
    label it has rows for (``labels``: every label ``fn`` may use), plus
    ``counts``: each key's and rider's counts dict (add them up: ``SumCounts``,
    ``summed_counts``). With
    ``progress``, each worker logs how far it got on stderr
    (``transforms.progress``).
    """

    fn: PerKeyFn
    labels: tuple[str, ...]
    decode: DecodeFn = decode_block
    progress: ProgressSpec | None = None

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, keyed):
        return (
            keyed
            | "Join" >> beam.GroupByKey()
            | "Apply" >> beam.ParDo(_ApplyPerKey(self.fn, self.decode, self.labels, self.progress))
            .with_output_types(LabelledBlock)
            .with_outputs(COUNTS, main=BLOCKS)
        )


def add_counts(total: dict, counts: Mapping[str, int]) -> dict:
    """``total`` with ``counts`` added to it, name by name (in place; returned)."""
    for name, value in counts.items():
        total[name] = total.get(name, 0) + value
    return total


def summed_counts(many) -> dict:
    """Counter dicts added up, by name in sorted order (what ``SumCounts`` gives, for a list at hand)."""
    total: dict = {}
    for counts in many:
        add_counts(total, counts)
    return dict(sorted(total.items()))


class SumCounts(beam.CombineFn):
    """Adds up counter dicts; exact on every runner."""

    def create_accumulator(self):
        return {}

    def add_input(self, acc, counts):
        return add_counts(acc, counts)

    def merge_accumulators(self, accs):
        merged: dict = {}
        for acc in accs:
            self.add_input(merged, acc)
        return merged

    def extract_output(self, acc):
        return dict(sorted(acc.items()))
