"""Write rows as sharded ``part-*`` files (Avro or JSON Lines) and one JSON document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import apache_beam as beam
import fastavro
import orjson
from apache_beam import coders
from apache_beam.io.filesystems import FileSystems

FORMATS = ("avro", "jsonl")


def join_path(directory: str, *parts: str) -> str:
    return FileSystems.join(directory, *parts)


@dataclass
class WriteRows(beam.PTransform):
    """Rows -> ``<directory>/part-SSSSS-of-NNNNN.<avro|jsonl>``; an empty input still writes a shard."""

    directory: str
    output_format: str
    avro_schema: dict | None = None

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, rows):
        prefix = join_path(self.directory, "part")
        if self.output_format == "jsonl":
            return (
                rows
                | "ToJson" >> beam.Map(orjson.dumps)
                | "WriteJsonl" >> beam.io.WriteToText(prefix, file_name_suffix=".jsonl", coder=coders.BytesCoder())
            )
        if self.output_format == "avro":
            schema = fastavro.parse_schema(self.avro_schema)
            return rows | "WriteAvro" >> beam.io.WriteToAvro(prefix, schema=schema, file_name_suffix=".avro")
        raise ValueError(f"unknown output format {self.output_format!r}; expected one of {FORMATS}")


@dataclass
class WriteRowsByKey(beam.PTransform):
    """Rows routed by ``key_of(row)`` to ``<directory>/<key>/`` (keys known when the graph is built)."""

    directory: str
    output_format: str
    key_of: Callable[[dict], str]
    schemas_by_key: dict  # key -> Avro schema (or None for JSON Lines)

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, rows):
        keys = sorted(self.schemas_by_key)
        index = {key: n for n, key in enumerate(keys)}
        key_of = self.key_of
        parts = rows | "Route" >> beam.Partition(lambda row, _n: index[key_of(row)], len(keys))
        for key, part in zip(keys, parts):
            part | f"Write[{key}]" >> WriteRows(join_path(self.directory, key), self.output_format, self.schemas_by_key[key])
        return rows.pipeline


def write_json_document(document: dict, path: str) -> str:
    """Write one JSON document (pretty, sorted keys) through Beam's filesystems."""
    with FileSystems.create(path) as handle:
        handle.write(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE))
    return path
