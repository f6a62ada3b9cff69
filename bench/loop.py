"""The domain loop: the job's work without Beam, as the practical ceiling.

    python -m bench.loop --transcripts GLOB --candidates GLOB --output DIR [--output-format jsonl|avro]

Reads the same files as the job (gzip JSON Lines), keys every line by its
``source_id`` (as the job's read step keys it, ``transforms.json_keys``), calls
``domain.reprocess.process_source`` once per source in a plain loop in one
process, and serializes every output row to files (JSON Lines with orjson, or
Avro with fastavro and the same schemas and codec as the job). No Beam import.

Prints one JSON object: candidates, phase times, and memory. ``rss_read_mb``
is the process's peak RSS once every input line is held in memory grouped by
source; ``step_peak_extra_mb`` is how much the per-source step and its
writers added on top of that, at their worst. Outputs are streamed to files as
each source finishes, so that extra is what one source costs - it should track
the largest source, not the archive.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import fastavro
import orjson

from bench.lines import read_grouped
from runners.collector import collector_paused, tune_collector
from transforms.compression import deflate_avro_writer

from domain.assets import durable_avro_schema_path, load_json_asset
from domain.reprocess import OUTPUT_TAGS, RunConfig, process_source

# The job's output schemas (pipelines.reprocess.OUTPUT_SCHEMAS; not imported, it would import Beam).
OUTPUT_SCHEMAS = {
    "retry_requests": "outputs/retry_request.v1.avsc",
    "evaluations": "outputs/evaluation.v1.avsc",
    "dead_letters": "outputs/dead_letter.v1.avsc",
}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Writers:
    """One output file per folder, opened on first use."""

    def __init__(self, root: Path, output_format: str) -> None:
        self.root = root
        self.avro = output_format == "avro"
        self.files: dict[str, tuple] = {}

    def write(self, folder: str, schema_path: str, rows) -> None:
        entry = self.files.get(folder)
        if entry is None:
            path = self.root / folder / ("part-00000-of-00001." + ("avro" if self.avro else "jsonl"))
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(path, "wb")
            writer = (deflate_avro_writer(handle, fastavro.parse_schema(load_json_asset(schema_path)))
                      if self.avro else None)
            entry = self.files[folder] = (handle, writer)
        handle, writer = entry
        if writer is not None:
            for row in rows:
                writer.write(row)
        else:
            handle.write(b"".join(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE) for row in rows))

    def close(self) -> None:
        for handle, writer in self.files.values():
            if writer is not None:
                writer.flush()
            handle.close()


def write_source(writers: _Writers, outputs: dict[str, tuple[dict, ...]]) -> int:
    by_family: dict[str, list[dict]] = defaultdict(list)
    for row in outputs["artifacts"]:
        by_family[row["family"]].append(row)
    for family, rows in by_family.items():
        writers.write(f"artifacts/{family}", durable_avro_schema_path(family), rows)
    for tag in OUTPUT_TAGS:
        if tag != "artifacts" and outputs[tag]:
            writers.write(tag, OUTPUT_SCHEMAS[tag], outputs[tag])
    return sum(len(rows) for rows in outputs.values())


def run(transcripts: str, candidates: str, output: Path, output_format: str, pause_gc: bool = True) -> dict:
    if pause_gc:
        tune_collector()  # the job's collector policy (runners.collector)
    started = time.perf_counter()
    transcript_lines = read_grouped(transcripts)
    candidate_lines = read_grouped(candidates)
    read_s = time.perf_counter() - started
    rss_read = peak_rss_mb()

    writers = _Writers(output, output_format)
    config = RunConfig()
    rows = evaluated = 0
    for source_id in sorted(transcript_lines.keys() | candidate_lines.keys()):
        # The job pauses the garbage collector around each per-source call
        # (runners.collector.collector_paused); the ceiling does the same.
        with collector_paused() if pause_gc else contextlib.nullcontext():
            result = process_source(source_id, transcript_lines.get(source_id, ()), candidate_lines.get(source_id, ()),
                                    config)
        rows += write_source(writers, {tag: getattr(result, tag) for tag in OUTPUT_TAGS})
        evaluated += result.counts.get("evaluations", 0)
    writers.close()
    total_s = time.perf_counter() - started
    n = sum(len(lines) for lines in candidate_lines.values())
    return {
        "candidates": n,
        "evaluations": evaluated,
        "rows_written": rows,
        "sources": len(transcript_lines.keys() | candidate_lines.keys()),
        "read_s": round(read_s, 3),
        "process_and_write_s": round(total_s - read_s, 3),
        "total_s": round(total_s, 3),
        "rss_read_mb": round(rss_read, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "step_peak_extra_mb": round(peak_rss_mb() - rss_read, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transcripts", required=True)
    parser.add_argument("--candidates", required=True)
    parser.add_argument("--output", required=True, type=Path)
    parser.add_argument("--output-format", choices=("jsonl", "avro"), default="jsonl")
    parser.add_argument("--gc", choices=("paused", "auto"), default="paused",
                        help="pause the garbage collector around each per-source call, as the job does (default)")
    args = parser.parse_args(argv)
    print(orjson.dumps(run(args.transcripts, args.candidates, args.output, args.output_format,
                           args.gc == "paused")).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
