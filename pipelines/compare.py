"""``notarius-reprocess compare RUN_A RUN_B --output DIR``: what changed from one run to another (contract §6.3).

Both run folders must verify. A Beam job with the main job's runners (no
``--runner``: the in-process Fn API runner; any Beam option goes through)
reads each run's evaluations, retry requests and artifacts (Avro, JSON Lines
or Parquet, the two runs in any formats), gathers what each run wrote for
every slot, and compares the slot's outcome and accepted records in A and B
(``analysis.compare``: every rule lives there; its transforms are ``transforms.compare``, its page
``pipelines.pages.compare``; this module builds the job and writes the documents). Under
``--output``: ``slots/`` (one row per slot whose outcome or accepted records
differ), ``compare.json`` (the counts), ``compare.html`` (the same at a
glance) and, last, ``manifest.json``: the comparison's commit record, listing
its files as a run's manifest does.

Exits 0 when the comparison's conservation holds (every slot of A or B counted
in exactly one transition, every row the runs' manifests list read), 2 when it
does not, 1 on a refused command line or folder.
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m pipelines.compare`: its first steps, then this module imported as itself
    from pipelines.entry import run_module

    run_module("pipelines.compare")

import sys
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import apache_beam as beam
import orjson
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import StandardOptions

from analysis.compare import ARTIFACT_CHANGES, RUN_A, RUN_B, RUNS, SLOT_CHANGES, facts_by_slot
from analysis.slots import RowError
from analysis.compare_folder import (COMPARE_HTML, COMPARE_JSON, PAGES_FOLDER, SLOTS_OUTPUT, comparison_document,
                                     comparison_manifest, compared_output, document_facts, listed_rows, page_name,
                                     rows_block, slot_row_order)
from analysis.cost import comparison_cost, unpriced_line
from domain.batch.prices import PriceTable
from domain.errors import Refused
from domain.run_integrity import MANIFEST_NAME, OutputFile, files_block, listed_files, relative_path
from domain.schemas import SLOT_CHANGE_SCHEMA_AVRO
from pipelines.guards import claimed_output
from pipelines.interruption import command_named
from pipelines.options import PRICES_OPTION, JobOption, OptionsError, beam_options, parse_command, read_prices, wants_help
from pipelines.outputs import iter_file_rows
from pipelines.pages.compare import render_comparison, write_source_page
from pipelines.verify import NotVerified, require_verified
from runners.workarounds import send_stage_inputs_in_pieces, send_stage_inputs_whole
from transforms.compare import REFUSED_TALLY, CompareSources, ReadRuns
from pipelines.folders import remove_folder_contents
from transforms.files import OUTPUT_FORMATS, SUFFIX_FORMATS, format_of, literal_pattern, normalized_folder
from transforms.process import SumCounts
from transforms.write import OutputSpec, WriteOutputs, join_path, write_document, writer_schema

DEFAULT_RUNNER = "FnApiRunner"  # as the main job: the DirectRunner's engine without a Prism download
PROG = "notarius-reprocess compare"
USAGE = f"{PROG} RUN_A RUN_B --output DIR [--output-format {'|'.join(OUTPUT_FORMATS)}] [--overwrite] [Beam options]"
# Slot rows per change in compare.json's examples.
EXAMPLES_PER_CHANGE = 20

COMPARE_OPTIONS: tuple[JobOption, ...] = (
    JobOption("--output", required=True, help="Folder for the comparison (local, gs://, s3://): absent or empty (see "
                                              "--overwrite), and not inside either run folder."),
    JobOption("--output-format", "Format of slots/part-* (default avro).", default="avro", choices=OUTPUT_FORMATS),
    JobOption("--overwrite", "Replace what --output holds (removed, the earlier manifest first, before this "
                             "comparison writes).", default=False, switch=True),
    PRICES_OPTION,
)
DESCRIPTION = ("Compare two run folders that verify (contract §6.3): slots/ (the slots whose outcome or accepted records "
               "differ), compare.json, compare.html and manifest.json under --output. Any Beam option passes through.")


class Prices(NamedTuple):
    """The operator's prices (``--prices``): the table read and the file it was read from (None, None: none)."""

    table: PriceTable | None
    file: str | None


# --- the job ----------------------------------------------------------------------------------------

def build_pipeline(pipeline: beam.Pipeline, runs: Mapping[str, str], manifests: Mapping[str, Mapping],
                   output: str, fmt: str, options: Mapping[str, Any], runner_name: str,
                   prices: Prices = Prices(None, None)) -> None:
    blocks, read_counts = pipeline | "ReadRuns" >> ReadRuns(runs)
    sources = blocks | "CompareSources" >> CompareSources()
    changed = sources | "Changed" >> beam.Filter(lambda source: bool(source.rows))

    spec = OutputSpec(join_path(output, SLOTS_OUTPUT), fmt, writer_schema(fmt, SLOT_CHANGE_SCHEMA_AVRO))
    written = (  # a source's changed slots are one block
        changed
        | "Label" >> beam.Map(lambda source: (SLOTS_OUTPUT, list(source.rows)))
        | "WriteSlots" >> WriteOutputs({SLOTS_OUTPUT: spec}, output)
    )
    files = written | "AllFiles" >> beam.combiners.ToList()  # (label, final path, facts) of every file
    described = {run: describe_run(runs[run], manifests[run]) for run in RUNS}
    pages = (  # one page per source, its changed slots in memory at once (never the whole comparison's)
        changed
        | "WritePages" >> beam.Map(lambda source: write_source_page((source.source_id, source.rows), output,
                                                                    described))
        | "AllPages" >> beam.combiners.ToList()
    )

    examples = (
        changed
        | "ByChange" >> beam.FlatMap(lambda source: [(row["change"], row) for row in source.rows])
        | "FirstSlots" >> beam.combiners.Top.PerKey(EXAMPLES_PER_CHANGE, key=slot_row_order, reverse=True)
        | "Examples" >> beam.combiners.ToDict()
    )
    counts = read_counts | "SumReadCounts" >> beam.CombineGlobally(SumCounts()).without_defaults()
    cost = (sources | "CostCounts" >> beam.Map(lambda source: source.cost)
            | "SumCostCounts" >> beam.CombineGlobally(SumCounts()))  # {} when neither run has a slot
    listed = {run: listed_rows(manifests[run]) for run in RUNS}
    families = sorted({family for run in RUNS for family in (manifests[run].get("outcomes") or {})})
    (
        sources
        | "Tally" >> beam.Map(lambda source: source.tally)
        | "SumTallies" >> beam.CombineGlobally(SumCounts())  # {} when neither run has a slot
        | "Document" >> beam.FlatMap(document_of, families, described, listed, read=beam.pvalue.AsSingleton(counts),
                                 examples=beam.pvalue.AsSingleton(examples), prices=prices,
                                 cost_counts=beam.pvalue.AsSingleton(cost))
        | "WriteDocuments" >> beam.Map(write_documents, output, pages=beam.pvalue.AsSingleton(pages))
        # The commit record: after the documents and every slot file are in place.
        | "WriteManifest" >> beam.Map(write_manifest, output, options, runner_name,
                                      files=beam.pvalue.AsSingleton(files))
    )


def document_of(tallies: dict, families: list[str], described: dict, listed: dict, read: dict,
                examples: dict, prices: Prices, cost_counts: Mapping[tuple, int]) -> Iterable[dict]:
    """compare.json from the summed tallies, the reading step's counts, the first changed slots and what the
    runs cost (``analysis.cost.comparison_cost`` of the summed counts); none when a block held a row of the
    wrong type (then nothing is written after it: no manifest commits)."""
    if tallies.get(REFUSED_TALLY):
        return
    document = comparison_document(tallies, families=families, runs=described, rows=rows_block(listed, read),
                                   examples=examples)
    yield {**document, "cost": comparison_cost(cost_counts, RUNS, prices.table, prices.file)}


def describe_run(folder: str, manifest: Mapping[str, Any]) -> dict:
    """What compare.json says of a run it compared."""
    options = manifest.get("options") or {}
    conservation = manifest.get("conservation") or {}
    return {"folder": folder, "output_format": options.get("output_format"),
            "candidates_in": conservation.get("candidates_in"), "families": options.get("families"),
            "max_attempts": options.get("max_attempts"), "refresh_stale": options.get("refresh_stale"),
            "runner": manifest.get("runner")}


def write_documents(document: dict, output: str, pages: Sequence[Mapping[str, Any]] = ()) -> tuple[dict, dict]:
    """compare.json and compare.html (the pages are written already); returns the document and the facts
    (bytes, sha256) of every document, the pages' included, for the manifest."""
    data = {COMPARE_JSON: orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
                                       | orjson.OPT_APPEND_NEWLINE),
            COMPARE_HTML: render_comparison(document, pages).encode("utf-8")}
    for name, content in data.items():
        write_document(content, join_path(output, name))
    facts = {name: document_facts(content) for name, content in data.items()}
    return document, {**facts, **{page["page"]: page["facts"] for page in pages}}


def write_manifest(written: tuple[dict, dict], output: str, options: Mapping[str, Any], runner: str,
                   files: list) -> str:
    document, documents = written
    block = files_block(OutputFile(relative_path(output, path), format_of(path), facts["bytes"], facts["sha256"],
                                   facts["rows"]) for _, path, facts in files)
    manifest = comparison_manifest(document, files=block, documents=documents, options=options, runner=runner)
    return write_document(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
                                       | orjson.OPT_APPEND_NEWLINE), join_path(output, MANIFEST_NAME))


# --- the command -------------------------------------------------------------------------------------

def _writes() -> list[str]:
    """Paths (relative to --output) compare writes: what the run folders must not reach."""
    return ([f"{SLOTS_OUTPUT}/part-00000-of-00001{suffix}" for suffix in SUFFIX_FORMATS]
            + [COMPARE_JSON, COMPARE_HTML, page_name("source"), MANIFEST_NAME])


def _job_flags() -> list[str]:
    return [spelling for option in COMPARE_OPTIONS for spelling in option.spellings]


def parse(argv: Sequence[str]):
    """(the two run folders, the compare flags, the arguments left for Beam); a mistake ends the command."""
    if wants_help(argv):  # the usage line names the two folders, which come first
        parse_command(f"{PROG} RUN_A RUN_B", DESCRIPTION, COMPARE_OPTIONS, argv)  # prints the help, exits 0
    folders = list(argv[:2])
    if len(folders) < 2 or any(folder.startswith("-") for folder in folders):
        raise OptionsError(f"name the two run folders first: {USAGE}")
    args, beam_args = parse_command(PROG, DESCRIPTION, COMPARE_OPTIONS, list(argv[2:]), known_only=True)
    return folders, args, beam_args


def run(argv: Sequence[str] | None = None) -> dict:
    """Run the comparison and return its document (what compare.json holds)."""
    return compare(argv)[0]


@command_named(PROG)
def compare(argv: Sequence[str] | None = None) -> tuple[dict, str]:
    """Run the comparison: its document and the folder it was written to (links resolved)."""
    folders, args, beam_args = parse(list(argv) if argv is not None else sys.argv[1:])
    manifests = {}

    def both_runs_verify() -> None:
        for run_name, folder in zip(RUNS, folders):
            try:
                manifests[run_name] = require_verified(folder)  # contract §6.2: only a run folder that verifies
            except NotVerified as refused:
                raise OptionsError(f"run {run_name.upper()}: {refused}") from None

    prices = []

    def preflight() -> None:
        both_runs_verify()
        prices.append(read_prices(args.prices) if args.prices else None)  # a file that is not one: one line

    options = beam_options(PROG, beam_args, _job_flags(), DEFAULT_RUNNER, preflight=preflight)
    standard = options.view_as(StandardOptions)
    runs = {run_name: normalized_folder(folder) for run_name, folder in zip(RUNS, folders)}
    # Every file of either run is an input: the comparison may be written neither in a run folder nor around one.
    inputs = {f"RUN_{run_name.upper()}": join_path(literal_pattern(runs[run_name]), "**") for run_name in RUNS}
    with claimed_output(PROG, args.output, inputs=inputs, writes=_writes(), overwrite=args.overwrite,
                        remove_first=[MANIFEST_NAME], commit_record=MANIFEST_NAME) as folder:
        recorded = {"run_a": runs[RUN_A], "run_b": runs[RUN_B], "output": folder, "output_format": args.output_format,
                    "prices": args.prices}
        send_stage_inputs_whole()  # see runners/workarounds.py
        send_stage_inputs_in_pieces()
        with beam.Pipeline(options=options) as pipeline:
            # What the runs cost (contract §6.4) is counted in the job, from the rows it compares.
            build_pipeline(pipeline, runs, manifests, folder, args.output_format, recorded, standard.runner,
                           Prices(prices[0], args.prices))
        if not FileSystems.exists(join_path(folder, MANIFEST_NAME)):  # a row of the wrong type: nothing committed
            problem = first_row_error(runs, manifests)
            remove_folder_contents(folder)  # claimed empty: all of it is this command's (slots/, documents)
            raise Refused(f"{problem}; the run verifies, but compare reads only rows its output "
                          f"contract allows: nothing was written to {folder}")
        path = join_path(folder, COMPARE_JSON)
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            return orjson.loads(handle.read()), folder


def first_row_error(runs: Mapping[str, str], manifests: Mapping[str, Mapping]) -> str:
    """The first row of either run that compare cannot read as facts, by file and row number. The job's
    blocks do not carry their file, so the listed files are read again (only when the job met such a row)."""
    for run in RUNS:
        for rel in sorted(listed_files(manifests[run])):
            output = compared_output(rel)
            if output is None:
                continue
            path = join_path(runs[run], rel)
            try:
                for number, row in enumerate(iter_file_rows(path), 1):
                    try:
                        facts_by_slot(output, [row])
                    except RowError as exc:
                        return f"run {run.upper()}: {path} row {number}: {exc}"
            except (OSError, ValueError):
                continue  # not readable past here: the reading step's dead letters, not a row of the wrong type
    return "a row of run A or B is not what its output's contract says (not found again when read anew)"


def format_summary(document: Mapping[str, Any], output: str) -> str:
    """The lines compare prints: transitions off the diagonal, changes, artifacts, requests, conservation."""
    total = document["total"]
    lines = [f"compared {document['runs'][RUN_A]['folder']} (A) with {document['runs'][RUN_B]['folder']} (B): "
             f"{total['slots']['in_a_or_b']} slots, {total['changed_slots']} changed"]
    moved = [(src, dst, n) for src, row in total["transitions"].items() for dst, n in row.items() if src != dst]
    for src, dst, n in sorted(moved, key=lambda t: (-t[2], t[0], t[1])):
        lines.append(f"  {src:>9} -> {dst:<9} {n:>8}")
    if not moved:
        lines.append("  every slot kept its outcome")
    lines.append("changes: " + ", ".join(f"{total['changes'][c]} {c}" for c in SLOT_CHANGES))
    lines.extend(situation_lines(total))
    lines.append("accepted artifacts: " + ", ".join(f"{total['artifacts'][a]} {a}" for a in ARTIFACT_CHANGES))
    answered = total["requests_answered"]
    lines.append(f"requests of A answered in B: {answered['answered']} of {answered['requests']} "
                 f"({answered['passed']} passed, {answered['failed_again']} failed again, "
                 f"{answered['deferred']} deferred)")
    if total.get("failed_after_registry_change"):
        lines.append(f"occurrence attempts that failed after their registry changed: "
                     f"{total['failed_after_registry_change']}")
    slots, rows = document["conservation"]["slots"], document["conservation"]["rows"]
    lines.append(f"conservation: {slots['slots_in_a_or_b']} slots = {slots['counted_in_transitions']} in transitions, "
                 f"rows read as listed: {'yes' if rows['holds'] else 'NO'} -> "
                 f"{'holds' if document['conservation']['holds'] else 'DOES NOT HOLD'}")
    lines.extend(cost_summary_lines(document))
    lines.append(f"outputs under {output}: {SLOTS_OUTPUT}/ (the changed slots), {COMPARE_JSON}, {COMPARE_HTML} "
                 f"(and {PAGES_FOLDER}/: every changed slot, one page per source), {MANIFEST_NAME}")
    return "\n".join(lines)


def cost_summary_lines(document: Mapping[str, Any]) -> list[str]:
    """What compare prints of the cost (contract §6.4): B's attempts beside A's, and the refresh round."""
    cost = document.get("cost")
    if not cost:
        return []
    has_prices = cost["prices"]["file"] is not None
    currency = cost["prices"]["currency"]

    def said(total: Mapping[str, Any]) -> str:
        if not has_prices:
            return (f"{total['input_tokens']:,} input + {total['output_tokens']:,} output tokens "
                    f"(usage known for {total['with_usage']:,} of {total['attempts']:,})")
        shown = "unknown" if total["cost"] is None else f"{total['cost']:.6f}" + (f" {currency}" if currency else "")
        return f"{shown} (cost known for {total['priced'] or 0:,} of {total['attempts']:,})"

    a, b = cost["attempts"]["a"]["total"], cost["attempts"]["b"]["total"]
    refresh = cost["refresh_round"]
    lines = [f"cost of the attempts: A {said(a)}; B {said(b)}",
             f"the revision's refresh round (B's answers to A's {refresh['total']['attempts'] + refresh['unanswered_total']} "
             f"refresh requests): {said(refresh['total'])}"
             + (f"; {refresh['unanswered_total']} not answered" if refresh["unanswered_total"] else "")]
    return lines


def situation_lines(total: Mapping[str, Any]) -> list[str]:
    """Where the changed slots stand in B, the most first (compare.html says what each means and what to do)."""
    counts = [(n, name) for name, n in (total.get("situations") or {}).items() if n]
    if not counts:
        return []
    listed = ", ".join(f"{n} {name.replace('_', ' ')}" for n, name in sorted(counts, key=lambda c: (-c[0], c[1])))
    return [f"where they stand in B: {listed} ({COMPARE_HTML}: what each means, what to do next, every slot)"]


def main(argv: Sequence[str] | None = None) -> int:
    document, folder = compare(argv)
    unpriced = unpriced_line((document.get("cost") or {}).get("unpriced") or (), (document.get("cost") or {}).get(
        "prices", {}).get("file"))
    if unpriced:
        print(f"{PROG}: {unpriced}", file=sys.stderr)
    print(format_summary(document, folder))
    return 0 if document["conservation"]["holds"] else 2

