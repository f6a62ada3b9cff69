"""``make demo``: the real job on real transcripts, out of the box.

1. builds an archive from the bundled Critical Role sample (CRD3, CC BY-SA 4.0,
   see sample/data/ATTRIBUTION.md) with the SIMULATED producer (a stand-in
   for an LLM, with known injected defects and a ground-truth file);
2. runs the reprocess job on it (DirectRunner, Avro outputs);
3. measures the retry economy against the ground truth and writes a
   self-contained HTML report beside the outputs;
4. prints the summary and where everything is.

Exits non-zero when the job fails, conservation does not hold, or a retry
request leaks internal text or a failing slot does not get exactly one.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

from pipelines import reprocess, report, retry_economy
from sample import simulated_producer

SAMPLE_TRANSCRIPTS = "data/crd3-sample.transcripts.jsonl.gz"


def bundled_transcripts() -> Path:
    return Path(str(resources.files("sample").joinpath(SAMPLE_TRANSCRIPTS)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", default="out/demo", help="Folder for the archive, the job outputs and the report.")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--output-format", default="avro", choices=("avro", "jsonl", "parquet"))
    parser.add_argument("--transcripts", type=Path, default=None,
                        help="transcript records to simulate from (default: the bundled CRD3 sample)")
    parser.add_argument("--candidates", type=int, default=None,
                        help="about this many candidates (default: every slot of the sample)")
    parser.add_argument("--defect-rate", action="append", default=[], metavar="NAME=P",
                        help="override a defect rate of the simulated producer (repeatable)")
    args, beam_args = parser.parse_known_args(argv)

    root = Path(args.output).resolve()
    archive, job_out = root / "archive", root / "job"
    truth = archive / "ground-truth.jsonl"
    archive.mkdir(parents=True, exist_ok=True)
    print(f"1/3 simulated producer -> {archive}")
    simulated_producer.main([
        "--transcripts", str(args.transcripts or bundled_transcripts()),
        "--transcripts-out", str(archive / "transcripts.jsonl.gz"),
        "--candidates-out", str(archive / "candidates.jsonl.gz"),
        "--truth-out", str(truth),
        "--seed", str(args.seed),
        "--reconciliations",
        *(["--candidates", str(args.candidates)] if args.candidates else []),
        *(option for rate in args.defect_rate for option in ("--defect-rate", rate)),
    ])
    print(f"2/3 reprocess job -> {job_out}")
    status = reprocess.main([
        "--transcripts", str(archive / "transcripts.jsonl.gz"),
        "--candidates", str(archive / "candidates.jsonl.gz"),
        "--output", str(job_out),
        "--output-format", args.output_format,
        "--overwrite",  # the demo folder is the demo's own: a second `make demo` replaces the first
        *beam_args,
    ])
    if status != 0:
        return status

    print("3/3 retry economy and report")
    figures = retry_economy.load_figures(job_out, truth)
    for line in retry_economy.summary_lines(figures):
        print(f"  {line}")
    retry_economy.write_json(figures, root / "retry_economy.json")
    path = report.write_report(figures, root / "report.html")
    print(f"report: {path}")
    return 0 if figures.ok else 1


if __name__ == "__main__":
    sys.exit(main())
