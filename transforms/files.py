"""Files through Beam's filesystems: facts about written files, folder listing and removal.

Generic: nothing here knows a D&D rule or an output's name. Everything goes
through ``FileSystems``, so local paths, ``gs://`` and ``s3://`` behave alike.
A file is read in bounded chunks (hash, byte size and row count never hold
the file in memory).
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Callable, Iterable, Iterator

import apache_beam as beam
import fastavro
from apache_beam.io.filesystem import BeamIOError, CompressionTypes, FileSystem
from apache_beam.io.filesystems import FileSystems

_CHUNK = 1 << 20
GLOB_CHARACTERS = "*?[]"


def _chunks(path: str) -> Iterator[bytes]:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        while chunk := handle.read(_CHUNK):
            yield chunk


def _jsonl_rows(path: str) -> int:
    rows, last = 0, b"\n"
    for chunk in _chunks(path):
        rows += chunk.count(b"\n")
        last = chunk[-1:]
    return rows + (last != b"\n")  # a last line without its line break


def _avro_rows(path: str) -> int:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return sum(block.num_records for block in fastavro.block_reader(handle))


def _parquet_rows(path: str) -> int:
    import pyarrow.parquet as pq  # only for Parquet runs

    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return pq.ParquetFile(handle).metadata.num_rows  # the footer's count: no row is read


# Row counters by file format; a new writer format adds its counter here.
ROW_COUNTERS: dict[str, Callable[[str], int]] = {"jsonl": _jsonl_rows, "avro": _avro_rows, "parquet": _parquet_rows}
# File name suffix -> format.
SUFFIX_FORMATS: dict[str, str] = {".jsonl": "jsonl", ".avro": "avro", ".parquet": "parquet"}


def format_of(path: str) -> str:
    for suffix, fmt in SUFFIX_FORMATS.items():
        if path.endswith(suffix):
            return fmt
    raise ValueError(f"no known format for {path!r}; known suffixes: {sorted(SUFFIX_FORMATS)}")


def content_facts(path: str) -> tuple[int, str]:
    """(byte size, sha256 hex) of one file, streamed."""
    digest, size = hashlib.sha256(), 0
    for chunk in _chunks(path):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def row_count(path: str, fmt: str) -> int:
    """Rows in one file of a known format; ValueError when it cannot be read as one."""
    if fmt not in ROW_COUNTERS:
        raise ValueError(f"unknown format {fmt!r}")
    try:
        return ROW_COUNTERS[fmt](path)
    except Exception as exc:  # a damaged file has no row count
        raise ValueError(f"not readable as {fmt} ({type(exc).__name__}: {exc})") from exc


def file_facts(path: str, fmt: str) -> dict:
    """``{"bytes", "sha256", "rows"}`` of one file, streamed."""
    size, sha256 = content_facts(path)
    return {"bytes": size, "sha256": sha256, "rows": row_count(path, fmt)}


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


def list_files(folder: str) -> list[str]:
    """Every file under ``folder`` (recursively), as full paths; [] when it does not exist."""
    pattern = FileSystems.join(folder, "**")
    return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)


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
        absolute = normalized_folder(pattern) if is_local(pattern) else pattern
        inside = [m.path for m in FileSystems.match([absolute])[0].metadata_list
                  if m.path.startswith(folder.rstrip("/") + "/")]
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
