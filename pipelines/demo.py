"""``make demo``: the real job on real transcripts, out of the box.

1. builds an archive from the bundled Critical Role sample (CRD3, CC BY-SA 4.0,
   see sample/data/ATTRIBUTION.md) with the SIMULATED producer (a stand-in
   for an LLM, with known injected defects and a ground-truth file);
2. runs the reprocess job on it (DirectRunner, Avro outputs);
3. prints the summary and where everything is.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

from pipelines import reprocess
from sample import simulated_producer

SAMPLE_TRANSCRIPTS = "data/crd3-sample.transcripts.jsonl.gz"


def bundled_transcripts() -> Path:
    return Path(str(resources.files("sample").joinpath(SAMPLE_TRANSCRIPTS)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", default="out/demo", help="Folder for the archive and the job outputs.")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--output-format", default="avro", choices=("avro", "jsonl"))
    args, beam_args = parser.parse_known_args(argv)

    root = Path(args.output).resolve()
    archive, job_out = root / "archive", root / "job"
    archive.mkdir(parents=True, exist_ok=True)
    print(f"1/2 simulated producer -> {archive}")
    simulated_producer.main([
        "--transcripts", str(bundled_transcripts()),
        "--transcripts-out", str(archive / "transcripts.jsonl.gz"),
        "--candidates-out", str(archive / "candidates.jsonl.gz"),
        "--truth-out", str(archive / "ground-truth.jsonl"),
        "--seed", str(args.seed),
    ])
    print(f"2/2 reprocess job -> {job_out}")
    return reprocess.main([
        "--transcripts", str(archive / "transcripts.jsonl.gz"),
        "--candidates", str(archive / "candidates.jsonl.gz"),
        "--output", str(job_out),
        "--output-format", args.output_format,
        *beam_args,
    ])


if __name__ == "__main__":
    sys.exit(main())
