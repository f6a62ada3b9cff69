"""JSON Lines reading and writing shared by the sample tools.

Records are written with orjson, one per line, terminated by a single b"\\n".
orjson escapes every control character below U+0020 (so never a raw \\n or
\\r), but writes U+0085 (NEXT LINE), U+2028 and U+2029 raw. That is valid
JSON and valid JSON Lines, because readers split on b"\\n" only. Never read
these files with `str.splitlines()`: it also breaks on U+0085/U+2028/U+2029
and would cut a record in two (CRD3 C1E010 turn 2 contains U+0085).

Files whose name ends in ".gz" are gzip-compressed with mtime=0 and no
embedded file name, so the same records always give the same bytes.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import orjson

# Fixed so the compressed bytes do not depend on a library default.
GZIP_LEVEL = 6


def dumps_line(record: Any) -> bytes:
    """One record as exactly one b"\\n"-terminated JSON line."""
    payload = orjson.dumps(record)
    if b"\n" in payload:  # orjson escapes \n; this guards the invariant anyway
        raise ValueError("serialized record contains a raw line feed")
    return payload + b"\n"


def iter_lines(data: bytes) -> Iterator[bytes]:
    """Non-empty lines of a JSON Lines payload, split on b"\\n" only."""
    for line in data.split(b"\n"):
        if line.strip():
            yield line


def read_bytes(path: str | Path) -> bytes:
    path = Path(path)
    raw = path.read_bytes()
    return gzip.decompress(raw) if path.name.endswith(".gz") else raw


def read_jsonl(path: str | Path) -> Iterator[dict]:
    """Parse every record of a .jsonl or .jsonl.gz file."""
    for line in iter_lines(read_bytes(path)):
        yield orjson.loads(line)


@contextmanager
def open_output(path: str | Path) -> Iterator[BinaryIO]:
    """A binary writer; gzip (deterministic header) when the name ends in .gz."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw:
        if path.name.endswith(".gz"):
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                               compresslevel=GZIP_LEVEL, mtime=0) as zipped:
                buffered = io.BufferedWriter(zipped, buffer_size=1 << 20)
                yield buffered
                buffered.flush()
        else:
            yield raw


def write_jsonl(path: str | Path, records: Iterable[Any]) -> int:
    """Write records as JSON Lines; returns how many were written."""
    count = 0
    with open_output(path) as out:
        for record in records:
            out.write(dumps_line(record))
            count += 1
    return count
