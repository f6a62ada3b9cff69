"""Read record files (JSON Lines, optionally gzip; Avro) into keyed raw records.

Generic: nothing here knows a D&D rule. A record is kept as the bytes it was
read as until the per-key step; only its key field is looked at here. Every
record that cannot be read or keyed becomes a dead letter with its original
bytes, and every record read is counted, so the job can prove conservation.
"""

from __future__ import annotations

import base64
import bz2
import contextlib
import gzip
import os
from dataclasses import dataclass
from typing import Iterator

import apache_beam as beam
import fastavro
import orjson
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from domain.records import dead_letter_row

KEYED = "keyed"
DEAD = "dead"
COUNTS = "counts"

# A dead letter payload for a record too large to keep whole keeps its head only.
OVERSIZE_PAYLOAD_HEAD = 64 * 1024
_READ_BLOCK = 1 << 20


def iter_lines(stream, max_record_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """(line without its line break, oversize?) for each line of a binary stream.

    Splits on b"\\n" only (a record may legally contain U+0085 or U+2028) and
    never holds more than ``max_record_bytes`` of one line in memory.
    """
    while True:
        line = stream.readline(max_record_bytes + 1)
        if not line:
            return
        if line.endswith(b"\n") or len(line) <= max_record_bytes:
            yield line.rstrip(b"\r\n") if line.endswith(b"\n") else line, False
            continue
        head = line[:OVERSIZE_PAYLOAD_HEAD]
        while not line.endswith(b"\n"):  # skip the rest of the oversize line
            line = stream.readline(_READ_BLOCK)
            if not line:
                break
        yield head, True


def decompressed(raw, path: str):
    """A bounded-readline stream over ``raw``, decompressed by file extension.

    (Beam's own CompressedFile has no ``readline(size)``, which the record size
    limit needs.)
    """
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if path.endswith(".bz2"):
        return bz2.BZ2File(raw, mode="rb")
    return contextlib.nullcontext(raw)


def avro_record_to_json(record: dict) -> bytes:
    """An Avro record as a JSON line; bytes fields must be UTF-8 text."""

    def default(value):
        if isinstance(value, bytes):
            return value.decode("utf-8")  # UnicodeDecodeError -> the caller's dead letter
        raise TypeError

    return orjson.dumps(record, default=default)


def _avro_payload(record: dict) -> bytes:
    def default(value):
        if isinstance(value, bytes):
            return {"base64": base64.b64encode(value).decode("ascii")}
        raise TypeError

    return orjson.dumps(record, default=default)


class _ReadAndKey(beam.DoFn):
    """One readable file -> (key, record bytes) pairs, dead letters and counts."""

    def __init__(self, input_name: str, key_field: str, max_record_bytes: int) -> None:
        self.input_name = input_name
        self.key_field = key_field
        self.max_record_bytes = max_record_bytes

    def setup(self) -> None:
        self.bad_records = Metrics.counter("read", f"{self.input_name}_dead_letters")
        self.records = Metrics.counter("read", f"{self.input_name}_in")

    def process(self, readable: fileio.ReadableFile):
        path = readable.metadata.path
        records = blank = dead_count = 0
        dead: list[dict] = []
        try:
            if path.endswith(".avro"):
                source = self._avro_lines(readable, dead)
            else:
                source = self._text_lines(readable, dead)
            for line in source:
                if line is None:
                    records += 1  # already a dead letter
                    continue
                if not line.strip():
                    blank += 1
                    continue
                records += 1
                keyed = self._key(line)
                if isinstance(keyed, dict):
                    dead.append(keyed)
                else:
                    yield beam.pvalue.TaggedOutput(KEYED, keyed)
                while dead:
                    dead_count += 1
                    yield beam.pvalue.TaggedOutput(DEAD, dead.pop())
        except Exception as exc:  # unreadable file or corrupt compression: the rest of it is one dead letter
            records += 1
            dead.append(dead_letter_row(
                self.input_name,
                f"file {path} could not be read past record {records - 1}: {type(exc).__name__}: {exc}"[:500],
                b""))
        for row in dead:
            yield beam.pvalue.TaggedOutput(DEAD, row)
        self.records.inc(records)
        self.bad_records.inc(dead_count + len(dead))
        yield beam.pvalue.TaggedOutput(COUNTS, {
            f"{self.input_name}_in": records,
            f"dead_letters/{self.input_name}": dead_count + len(dead),
            f"blank_lines/{self.input_name}": blank,
        })

    def _text_lines(self, readable: fileio.ReadableFile, dead: list[dict]):
        with readable.open(compression_type=CompressionTypes.UNCOMPRESSED) as raw, decompressed(raw, readable.metadata.path) as stream:
            for line, oversize in iter_lines(stream, self.max_record_bytes):
                if oversize:
                    dead.append(dead_letter_row(
                        self.input_name,
                        f"record exceeds --max-record-bytes ({self.max_record_bytes} bytes); payload holds its first "
                        f"{len(line)} bytes", line))
                    yield None
                else:
                    yield line

    def _avro_lines(self, readable: fileio.ReadableFile, dead: list[dict]):
        with readable.open(compression_type=CompressionTypes.UNCOMPRESSED) as stream:
            for record in fastavro.reader(stream):
                try:
                    yield avro_record_to_json(record)
                except (UnicodeDecodeError, TypeError) as exc:
                    dead.append(dead_letter_row(self.input_name, f"Avro record has non-UTF-8 text ({exc})"[:300],
                                                _avro_payload(record)))
                    yield None

    def _key(self, line: bytes) -> tuple[str, bytes] | dict:
        if len(line) > self.max_record_bytes:
            return dead_letter_row(self.input_name, f"record exceeds --max-record-bytes ({self.max_record_bytes} bytes)",
                                   line[:OVERSIZE_PAYLOAD_HEAD])
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            return dead_letter_row(self.input_name, _json_reason(line, exc), line)
        key = record.get(self.key_field) if isinstance(record, dict) else None
        if not isinstance(key, str) or not key.strip():
            what = "not a JSON object" if not isinstance(record, dict) else f"missing a string '{self.key_field}'"
            return dead_letter_row(self.input_name, f"record is {what}", line)
        return key, line


def absolute_pattern(pattern: str) -> str:
    """Local patterns made absolute: workers may not share the launcher's working directory."""
    if FileSystems.get_scheme(pattern) is None:
        return os.path.abspath(pattern)
    return pattern


def _json_reason(line: bytes, exc: orjson.JSONDecodeError) -> str:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return "record is not valid UTF-8 text"
    return f"record is not valid JSON ({str(exc).split(':', 1)[0]} at character {exc.pos})"


@dataclass
class ReadKeyedRecords(beam.PTransform):
    """Files matching ``pattern`` -> tagged outputs ``keyed`` (key, bytes), ``dead`` rows, ``counts``."""

    pattern: str
    input_name: str
    key_field: str
    max_record_bytes: int

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, pbegin):
        return (
            pbegin
            | "Match" >> fileio.MatchFiles(absolute_pattern(self.pattern), empty_match_treatment=fileio.EmptyMatchTreatment.ALLOW)
            | "Open" >> fileio.ReadMatches()
            | "ReadAndKey" >> beam.ParDo(_ReadAndKey(self.input_name, self.key_field, self.max_record_bytes))
            .with_outputs(KEYED, DEAD, COUNTS)
        )
