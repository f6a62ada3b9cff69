"""Write blocks of rows as sharded ``part-*`` files (Avro, JSON Lines or Parquet) and one JSON document.

Every element written is a *block*: a non-empty sequence of rows (one key's
rows of one output, see ``transforms.process``), labelled with its output.
A JSON Lines block becomes one pre-joined run of lines - still valid JSON
Lines - an Avro block is written record by record, and a Parquet block
becomes one Arrow table, so Beam's per-element cost is paid once per block,
not once per row. ``WriteOutputs`` writes every output folder of a job in one
step (one temporary file per bundle and output, one finalize).
"""

from __future__ import annotations

import hashlib
import uuid
from collections import defaultdict
from dataclasses import dataclass

import apache_beam as beam
import fastavro
import orjson
import pyarrow as pa
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from domain.assets import arrow_schema_path, load_json_asset
from transforms.compression import deflate_avro_writer
from transforms.files import FORMAT_SUFFIXES, OUTPUT_FORMATS, list_files

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


def write_document(data: bytes, path: str) -> str:
    """Write one whole small file (a manifest, a report) through Beam's filesystems.

    Written beside its place and then renamed, so a reader never sees half a document
    (a rename is atomic locally; on object stores the copy appears whole)."""
    staging = f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        with FileSystems.create(staging) as handle:
            handle.write(data)
    except BaseException:
        try:
            FileSystems.delete([staging])  # a full disk leaves no half document behind
        except Exception:  # noqa: BLE001 - never created, or already gone: nothing to remove
            pass
        raise
    FileSystems.rename([staging], [path])
    return path


def write_json_document(document: dict, path: str) -> str:
    """Write one JSON document (pretty, sorted keys) with :func:`write_document`."""
    return write_document(
        orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE), path)


# --- one writer for many outputs -----------------------------------------------------------------

@dataclass(frozen=True)
class OutputSpec:
    """One output folder of ``WriteOutputs``: its directory, file format and schema (Avro dict or pyarrow.Schema)."""

    directory: str
    output_format: str
    schema: object = None


def writer_schema(fmt: str, avro_path: str):
    """What the writer of ``fmt`` needs for the output whose contract is the Avro schema ``avro_path`` (an asset):
    that schema, the Arrow schema derived from it (``domain.assets.arrow_schema_path``), or nothing."""
    if fmt == "avro":
        return load_json_asset(avro_path)
    if fmt == "parquet":
        return arrow_schema(load_json_asset(arrow_schema_path(avro_path)))
    return None


class _HashingHandle:
    """The handle a format's writer writes through: every byte is hashed and counted on its way to the
    file, so the manifest's facts of a file come from writing it, not from reading it back."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data) -> int:
        self.digest.update(data)
        self.size += memoryview(data).nbytes
        return self.handle.write(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()

    @property
    def closed(self) -> bool:
        return self.handle.closed

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False


class _FileWriter:
    """One open file of one output format, taking blocks of rows; ``facts()`` once closed: its byte size,
    sha256 and row count, as written."""

    def __init__(self, path: str, spec: OutputSpec) -> None:
        self.fmt = spec.output_format
        self.rows = 0
        self.handle = _HashingHandle(FileSystems.create(path, mime_type="application/octet-stream",
                                                        compression_type=CompressionTypes.UNCOMPRESSED))
        if self.fmt == "avro":
            self.writer = deflate_avro_writer(self.handle, spec.schema)
        elif self.fmt == "parquet":
            import pyarrow.parquet as pq
            if spec.schema is None:
                raise ValueError("the Parquet format needs an Arrow schema")
            self.schema = spec.schema
            self.writer = pq.ParquetWriter(self.handle, spec.schema, compression=PARQUET_CODEC)
        elif self.fmt != "jsonl":
            raise ValueError(f"unknown output format {self.fmt!r}; expected one of {OUTPUT_FORMATS}")

    def write(self, rows) -> None:
        if not rows:
            return
        self.rows += len(rows)
        if self.fmt == "jsonl":
            self.handle.write(jsonl_block(rows))
            self.handle.write(b"\n")  # not joined to the block: that would copy it whole
        elif self.fmt == "avro":
            for record in rows:
                self.writer.write(record)
        else:
            self.writer.write_table(arrow_block(rows, self.schema))

    def close(self) -> dict:
        if self.fmt == "avro":
            self.writer.flush()
        elif self.fmt == "parquet":
            self.writer.close()
        self.handle.close()
        return {"bytes": self.handle.size, "sha256": self.handle.digest.hexdigest(), "rows": self.rows}


def _parsed(spec: OutputSpec) -> OutputSpec:
    if spec.output_format == "avro":
        return OutputSpec(spec.directory, spec.output_format, fastavro.parse_schema(spec.schema))
    return spec


class _WriteTemporaryFiles(beam.DoFn):
    """``(label, block)`` -> one temporary file per (bundle, label); emits ``(label, temporary path, facts)`` at
    bundle end (facts: the file's bytes, sha256 and rows, counted as it was written)."""

    def __init__(self, specs: dict, temp_dir: str) -> None:
        self.specs = specs
        self.temp_dir = temp_dir

    def setup(self) -> None:
        self._parsed = {label: _parsed(spec) for label, spec in self.specs.items()}

    def start_bundle(self) -> None:
        self._open: dict[str, tuple[str, _FileWriter]] = {}

    def process(self, element):
        label, rows = element
        if label not in self._parsed:  # Beam would not say a word about an undeclared output
            raise ValueError(f"no output {label!r}; known outputs: {sorted(self._parsed)}")
        if label not in self._open:
            spec = self._parsed[label]
            path = join_path(self.temp_dir, f"{uuid.uuid4().hex}{FORMAT_SUFFIXES[spec.output_format]}")
            self._open[label] = (path, _FileWriter(path, spec))
        self._open[label][1].write(rows)

    def finish_bundle(self):
        from apache_beam.transforms.window import GlobalWindow
        from apache_beam.utils.windowed_value import WindowedValue
        for label, (path, writer) in sorted(self._open.items()):
            facts = writer.close()
            yield WindowedValue((label, path, facts), GlobalWindow().max_timestamp(), [GlobalWindow()])
        self._open = {}


def _finalize(_, temporary: list, specs: dict, temp_dir: str) -> list:
    """Rename each output's temporary files to ``part-SSSSS-of-NNNNN``; an output without any gets one empty shard.

    Returns ``(label, final path, facts)`` for every file, only once all of them are in place."""
    by_label: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for label, path, facts in temporary:
        by_label[label].append((path, facts))
    sources, targets, final = [], [], []
    for label in sorted(specs):
        spec = _parsed(specs[label])
        suffix = FORMAT_SUFFIXES[spec.output_format]
        files = sorted(by_label.get(label, []), key=lambda item: item[0])
        if not files:  # an empty output still gets its shard
            path = join_path(temp_dir, f"{uuid.uuid4().hex}{suffix}")
            files = [(path, _FileWriter(path, spec).close())]
        try:
            FileSystems.mkdirs(spec.directory)
        except (IOError, OSError):
            pass  # already there (or an object store: no folders)
        for index, (path, facts) in enumerate(files):
            target = join_path(spec.directory, f"part-{index:05d}-of-{len(files):05d}{suffix}")
            sources.append(path)
            targets.append(target)
            final.append((label, target, facts))
    # A retried finalize finds some files renamed already: those stay as they are.
    pending = [(source, target) for source, target in zip(sources, targets)
               if FileSystems.exists(source) or not FileSystems.exists(target)]
    if pending:
        FileSystems.rename([source for source, _ in pending], [target for _, target in pending])
    try:  # files of retried bundles, never renamed: the folder locally, its objects on an object store
        FileSystems.delete([temp_dir] if FileSystems.get_scheme(temp_dir) is None else
                           list_files(temp_dir))
    except Exception:  # noqa: BLE001 - leftovers of a temporary folder are not the run's outputs
        pass
    return final


@dataclass
class WriteOutputs(beam.PTransform):
    """``(label, block)`` elements (one PCollection or several) -> ``<specs[label].directory>/part-SSSSS-of-NNNNN.<suffix>``,
    for many outputs at once.

    One temporary file per (bundle, label) under ``<folder>/.temp-write-<uuid>/``, then one finalize step
    renames them all; every label in ``specs`` gets at least one (possibly empty) shard. Returns
    ``(label, final path, facts)`` for every file (facts: ``{"bytes", "sha256", "rows"}``, counted as
    the file was written), emitted only after every file of every output is in place."""

    specs: dict  # label -> OutputSpec
    folder: str  # the folder the outputs belong to: their temporary files are written under it

    def __post_init__(self) -> None:
        super().__init__()

    def expand(self, labelled):
        temp_dir = join_path(self.folder, f".temp-write-{uuid.uuid4().hex}")
        # Several inputs are written where each is produced (the write fuses into its producer's stage);
        # flattening the rows first would move every row through the runner once more.
        inputs = [labelled] if isinstance(labelled, beam.PCollection) else list(labelled)
        pipeline = inputs[0].pipeline
        per_input = [pcoll | f"WriteTemporary[{index}]" >> beam.ParDo(_WriteTemporaryFiles(self.specs, temp_dir))
                     for index, pcoll in enumerate(inputs)]
        # One input needs no Flatten: one transform less to build, translate and run.
        temporary = (per_input[0] if len(per_input) == 1
                     else per_input | "AllTemporary" >> beam.Flatten(pipeline=pipeline))
        return (
            pipeline
            | "Once" >> beam.Impulse()  # one element; a Create([None]) is five transforms
            | "Finalize" >> beam.FlatMap(_finalize, beam.pvalue.AsList(temporary), self.specs, temp_dir)
        )
