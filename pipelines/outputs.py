"""Read a job's output folder back (Avro, JSON Lines or Parquet), and the archive it read.

For the report, the retry-economy command and the tests. Plain file reading,
no pipeline. ``iter_rows`` streams one output folder row by row (what the
report uses, any size); ``read_rows``, ``read_outputs`` and the archive
readers hold everything at once, for demo- and test-sized runs.
"""

from __future__ import annotations

import glob
from collections import defaultdict
from pathlib import Path
from typing import IO, Iterable, Iterator

import fastavro
import orjson
from apache_beam.io.filesystems import CompressionTypes, FileSystems

from analysis.savings import ArchivedCandidate
from analysis.slots import Slot
from domain.intake import EnvelopeError, arrival_order, parse_candidate, resolve_transcript
from domain.run_integrity import ARTIFACTS, NON_ARTIFACT_OUTPUTS, artifact_output, is_part_file, relative_path
from domain.source import Transcript
from transforms.compression import decompressed
from transforms.files import format_of, list_files, normalized_folder
from transforms.write import join_path


# --- the job's outputs --------------------------------------------------------------------

def iter_rows(folder: str | Path) -> Iterator[dict]:
    """Every row of one output folder, streamed file by file (bounded memory); any Beam filesystem."""
    folder = normalized_folder(str(folder))
    for path in list_files(folder):
        if "/" in relative_path(folder, path) or not is_part_file(path):
            continue  # the folder's own part files only, as the writer leaves them
        yield from iter_file_rows(path)


def iter_file_rows(path: str) -> Iterator[dict]:
    """Every row of one output file (Avro, JSON Lines or Parquet, by its name), streamed."""
    fmt = format_of(path)
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        if fmt == "avro":
            yield from fastavro.reader(handle)
        elif fmt == "parquet":
            import pyarrow.parquet as pq

            with pq.ParquetFile(handle) as parquet:
                for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
                    yield from batch.to_pylist()
        else:
            for line in handle:
                if line.strip():
                    yield orjson.loads(line)


PARQUET_BATCH_ROWS = 4096


def read_rows(folder: str | Path) -> list[dict]:
    return list(iter_rows(folder))


def read_outputs(out: str | Path) -> dict[str, list[dict]]:
    result = {name: read_rows(join_path(str(out), name)) for name in NON_ARTIFACT_OUTPUTS}
    artifacts = join_path(str(out), ARTIFACTS)
    families = sorted({relative_path(artifacts, path).split("/")[0] for path in list_files(artifacts)})
    for family in families:
        result[artifact_output(family)] = read_rows(join_path(str(out), ARTIFACTS, family))
    return result


def read_manifest(out: str | Path) -> dict:
    with FileSystems.open(join_path(str(out), "manifest.json"),
                          compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        return orjson.loads(handle.read())


def canonical(rows: list[dict]) -> list[bytes]:
    """Rows as sorted canonical JSON: equal outputs compare equal whatever the sharding."""
    return sorted(orjson.dumps(row, option=orjson.OPT_SORT_KEYS) for row in rows)


# --- the archive ------------------------------------------------------------------------------

def input_paths(pattern: str) -> list[str]:
    """Files matching a glob; remote schemes (gs://, s3://) through Beam's filesystems."""
    if "://" in pattern:
        return sorted(m.path for result in FileSystems.match([pattern]) for m in result.metadata_list)
    return sorted(glob.glob(pattern))


def open_input(path: str) -> IO[bytes]:
    """A file of the archive (or another input) to read, decompressed by its name; any Beam filesystem."""
    if "://" in path:
        raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    else:
        raw = open(path, "rb")
    return decompressed(raw, path)


def _utf8_bytes(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    raise TypeError


def input_records(pattern: str) -> Iterator[bytes]:
    """Each record of an input glob as one JSON line, as the job's read step sees it.

    Records the job would dead-letter for their bytes (non-UTF-8 Avro text)
    are skipped: they never reach an evaluation.
    """
    for path in input_paths(pattern):
        with open_input(path) as stream:
            if path.endswith(".avro"):
                for record in fastavro.reader(stream):
                    try:
                        yield orjson.dumps(record, default=_utf8_bytes)
                    except (TypeError, UnicodeDecodeError):
                        continue
            else:
                for n, line in enumerate(stream):
                    line = line.rstrip(b"\r\n")
                    if n == 0 and line.startswith(b"\xef\xbb\xbf"):  # a file's byte order mark, as the job skips it
                        line = line[3:]
                    if line.strip():
                        yield line


def _source_id(line: bytes) -> str | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    value = record.get("source_id") if isinstance(record, dict) else None
    return value if isinstance(value, str) else None


def read_transcripts(pattern: str, sources: Iterable[str] | None = None) -> dict[str, Transcript]:
    """The usable transcript of each source, resolved as the job resolves it (``domain.intake``:
    copies with the same content are one transcript; conflicting or malformed records, none)."""
    wanted = None if sources is None else set(sources)
    lines: dict[str, list[bytes]] = defaultdict(list)
    for line in input_records(pattern):
        source_id = _source_id(line)
        if source_id is not None and (wanted is None or source_id in wanted):
            lines[source_id].append(line)
    transcripts: dict[str, Transcript] = {}
    for source_id, found in sorted(lines.items()):
        transcript = resolve_transcript(source_id, found).transcript
        if transcript is not None:
            transcripts[source_id] = transcript
    return transcripts


def read_candidates(pattern: str, candidate_ids: Iterable[str] | None = None) -> dict[str, ArchivedCandidate]:
    """Archived candidates by id; a duplicated id keeps the record received first, as the job does
    (``domain.intake.arrival_order``: ``received_at`` compared as an instant, then text, then bytes)."""
    wanted = None if candidate_ids is None else set(candidate_ids)
    kept: dict[str, tuple[tuple, ArchivedCandidate]] = {}
    for line in input_records(pattern):
        try:
            cand = parse_candidate(line)
        except EnvelopeError:
            continue
        if wanted is not None and cand.candidate_id not in wanted:
            continue
        order = arrival_order(cand)
        previous = kept.get(cand.candidate_id)
        if previous is None or order < previous[0]:
            slot = Slot(cand.family, cand.source_id, cand.chunk_id)
            kept[cand.candidate_id] = (order, ArchivedCandidate(cand.candidate_id, slot, cand.attempt,
                                                                cand.raw_response))
    return {cid: entry[1] for cid, entry in sorted(kept.items())}
