"""The PySpark peer: the job's domain work in PySpark, as a reference engine (docs/benchmarks.md).

    .venv-peers/bin/python -m bench.spark_peer --transcripts G --candidates G --output DIR \\
        [--master local[2]] [--partitions 4]
    (``make bench-peers`` installs .venv-peers; ``bench.peers`` runs this beside the job.)

The same work as ``bench.loop`` and the job, in PySpark's RDD API: each input
file read as lines (``textFile``, bytes), every line keyed by its
``source_id`` as the job's read step and the loop key it (``transforms.json_keys``),
the two inputs joined with ``cogroup`` into ``--partitions`` partitions, and
``domain.reprocess.process_source_groups`` called once per source inside the
Python workers, with the job's garbage-collector policy
(``runners.collector``). Each task writes its partition's rows as JSON Lines (orjson), one file
per output folder (``artifacts/<family>/``, ``retry_requests/``,
``evaluations/``, ``dead_letters/``) and partition, and returns its counts;
the driver adds them up. There is no manifest and no commit protocol: the
peer is given the cheapest honest way to write, so the comparison flatters
it rather than the job.

Prints one JSON object: candidates, evaluations, rows written, sources and
phase times. Needs Java 17 and PySpark (bench/requirements-peers.txt); the
domain comes from this checkout (PYTHONPATH), so Beam is not needed.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _keyed(input_name: str):
    def key(line: bytes):
        from transforms.json_keys import trusted_key  # keyed as the job's read step keys

        line = line.rstrip(b"\r")
        if not line.strip():
            return []
        return [(trusted_key(line, "source_id"), line)]

    key.__name__ = f"key_{input_name}"
    return key


def _process_partition(output: str):
    """Per partition: the domain once per source, rows streamed to this partition's files."""

    def run(index, sources):
        import orjson

        from domain.reprocess import INPUT_CANDIDATES, INPUT_TRANSCRIPTS, RunConfig, process_source_groups
        from runners.collector import collector_paused, tune_collector

        tune_collector()  # the job's collector policy, once per Python worker
        config = RunConfig()
        handles: dict[str, object] = {}
        counts: Counter = Counter()

        def write(folder: str, rows) -> None:
            handle = handles.get(folder)
            if handle is None:
                path = os.path.join(output, folder, f"part-{index:05d}.jsonl")
                os.makedirs(os.path.dirname(path), exist_ok=True)
                handle = handles[folder] = open(path, "wb")
            handle.write(b"".join(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE) for row in rows))

        try:
            for source_id, (transcripts, candidates) in sources:
                grouped = {INPUT_TRANSCRIPTS: list(transcripts), INPUT_CANDIDATES: list(candidates)}
                with collector_paused():
                    outputs, source_counts = process_source_groups(config, source_id, grouped)
                for folder, rows in outputs.items():
                    if rows:
                        write(folder, rows)
                counts.update(source_counts)
                counts["sources"] += 1
                counts["candidates"] += len(grouped[INPUT_CANDIDATES])
                counts["rows_written"] += sum(len(rows) for rows in outputs.values())
        finally:
            for handle in handles.values():
                handle.close()
        yield dict(counts)

    return run


def run(transcripts: str, candidates: str, output: Path, master: str, partitions: int) -> dict:
    started = time.perf_counter()
    from pyspark import SparkConf, SparkContext

    python = sys.executable
    env_path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    conf = (SparkConf().setMaster(master).setAppName("notarius-peer")
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.pyspark.python", python)
            .set("spark.executorEnv.PYTHONPATH", env_path))
    os.environ["PYTHONPATH"] = env_path
    os.environ.setdefault("PYSPARK_PYTHON", python)
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    context_s = time.perf_counter() - started
    try:
        transcript_files = sorted(glob.glob(transcripts))
        candidate_files = sorted(glob.glob(candidates))
        keyed_t = sc.textFile(",".join(transcript_files), use_unicode=False).flatMap(_keyed("transcripts"))
        keyed_c = sc.textFile(",".join(candidate_files), use_unicode=False).flatMap(_keyed("candidates"))
        output.mkdir(parents=True, exist_ok=True)
        per_partition = (keyed_t.cogroup(keyed_c, numPartitions=partitions)
                         .mapPartitionsWithIndex(_process_partition(str(output)))
                         .collect())
    finally:
        sc.stop()
    total = Counter()
    for counts in per_partition:
        total.update(counts)
    return {
        "candidates": total["candidates"],
        "evaluations": total["evaluations"],
        "rows_written": total["rows_written"],
        "sources": total["sources"],
        "partitions": partitions,
        "master": master,
        "context_s": round(context_s, 3),
        "total_s": round(time.perf_counter() - started, 3),
    }


def main(argv: list[str] | None = None) -> int:
    import orjson

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transcripts", required=True)
    parser.add_argument("--candidates", required=True)
    parser.add_argument("--output", required=True, type=Path)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the cogroup (the per-source stage)")
    args = parser.parse_args(argv)
    print(orjson.dumps(run(args.transcripts, args.candidates, args.output, args.master, args.partitions)).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
