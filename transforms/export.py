"""export-batch's steps (contract §7): each source's requests staged on disk, one request kept per id, and the
planned request files written. Wiring only: every rule of a request, its line and its file is
``domain.batch.export``'s; ``pipelines.batch_export`` builds the job from these.
"""

from __future__ import annotations

import hashlib

import apache_beam as beam
import orjson
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from domain import counters
from domain.batch.estimate import estimate_counts
from domain.batch.export import (INPUT_RETRY_REQUESTS, ExportConfig, choose_among_duplicates, export_source_groups,
                                 file_names, index_line)
from transforms.write import join_path

# Under --output while the export runs, removed before its manifest is written: each source's request lines,
# index entries and request records, from the per-source step to the file writers (``staged_export``).
STAGING = ".staging"


def staged_name(source_id: str) -> str:
    """A source's staging file: named by a digest, since a source id may hold any character."""
    return hashlib.sha256(source_id.encode("utf-8", "surrogatepass")).hexdigest() + ".bin"


def staged_export(config: ExportConfig, staging: str, source_id: str, grouped):
    """``export_source_groups``, with each request row's bytes (its line, index entry and request record)
    written to the source's staging file: the row that goes on holds its id, source, line size, estimate
    counts and where its bytes lie (``at``: file, offset, the three lengths). Why: the rows are grouped
    twice (by id, then by file) and the runner holds a grouping's whole input; with the lines in them,
    that was most of export-batch's peak memory (726 MB at 101k candidates) and grew with the archive.
    A retried bundle writes the same bytes under the same name."""
    outputs, counts = export_source_groups(config, source_id, grouped)
    rows = outputs["requests"]
    if not rows:
        return outputs, counts
    name = staged_name(source_id)
    parts, small, offset = [], [], 0
    for row in rows:
        index = orjson.dumps(row["index"])
        lengths = (len(row["line"]), len(index), len(row["raw"]))
        parts += (row["line"], index, row["raw"])
        small.append({"custom_id": row["custom_id"], "source_id": row["index"]["source_id"], "size": lengths[0] + 1,
                      "estimate": estimate_counts(row["index"]), "at": (name, offset, *lengths)})
        offset += sum(lengths)
    with FileSystems.create(join_path(staging, name), compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        handle.write(b"".join(parts))
    return {**outputs, "requests": small}, counts


class StagedReader:
    """Reads staged rows' bytes back, keeping a few staging files open (a file's rows come in id order,
    which visits the sources in no order)."""

    OPEN_FILES = 32

    def __init__(self, staging: str) -> None:
        self.staging = staging
        self.handles: dict[str, object] = {}

    def read(self, row: dict) -> tuple[bytes, bytes, bytes]:
        """(line, index entry, request record) of one staged row."""
        name, offset, line, index, raw = row["at"]
        handle = self.handles.pop(name, None)
        if handle is None:
            if len(self.handles) >= self.OPEN_FILES:
                self.handles.pop(next(iter(self.handles))).close()
            handle = FileSystems.open(join_path(self.staging, name), compression_type=CompressionTypes.UNCOMPRESSED)
        self.handles[name] = handle  # most recently used last
        handle.seek(offset)
        data = handle.read(line + index + raw)
        return data[:line], data[line:line + index], data[line + index:]

    def close(self) -> None:
        for handle in self.handles.values():
            handle.close()
        self.handles.clear()


def remove_staging(staging: str) -> None:
    """The staging files, then their folder (where the filesystem has folders)."""
    found = FileSystems.match([join_path(staging, "*")])[0].metadata_list
    if found:
        FileSystems.delete([m.path for m in found])
    if FileSystems.exists(staging):
        FileSystems.delete([staging])


class OnePerId(beam.DoFn):
    """Request ids are unique per source by construction; across sources, keep one."""

    def __init__(self, staging: str) -> None:
        self.staging = staging

    def process(self, element):
        custom_id, rows = element
        rows = list(rows)
        if len(rows) == 1:
            yield rows[0]
            return
        reader = StagedReader(self.staging)
        try:  # the choice reads each record's bytes (rare: duplicates)
            full = [{"index": {"source_id": row["source_id"]}, "raw": reader.read(row)[2], "staged": row}
                    for row in rows]
        finally:
            reader.close()
        kept, dead = choose_among_duplicates(custom_id, full)
        yield kept["staged"]
        # a block of rows, as every dead-letter output (transforms.write takes blocks)
        yield beam.pvalue.TaggedOutput("dead", dead)
        yield beam.pvalue.TaggedOutput("counts", {counters.dead_letters(INPUT_RETRY_REQUESTS): len(dead)})


class WriteRequestFiles(beam.DoFn):
    """One planned file: its request lines and its index, streamed from the staging files in id order (a
    retried bundle rewrites the same bytes under the same name)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def process(self, element, plan):
        number, rows = element
        requests_name, index_name = file_names(number, plan.files)
        ordered = sorted(rows, key=lambda r: r["custom_id"])
        reader = StagedReader(join_path(self.directory, STAGING))
        written = 0
        try:
            with FileSystems.create(join_path(self.directory, requests_name)) as body, \
                    FileSystems.create(join_path(self.directory, index_name)) as index:
                for number_in_file, row in enumerate(ordered, start=1):
                    line, entry, _ = reader.read(row)
                    body.write(line + b"\n")
                    index.write(index_line(number_in_file, entry))
                    written += len(line) + 1
        finally:
            reader.close()
        yield {"requests_file": requests_name, "index_file": index_name, "lines": len(ordered), "bytes": written}
