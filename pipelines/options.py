"""Command-line options of the reprocess job (one PipelineOptions subclass)."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from domain.families import FAMILIES

DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024


def parse_families(value: str | None) -> frozenset[str] | None:
    """``--families a,b`` -> the chosen family keys (None: all); unknown keys stop the command."""
    if not value:
        return None
    chosen = frozenset(part.strip() for part in value.split(",") if part.strip())
    unknown = sorted(chosen - FAMILIES.keys())
    if unknown:
        raise SystemExit(f"--families: unknown family {', '.join(unknown)}; known: {', '.join(sorted(FAMILIES))}")
    return chosen


class ReprocessOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        # Not argparse-required: Beam parses every loaded PipelineOptions subclass with one
        # parser, so a required flag here would break any other pipeline in the process.
        parser.add_argument("--transcripts", default=None, help="Glob of transcript files (.jsonl, .jsonl.gz, .avro).")
        parser.add_argument("--candidates", default=None, help="Glob of raw model-candidate files.")
        parser.add_argument("--output", default=None, help="Output directory (local, gs://, s3://).")
        parser.add_argument("--prior-registries", "--prior_registries", dest="prior_registries", default=None,
                            help="Optional glob of canonical registry artifacts from an earlier run (JSON Lines or "
                                 "Avro); their names count for occurrence membership.")
        parser.add_argument("--output-format", "--output_format", dest="output_format", choices=("avro", "jsonl"),
                            default="avro", help="Format of the part-* files (default avro).")
        parser.add_argument("--max-attempts", "--max_attempts", dest="max_attempts", type=int, default=3,
                            help="Producer attempts per slot before it is exhausted (default 3).")
        parser.add_argument("--families", default=None,
                            help="Comma-separated family keys to process; others are counted as filtered.")
        parser.add_argument("--max-record-bytes", "--max_record_bytes", dest="max_record_bytes", type=int,
                            default=DEFAULT_MAX_RECORD_BYTES,
                            help="Records larger than this become dead letters (default 8 MiB).")
