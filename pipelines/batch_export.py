"""Export retry and refresh requests as provider batch files:
``notarius-reprocess export-batch --retry-requests G --transcripts G --provider P --model M --output DIR``.

The same runners as the main job. Each request (a retry, or a refresh after a
prompt revision, contract §6.1) is joined with its transcript by source, and a
reconciliation request with the run's accepted chunk registry artifacts
(``--registries``, by default ``artifacts/*-registry/`` beside the run's
``retry_requests/``); one provider request line is written per request, in
files that stay within the provider's per-file limits. Beside every
``requests-NNNNN-of-MMMMM.jsonl`` lies its ``.index.jsonl``: line number ->
request id, slot, attempt and fingerprints, which ``import-batch`` reads back.
``export_manifest.json`` proves that every retry request read was exported,
dead-lettered (``dead_letters/``) or filtered, and states what the batch is
expected to cost (``estimate``: tokens by one documented rule, money with
``--prices``; contract §6.4).

The job's own flags are parsed here with argparse, and everything else goes
to Beam, so these flags never collide with another job's PipelineOptions.
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m pipelines.batch_export`: its first steps, then this module imported as itself
    from pipelines.entry import run_module

    run_module("pipelines.batch_export")

import argparse
import functools
import sys
from typing import Sequence

import apache_beam as beam
import orjson
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import StandardOptions

from domain.assets import CANDIDATE_INPUT_SCHEMA, TRANSCRIPT_INPUT_SCHEMA, input_field_shape
from domain.batch.estimate import estimate_summary, unpriced_line
from domain.batch.export import (INPUT_JUDGED, INPUT_REGISTRIES, INPUT_RETRY_REQUESTS, INPUT_TRANSCRIPTS, OUTPUT_TAGS,
                                 REGISTRY_ARTIFACTS, ExportConfig, build_export_manifest, file_names, plan_files,
                                 schema_problems)
from domain.batch.providers import PROVIDERS, RequestSettings
from domain.errors import Refused
from domain.families import FAMILIES
from domain.revision import KIND_JUDGE, REQUEST_KINDS
from pipelines.guards import claimed_output
from pipelines.interruption import command_named
from pipelines.options import (DEFAULT_MAX_RECORD_BYTES, PRICES_OPTION, JobOption, OptionsError, beam_options,
                               command_parser, parse_choices, parse_command, parse_families, read_prices,
                               required_files)
from pipelines.verify import require_verified
from runners.workarounds import send_stage_inputs_in_pieces, send_stage_inputs_whole
from transforms.export import STAGING, OnePerId, WriteRequestFiles, remove_staging, staged_export, staged_name
from transforms.files import literal_pattern, matching_files
from transforms.process import BLOCKS, COUNTS, JoinAndApply, SumCounts
from transforms.read import KeyedInput, ReadKeyedInputs
from transforms.write import OutputSpec, WriteOutputs, join_path, write_json_document

DEFAULT_RUNNER = "FnApiRunner"  # as the main job: the DirectRunner's engine without a Prism download
DEFAULT_MAX_OUTPUT_TOKENS = 8192
MANIFEST = "export_manifest.json"


PROG = "notarius-reprocess export-batch"
# A provider's token limit is a 32-bit integer in every request type.
MAX_OUTPUT_TOKENS_LIMIT = 2**31 - 1

EXPORT_OPTIONS: tuple[JobOption, ...] = (
    JobOption("--retry-requests", required=True,
              help="Glob of a run's retry request files (RUN/retry_requests/part-*, Avro, JSON Lines or Parquet); "
                   "the run folder must verify, and is read as named (RUN is never a pattern)."),
    JobOption("--transcripts", required=True, help="Glob of transcript files (.jsonl, .jsonl.gz, .avro)."),
    JobOption("--registries", help="Glob of the run's accepted chunk registry artifacts, which reconciliation "
                                   "prompts list (default: artifacts/*-registry/part-* beside the run's "
                                   "retry_requests/)."),
    JobOption("--kinds", help="Comma-separated request kinds to export (retry, refresh, judge; default all); others "
                              "are filtered."),
    JobOption("--candidates", help="Glob of the candidate files the run read: judge requests show the judged "
                                   "attempt's records (default: the run's own --candidates, from its manifest; "
                                   "read only when the run wrote judge requests)."),
    JobOption("--provider", required=True, choices=tuple(sorted(PROVIDERS)), help="Target batch API."),
    JobOption("--model", required=True, non_empty=True,
              help="Model name, as the provider spells it (one model per export)."),
    JobOption("--output", required=True, help="Output directory (local, gs://, s3://): absent or empty (see "
                                              "--overwrite), and not where an input glob reads."),
    JobOption("--overwrite", "Replace what --output holds (removed, the earlier export manifest first, before "
                             "this export writes).", default=False, switch=True),
    JobOption("--max-output-tokens", f"Output token limit per request (default {DEFAULT_MAX_OUTPUT_TOKENS}).",
              default=DEFAULT_MAX_OUTPUT_TOKENS, type=int, minimum=1, maximum=MAX_OUTPUT_TOKENS_LIMIT),
    JobOption("--temperature", "Sampling temperature, 0 to 2 (default: the provider's).", type=float, minimum=0,
              maximum=2),
    JobOption("--max-lines-per-file", "Split files at fewer lines than the provider's limit.", type=int, minimum=1),
    JobOption("--max-bytes-per-file", "Split files at fewer bytes than the provider's limit.", type=int, minimum=1),
    JobOption("--families", "Comma-separated family keys; other requests are counted as filtered."),
    JobOption("--only-request-ids", "File of request ids, one per line (e.g. import-batch's not_imported.txt); "
                                    "others are filtered.", existing_file=True),
    JobOption("--max-record-bytes", "Larger input records become dead letters (default 8 MiB).",
              default=DEFAULT_MAX_RECORD_BYTES, type=int, minimum=1),
    PRICES_OPTION,
)
DESCRIPTION = __doc__.split("\n\n")[0]


def parser() -> argparse.ArgumentParser:
    return command_parser(PROG, DESCRIPTION, EXPORT_OPTIONS)


def registries_glob(args: argparse.Namespace) -> str | None:
    """--registries (a run's registry artifacts read from that run folder as named), else the run's own
    registry artifacts when --retry-requests names its retry_requests/."""
    if args.registries:
        return read_pattern(args.registries, "artifacts")
    marker = "retry_requests/"
    if marker not in args.retry_requests:
        return None
    return literal_pattern(args.retry_requests.rsplit(marker, 1)[0]) + REGISTRY_ARTIFACTS


def retry_requests_glob(args: argparse.Namespace) -> str:
    """--retry-requests as read: from the run folder as named."""
    return read_pattern(args.retry_requests, "retry_requests")


def read_pattern(pattern: str, output_name: str) -> str:
    """A glob of one output of a run (``RUN/retry_requests/part-*``) with its run folder taken as named: the
    folder that verifies is the folder read, whatever characters its name holds (``runs/run[1]``); what
    follows ``<output_name>/`` stays a pattern. A glob that names no run folder is kept as given."""
    if run_folder_of(pattern, output_name) is None:
        return pattern
    head, marker, tail = pattern.rpartition(output_name + "/")
    return literal_pattern(head) + marker + tail


def judged_candidates_glob(args: argparse.Namespace) -> str | None:
    """Where judge requests find their judged attempts: --candidates, else the run's own candidates when
    the run wrote judge requests and they are exported (None: no judge request to render)."""
    kinds = parse_kinds(args.kinds)
    if kinds is not None and KIND_JUDGE not in kinds:
        return None
    if args.candidates:
        return args.candidates
    manifest = getattr(args, "run_manifest", None) or {}
    if not (manifest.get("outputs") or {}).get("judge_requests"):
        return None
    return (manifest.get("options") or {}).get("candidates")


def parse_kinds(value: str | None) -> frozenset[str] | None:
    return parse_choices(value, REQUEST_KINDS, "--kinds", "kind")


def _limit(requested: int | None, provider_limit: int | None) -> int | None:
    if requested is None:
        return provider_limit
    return requested if provider_limit is None else min(requested, provider_limit)


def read_request_ids(path: str) -> frozenset[str]:
    """The ids of an ``--only-request-ids`` file; OptionsError when it is not UTF-8 text."""
    with FileSystems.open(path) as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise OptionsError(f"--only-request-ids {path!r} is not UTF-8 text (byte {exc.start}): give the ids "
                           "one per line") from None
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


def build_pipeline(pipeline: beam.Pipeline, args: argparse.Namespace, runner_name: str) -> None:
    provider = PROVIDERS[args.provider]
    max_lines = _limit(args.max_lines_per_file, provider.max_lines)
    max_bytes = _limit(args.max_bytes_per_file, provider.max_bytes)
    families = parse_families(args.families)
    config = ExportConfig(
        provider_name=provider.name,
        settings=RequestSettings(model=args.model, max_output_tokens=args.max_output_tokens, temperature=args.temperature),
        max_bytes_per_file=max_bytes, families=families, only_request_ids=args.request_ids,
        kinds=parse_kinds(args.kinds))

    inputs = [
        KeyedInput(args.transcripts, INPUT_TRANSCRIPTS, "source_id", args.max_record_bytes,
                   fields=input_field_shape(TRANSCRIPT_INPUT_SCHEMA)),
        KeyedInput(retry_requests_glob(args), INPUT_RETRY_REQUESTS, "source_id", args.max_record_bytes),
    ]
    registries = registries_glob(args)
    if registries and not matching_files(registries):
        registries = None  # the run's own place for them holds none (an explicit --registries was checked)
    if registries:
        inputs.append(KeyedInput(registries, INPUT_REGISTRIES, "source_id", args.max_record_bytes))
    judged = judged_candidates_glob(args)
    if judged:
        inputs.append(KeyedInput(judged, INPUT_JUDGED, "source_id", args.max_record_bytes,
                                 fields=input_field_shape(CANDIDATE_INPUT_SCHEMA)))
    # The read step's dead letters and counts ride through the per-source step (one output: Flink).
    read = pipeline | "Read" >> ReadKeyedInputs(tuple(inputs), dead_letters_label="dead_letters")
    staging = join_path(args.output, STAGING)
    shaped = read | "PerSource" >> JoinAndApply(functools.partial(staged_export, config, staging), OUTPUT_TAGS)

    unique = (
        shaped[BLOCKS]
        # one key's block -> its rows: each row is keyed alone
        | "Rows" >> beam.FlatMap(lambda labelled: labelled[1] if labelled[0] == "requests" else ())
        | "ById" >> beam.Map(lambda row: (row["custom_id"], row))
        | "GroupById" >> beam.GroupByKey()
        | "OnePerId" >> beam.ParDo(OnePerId(staging)).with_outputs("dead", "counts", main="rows")
    )
    # The plan needs every id and size (small), never the lines themselves.
    plan = (
        unique.rows
        | "Sizes" >> beam.Map(lambda row: (row["custom_id"], row["size"]))
        | "AllSizes" >> beam.combiners.ToList()
        | "Plan" >> beam.Map(plan_files, max_lines, max_bytes)
    )
    files = (
        unique.rows
        | "Assign" >> beam.Map(lambda row, p: (p.file_of[row["custom_id"]], row), p=beam.pvalue.AsSingleton(plan))
        | "GroupByFile" >> beam.GroupByKey()
        | "WriteFiles" >> beam.ParDo(WriteRequestFiles(args.output), plan=beam.pvalue.AsSingleton(plan))
        | "AllFiles" >> beam.combiners.ToList()
    )
    shaped_dead = shaped[BLOCKS] | "DeadLetterBlocks" >> beam.FlatMap(
        lambda labelled: [labelled[1]] if labelled[0] == "dead_letters" else [])
    dead_letters = (shaped_dead, unique.dead) | "AllDeadLetters" >> beam.Flatten()
    (dead_letters | "LabelDeadLetters" >> beam.Map(lambda block: ("dead_letters", block))
     | "Write[dead_letters]" >> WriteOutputs(
         {"dead_letters": OutputSpec(join_path(args.output, "dead_letters"), "jsonl")}, args.output))

    options = {
        "retry_requests": args.retry_requests, "transcripts": args.transcripts, "provider": provider.name,
        "model": args.model, "output": args.output, "max_output_tokens": args.max_output_tokens,
        "temperature": args.temperature, "max_lines_per_file": max_lines, "max_bytes_per_file": max_bytes,
        "families": sorted(families) if families else None, "only_request_ids": args.only_request_ids,
        "max_record_bytes": args.max_record_bytes,
        "registries": registries, "kinds": args.kinds, "candidates": judged, "prices": args.prices,
    }
    manifest_path = join_path(args.output, MANIFEST)
    # What the written lines are expected to cost: counted from the lines kept, one dict per line.
    estimates = unique.rows | "EstimateCounts" >> beam.Map(lambda row: row["estimate"])
    prices = getattr(args, "price_table", None)
    (
        (shaped[COUNTS], unique.counts, estimates)
        | "AllCounts" >> beam.Flatten()
        | "SumCounts" >> beam.CombineGlobally(SumCounts())
        | "WriteManifest" >> beam.Map(
            lambda counts, written: _commit(staging, build_export_manifest(counts, written, options=options,
                                                                            runner=runner_name, prices=prices),
                                            manifest_path),
            written=beam.pvalue.AsSingleton(files))
    )


def _commit(staging: str, manifest: dict, path: str) -> str:
    """The staging files go once every file is written (this step waits for them), then the manifest."""
    remove_staging(staging)
    return write_json_document(manifest, path)


def run_folder_of(pattern: str, output_name: str) -> str | None:
    """The run folder a glob of one of its outputs names (``RUN/retry_requests/part-*`` -> ``RUN``)."""
    head, marker, _ = pattern.rpartition(output_name + "/")
    if not marker or (head and not head.endswith("/")):
        return None
    return head.rstrip("/") or "."


def _preflight(args: argparse.Namespace) -> None:
    """Everything that can be refused before a worker starts (the output folder: ``claimed_output``)."""
    provider = PROVIDERS[args.provider]
    problems = schema_problems(provider, parse_families(args.families) or FAMILIES)
    if problems:
        raise Refused(f"the LLM schemas do not fit {provider.name}'s structured-output subset:\n  " + "\n  ".join(problems),
                      names_the_command=False)
    if args.temperature is not None and not provider.takes_temperature:
        raise OptionsError(f"--temperature: {provider.name}'s request type has no temperature")
    parse_kinds(args.kinds)
    given = [("--retry-requests", retry_requests_glob(args)), ("--transcripts", args.transcripts)]
    for flag, pattern in given + ([("--registries", registries_glob(args))] if args.registries else []):
        required_files(flag, pattern)
    # contract §6.2: a run folder is read only when it verifies (never a half-written, mixed or forged one).
    run = run_folder_of(args.retry_requests, "retry_requests")
    if run is None:
        raise OptionsError(f"--retry-requests {args.retry_requests!r} does not name a run's retry requests "
                           f"(RUN/retry_requests/part-*): export-batch reads only a run folder that verifies")
    args.run_manifest = None
    for folder in (run, run_folder_of(args.registries, "artifacts") if args.registries else None):
        if folder is not None:
            verified = require_verified(folder)  # NotVerified: refused
            if folder == run:
                args.run_manifest = verified
    judged = judged_candidates_glob(args)
    if judged is not None:
        required_files("--candidates", judged)
    args.request_ids = read_request_ids(args.only_request_ids) if args.only_request_ids else None
    args.price_table = read_prices(args.prices) if args.prices else None


def _writes() -> list[str]:
    """Paths (relative to --output) an export writes: what the input globs must not reach."""
    requests, index = file_names(0, 1)
    return [requests, index, "dead_letters/part-00000-of-00001.jsonl", MANIFEST, f"{STAGING}/{staged_name('s')}"]


@command_named(PROG)
def run(argv: Sequence[str] | None = None) -> dict:
    """Run the export and return its manifest."""
    args, beam_args = parse_command(PROG, DESCRIPTION, EXPORT_OPTIONS,
                                    list(argv) if argv is not None else sys.argv[1:], known_only=True)
    options = beam_options(PROG, beam_args, _job_flags(), DEFAULT_RUNNER, preflight=lambda: _preflight(args))
    standard = options.view_as(StandardOptions)
    inputs = {"--retry-requests": retry_requests_glob(args), "--transcripts": args.transcripts,
              "--registries": registries_glob(args), "--only-request-ids": args.only_request_ids,
              "--candidates": judged_candidates_glob(args), "--prices": args.prices}
    with claimed_output(PROG, args.output, inputs=inputs, writes=_writes(), overwrite=args.overwrite,
                        remove_first=[MANIFEST], commit_record=MANIFEST) as folder:
        args.output = folder
        send_stage_inputs_whole()  # see runners/workarounds.py
        send_stage_inputs_in_pieces()
        with beam.Pipeline(options=options) as pipeline:
            build_pipeline(pipeline, args, standard.runner)
        with FileSystems.open(join_path(args.output, MANIFEST)) as handle:
            return orjson.loads(handle.read())


def _job_flags() -> list[str]:
    return [spelling for option in EXPORT_OPTIONS for spelling in option.spellings]


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
    lines.append(estimate_summary(manifest["estimate"]))
    return "\n".join(lines)


@command_named(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    manifest = run(argv)
    unpriced = unpriced_line(manifest["estimate"])
    if unpriced:
        print(f"{PROG}: {unpriced}", file=sys.stderr)
    print(format_summary(manifest))
    return 0 if manifest["conservation"]["holds"] else 2

