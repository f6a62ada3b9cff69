"""Files through Beam's filesystems: facts about written files, folder listing and removal.

Generic: nothing here knows a D&D rule or an output's name. Everything goes
through ``FileSystems``, so local paths, ``gs://`` and ``s3://`` behave alike.
A file is read once, in bounded chunks: hash, byte size and row count come
from the same pass and never hold the file in memory.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import Callable, Iterable

import apache_beam as beam
from apache_beam.io.filesystem import BeamIOError, CompressionTypes, FileSystem
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
# File name suffix -> format.
SUFFIX_FORMATS: dict[str, str] = {".jsonl": "jsonl", ".avro": "avro", ".parquet": "parquet"}


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


def file_facts(path: str, fmt: str) -> dict:
    """``{"bytes", "sha256", "rows"}`` of one file, streamed; ValueError when it cannot be read as ``fmt``."""
    facts = read_file_facts(path, fmt)
    if facts.row_error is not None:
        raise ValueError(facts.row_error)
    return {"bytes": facts.bytes, "sha256": facts.sha256, "rows": facts.rows}


class DescribeWrittenFiles(beam.PTransform):
    """``{label: PCollection of written file paths}`` (or one PCollection of ``(label, path)``) -> one dict per file:
    ``{"label", "path", "format", "bytes", "sha256", "rows"}``.

    Its input is what Beam's file writers return after finalizing (the final
    file names), so everything downstream runs after every file is in place.
    """

    def __init__(self, written: dict) -> None:
        super().__init__()
        self.written = written

    def expand(self, pbegin):
        if isinstance(self.written, beam.PCollection):
            labelled = self.written
        else:
            labelled = [
                paths | f"Label[{label}]" >> beam.Map(lambda path, label=label: (label, path))
                for label, paths in sorted(self.written.items())
            ] | "AllWrittenFiles" >> beam.Flatten()
        return (
            labelled
            # One file per element, spread over workers: hashing is the work.
            | "SpreadFiles" >> beam.Reshuffle()
            | "Facts" >> beam.Map(lambda item: {"label": item[0], "path": item[1], "format": format_of(item[1]),
                                                **file_facts(item[1], format_of(item[1]))})
        )


# --- folders ----------------------------------------------------------------------------------

def is_local(path: str) -> bool:
    return FileSystems.get_scheme(path) is None


def normalized_folder(path: str) -> str:
    """A local folder as an absolute path without ``..`` (nothing is created on the way); remote as given,
    without a trailing slash."""
    if is_local(path):
        return os.path.abspath(path)
    return path.rstrip("/")


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


def matching_files(pattern: str) -> list[str]:
    """The files a pattern matches (Beam's syntax), as full paths; a local pattern is read from the
    working directory."""
    return [m.path for m in FileSystems.match([absolute_pattern(pattern)])[0].metadata_list]


def list_files(folder: str) -> list[str]:
    """Every file under ``folder`` (recursively), as full paths; [] when it does not exist."""
    return sorted(matching_files(FileSystems.join(folder, "**")))


def folder_state(folder: str) -> str:
    """``absent``, ``empty``, ``not-empty`` or ``file`` (the path names a file)."""
    if is_local(folder):
        if not os.path.lexists(folder):
            parent = os.path.dirname(folder)
            while not os.path.lexists(parent):
                parent = os.path.dirname(parent)
            return "absent" if os.path.isdir(parent) else "file"
        if not os.path.isdir(folder):
            return "file"
        return "not-empty" if os.listdir(folder) else "empty"
    if FileSystems.exists(folder):  # an object under the folder's own name
        return "file"
    return "not-empty" if list_files(folder) else "absent"


def remove_folder_contents(folder: str, first: Iterable[str] = ()) -> None:
    """Remove everything under ``folder`` (never anything outside it); the paths in ``first`` go first."""
    for path in first:
        if FileSystems.exists(path):
            FileSystems.delete([path])
    if is_local(folder):
        for name in os.listdir(folder):  # the folder itself stays (it may be the working directory)
            path = os.path.join(folder, name)
            if os.path.islink(path):  # the link goes, never what it points to
                os.unlink(path)
            else:
                FileSystems.delete([path])
        return
    prefix = folder.rstrip("/") + "/"
    inside = [path for path in list_files(folder) if path.startswith(prefix)]
    if inside:
        FileSystems.delete(inside)


def pattern_reaches(pattern: str, path: str) -> bool:
    """Would ``FileSystems.match([pattern])`` return a file at ``path``? (Beam's own pattern syntax:
    ``*`` stays within a folder, ``**`` crosses folders.)"""
    if pattern.endswith("/"):
        pattern += "*"  # as FileSystems.match reads it
    return re.match(FileSystem.translate_pattern(pattern), path) is not None


class OutputFolderError(ValueError):
    """An output folder a job must not write into; its text is the one line shown to the operator."""


def prepare_output_folder(output: str, input_patterns: dict[str, str], sample_outputs: Iterable[str], *,
                          overwrite: bool, remove_first: Iterable[str] = ()) -> str:
    """Check the folder a job is about to write into, empty it with ``overwrite``; returns it normalized.

    Refused: the filesystem (or bucket) root; glob characters in the path (Beam's writers match
    their own temporary files with it); a path that names a file; a folder the input patterns
    would read (``sample_outputs``: paths relative to the folder that the job writes); a folder
    that holds anything, unless ``overwrite`` (then its contents are removed, ``remove_first``
    relative paths before the rest). Nothing is created here.
    """
    folder = normalized_folder(output)
    if is_filesystem_root(folder):
        raise OutputFolderError(f"--output {output!r} is the root of its filesystem; name a folder for this run")
    bad = sorted({ch for ch in folder if ch in GLOB_CHARACTERS})
    if bad:
        raise OutputFolderError(f"--output {output!r} contains {' '.join(bad)}: Beam reads those as a file pattern; "
                                f"choose a folder name without them")
    for flag, pattern in sorted(input_patterns.items()):
        if not pattern:
            continue
        absolute = absolute_pattern(pattern)
        inside = [path for path in matching_files(absolute) if path.startswith(folder.rstrip("/") + "/")]
        if inside:
            raise OutputFolderError(f"--output {output!r} holds input files of {flag} ({inside[0]}); write the "
                                    f"outputs to a folder of their own")
        reached = [rel for rel in sample_outputs if pattern_reaches(absolute, FileSystems.join(folder, rel))]
        if reached:
            raise OutputFolderError(f"--output {output!r} is within reach of {flag} {pattern!r} (it would match "
                                    f"{reached[0]}): the next run would read this run's outputs as input; "
                                    f"write outside the input folders")
    state = folder_state(folder)
    if state == "file":
        raise OutputFolderError(f"--output {output!r} is a file, not a folder")
    if state == "not-empty":
        if not overwrite:
            raise OutputFolderError(f"--output {output!r} already holds files (an earlier run?); choose an empty "
                                    f"folder, or pass --overwrite to replace its contents")
        try:
            remove_folder_contents(folder, [FileSystems.join(folder, rel) for rel in remove_first])
        except (OSError, BeamIOError) as exc:
            raise OutputFolderError(f"--overwrite could not empty {output!r}: {exc}") from None
    return folder
