"""Command-line options of the reprocess job (one PipelineOptions subclass)."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024


class ReprocessOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        parser.add_argument("--transcripts", required=True, help="Glob of transcript files (.jsonl, .jsonl.gz, .avro).")
        parser.add_argument("--candidates", required=True, help="Glob of raw model-candidate files.")
        parser.add_argument("--output", required=True, help="Output directory (local, gs://, s3://).")
        parser.add_argument("--output-format", "--output_format", dest="output_format", choices=("avro", "jsonl"),
                            default="avro", help="Format of the part-* files (default avro).")
        parser.add_argument("--max-attempts", "--max_attempts", dest="max_attempts", type=int, default=3,
                            help="Producer attempts per slot before it is exhausted (default 3).")
        parser.add_argument("--families", default=None,
                            help="Comma-separated family keys to process; others are counted as filtered.")
        parser.add_argument("--max-record-bytes", "--max_record_bytes", dest="max_record_bytes", type=int,
                            default=DEFAULT_MAX_RECORD_BYTES,
                            help="Records larger than this become dead letters (default 8 MiB).")
