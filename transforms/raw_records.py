"""Input records as bytes: split into lines, turned into JSON lines, keyed and packed into blocks.

What the read step does to a record, without Beam (``transforms/read.py`` holds the DoFn and the
transform that call these): generic, nothing here knows a D&D rule, and every function is tested
on plain bytes.

- ``split_lines`` (and ``iter_lines``, its pairs): a JSON Lines stream split on ``b"\\n"``, never holding
  more than the record limit of one line in memory; an oversize line keeps its head (``OVERSIZE_PAYLOAD_HEAD``,
  ``Oversize``) for its dead letter (``oversize_dead_letter``).
- ``project``, ``avro_record_to_json``, ``avro_payload``: an Avro (or Parquet) record narrowed to the
  fields its contract names and written as one JSON line, or as a dead letter's payload.
- ``key_record``: a record's key (the fast path of ``transforms.json_keys.key_of``, else a full parse
  that names what is wrong), or its dead-letter row (``json_reason``).
- ``encode_block``, ``decode_block``, ``Blocks``: the records of one key met in one file, packed into
  one compressed value; Beam pays per element, so records travel in blocks, not one by one.
"""

from __future__ import annotations

import base64
import struct
import sys
from array import array
from itertools import accumulate
from typing import Iterator

import orjson
import zstandard  # a dependency of apache-beam itself

from domain.records import json_error_summary
from domain.rows import DeadLetterRow, dead_letter_row
from transforms.json_keys import key_of

# A dead letter payload for a record too large to keep whole keeps its head only.
OVERSIZE_PAYLOAD_HEAD = 64 * 1024
_READ_BLOCK = 1 << 20
UTF8_BOM = b"\xef\xbb\xbf"


class Oversize:
    """A line longer than the record limit, as ``split_lines`` gives it: its head only, for its dead letter."""

    __slots__ = ("head",)

    def __init__(self, head: bytes) -> None:
        self.head = head


def split_lines(stream, max_record_bytes: int, drop_bom: bool = False) -> Iterator[bytes | Oversize]:
    """Each line of a binary stream without its line break: the line (``bytes``), or ``Oversize`` for a
    line longer than ``max_record_bytes``.

    Splits on b"\\n" only (a record may legally contain U+0085 or U+2028) and never holds more than
    ``max_record_bytes`` of one line in memory. ``drop_bom``: a UTF-8 byte order mark that starts the
    stream is the file's (Windows tools write one), not the first record's; it still counts toward
    that line's length. One generator, yielding the line itself: the read step calls it once per
    record, so a second generator or a pair per line costs every candidate (docs/benchmarks.md).
    """
    readline = stream.readline
    size = max_record_bytes + 2  # room for a record at the limit plus its line break ("\r\n" is two bytes)
    first = drop_bom
    while True:
        line = readline(size)
        if not line:
            return
        record = line.rstrip(b"\r\n") if line.endswith(b"\n") else line
        if len(record) <= max_record_bytes:
            if first:
                first = False
                if record.startswith(UTF8_BOM):
                    record = record[len(UTF8_BOM):]
            yield record
            continue
        # The first limit + 1 bytes are record content (never the "\r" of a line break).
        head = record[: min(max_record_bytes + 1, OVERSIZE_PAYLOAD_HEAD)]
        while not line.endswith(b"\n"):  # skip the rest of the oversize line
            line = readline(_READ_BLOCK)
            if not line:
                break
        if first:
            first = False
            if head.startswith(UTF8_BOM):
                head = head[len(UTF8_BOM):]
        yield Oversize(head)


def iter_lines(stream, max_record_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """``split_lines`` as (line or its head, oversize?) pairs."""
    for line in split_lines(stream, max_record_bytes):
        yield (line.head, True) if type(line) is Oversize else (line, False)


def oversize_dead_letter(input_name: str, max_record_bytes: int, head: bytes) -> DeadLetterRow:
    """The dead letter of a line longer than the record limit, which keeps the line's head."""
    return dead_letter_row(input_name, f"record exceeds --max-record-bytes ({max_record_bytes} bytes); payload "
                                       f"holds its first {len(head)} bytes", head)


def project(value, shape):
    """``value`` with only the fields ``shape`` names (nested: {name: sub-shape or None}); lists
    are projected item by item. Fields a contract does not name are ignored, whatever their
    type, so they can neither fail nor reach the record."""
    if shape is None:
        return value
    if isinstance(value, dict):  # a field kept whole is not passed through project (most of them: a call each)
        return {key: item if (inner := shape[key]) is None else project(item, inner)
                for key, item in value.items() if key in shape}
    if isinstance(value, list):
        return [project(item, shape) for item in value]
    return value


def avro_record_to_json(record: dict) -> bytes:
    """An Avro record as a JSON line; bytes fields must be UTF-8 text."""

    def default(value):
        if isinstance(value, bytes):
            return value.decode("utf-8")  # UnicodeDecodeError -> the caller's dead letter
        raise TypeError

    return exact(orjson.dumps(record, default=default))


def exact(data: bytes) -> bytes:
    """``data`` in an allocation of its own length. orjson's result keeps the buffer it wrote into, sized
    for the worst case: 4 KiB for a short line, ~13x a long string's length (orjson 3.13). A line
    that waits in a block (``Blocks``: budgeted by length) would hold that much; copied, its length.
    At 101k candidates compare's read of one evaluations file held 376 MB of such buffers for ~15 MB
    of lines."""
    return bytes(memoryview(data))


def avro_payload(record: dict) -> bytes:
    """A dead letter's payload for an Avro record: bytes as base64, any other value JSON has
    no form for (decimals from a wider schema, ...) as its text. Must not fail: if it did, the
    rest of the file would be lost with it."""

    def default(value):
        if isinstance(value, bytes):
            return {"base64": base64.b64encode(value).decode("ascii")}
        return str(value)

    try:
        return exact(orjson.dumps(record, default=default))  # waits in a block of dead letters
    except TypeError:  # nested deeper than JSON encoding allows
        return b""


def key_record(line: bytes, input_name: str, key_field: str,
               max_record_bytes: int) -> tuple[str, bytes] | DeadLetterRow:
    """``(key, line)``: the string value of the record's top-level ``key_field``; or the line's dead-letter
    row (too large, not UTF-8, not JSON, not an object, no non-blank string key)."""
    if len(line) > max_record_bytes:
        return dead_letter_row(input_name, f"record exceeds --max-record-bytes ({max_record_bytes} bytes)",
                               line[:OVERSIZE_PAYLOAD_HEAD])
    key = key_of(line, key_field)  # the fast path; a line it cannot vouch for is parsed in full
    if key is not None and key.strip():
        return key, line
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return dead_letter_row(input_name, json_reason(line, exc), line)
    key = record.get(key_field) if isinstance(record, dict) else None
    if not isinstance(key, str) or not key.strip():
        what = "not a JSON object" if not isinstance(record, dict) else f"missing a string '{key_field}'"
        return dead_letter_row(input_name, f"record is {what}", line)
    return key, line


def json_reason(line: bytes, exc: orjson.JSONDecodeError) -> str:
    """Why orjson refused ``line``, in a dead letter's words."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return "record is not valid UTF-8 text"
    return f"record is not valid JSON ({json_error_summary(exc)})"


# A block: the record count and each record's length (little-endian uint64s), then every record's
# bytes back to back, compressed. Lengths, not a separator, so decoding slices the records out
# instead of scanning every byte for one (a split cost the job ~10k instructions per candidate,
# docs/benchmarks.md), and a record may hold any byte.
_LENGTHS = struct.Struct("<Q")


# Fast level: the point is holding and moving fewer bytes in the shuffle, not archiving. At 100k
# in-process (2026-12-05) level 1 peaked at 298 MB; levels -1 to -7 at 346-401 MB, lz4 469 MB,
# no compression 913 MB, for 6k (lz4) to 20k (none) fewer instructions per candidate.
_ZSTD_LEVEL = 1


def _compress(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(data)


def _decompress(data) -> bytes:
    return zstandard.ZstdDecompressor().decompress(data)


def encode_block(records: list[bytes]) -> bytes:
    """Records packed into one compressed value (``decode_block`` gives them back)."""
    lengths = array("Q", map(len, records))
    if sys.byteorder != "little":
        lengths.byteswap()
    return b"".join((_LENGTHS.pack(len(records)), lengths.tobytes(), _compress(b"".join(records))))


def decode_block(block: bytes) -> list[bytes]:
    (count,) = _LENGTHS.unpack_from(block)
    header = _LENGTHS.size + count * _LENGTHS.size
    lengths = array("Q")
    lengths.frombytes(block[_LENGTHS.size:header])
    if sys.byteorder != "little":
        lengths.byteswap()
    payload = _decompress(memoryview(block)[header:])
    ends = list(accumulate(lengths))
    return list(map(payload.__getitem__, map(slice, [0, *ends[:-1]], ends)))


class Blocks:
    """Records of one file grouped by key, flushed as ``(key, block)`` past a byte budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.pending: dict[str, list[bytes]] = {}
        self.size = 0

    def add(self, key: str, line: bytes) -> bool:
        """Add a record; True when the pending blocks should be flushed."""
        block = self.pending.get(key)
        if block is None:
            self.pending[key] = [line]
        else:
            block.append(line)
        self.size += len(line)
        return self.size >= self.budget

    def flush(self) -> list[tuple[str, bytes]]:
        blocks = [(key, encode_block(records)) for key, records in self.pending.items()]
        self.pending, self.size = {}, 0
        return blocks
