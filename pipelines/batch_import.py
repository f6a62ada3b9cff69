"""Import provider batch results as the next attempts:
``notarius-reprocess import-batch --provider P --results FILES --requests GLOB --output DIR``.

Writes under ``--output``:

- ``candidates.jsonl``: one raw model-candidate record (contract §3.2) per answered
  request, ready to be added to the archive for the next run of the job, with
  the usage the provider billed for it (``usage``, null when it said none);
- ``verdicts.jsonl``: the same for judge requests: verdict records (contract §3.3);
- ``ledger.jsonl``: every result line, byte for byte, with what it was;
- ``import_manifest.json``: every exported request classified (imported,
  errored, expired, canceled, missing), the ids of all not imported, the
  conservation check, and the billed tokens per request kind and family beside
  the export's estimate (``usage``, contract §6.4);
- ``not_imported.txt``: those ids, one per line, for ``export-batch
  --only-request-ids`` to resubmit exactly them.

Plain Python rather than Beam: it reads one batch's files and writes four, in a
single streaming pass that holds only the export index and one state per
request, and provider batches are bounded (50,000 to 200,000 requests). One
process gives byte-identical outputs for the same inputs, which a ledger needs.
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m pipelines.batch_import`: its first steps, then this module imported as itself
    from pipelines.entry import run_module

    run_module("pipelines.batch_import")

import argparse
import hashlib
import sys
import uuid
from typing import Iterator, Sequence

import orjson
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from domain.batch.export import INDEX_SUFFIX, REQUESTS_SUFFIX
from domain.batch.ledger import (
    CANCELED, EXPIRED, MISSING, UNKNOWN_TIME, ExportedRequest, ImportLedger, is_verdict_record, not_imported_ids,
    parse_index_row)
from domain.batch.providers import PROVIDERS
from domain.errors import NotariusError, Refused
from domain.intake import received_instant
from pipelines.guards import claimed_output
from pipelines.options import JobOption, OptionsError, command_parser, parse_command, required_files
from pipelines.interruption import command_named
from transforms.compression import decompressed
from transforms.raw_records import UTF8_BOM
from transforms.write import join_path, write_json_document

CANDIDATES = "candidates.jsonl"
VERDICTS = "verdicts.jsonl"  # the judges' answers (contract §3.3), for the next run's --verdicts
LEDGER = "ledger.jsonl"
MANIFEST = "import_manifest.json"
NOT_IMPORTED = "not_imported.txt"


PROG = "notarius-reprocess import-batch"
DESCRIPTION = __doc__.split("\n\n")[0]
IMPORT_OPTIONS: tuple[JobOption, ...] = (
    JobOption("--provider", required=True, choices=tuple(sorted(PROVIDERS)), help="The batch API the requests went to."),
    JobOption("--results", required=True, many=True,
              help="Every result file the provider returned (paths or globs): output and error files alike."),
    JobOption("--requests", required=True,
              help="Glob of the exported requests-*.jsonl files (their .index.jsonl beside)."),
    JobOption("--output", required=True, help="Output directory (local, gs://, s3://): absent or empty (see "
                                              "--overwrite), and not where --results or --requests read."),
    JobOption("--overwrite", "Replace what --output holds (the earlier import manifest first).", default=False,
              switch=True),
    JobOption("--received-at", "received_at for results whose line carries no time (Anthropic, Gemini API); "
                               f"default {UNKNOWN_TIME}, meaning unknown."),
    JobOption("--unanswered", "What an exported request with no result line counts as (default missing; say "
                              "expired or canceled when the whole batch expired or was cancelled and the provider "
                              "writes no line for it).", default=MISSING, choices=(MISSING, EXPIRED, CANCELED)),
)


def parser() -> argparse.ArgumentParser:
    return command_parser(PROG, DESCRIPTION, IMPORT_OPTIONS)


def match_all(patterns: Sequence[str], flag: str) -> list[str]:
    paths: set[str] = set()
    for pattern in patterns:
        paths.update(required_files(flag, pattern))
    return sorted(paths)


def request_files(paths: Sequence[str]) -> list[tuple[str, str]]:
    """(requests file, index file) pairs named by a glob that may match either."""
    def stem(path: str) -> str:
        for suffix in (INDEX_SUFFIX, REQUESTS_SUFFIX):  # the index first: it ends in .jsonl too
            if path.endswith(suffix):
                return path[:-len(suffix)]
        return path

    stems = {stem(p) for p in paths}
    return [(stem + REQUESTS_SUFFIX, stem + INDEX_SUFFIX) for stem in sorted(stems)]


class UnreadableFile(NotariusError):
    """A file that could not be read to its end (cut or corrupt compression, a failed read);
    ``lines_read`` lines came before the damage."""

    names_the_command = False  # an export that is damaged: the text, which names the file, is the whole line

    def __init__(self, path: str, lines_read: int, cause: Exception) -> None:
        super().__init__(f"{path} could not be read past line {lines_read}: {type(cause).__name__}: {cause}"[:500])
        self.path, self.lines_read = path, lines_read


def read_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """(line number, line) with only the b"\\n" terminator removed: what is kept is what was read.

    Raises UnreadableFile when the file cannot be opened or read to its end; the lines before
    the damage have been yielded. (Only reading is wrapped: a generator never sees its caller's errors.)
    """
    number = 0
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as raw, \
                decompressed(raw, path) as stream:
            for number, line in enumerate(iter(stream.readline, b""), start=1):
                yield number, line[:-1] if line.endswith(b"\n") else line
    except Exception as exc:  # EOFError of a cut .gz, zlib/bz2 errors, BadGzipFile, I/O errors alike
        raise UnreadableFile(path, number, exc) from exc


def load_exported(pairs: Sequence[tuple[str, str]]) -> list[ExportedRequest]:
    """The export's requests, checked line by line against the file that was uploaded."""
    exported: list[ExportedRequest] = []
    for requests_path, index_path in pairs:
        for path in (requests_path, index_path):
            if not FileSystems.exists(path):
                raise Refused(f"{path} is missing: --requests needs each requests file with its index beside it",
                              names_the_command=False)
        # UnreadableFile: the export itself is damaged, nothing can be matched safely.
        index = [parse_index_row(raw, f"{index_path}:{n}") for n, raw in read_lines(index_path) if raw.strip()]
        lines = [raw for _, raw in read_lines(requests_path)]
        if len(lines) != len(index) or any(
                hashlib.sha256(line).hexdigest() != row.line_sha256 for line, row in zip(lines, index)):
            raise Refused(f"{requests_path} does not match its index {index_path}: was the file edited?",
                          names_the_command=False)
        exported.extend(index)
    return exported


# What an import writes (relative to --output): what the input globs must not reach.
IMPORT_WRITES = (CANDIDATES, VERDICTS, LEDGER, NOT_IMPORTED, MANIFEST)


@command_named(PROG)
def run(argv: Sequence[str] | None = None) -> dict:
    """Import the results and return the import manifest."""
    args = parse_command(PROG, DESCRIPTION, IMPORT_OPTIONS, list(argv) if argv is not None else sys.argv[1:])
    provider = PROVIDERS[args.provider]
    if args.received_at is not None and received_instant(args.received_at) is None:
        # Written into every candidate without a time of its own: a value the job cannot order by is refused.
        raise OptionsError(f"--received-at {args.received_at!r} is not a time (RFC 3339, e.g. 2026-10-01T12:00:00Z)")
    pairs = request_files(match_all([args.requests], "--requests"))
    results = match_all(args.results, "--results")
    ledger = ImportLedger(provider, load_exported(pairs), received_at=args.received_at or UNKNOWN_TIME,
                          unanswered=args.unanswered)  # ExportIndexError: an index line that is not one
    with claimed_output(PROG, args.output, inputs={"--results": args.results, "--requests": args.requests},
                        writes=IMPORT_WRITES, overwrite=args.overwrite, remove_first=[MANIFEST],
                        commit_record=MANIFEST) as folder:
        # Written aside, moved into place once whole, then the manifest: a folder never holds a partial
        # candidates.jsonl beside a manifest (the guard removes the aside folder on every way out).
        aside = join_path(folder, f".temp-import-{uuid.uuid4().hex}")
        FileSystems.mkdirs(aside)
        manifest = _import(args, provider, pairs, results, ledger, aside)
        names = (CANDIDATES, VERDICTS, LEDGER, NOT_IMPORTED)
        FileSystems.rename([join_path(aside, name) for name in names], [join_path(folder, name) for name in names])
        manifest["options"]["output"] = folder
        write_json_document(manifest, join_path(folder, MANIFEST))
        return manifest


def _import(args, provider, pairs, results, ledger: ImportLedger, folder: str) -> dict:
    """Read every results file into the ledger; write the candidates, ledger and ids to resubmit under
    ``folder``; returns the manifest."""
    written = verdicts = ledger_rows = 0
    files = []
    with FileSystems.create(join_path(folder, CANDIDATES)) as candidates_out, \
            FileSystems.create(join_path(folder, VERDICTS)) as verdicts_out, \
            FileSystems.create(join_path(folder, LEDGER)) as ledger_out:
        for path in results:
            digest, lines, blank, unreadable = hashlib.sha256(), 0, 0, None
            try:
                for number, raw in read_lines(path):
                    digest.update(raw + b"\n")  # the file as read, byte-order mark included
                    if number == 1 and raw.startswith(UTF8_BOM):  # Windows tools write one: the file's, not the line's
                        raw = raw[len(UTF8_BOM):]
                    if not raw.strip():
                        blank += 1
                        continue
                    lines += 1
                    row, candidate = ledger.add(path, number, raw)
                    ledger_out.write(orjson.dumps(row) + b"\n")
                    ledger_rows += 1
                    if candidate is not None and is_verdict_record(candidate):
                        verdicts_out.write(orjson.dumps(candidate) + b"\n")
                        verdicts += 1
                    elif candidate is not None:
                        candidates_out.write(orjson.dumps(candidate) + b"\n")
                        written += 1
            except UnreadableFile as exc:
                # As the job does with a damaged input: what came before is imported, the rest is one
                # unreadable line, the manifest names the file and claims no conservation (exit 2).
                unreadable = str(exc)
                print(f"{PROG}: {unreadable}", file=sys.stderr)
                lines += 1
                ledger_out.write(orjson.dumps(ledger.add_unreadable_rest(path, exc.lines_read + 1, unreadable)) + b"\n")
                ledger_rows += 1
            files.append({"path": path, "lines": lines, "blank_lines": blank, "sha256": digest.hexdigest(),
                          "unreadable": unreadable})

    summary = ledger.summary()
    resubmit = not_imported_ids(summary)
    with FileSystems.create(join_path(folder, NOT_IMPORTED)) as handle:
        handle.write(b"".join(rid.encode("utf-8") + b"\n" for rid in resubmit))
    result_lines = sum(f["lines"] for f in files)
    conservation = summary["conservation"]
    conservation["holds"] = (conservation["holds"] and written + verdicts == summary["requests"]["imported"]
                             and ledger_rows == result_lines)
    return {
        "provider": provider.name,
        **summary,
        "candidates_written": written,
        "verdicts_written": verdicts,
        "ledger_rows": ledger_rows,
        "requests_files": [p for p, _ in pairs],
        "results_files": files,
        "outputs": {"candidates": CANDIDATES, "verdicts": VERDICTS, "ledger": LEDGER, "not_imported": NOT_IMPORTED},
        "options": {"provider": provider.name, "results": list(args.results), "requests": args.requests,
                    "output": args.output, "received_at": args.received_at, "unanswered": args.unanswered},
    }


def format_summary(manifest: dict) -> str:
    c = manifest["conservation"]
    endings = manifest["imported_endings"]
    lines = [
        f"{manifest['provider']}: {c['exported']} exported = {c['imported']} imported + {c['errored']} errored + "
        f"{c['expired']} expired + {c['canceled']} canceled + {c['missing']} missing -> "
        f"{'holds' if c['holds'] else 'DOES NOT HOLD'}",
        f"imported: {endings['complete']} complete, {endings['refused']} refused, {endings['truncated']} truncated "
        "(refused and truncated answers are kept; the job will reject them with guidance); by request kind: "
        + (", ".join(f"{n} {kind}" for kind, n in manifest.get("imported_by_kind", {}).items()) or "none"),
        "result lines: " + ", ".join(f"{n} {kind}" for kind, n in manifest["result_lines"].items() if n),
        f"candidates: {manifest['outputs']['candidates']} ({manifest['candidates_written']}); verdicts: "
        f"{manifest['outputs']['verdicts']} ({manifest['verdicts_written']}); to resubmit: {manifest['outputs']['not_imported']} "
        f"({sum(len(v) for v in manifest['not_imported'].values())} ids)",
        usage_summary(manifest["usage"]),
    ]
    return "\n".join(lines)


def usage_summary(usage: dict) -> str:
    """The summary's line about what the answers were billed, and how far off the export's estimate was."""
    total, calibration = usage["total"], usage["calibration"]
    if total["with_usage"] and total["cached_unknown"] == total["with_usage"]:
        cached = "cached ones not said"
    else:
        cached = f"{total['cached_input_tokens']:,} cached" + (
            f"; {total['cached_unknown']} answer(s) did not say how many" if total["cached_unknown"] else "")
    line = (f"billed: {total['input_tokens']:,} input tokens ({cached}), {total['output_tokens']:,} output tokens "
            f"for {total['with_usage']} of {total['answers']} answers")
    if total["without_usage"]:
        line += f" ({total['without_usage']} without usage: unknown, not zero)"
    if calibration["billed_per_estimated"] is not None:
        line += (f"; billed / estimated input tokens for {calibration['provider']}: {calibration['billed_per_estimated']}"
                 f" over {calibration['answers']} answers")
    return line


@command_named(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    manifest = run(argv)
    print(format_summary(manifest))
    return 0 if manifest["conservation"]["holds"] else 2

