"""Write blocks of rows as sharded ``part-*`` files (Avro, JSON Lines or Parquet) and one JSON document.

Every element written is a *block*: a non-empty sequence of rows (one key's
rows of one output, see ``transforms.process``). A JSON Lines block becomes
one pre-joined run of lines - still valid JSON Lines - an Avro block is
written record by record into the shard, and a Parquet block becomes one
Arrow table for Beam's Parquet sink (``WriteToParquetBatched``), so Beam's
per-element cost is paid once per block, not once per row.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import apache_beam as beam
import fastavro
import orjson
import pyarrow as pa
from apache_beam import coders
from apache_beam.io import filebasedsink
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

FORMATS = ("avro", "jsonl", "parquet")
PARQUET_CODEC = "snappy"  # what DuckDB, Polars and pandas read without options


def join_path(directory: str, *parts: str) -> str:
    return FileSystems.join(directory, *parts)


def jsonl_block(rows) -> bytes:
    """A block of rows as JSON Lines without the last line break (the text sink adds it)."""
    return b"\n".join([orjson.dumps(row) for row in rows])


_ARROW_PRIMITIVES = {"string": pa.string, "int64": pa.int64, "int32": pa.int32, "bool": pa.bool_,
                     "float64": pa.float64, "float32": pa.float32, "binary": pa.binary}


def _arrow_type(description):
    if isinstance(description, str):
        return _ARROW_PRIMITIVES[description]()
    if "list" in description:
        return pa.list_(_arrow_field(description["list"]))
    if "struct" in description:
        return pa.struct([_arrow_field(f) for f in description["struct"]])
    raise ValueError(f"unknown Arrow type description {description!r}")


def _arrow_field(description: dict) -> pa.Field:
    return pa.field(description["name"], _arrow_type(description["type"]), nullable=bool(description["nullable"]))


def arrow_schema(description: dict) -> pa.Schema:
    """A ``pyarrow.Schema`` from its JSON description (``domain.schemagen.arrow_schema``)."""
    return pa.schema([_arrow_field(f) for f in description["fields"]])


def arrow_block(rows, schema: pa.Schema) -> pa.Table:
    """A block of rows as one Arrow table; a row that does not fit the schema fails loudly."""
    return pa.Table.from_pylist(list(rows), schema=schema)


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
    """Row blocks -> ``<directory>/part-SSSSS-of-NNNNN.<avro|jsonl|parquet>``; an empty input still writes a shard.

    Returns Beam's writer result: the final path of every file, emitted only after the write
    is finalized (temporary files renamed). A step that must follow the files waits on it."""

    directory: str
    output_format: str
    avro_schema: dict | None = None
    arrow_schema: pa.Schema | None = None  # Parquet only

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
        if self.output_format == "parquet":
            schema = self.arrow_schema
            if schema is None:
                raise ValueError("the Parquet format needs an Arrow schema")
            return (
                blocks
                | "ToArrow" >> beam.FlatMap(lambda rows: [arrow_block(rows, schema)] if rows else [])
                | "WriteParquet" >> beam.io.WriteToParquetBatched(
                    prefix, schema, codec=PARQUET_CODEC, file_name_suffix=".parquet")
            )
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
    schemas_by_key: dict  # key -> Avro schema (avro), pyarrow.Schema (parquet) or None (jsonl)

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, blocks):
        keys = sorted(self.schemas_by_key)
        parts = blocks | "Route" >> beam.ParDo(_SplitByKey(self.key_of, frozenset(keys))).with_outputs(*keys)
        by_format = "arrow_schema" if self.output_format == "parquet" else "avro_schema"
        return {key: parts[key] | f"Write[{key}]" >> WriteRows(join_path(self.directory, key), self.output_format,
                                                               **{by_format: self.schemas_by_key[key]})
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
