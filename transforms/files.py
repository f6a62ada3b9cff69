"""Files through Beam's filesystems: facts about written files, patterns and folder listing.

Generic: nothing here knows a D&D rule or an output's name. Everything goes
through ``FileSystems``, so local paths, ``gs://`` and ``s3://`` behave alike.
A file is read once, in bounded chunks: hash, byte size and row count come
from the same pass and never hold the file in memory.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass
from typing import Callable

from apache_beam.io.filesystem import CompressionTypes, FileMetadata
from apache_beam.io.filesystems import FileSystems

from transforms.avro_container import avro_row_count

_CHUNK = 1 << 20
GLOB_CHARACTERS = "*?[]"


class _HashedStream:
    """A file read front to back once: every byte read is also hashed and counted, so a row counter
    reads the very bytes the hash covers."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0
        self.at_end = False

    def read(self, n: int = -1) -> bytes:
        data = self.handle.read(n)
        self.digest.update(data)
        self.size += len(data)
        self.at_end = self.at_end or (not data and n != 0)
        return data

    def read_to_end(self) -> None:
        while not self.at_end:
            self.read(_CHUNK)


def _jsonl_rows(stream: _HashedStream) -> int:
    rows, last = 0, b"\n"
    while chunk := stream.read(_CHUNK):
        rows += chunk.count(b"\n")
        last = chunk[-1:]
    return rows + (last != b"\n")  # a last line without its line break


def _parquet_rows(stream: _HashedStream) -> int:
    import pyarrow.parquet as pq  # only for Parquet runs

    stream.read_to_end()  # the footer holds the count: hash every byte first, then read only the footer
    return pq.ParquetFile(stream.handle).metadata.num_rows  # no row is read


# Row counters by file format, reading the file through its hashed stream; a new writer format adds its counter here.
ROW_COUNTERS: dict[str, Callable[[_HashedStream], int]] = {"jsonl": _jsonl_rows, "avro": avro_row_count,
                                                             "parquet": _parquet_rows}
# The output file formats, each with its file name suffix: the one list (the writers, the readers, the part files
# a command writes, every --output-format's choices).
FORMAT_SUFFIXES: dict[str, str] = {"jsonl": ".jsonl", "avro": ".avro", "parquet": ".parquet"}
OUTPUT_FORMATS = tuple(sorted(FORMAT_SUFFIXES))  # as --output-format lists them
# File name suffix -> format.
SUFFIX_FORMATS: dict[str, str] = {suffix: fmt for fmt, suffix in FORMAT_SUFFIXES.items()}


def format_of(path: str) -> str:
    for suffix, fmt in SUFFIX_FORMATS.items():
        if path.endswith(suffix):
            return fmt
    raise ValueError(f"no known format for {path!r}; known suffixes: {sorted(SUFFIX_FORMATS)}")


@dataclass(frozen=True)
class FileFacts:
    """Byte size, sha256 and row count of one file, from one streamed read."""

    bytes: int
    sha256: str
    rows: int | None  # None: not readable as its format, ``row_error`` says why
    row_error: str | None = None


def read_file_facts(path: str, fmt: str) -> FileFacts:
    """The facts of one file of format ``fmt``, read once. A file that cannot be read as ``fmt`` still
    has its size and hash (``rows`` None, ``row_error`` why); one that cannot be read at all raises."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        stream = _HashedStream(handle)
        rows, row_error = None, None
        if fmt not in ROW_COUNTERS:
            row_error = f"unknown format {fmt!r}"
        else:
            try:
                rows = ROW_COUNTERS[fmt](stream)
            except Exception as exc:  # a damaged file has no row count
                row_error = f"not readable as {fmt} ({type(exc).__name__}: {exc})"
        # The bytes after the rows (or after the damage) are hashed too; a file that cannot be read raises here.
        stream.read_to_end()
    return FileFacts(stream.size, stream.digest.hexdigest(), rows, row_error)


# --- folders ----------------------------------------------------------------------------------

def is_local(path: str) -> bool:
    return FileSystems.get_scheme(path) is None


def normalized_folder(path: str) -> str:
    """A local folder as an absolute path without ``..`` (nothing is created on the way); remote as given,
    without a trailing slash."""
    if is_local(path):
        return os.path.abspath(path)
    return path.rstrip("/")


def resolved_folder(path: str) -> str:
    """A local folder as the real path every link in it leads to (what two paths must be compared as);
    remote as given, without a trailing slash (object stores have no links)."""
    if is_local(path):
        return os.path.realpath(path)
    return path.rstrip("/")


def resolved_pattern(pattern: str) -> str:
    """A local pattern made absolute, the links and ``..`` of its fixed part (the folders before the first
    glob character) resolved; remote as given."""
    if not is_local(pattern):
        return pattern
    absolute = os.path.abspath(pattern)
    cuts = [absolute.find(ch) for ch in GLOB_CHARACTERS if ch in absolute]
    if not cuts:
        return os.path.realpath(absolute)
    fixed = absolute[:min(cuts)].rpartition("/")[0]  # the last folder before the glob part
    base = os.path.realpath(fixed or "/")
    return (base.rstrip("/") or "") + absolute[len(fixed):]


def is_filesystem_root(folder: str) -> bool:
    """``/`` (or a drive root) locally; a bucket's root remotely (``gs://bucket``)."""
    if is_local(folder):
        return os.path.dirname(folder) == folder
    scheme, _, rest = folder.partition("://")
    return "/" not in rest.strip("/")


def absolute_pattern(pattern: str) -> str:
    """Local patterns made absolute: workers may not share the launcher's working directory."""
    if is_local(pattern):
        return os.path.abspath(pattern)
    return pattern


def literal_pattern(path: str) -> str:
    """The pattern (Beam's syntax) that matches ``path`` itself: each glob character in a set of its own
    (``run[1]`` -> ``run[[]1]``). A folder a command is given is read as named through it, never as the
    folders its name would match (``run[1]`` is not ``run1``)."""
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in path)


def _set_members(members: str) -> str:
    """The members of a ``[...]`` set as a regular expression's: each character escaped, ranges kept
    (read as ``re`` reads a set: ``a-z``; a ``-`` first or last is itself)."""
    parts, i = [], 0
    while i < len(members):
        if members[i + 1:i + 2] == "-" and i + 2 < len(members):
            parts.append(f"{re.escape(members[i])}-{re.escape(members[i + 2])}")
            i += 3
        else:
            parts.append(re.escape(members[i]))
            i += 1
    return "".join(parts)


@functools.lru_cache(maxsize=256)
def pattern_regex(pattern: str) -> re.Pattern:
    """A pattern in Beam's syntax (``FileSystem.translate_pattern``: ``*`` within a folder, ``**`` across
    folders, ``?`` one character, ``[...]`` a set, ``[!...]`` its complement, a ``[`` never closed is
    itself) as a compiled regular expression. Unlike Beam's translation, a set's members are escaped:
    ``[[]`` (a literal ``[``, as ``literal_pattern`` writes it) compiles without re's nested-set warning."""
    parts, i, n = [], 0, len(pattern)
    while i < n:
        ch = pattern[i]
        i += 1
        if ch == "*":
            if pattern.startswith("*", i):
                parts.append(".*")
                i += 1
            else:
                parts.append(r"[^/\\]*")
        elif ch == "?":
            parts.append(".")
        elif ch == "[":
            start = i + pattern.startswith("!", i)
            end = pattern.find("]", start + pattern.startswith("]", start))  # a "]" first is a member
            if end < 0:
                parts.append(re.escape(ch))
                continue
            negated = pattern.startswith("!", i)
            parts.append(f"[{'^' if negated else ''}{_set_members(pattern[start:end])}]")
            i = end + 1
        else:
            parts.append(re.escape(ch))
    return re.compile(r"(?ms)" + "".join(parts) + r"\Z")


def _pattern_as_matched(pattern: str) -> tuple[str, int | None]:
    """A pattern as the matchers read it (absolute when local; a trailing ``/`` meaning its files, as
    ``FileSystems.match`` reads it) and where its first glob character is (None: a plain path)."""
    pattern = absolute_pattern(pattern)
    if pattern.endswith("/"):
        pattern += "*"
    cuts = [pattern.find(ch) for ch in "*?[" if ch in pattern]
    return pattern, (min(cuts) if cuts else None)


def matching_metadata(pattern: str) -> list[FileMetadata]:
    """The files a pattern matches (Beam's syntax, read by ``pattern_regex``), with their metadata; a local
    pattern is read from the working directory. Beam lists what its own match would (the folder before
    the first glob character); the pattern is matched here, warnings-free."""
    pattern, first_glob = _pattern_as_matched(pattern)
    if first_glob is None:
        return FileSystems.match([pattern])[0].metadata_list  # a path: that file, if it exists
    regex = pattern_regex(pattern)
    listed = FileSystems.match([pattern[:first_glob] + "**"])[0].metadata_list
    return [metadata for metadata in listed if regex.match(metadata.path)]


def dangling_links(pattern: str) -> list[str]:
    """The symbolic links a local pattern matches whose target does not exist, as full paths. Beam's match
    leaves them out, so a link to a file not there (a moved archive, an unmounted disk) would be read as no
    input at all rather than as a missing one; remote patterns have no links ([])."""
    if not is_local(pattern):
        return []
    pattern, first_glob = _pattern_as_matched(pattern)
    if first_glob is None:
        return [pattern] if os.path.islink(pattern) and not os.path.exists(pattern) else []
    regex = pattern_regex(pattern)
    top = os.path.dirname(pattern[:first_glob] + "x")
    found = []
    for folder, _, names in os.walk(top):
        for name in names:
            path = os.path.join(folder, name)
            if regex.match(path) and os.path.islink(path) and not os.path.exists(path):
                found.append(path)
    return sorted(found)


def matching_files(pattern: str) -> list[str]:
    """The files a pattern matches (Beam's syntax), as full paths; a local pattern is read from the
    working directory."""
    return [metadata.path for metadata in matching_metadata(pattern)]


def list_files(folder: str) -> list[str]:
    """Every file under ``folder`` (recursively), as full paths; [] when it does not exist. The folder is
    taken as named: glob characters in its name are part of it."""
    return sorted(matching_files(FileSystems.join(literal_pattern(folder), "**")))
