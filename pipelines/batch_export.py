"""Export retry and refresh requests as provider batch files:
``notarius-reprocess export-batch --retry-requests G --transcripts G --provider P --model M --output DIR``.

The same runners as the main job. Each request (a retry, or a refresh after a
prompt revision, SPEC §6.1) is joined with its transcript by source, and a
reconciliation request with the run's accepted chunk registry artifacts
(``--registries``, by default ``artifacts/*-registry/`` beside the run's
``retry_requests/``); one provider request line is written per request, in
files that stay within the provider's per-file limits. Beside every
``requests-NNNNN-of-MMMMM.jsonl`` lies its ``.index.jsonl``: line number ->
request id, slot, attempt and fingerprints, which ``import-batch`` reads back.
``export_manifest.json`` proves that every retry request read was exported,
dead-lettered (``dead_letters/``) or filtered.

The job's own flags are parsed here with argparse, and everything else goes
to Beam, so these flags never collide with another job's PipelineOptions.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Sequence

import apache_beam as beam
import orjson
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from domain.assets import TRANSCRIPT_INPUT_SCHEMA, input_field_shape
from domain.batch.export import (
    INPUT_REGISTRIES, INPUT_RETRY_REQUESTS, REGISTRY_ARTIFACTS, INPUT_TRANSCRIPTS, OUTPUT_TAGS, REQUESTS_PREFIX, ExportConfig, build_export_manifest,
    choose_among_duplicates, export_source_groups, file_contents, file_names, plan_files, schema_problems)
from domain.batch.providers import PROVIDERS, RequestSettings
from domain.families import FAMILIES
from domain.revision import REQUEST_KINDS
from pipelines.options import OptionsError, check_arguments, parse_choices, parse_families, parser_flags, required_files
from pipelines.runner_workarounds import send_stage_inputs_whole
from transforms.collector import freeze_for_exit
from transforms.files import matching_files
from transforms.process import COUNTS, JoinAndApply, SumCounts
from transforms.read import COUNTS as READ_COUNTS
from transforms.read import DEAD, KEYED, KeyedInput, ReadKeyedInputs
from transforms.write import OutputSpec, WriteOutputs, join_path, write_json_document

DEFAULT_RUNNER = "FnApiRunner"  # as the main job: the DirectRunner's engine without a Prism download
DEFAULT_MAX_OUTPUT_TOKENS = 8192
DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024
MANIFEST = "export_manifest.json"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="notarius-reprocess export-batch", description=__doc__.split("\n\n")[0],
                                allow_abbrev=False)  # "--kind" is a typo, not --kinds (the job refuses it too)
    p.add_argument("--retry-requests", "--retry_requests", dest="retry_requests", required=True,
                   help="Glob of retry request files (the main job's retry_requests/part-*, Avro, JSON Lines or Parquet).")
    p.add_argument("--transcripts", required=True, help="Glob of transcript files (.jsonl, .jsonl.gz, .avro).")
    p.add_argument("--registries", default=None,
                   help="Glob of the run's accepted chunk registry artifacts, which reconciliation prompts list "
                        "(default: artifacts/*-registry/part-* beside the run's retry_requests/).")
    p.add_argument("--kinds", default=None,
                   help="Comma-separated request kinds to export (retry, refresh; default both); others are filtered.")
    p.add_argument("--provider", required=True, choices=sorted(PROVIDERS), help="Target batch API.")
    p.add_argument("--model", required=True, help="Model name, as the provider spells it (one model per export).")
    p.add_argument("--output", required=True, help="Output directory (local, gs://, s3://); must hold no request files.")
    p.add_argument("--max-output-tokens", "--max_output_tokens", dest="max_output_tokens", type=int,
                   default=DEFAULT_MAX_OUTPUT_TOKENS,
                   help=f"Output token limit per request (default {DEFAULT_MAX_OUTPUT_TOKENS}).")
    p.add_argument("--temperature", type=float, default=None, help="Sampling temperature (default: the provider's).")
    p.add_argument("--max-lines-per-file", "--max_lines_per_file", dest="max_lines_per_file", type=int, default=None,
                   help="Split files at fewer lines than the provider's limit.")
    p.add_argument("--max-bytes-per-file", "--max_bytes_per_file", dest="max_bytes_per_file", type=int, default=None,
                   help="Split files at fewer bytes than the provider's limit.")
    p.add_argument("--families", default=None, help="Comma-separated family keys; other requests are counted as filtered.")
    p.add_argument("--only-request-ids", "--only_request_ids", dest="only_request_ids", default=None,
                   help="File of request ids, one per line (e.g. import-batch's not_imported.txt); others are filtered.")
    p.add_argument("--max-record-bytes", "--max_record_bytes", dest="max_record_bytes", type=int,
                   default=DEFAULT_MAX_RECORD_BYTES, help="Larger input records become dead letters (default 8 MiB).")
    return p


def registries_glob(args: argparse.Namespace) -> str | None:
    """--registries, else the run's own registry artifacts when --retry-requests names its retry_requests/."""
    if args.registries:
        return args.registries
    marker = "retry_requests/"
    if marker not in args.retry_requests:
        return None
    return args.retry_requests.rsplit(marker, 1)[0] + REGISTRY_ARTIFACTS


def parse_kinds(value: str | None) -> frozenset[str] | None:
    return parse_choices(value, REQUEST_KINDS, "--kinds", "kind")


def _limit(requested: int | None, provider_limit: int | None, flag: str) -> int | None:
    if requested is None:
        return provider_limit
    if requested < 1:
        raise SystemExit(f"{flag} must be at least 1")
    return requested if provider_limit is None else min(requested, provider_limit)


def _request_ids(path: str | None) -> frozenset[str] | None:
    if path is None:
        return None
    with FileSystems.open(path) as handle:
        return frozenset(line.strip() for line in handle.read().decode("utf-8").splitlines() if line.strip())


class _OnePerId(beam.DoFn):
    """Request ids are unique per source by construction; across sources, keep one."""

    def process(self, element):
        custom_id, rows = element
        rows = list(rows)
        kept, dead = choose_among_duplicates(custom_id, rows) if len(rows) > 1 else (rows[0], [])
        yield kept
        if dead:  # a block of rows, as every dead-letter output (transforms.write takes blocks)
            yield beam.pvalue.TaggedOutput("dead", dead)
            yield beam.pvalue.TaggedOutput("counts", {f"dead_letters/{INPUT_RETRY_REQUESTS}": len(dead)})


class _WriteFile(beam.DoFn):
    """One planned file: its request lines and its index, written whole (a retried
    bundle rewrites the same bytes under the same name)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def process(self, element, plan):
        number, rows = element
        requests_name, index_name = file_names(number, plan.files)
        body, index = file_contents(list(rows))
        for name, data in ((requests_name, body), (index_name, index)):
            with FileSystems.create(join_path(self.directory, name)) as handle:
                handle.write(data)
        yield {"requests_file": requests_name, "index_file": index_name, "lines": body.count(b"\n"), "bytes": len(body)}


def build_pipeline(pipeline: beam.Pipeline, args: argparse.Namespace, runner_name: str) -> None:
    provider = PROVIDERS[args.provider]
    max_lines = _limit(args.max_lines_per_file, provider.max_lines, "--max-lines-per-file")
    max_bytes = _limit(args.max_bytes_per_file, provider.max_bytes, "--max-bytes-per-file")
    families = parse_families(args.families)
    config = ExportConfig(
        provider_name=provider.name,
        settings=RequestSettings(model=args.model, max_output_tokens=args.max_output_tokens, temperature=args.temperature),
        max_bytes_per_file=max_bytes, families=families, only_request_ids=_request_ids(args.only_request_ids),
        kinds=parse_kinds(args.kinds))

    inputs = [
        KeyedInput(args.transcripts, INPUT_TRANSCRIPTS, "source_id", args.max_record_bytes,
                   fields=input_field_shape(TRANSCRIPT_INPUT_SCHEMA)),
        KeyedInput(args.retry_requests, INPUT_RETRY_REQUESTS, "source_id", args.max_record_bytes),
    ]
    registries = registries_glob(args)
    if registries and not matching_files(registries):
        registries = None  # the run's own place for them holds none (an explicit --registries was checked)
    if registries:
        inputs.append(KeyedInput(registries, INPUT_REGISTRIES, "source_id", args.max_record_bytes))
    read = pipeline | "Read" >> ReadKeyedInputs(tuple(inputs))
    shaped = read[KEYED] | "PerSource" >> JoinAndApply(functools.partial(export_source_groups, config), OUTPUT_TAGS)

    unique = (
        shaped["requests"]
        | "Rows" >> beam.FlatMap(lambda block: block)  # one key's block -> its rows: each row is keyed alone
        | "ById" >> beam.Map(lambda row: (row["custom_id"], row))
        | "GroupById" >> beam.GroupByKey()
        | "OnePerId" >> beam.ParDo(_OnePerId()).with_outputs("dead", "counts", main="rows")
    )
    # The plan needs every id and size (small), never the lines themselves.
    plan = (
        unique.rows
        | "Sizes" >> beam.Map(lambda row: (row["custom_id"], len(row["line"]) + 1))
        | "AllSizes" >> beam.combiners.ToList()
        | "Plan" >> beam.Map(plan_files, max_lines, max_bytes)
    )
    files = (
        unique.rows
        | "Assign" >> beam.Map(lambda row, p: (p.file_of[row["custom_id"]], row), p=beam.pvalue.AsSingleton(plan))
        | "GroupByFile" >> beam.GroupByKey()
        | "WriteFiles" >> beam.ParDo(_WriteFile(args.output), plan=beam.pvalue.AsSingleton(plan))
        | "AllFiles" >> beam.combiners.ToList()
    )
    dead_letters = (read[DEAD], shaped["dead_letters"], unique.dead) | "AllDeadLetters" >> beam.Flatten()
    (dead_letters | "LabelDeadLetters" >> beam.Map(lambda block: ("dead_letters", block))
     | "Write[dead_letters]" >> WriteOutputs(
         {"dead_letters": OutputSpec(join_path(args.output, "dead_letters"), "jsonl")}, args.output))

    options = {
        "retry_requests": args.retry_requests, "transcripts": args.transcripts, "provider": provider.name,
        "model": args.model, "output": args.output, "max_output_tokens": args.max_output_tokens,
        "temperature": args.temperature, "max_lines_per_file": max_lines, "max_bytes_per_file": max_bytes,
        "families": sorted(families) if families else None, "only_request_ids": args.only_request_ids,
        "max_record_bytes": args.max_record_bytes,
        "registries": registries, "kinds": args.kinds,
    }
    manifest_path = join_path(args.output, MANIFEST)
    (
        (read[READ_COUNTS], shaped[COUNTS], unique.counts)
        | "AllCounts" >> beam.Flatten()
        | "SumCounts" >> beam.CombineGlobally(SumCounts())
        | "WriteManifest" >> beam.Map(
            lambda counts, written: write_json_document(
                build_export_manifest(counts, written, options=options, runner=runner_name), manifest_path),
            written=beam.pvalue.AsSingleton(files))
    )


def _preflight(args: argparse.Namespace) -> None:
    """Everything that can be refused before a worker starts."""
    provider = PROVIDERS[args.provider]
    problems = schema_problems(provider, parse_families(args.families) or FAMILIES)
    if problems:
        raise SystemExit(f"the LLM schemas do not fit {provider.name}'s structured-output subset:\n  " + "\n  ".join(problems))
    if args.temperature is not None and not provider.takes_temperature:
        raise SystemExit(f"--temperature: {provider.name}'s request type has no temperature")
    if args.max_output_tokens < 1:
        raise SystemExit("--max-output-tokens must be at least 1")
    if args.max_record_bytes < 1:
        raise SystemExit("--max-record-bytes must be at least 1")
    parse_kinds(args.kinds)
    given = [("--retry-requests", args.retry_requests), ("--transcripts", args.transcripts)]
    for flag, pattern in given + ([("--registries", args.registries)] if args.registries else []):
        required_files(flag, pattern)
    stale = matching_files(join_path(args.output, REQUESTS_PREFIX + "*"))
    if stale:
        raise SystemExit(f"--output {args.output!r} already holds request files; export into an empty folder")


def run(argv: Sequence[str] | None = None) -> dict:
    """Run the export and return its manifest."""
    command = parser()
    args, beam_args = command.parse_known_args(list(argv) if argv is not None else sys.argv[1:])
    options = PipelineOptions(beam_args)
    standard = options.view_as(StandardOptions)
    try:
        # What is neither an export flag nor a Beam option would otherwise be dropped by Beam without a word.
        passed_on = check_arguments(beam_args, standard.runner, job_flags=parser_flags(command))
    except OptionsError as exc:
        raise SystemExit(f"{command.prog}: {exc}") from None
    if passed_on:
        print(f"{command.prog}: passing {', '.join(passed_on)} on to the runner's job server", file=sys.stderr)
    _preflight(args)
    if not standard.runner:
        standard.runner = DEFAULT_RUNNER
    send_stage_inputs_whole()  # see pipelines/runner_workarounds.py
    with beam.Pipeline(options=options) as pipeline:
        build_pipeline(pipeline, args, standard.runner)
    with FileSystems.open(join_path(args.output, MANIFEST)) as handle:
        return orjson.loads(handle.read())


def format_summary(manifest: dict) -> str:
    c = manifest["conservation"]
    lines = [f"{f['requests_file']}: {f['lines']} requests, {f['bytes']} bytes (index: {f['index_file']})"
             for f in manifest["files"]]
    kinds = ", ".join(f"{n} {kind}" for kind, n in manifest.get("exported_by_kind", {}).items())
    lines.append(f"{manifest['provider']} / {manifest['model']}: {c['exported']} requests ({kinds}) "
                 f"in {len(manifest['files'])} file(s)")
    lines.append(f"conservation: {c['retry_requests_in']} requests in = {c['exported']} exported + "
                 f"{c['dead_letters']} dead letters + {c['filtered']} filtered -> {'holds' if c['holds'] else 'DOES NOT HOLD'}")
    if manifest["stale"]:
        lines.append(f"{manifest['stale']} request(s) were built under older prompt or schema fingerprints; "
                     "they are sent with the current prompt and schema")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    manifest = run(argv)
    print(format_summary(manifest))
    return 0 if manifest["conservation"]["holds"] else 2


if __name__ == "__main__":
    sys.exit(freeze_for_exit(main()))
