"""Write blocks of rows as sharded ``part-*`` files (Avro or JSON Lines) and one JSON document.

Every element written is a *block*: a non-empty sequence of rows (one key's
rows of one output, see ``transforms.process``). A JSON Lines block becomes
one pre-joined run of lines - still valid JSON Lines - and an Avro block is
written record by record into the shard, so Beam's per-element cost is paid
once per block, not once per row.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import apache_beam as beam
import fastavro
import orjson
from apache_beam import coders
from apache_beam.io import filebasedsink
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

FORMATS = ("avro", "jsonl")


def join_path(directory: str, *parts: str) -> str:
    return FileSystems.join(directory, *parts)


def jsonl_block(rows) -> bytes:
    """A block of rows as JSON Lines without the last line break (the text sink adds it)."""
    return b"\n".join([orjson.dumps(row) for row in rows])


class _AvroBlockSink(filebasedsink.FileBasedSink):
    """Beam's fastavro sink, taking a block of records per element."""

    def __init__(self, file_path_prefix: str, schema: dict, codec: str = "deflate") -> None:
        super().__init__(file_path_prefix, file_name_suffix=".avro", coder=None, mime_type="application/x-avro",
                         # Avro compresses its own blocks (``codec``), not the file.
                         compression_type=CompressionTypes.UNCOMPRESSED)
        self._schema = schema
        self._codec = codec

    def open(self, temp_path):
        handle = super().open(temp_path)
        return handle, fastavro.write.Writer(handle, self._schema, self._codec)

    def write_record(self, file_handle, value) -> None:
        _, writer = file_handle
        for record in value:
            writer.write(record)

    def close(self, file_handle) -> None:
        handle, writer = file_handle
        writer.flush()
        handle.close()


@dataclass
class WriteRows(beam.PTransform):
    """Row blocks -> ``<directory>/part-SSSSS-of-NNNNN.<avro|jsonl>``; an empty input still writes a shard.

    Returns Beam's writer result: the final path of every file, emitted only after the write
    is finalized (temporary files renamed). A step that must follow the files waits on it."""

    directory: str
    output_format: str
    avro_schema: dict | None = None

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, blocks):
        prefix = join_path(self.directory, "part")
        if self.output_format == "jsonl":
            return (
                blocks
                # An empty block would become a blank line: it becomes nothing.
                | "ToJsonLines" >> beam.FlatMap(lambda rows: [jsonl_block(rows)] if rows else [])
                | "WriteJsonl" >> beam.io.WriteToText(prefix, file_name_suffix=".jsonl", coder=coders.BytesCoder())
            )
        if self.output_format == "avro":
            return blocks | "WriteAvro" >> beam.io.iobase.Write(
                _AvroBlockSink(prefix, fastavro.parse_schema(self.avro_schema)))
        raise ValueError(f"unknown output format {self.output_format!r}; expected one of {FORMATS}")


class _SplitByKey(beam.DoFn):
    """A block -> one sub-block per key (tagged with the key), in row order."""

    def __init__(self, key_of: Callable[[dict], str], keys: frozenset[str]) -> None:
        self.key_of = key_of
        self.keys = keys

    def process(self, block):
        parts: dict[str, list] = defaultdict(list)
        for row in block:
            parts[self.key_of(row)].append(row)
        for key, rows in parts.items():
            if key not in self.keys:  # Beam would drop an undeclared tag's rows without a word
                raise ValueError(f"no writer for key {key!r}; known keys: {sorted(self.keys)}")
            yield beam.pvalue.TaggedOutput(key, rows)


@dataclass
class WriteRowsByKey(beam.PTransform):
    """Row blocks routed by ``key_of(row)`` to ``<directory>/<key>/`` (keys known when the graph is built).

    Returns ``{key: final file paths}`` (each key's ``WriteRows`` result)."""

    directory: str
    output_format: str
    key_of: Callable[[dict], str]
    schemas_by_key: dict  # key -> Avro schema (or None for JSON Lines)

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, blocks):
        keys = sorted(self.schemas_by_key)
        parts = blocks | "Route" >> beam.ParDo(_SplitByKey(self.key_of, frozenset(keys))).with_outputs(*keys)
        return {key: parts[key] | f"Write[{key}]" >> WriteRows(join_path(self.directory, key), self.output_format,
                                                               self.schemas_by_key[key])
                for key in keys}


def write_json_document(document: dict, path: str) -> str:
    """Write one JSON document (pretty, sorted keys) through Beam's filesystems.

    Written beside its place and then renamed, so a reader never sees half a document
    (a rename is atomic locally; on object stores the copy appears whole)."""
    staging = f"{path}.{uuid.uuid4().hex}.tmp"
    with FileSystems.create(staging) as handle:
        handle.write(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE))
    FileSystems.rename([staging], [path])
    return path
