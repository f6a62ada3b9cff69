"""Read record files (JSON Lines, optionally gzip; Avro) into keyed raw records.

Generic: nothing here knows a D&D rule. A record is kept as the bytes it was
read as until the per-key step; only its key field is looked at here. Every
record that cannot be read or keyed becomes a dead letter with its original
bytes, and every record read is counted, so the job can prove conservation.

What is done to each record's bytes (lines split, Avro and Parquet records as JSON lines,
keying, blocks) is in ``transforms/raw_records.py``, without Beam; here are the DoFn that reads
each file through it and the transform that wires the step.

Records leave in blocks, not one element each: ``keyed`` carries
``(key, (input name, block))`` where a block packs the records of one key met in one file
(``encode_block``/``decode_block``), and ``dead`` carries lists of dead-letter
rows. Read for a ``JoinAndApply`` (``dead_letters_label``), the step has one
output instead: the dead letters and counts ride with the keyed blocks to the
join (``transforms.process.rider``), because Flink's batch translation writes a
stage's whole output once per consumer (three times for three outputs).

Beam pays a fixed cost per element (and per shuffled element), so a
block per (file, key) instead of a line per element is most of the job's
speed; packed blocks are compressed, which cuts what the shuffle holds and
moves about fourfold (docs/benchmarks.md). A file's pending blocks are
flushed whenever they hold ``BLOCK_BYTES``, so memory stays bounded whatever
the file's size or order.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

import apache_beam as beam
import fastavro
import orjson
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.metrics import Metrics

from domain import counters
from domain.rows import dead_letter_row
from runners.collector import tune_collector
from transforms.compression import decompressed
from transforms.files import absolute_pattern, matching_metadata
from transforms.process import BLOCKS, rider
from transforms.progress import ProgressSpec
from transforms.json_keys import key_of
from transforms.raw_records import (Blocks, avro_payload, avro_record_to_json, exact, key_record, oversize_dead_letter,
                                    project, split_lines)

KEYED = "keyed"
DEAD = "dead"
COUNTS = "counts"

# Pending keyed bytes of one file before its blocks are flushed; dead letters per block.
BLOCK_BYTES = 16 << 20
DEAD_BLOCK_ROWS = 1000
PARQUET_BATCH_ROWS = 4096
# Reading progress: files done and records read, tallied every PROGRESS_RECORDS records of a file.
RECORDS = "records"
PROGRESS_RECORDS = 16384


def reading_progress(input_name: str, interval_s: float) -> ProgressSpec:
    """Progress lines for reading one input ("reading candidates: 3 of 8 files, 49,152 records, 41% of
    1.2 GB ..."; how many files and bytes the input holds is filled in by ``ReadKeyedInputs``)."""
    return ProgressSpec("files", (RECORDS,), interval_s, (f"reading {input_name}", f"read {input_name}"))


def with_known_size(spec: "KeyedInput") -> "KeyedInput":
    """``spec`` whose progress knows how many files and bytes its pattern matches now (listed once, before
    the run starts), so each line says the share done; unchanged without progress, or when the listing
    fails (the read then reports that failure itself)."""
    if spec.progress is None or spec.progress.interval_s <= 0:
        return spec
    try:
        files = [m for _, m in _match_input((spec.input_name, absolute_pattern(spec.pattern)))]
    except Exception:  # noqa: BLE001 - progress is never why a run fails
        return spec
    progress = replace(spec.progress, total_keys=len(files), total_bytes=sum(m.size_in_bytes for m in files))
    return replace(spec, progress=progress)


class _Position:
    """Where the reader is in the file's bytes as stored (compressed or not), when the stream says."""

    def __init__(self) -> None:
        self.stream = None

    def now(self) -> int | None:
        try:
            return None if self.stream is None else self.stream.tell()
        except (OSError, ValueError, AttributeError):  # a stream that cannot tell: counted when the file ends
            return None


@dataclass(frozen=True)
class KeyedInput:
    """One input of ``ReadKeyedInputs``: its files, its name (in counts, dead letters and the
    per-key groups) and how its records are keyed."""

    pattern: str
    input_name: str
    key_field: str
    max_record_bytes: int
    # Avro and Parquet: the fields to keep, nested ({name: sub-shape or None}); None keeps every field.
    fields: dict | None = None
    # Logs how far each worker got (files, records) on stderr; see ``reading_progress``.
    progress: ProgressSpec | None = None
    # Records keyed by a bucket of their key (its crc32 modulo this) instead of the key itself: many
    # records per block when keys are nearly unique (``transforms.resolve``). None: the key.
    key_buckets: int | None = None


def _match_input(named_pattern: tuple[str, str]):
    """(input name, pattern) -> (input name, file metadata) per matching file; folders are
    skipped as ``fileio.ReadMatches`` skips them, and no match is no file (preflight decides)."""
    name, pattern = named_pattern
    for metadata in matching_metadata(pattern):
        if not metadata.path.endswith(("/", "\\")):
            yield name, metadata


def _match_inputs(_seed, named_patterns: list[tuple[str, str]]):
    """Every input's files, in the order of ``named_patterns`` (``_match_input`` for each)."""
    for named_pattern in named_patterns:
        yield from _match_input(named_pattern)


class _ReadAndKey(beam.DoFn):
    """(input name, file metadata) -> (key, (input name, block)) pairs, dead-letter row blocks and counts."""

    def __init__(self, inputs: dict[str, KeyedInput], dead_letters_label: str | None = None) -> None:
        self.inputs = inputs
        self.dead_letters_label = dead_letters_label
        self.trackers: dict = {}

    def _keyed(self, element):
        return element if self.dead_letters_label is not None else beam.pvalue.TaggedOutput(KEYED, element)

    # A rider's key names what it carries, its input and file, and (dead-letter blocks) which block.
    def _dead(self, name: str, path: str, block_no: int, rows: list[dict]):
        if self.dead_letters_label is None:
            return beam.pvalue.TaggedOutput(DEAD, rows)
        return rider((DEAD, name, path, block_no), BLOCKS, (self.dead_letters_label, rows))

    def _counts(self, name: str, path: str, counts: dict):
        if self.dead_letters_label is None:
            return beam.pvalue.TaggedOutput(COUNTS, counts)
        return rider((COUNTS, name, path), COUNTS, counts)

    def setup(self) -> None:
        tune_collector()
        self.bad_records = {name: Metrics.counter("read", f"{name}_dead_letters") for name in self.inputs}
        self.records = {name: Metrics.counter("read", counters.records_in(name)) for name in self.inputs}
        self.trackers = {name: spec.progress.tracker() for name, spec in self.inputs.items() if spec.progress is not None}

    def teardown(self) -> None:
        for tracker in self.trackers.values():
            tracker.finish()

    def process(self, element):
        name, metadata = element
        spec = self.inputs[name]
        readable = fileio.ReadableFile(metadata)
        path = metadata.path
        records = blank = dead_count = dead_blocks = 0
        dead: list[dict] = []
        blocks = Blocks(BLOCK_BYTES)
        tracker = self.trackers.get(name)
        position, counted_bytes = _Position(), 0  # bytes of this file already counted toward progress
        key_field, limit, buckets = spec.key_field, spec.max_record_bytes, spec.key_buckets
        try:
            if path.endswith(".avro"):
                source = _avro_lines(spec, readable, dead, position)
            elif path.endswith(".parquet"):
                source = _parquet_lines(spec, readable)
            else:
                source = _text_lines(spec, readable, position)
            # Once per record: the common case (a line keyed by key_of's fast path) takes no other call.
            for line in source:
                if type(line) is bytes and line.strip():
                    records += 1
                    if tracker is not None and not records % PROGRESS_RECORDS:  # one large file is not silent
                        now = position.now()
                        done = 0 if now is None else max(now - counted_bytes, 0)
                        counted_bytes += done
                        tracker.add({RECORDS: PROGRESS_RECORDS}, keys=0, done_bytes=done)
                    key = key_of(line, key_field) if len(line) <= limit else None
                    if key is None or not key.strip():  # parsed in full: its key after all, or why not
                        keyed = key_record(line, name, key_field, limit)
                        if isinstance(keyed, dict):
                            dead.append(keyed)
                            key = None
                        else:
                            key = keyed[0]
                    if key is not None:
                        if blocks.add(key if buckets is None else bucket_of(key, buckets), line):
                            for key, block in blocks.flush():
                                yield self._keyed((key, (name, block)))
                        continue
                elif type(line) is bytes:
                    blank += 1
                    continue
                else:  # None: already a dead letter (Avro); or a text line past the limit
                    records += 1
                    if line is not None:
                        dead.append(oversize_dead_letter(name, limit, line.head))
                if len(dead) >= DEAD_BLOCK_ROWS:
                    dead_count += len(dead)
                    dead_blocks += 1
                    yield self._dead(name, path, dead_blocks, dead)
                    dead = []
        except Exception as exc:  # unreadable file or corrupt compression: the rest of it is one dead letter
            records += 1
            unreadable = True
            dead.append(dead_letter_row(
                name,
                f"file {path} could not be read past record {records - 1}: {type(exc).__name__}: {exc}"[:500],
                b""))
        else:
            unreadable = False
        # Records keyed before a failure are still delivered: each was counted in.
        for key, block in blocks.flush():
            yield self._keyed((key, (name, block)))
        if dead:
            dead_count += len(dead)
            dead_blocks += 1
            yield self._dead(name, path, dead_blocks, dead)
        self.records[name].inc(records)
        self.bad_records[name].inc(dead_count)
        if tracker is not None:
            tracker.add({RECORDS: records % PROGRESS_RECORDS},
                        done_bytes=max((metadata.size_in_bytes or 0) - counted_bytes, 0))
        counts = {
            counters.records_in(name): records,
            counters.dead_letters(name): dead_count,
            counters.blank_lines(name): blank,
        }
        if unreadable:
            # How many records the damaged part held is unknown: the manifest must not claim conservation.
            counts[counters.unreadable_file(name, path)] = 1
        yield self._counts(name, path, counts)


def bucket_of(key: str, buckets: int) -> str:
    """The bucket of a key (stable across processes and runs: crc32, not ``hash``)."""
    return str(zlib.crc32(key.encode("utf-8", "surrogatepass")) % buckets)


def _text_lines(spec: KeyedInput, readable: fileio.ReadableFile, position: _Position | None = None):
    """The lines of a JSON Lines file (``split_lines``: bytes, or ``Oversize`` past the record limit)."""
    with readable.open(compression_type=CompressionTypes.UNCOMPRESSED) as raw, decompressed(raw, readable.metadata.path) as stream:
        if position is not None:
            position.stream = raw
        yield from split_lines(stream, spec.max_record_bytes, drop_bom=True)


def _avro_lines(spec: KeyedInput, readable: fileio.ReadableFile, dead: list[dict],
                position: _Position | None = None):
    with readable.open(compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        if position is not None:
            position.stream = stream
        for record in fastavro.reader(stream):
            try:
                yield avro_record_to_json(project(record, spec.fields))
            except (UnicodeDecodeError, TypeError) as exc:
                dead.append(dead_letter_row(spec.input_name, f"Avro record has non-UTF-8 text ({exc})"[:300],
                                            avro_payload(record)))
                yield None


def _parquet_lines(spec: KeyedInput, readable: fileio.ReadableFile):
    """Rows of a Parquet file (e.g. a Parquet run's retry requests or registries) as JSON lines,
    projected like Avro records, each in an allocation of its own length (``exact``: they wait in blocks)."""
    import pyarrow.parquet as pq

    with readable.open(compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        for batch in pq.ParquetFile(stream).iter_batches(batch_size=PARQUET_BATCH_ROWS):
            for row in batch.to_pylist():
                yield exact(orjson.dumps(project(row, spec.fields)))


@dataclass
class ReadKeyedInputs(beam.PTransform):
    """Every file of every input, read in one step -> tagged outputs ``keyed``
    ``(key, (input name, block))``, ``dead`` row blocks and ``counts``; or, with
    ``dead_letters_label``, one collection for a ``JoinAndApply``: the keyed blocks,
    and the dead-letter blocks and counts as riders that leave the join as its
    ``(dead_letters_label, rows)`` blocks and its counts.

    One step for all inputs, so they reach the per-key join as one collection:
    a join of several collections needs a Flatten, which the FnApiRunner
    materializes (every record written and read once more) before grouping.
    One output, for the same reason on Flink: its batch translation ships a
    multi-output stage's whole output to every consumer (at 1M candidates the
    read stage wrote 432 MB for 144 MB of keyed blocks, docs/benchmarks.md).
    """

    inputs: tuple[KeyedInput, ...]
    dead_letters_label: str | None = None

    def __post_init__(self) -> None:
        super().__init__()
        names = [spec.input_name for spec in self.inputs]
        if len(set(names)) != len(names):
            raise ValueError(f"input names must be distinct: {names}")

    def expand(self, pbegin):
        patterns = [(spec.input_name, absolute_pattern(spec.pattern)) for spec in self.inputs]
        files = (
            pbegin
            # One seed element, and every pattern matched in its one call: a Create of the patterns costs
            # the graph four more transforms (it wraps Impulse, FlatMap, a reshuffle step and a decode).
            | "Seed" >> beam.Impulse()
            | "Match" >> beam.FlatMap(_match_inputs, patterns)
            # Matching is one element's work per input; without this break the runner fuses
            # every file's read into those bundles, so a single worker would read them all.
            | "Spread" >> beam.Reshuffle()
        )
        inputs = {spec.input_name: with_known_size(spec) for spec in self.inputs}
        read = beam.ParDo(_ReadAndKey(inputs, self.dead_letters_label))
        if self.dead_letters_label is not None:
            return files | "ReadAndKey" >> read
        return files | "ReadAndKey" >> read.with_outputs(KEYED, DEAD, COUNTS)
