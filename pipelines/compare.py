"""``notarius-reprocess compare RUN_A RUN_B --output DIR``: what changed from one run to another (contract §6.3).

Both run folders must verify. A Beam job with the main job's runners (no
``--runner``: the in-process Fn API runner; any Beam option goes through)
reads each run's evaluations, retry requests and artifacts (Avro, JSON Lines
or Parquet, the two runs in any formats), gathers what each run wrote for
every slot, and compares the slot's outcome and accepted records in A and B
(``analysis.compare``: every rule lives there; this module only wires). Under
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
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import apache_beam as beam
import orjson
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import StandardOptions

from analysis.compare import (ANSWER_STATUSES, ARTIFACT_CHANGES, COMPARE_HTML, COMPARE_JSON, COMPARED_OUTPUTS,
                              OUTPUT_ARTIFACTS, READ_FIELDS, RUN_A, RUN_B, RUNS, SITUATION_ABSENT, SITUATION_ENTRY_LIST,
                              SITUATION_EXHAUSTED, SITUATION_JUDGES, SITUATION_NEWLY_ACCEPTED,
                              SITUATION_RECORDS_CHANGED, SITUATION_REFRESH, SITUATION_REGISTRY, SITUATION_RETRY,
                              SITUATIONS, SLOT_CHANGES, SLOT_OUTCOMES, SLOTS_OUTPUT, RowError,
                              comparison_document, comparison_manifest, compare_source, compared_output, document_facts,
                              facts_by_slot, input_name, listed_rows, page_name, PAGES_FOLDER, rows_block, sum_tallies,
                              situation_of_row,
                              slot_row_order)
from analysis.record_diff import RECORD_ADDED, RECORD_REMOVED
from domain.errors import Refused
from domain.run_integrity import MANIFEST_NAME, OutputFile, files_block, listed_files, relative_path
from domain.schemas import SLOT_CHANGE_SCHEMA_AVRO
from pipelines.guards import claimed_output
from analysis.cost import unpriced_line
from pipelines.cost_page import comparison_cost_section
from pipelines.options import PRICES_OPTION, JobOption, OptionsError, beam_options, parse_command, read_prices, wants_help
from pipelines.run_cost import comparison_cost
from pipelines.html_page import CSP, STYLE, e, figure, legend, section, stacked_bars, verdict
from runners.workarounds import send_stage_inputs_whole
from pipelines.verify import NotVerified, require_verified
from pipelines.interruption import command_named
from pipelines.outputs import iter_file_rows
from transforms.files import OUTPUT_FORMATS, SUFFIX_FORMATS, format_of, literal_pattern, normalized_folder, remove_folder_contents
from transforms.process import SumCounts
from transforms.raw_records import decode_block
from transforms.read import COUNTS, KEYED, KeyedInput, ReadKeyedInputs
from transforms.write import OutputSpec, WriteOutputs, join_path, write_document, writer_schema

DEFAULT_RUNNER = "FnApiRunner"  # as the main job: the DirectRunner's engine without a Prism download
PROG = "notarius-reprocess compare"
USAGE = f"{PROG} RUN_A RUN_B --output DIR [--output-format {'|'.join(OUTPUT_FORMATS)}] [--overwrite] [Beam options]"
# A row of a verified run is read whole, however large its raw response (the job bounds its inputs).
READ_LIMIT = 2**31 - 1
# Slot rows per change in compare.json's examples.
EXAMPLES_PER_CHANGE = 20
# Blocks holding a row of the wrong type are tallied under this key (no more output of the reading stage: on
# Flink, each costs one more copy of that stage's whole output).
REFUSED_TALLY = ("refused_blocks",)

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


# --- the job ----------------------------------------------------------------------------------------

def run_pattern(folder: str, output: str) -> str:
    """The part files of one output of a run (every family's, for artifacts); the folder read as named."""
    if output == OUTPUT_ARTIFACTS:
        return join_path(literal_pattern(folder), OUTPUT_ARTIFACTS, "*", "part-*")
    return join_path(literal_pattern(folder), output, "part-*")


@dataclass(frozen=True)
class SourceComparison:
    """One source's part of the comparison: its changed slots' rows (in slot order) and its share of every
    count of compare.json (with ``REFUSED_TALLY``: blocks holding a row of the wrong type, which keep the
    comparison from being committed)."""

    source_id: str
    rows: tuple[dict, ...]
    tally: Mapping[tuple, int]


def compare_source_blocks(element) -> SourceComparison:
    """``(source, [(input name, block)])``: every block both runs wrote of one source -> its comparison.

    Per source, not per slot: a slot names its source, and grouping the runs' rows by slot made one element
    per slot and run for the runner to encode, hold and group (at 101k candidates two thirds of compare's
    time, and its peak memory grew with the runs)."""
    source_id, named_blocks = element
    parts, refused = [], 0
    for name, block in named_blocks:
        run, output = name.split(".", 1)
        rows = (orjson.loads(line) for line in decode_block(block))
        try:
            parts.append((run, facts_by_slot(output, rows)))
        except RowError:
            # Possible in a run that verifies (a JSON Lines file edited and listed anew): nothing of the block
            # is compared and the comparison is not committed; the command names the file and the row.
            refused += 1
    comparisons = compare_source(parts)
    tally = sum_tallies(comparison.tally() for comparison in comparisons)
    if refused:
        tally[REFUSED_TALLY] = refused
    return SourceComparison(source_id, tuple(row for c in comparisons if (row := c.row()) is not None), tally)


class ReadRuns(beam.PTransform):
    """Both runs' evaluations, requests and artifacts -> ``(source, (input name, block))`` per source and file,
    and the reading step's counts (rows read, rows not readable, per run and output)."""

    def __init__(self, runs: Mapping[str, str]) -> None:
        super().__init__()
        self.runs = dict(runs)

    def expand(self, pbegin):
        inputs = tuple(KeyedInput(run_pattern(self.runs[run], output), input_name(run, output), "source_id",
                                  READ_LIMIT, fields=READ_FIELDS[output])
                       for run in RUNS for output in COMPARED_OUTPUTS)
        read = pbegin | "Read" >> ReadKeyedInputs(inputs)
        return read[KEYED], read[COUNTS]


class CompareSources(beam.PTransform):
    """``(source, (input name, block))`` -> one ``SourceComparison`` per source of A or B."""

    def expand(self, blocks):
        return blocks | "GroupBySource" >> beam.GroupByKey() | "Compare" >> beam.Map(compare_source_blocks)


def build_pipeline(pipeline: beam.Pipeline, runs: Mapping[str, str], manifests: Mapping[str, Mapping],
                   output: str, fmt: str, options: Mapping[str, Any], runner_name: str,
                   cost: Mapping[str, Any] | None = None) -> None:
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
    listed = {run: listed_rows(manifests[run]) for run in RUNS}
    families = sorted({family for run in RUNS for family in (manifests[run].get("outcomes") or {})})
    (
        sources
        | "Tally" >> beam.Map(lambda source: source.tally)
        | "SumTallies" >> beam.CombineGlobally(SumCounts())  # {} when neither run has a slot
        | "Document" >> beam.FlatMap(document_of, families, described, listed, read=beam.pvalue.AsSingleton(counts),
                                 examples=beam.pvalue.AsSingleton(examples), cost=cost)
        | "WriteDocuments" >> beam.Map(write_documents, output, pages=beam.pvalue.AsSingleton(pages))
        # The commit record: after the documents and every slot file are in place.
        | "WriteManifest" >> beam.Map(write_manifest, output, options, runner_name,
                                      files=beam.pvalue.AsSingleton(files))
    )


def document_of(tallies: dict, families: list[str], described: dict, listed: dict, read: dict,
                examples: dict, cost: Mapping[str, Any] | None = None) -> Iterable[dict]:
    """compare.json from the summed tallies, the reading step's counts and the first changed slots (and what
    the runs cost, ``pipelines.run_cost.comparison_cost``); none when a block held a row of the wrong type
    (then nothing is written after it: no manifest commits)."""
    if tallies.get(REFUSED_TALLY):
        return
    document = comparison_document(tallies, families=families, runs=described, rows=rows_block(listed, read),
                                   examples=examples)
    yield document if cost is None else {**document, "cost": dict(cost)}


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


# --- the page -----------------------------------------------------------------------------------------

OUTCOME_COLOURS = {"accepted": "#2e7d32", "retry": "#f9a825", "refresh": "#00838f", "exhausted": "#c62828",
                   "deferred": "#757575", "absent": "#bdbdbd"}
CHANGE_COLOURS = {"regression": "#c62828", "fix": "#2e7d32", "records_changed": "#1565c0", "other": "#9e9e9e"}
TOP_REASON_CODES = 15
# The report's style, and tables of text (slots, attempts) read from the left.
PAGE_STYLE = STYLE + ("table.text td,table.text th{text-align:left;vertical-align:top}\n"
                      "ul.records{margin:0;padding-left:0;list-style:none}ul.records li{margin:0 0 2px}\n"
                      "li.added{color:#2e7d32}li.removed{color:#c62828}span.counts{color:#555;font-size:.85em}\n"
                      "span.attempts{font-size:.8em;color:#555;word-break:break-all}\n")


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]], foot: Sequence[Any] | None = None,
           text: bool = False) -> str:
    """A table; cells are HTML already (escape data with ``e``)."""
    thead = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    tfoot = ("<tfoot><tr>" + "".join(f"<th>{cell}</th>" for cell in foot) + "</tr></tfoot>") if foot else ""
    opening = '<table class="text">' if text else "<table>"
    return f"{opening}<thead><tr>{thead}</tr></thead><tbody>{body}</tbody>{tfoot}</table>"


def transitions_section(document: Mapping[str, Any]) -> str:
    transitions = document["total"]["transitions"]
    rows = []
    for src in SLOT_OUTCOMES:
        if src not in transitions:
            continue
        cells = [e(src)]
        for dst in SLOT_OUTCOMES:
            n = transitions[src].get(dst, 0)
            moved = src != dst and n
            cells.append(f"<b>{n}</b>" if moved else (str(n) if n else "·"))
        rows.append(cells)
    by_family = [(family, tuple(block["changes"][c] for c in SLOT_CHANGES))
                 for family, block in document["by_family"].items() if block["changed_slots"]]
    chart = (legend((c, CHANGE_COLOURS[c]) for c in SLOT_CHANGES)
             + stacked_bars(by_family, [CHANGE_COLOURS[c] for c in SLOT_CHANGES], SLOT_CHANGES,
                            "changed slots per family")
             if by_family else "<p>No slot changed.</p>")
    return section("transitions", "Slot outcomes, A → B",
                   "<p>Each slot of A or B is counted once, in the row of its outcome in A and the column of its "
                   "outcome in B (<i>absent</i>: the run holds nothing of it). Off the diagonal: the slot changed.</p>"
                   + _table(["A \\ B", *SLOT_OUTCOMES], rows) + chart)


def families_section(document: Mapping[str, Any]) -> str:
    head = ["family", "slots A", "slots B", *SLOT_CHANGES, *(f"artifacts {a}" for a in ARTIFACT_CHANGES)]

    def cells(name: str, block: Mapping[str, Any]) -> list:
        return [e(name), block["slots"]["in_a"], block["slots"]["in_b"], *(block["changes"][c] for c in SLOT_CHANGES),
                *(block["artifacts"][a] for a in ARTIFACT_CHANGES)]

    rows = [cells(f, b) for f, b in document["by_family"].items() if b["slots"]["in_a_or_b"]]
    return section("families", "Per family",
                   "<p>A regression was accepted in A and is not in B; a fix the reverse; records changed: accepted "
                   "in both, with other records (compared by a hash of the records, not of provenance).</p>"
                   + _table(head, rows, cells("total", document["total"])))


def requests_section(document: Mapping[str, Any]) -> str:
    head = ["family", "requests in A", *ANSWER_STATUSES]
    families = [(f, b["requests_answered"]) for f, b in document["by_family"].items()
                if b["requests_answered"]["requests"]]
    rows = [[e(f), r["requests"], *(r[s] for s in ANSWER_STATUSES)] for f, r in families]
    total = document["total"]["requests_answered"]
    registry = [(f, b["failed_after_registry_change"]) for f, b in document["by_family"].items()
                if b.get("failed_after_registry_change")]
    body = ("<p>A request of A is answered in B when B evaluated an attempt of its slot with the attempt number it "
            "asked for; that attempt passed, failed again or was deferred.</p>"
            + (_table(head, rows, ["total", total["requests"], *(total[s] for s in ANSWER_STATUSES)]) if rows
               else "<p>Run A made no request.</p>"))
    body += ("<h3>Failed after their registry changed</h3><p>Occurrence attempts that passed in A and fail in B "
             "because a name is not in the registry (the attempt is the same; the registry it is checked against "
             "changed): "
             f"<b>{e(document['total'].get('failed_after_registry_change', 0))}</b>.</p>")
    if registry:
        body += _table(["family", "attempts"], [[e(f), n] for f, n in registry])
    return section("requests", "Requests of A answered in B", body)


def reason_codes_section(document: Mapping[str, Any]) -> str:
    codes = document["total"]["reason_codes"]
    a, b = codes.get(RUN_A, {}), codes.get(RUN_B, {})
    names = sorted(set(a) | set(b), key=lambda c: (-max(a.get(c, 0), b.get(c, 0)), c))[:TOP_REASON_CODES]
    if not names:
        return section("reason-codes", "Issues by reason code", "<p>Neither run has an issue.</p>")
    rows = [[f"<code>{e(c)}</code>", a.get(c, 0), b.get(c, 0), f"{b.get(c, 0) - a.get(c, 0):+d}"] for c in names]
    return section("reason-codes", "Issues by reason code",
                   "<p>Every issue of every evaluation of each run (the most frequent first).</p>"
                   + _table(["reason code", "A", "B", "B − A"], rows))


def _attempt_text(deciding: Mapping[str, Any] | None) -> str:
    if not deciding:
        return "–"
    codes = ", ".join(deciding["reason_codes"])
    return f"<code>{e(deciding['candidate_id'])}</code> (attempt {e(deciding['attempt'])})" + (
        f" <code>{e(codes)}</code>" if codes else "")


# --- what changed and what to do next: the situations, every changed slot -------------------------------

def _export(folder: str, kinds: str, again: str = "run the job again") -> str:
    where = f"{folder.rstrip('/')}/retry_requests/part-*"
    return (f"<code>notarius-reprocess export-batch --retry-requests '{e(where)}' --kinds {e(kinds)} --transcripts ... "
            "--provider P --model M --output DIR</code>, send the batch, <code>import-batch</code> the results, add "
            f"them to the archive and {again}")


def situation_texts(b: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Per situation (``analysis.compare.SITUATIONS``): what it means, and what to do next (``b``: what
    compare.json says of run B: its folder is in the commands, and whether it wrote refresh requests)."""
    b_folder = str(b["folder"])
    refresh_first = ("" if b.get("refresh_stale") else
                     "Run B again with <code>--refresh-stale</code> (B ran without it, so it wrote none), then ")
    return {
        SITUATION_RECORDS_CHANGED: (
            "Accepted in both runs, with other records: the slot's row says which records were added, removed or "
            "changed, and which of their fields differ.",
            "Read the record changes. If B's are right, nothing to do; if they are worse, the revision made them "
            "worse: revise the prompt again and refresh (<code>--refresh-stale</code>)."),
        SITUATION_NEWLY_ACCEPTED: (
            "Accepted in B, not in A: a retry or refresh answer, or a judge's verdict, made it pass (its records are "
            "all added).",
            "Nothing to do."),
        SITUATION_ENTRY_LIST: (
            "Deferred in B, waiting for its entry list: a reconciliation whose source's chunk registries changed "
            "(a retry or refresh answer was accepted), so its attempts were made for another list; they are neither "
            "accepted nor corrected (reason <code>entry_list_changed</code>). Not a defect of the attempts.",
            (refresh_first or "B wrote one refresh request for each, carrying the current list (its manifest "
                               "counts these slots in <code>refresh.entry_list_slots_waiting</code>): ")
            + _export(b_folder, "refresh") + "."),
        SITUATION_JUDGES: (
            "Deferred in B, waiting for its judges: its attempt passes the rules and waits on a judge's verdict "
            "(<code>awaiting_judgment</code>).",
            _export(b_folder, "judge", "run the job again with <code>--verdicts</code>") + "."),
        SITUATION_REGISTRY: (
            "Deferred in B: no registry of its kind is accepted for its source in B, so it cannot be checked yet.",
            "Look at the registry slots of the same source (their rows): once they are accepted, run again."),
        SITUATION_RETRY: (
            "No attempt passes in B (a rule or a judge's fail: B's reason codes say which); B wrote a retry request "
            "with correction guidance.",
            _export(b_folder, "retry") + "."),
        SITUATION_REFRESH: (
            "No attempt passes in B and its retry budget is spent, but it rests only on attempts under an earlier "
            "prompt: B wrote a refresh request.",
            _export(b_folder, "refresh") + "."),
        SITUATION_EXHAUSTED: (
            "No attempt passes in B and its retry budget (<code>--max-attempts</code>) is spent: no request.",
            "Read B's reason codes: revise the prompt, or run again with a higher <code>--max-attempts</code>."),
        SITUATION_ABSENT: (
            "B holds nothing of the slot: none of its candidates was among B's inputs.",
            "Check B's <code>--candidates</code> and <code>--families</code>: compare runs over the same archive."),
    }


def situation_anchor(name: str) -> str:
    return f"situation-{name}"


def situations_section(document: Mapping[str, Any], indexed: bool) -> str:
    """Every situation a changed slot of this comparison is in: how many, what it means, what to do next."""
    total = document["total"]
    counts = total.get("situations") or {}
    texts = situation_texts(document["runs"][RUN_B])
    rows = [[f'<span id="{situation_anchor(name)}">{e(name.replace("_", " "))}</span>', f"<b>{counts[name]}</b>",
             texts[name][0], texts[name][1]] for name in SITUATIONS if counts.get(name)]
    if not rows:
        return section("next", "What changed and what to do next", "<p>No slot changed.</p>")
    where = ('every changed slot is listed on the page of its source (<a href="#sources">below</a>)' if indexed
             else f"the comparison's page, <code>{COMPARE_HTML}</code>, lists every changed slot, by source")
    return section("next", "What changed and what to do next",
                   f"<p>Each of the {total['changed_slots']} changed slots is in one situation: where it stands in "
                   f"B. A regression (accepted in A, not in B) is in the situation that says why; {where}.</p>"
                   + _table(["situation", "slots", "what it means", "what to do next"], rows, text=True))


def sources_section(pages: Sequence[Mapping[str, Any]]) -> str:
    """compare.html's index of the pages: one per source with a changed slot, every slot on one of them."""
    if not pages:
        return section("sources", "Changed slots, by source", "<p>No slot changed.</p>")
    rows = [[f'<a href="{e(p["page"])}">{e(p["source_id"])}</a>', f"<b>{p['slots']}</b>",
             *(p["changes"].get(change, 0) or "·" for change in SLOT_CHANGES)]
            for p in sorted(pages, key=lambda p: p["source_id"])]
    return section("sources", "Changed slots, by source",
                   f"<p>Every changed slot, on the page of its source ({sum(p['slots'] for p in pages)} in all; each "
                   "is also a row of <code>slots/</code>).</p>"
                   + _table(["source", "changed slots", *SLOT_CHANGES], rows, text=True))


def records_html(records: Mapping[str, Any] | None) -> str:
    """A slot row's ``records``: the listed changes by name, the fields that differ, and what was left out."""
    if not records:
        return "–"
    items = []
    for change in records["listed"]:
        name = e(change["record"])
        if change["change"] == RECORD_ADDED:
            items.append(f'<li class="added">+ {name}</li>')
        elif change["change"] == RECORD_REMOVED:
            items.append(f'<li class="removed">− {name}</li>')
        else:
            fields = "; ".join(f"<code>{e(f['field'])}</code> {_value(f['a'])} → {_value(f['b'])}"
                               for f in change["fields"])
            items.append(f'<li class="changed">~ {name}: {fields}</li>')
    if records["more"]:
        items.append(f"<li>… and {records['more']} more change(s), not listed</li>")
    counts = ", ".join(f"{records[kind]} {kind}" for kind in ("added", "removed", "changed", "unchanged")
                       if records[kind])
    if not items:
        counts = "the same records, in another order" if records["unchanged"] else "no records in either run"
    return f'<ul class="records">{"".join(items)}</ul><span class="counts">{e(counts)}</span>'


def _value(shown: str | None) -> str:
    return "<i>none</i>" if shown is None else f"<code>{e(shown)}</code>"


def render_source_page(source_id: str, rows: Sequence[Mapping[str, Any]], runs: Mapping[str, Mapping]) -> str:
    """pages/<source>.html: every changed slot of one source, by family, with what changed in its records and
    its situation (linked to what it means and what to do next on compare.html)."""
    index = "../" + COMPARE_HTML
    by_family: dict[str, list] = {}
    for row in sorted(rows, key=slot_row_order):
        by_family.setdefault(row["family"], []).append(row)
    parts = [f'<p class="meta"><a href="{e(index)}">← the comparison</a> · '
             + e(" · ".join(f"{run.upper()}: {runs[run]['folder']}" for run in RUNS)) + "</p>",
             f"<p>{len(rows)} changed slot(s) of this source, by family. <i>Situation</i>: where the slot stands in "
             f'B; <a href="{e(index)}#next">what each means and what to do next</a>. Records: '
             "<b>+</b> added, <b>−</b> removed, <b>~</b> changed (the fields that differ, A → B).</p>"]
    for family, found in by_family.items():
        parts.append(section(f"family-{e(family)}", f"{family} ({len(found)})", _table(
            ["chunk", "A → B", "change: situation", "records", "deciding attempt in A, in B"],
            [[e(r["chunk_id"]), f"{e(r['transition']['from'])} → {e(r['transition']['to'])}",
              _change_text(index, r), records_html(r.get("records")),
              f'<span class="attempts">A: {_attempt_text(r["deciding_a"])}<br>B: {_attempt_text(r["deciding_b"])}'
              "</span>"] for r in found], text=True)))
    return _page(f"notarius-reprocess comparison: {source_id}", f"Changed slots of {source_id}", "\n".join(parts))


def _change_text(index: str, row: Mapping[str, Any]) -> str:
    """The slot's change and its situation (one word when they say the same)."""
    name = situation_of_row(row)
    link = _situation_link(index, name)
    return link if name == row["change"] else f"{e(row['change'])}: {link}"


def _situation_link(index: str, name: str | None) -> str:
    if name is None:
        return "–"
    return f'<a href="{e(index)}#{situation_anchor(name)}">{e(name.replace("_", " "))}</a>'


def write_source_page(grouped: tuple[str, Iterable[Mapping[str, Any]]], output: str,
                      runs: Mapping[str, Mapping]) -> dict:
    """One source's page (``(source_id, its changed slots' rows)``), written; what the index and the manifest
    say of it."""
    source_id, rows = grouped[0], list(grouped[1])
    name = page_name(source_id)
    data = render_source_page(source_id, rows, runs).encode("utf-8")
    write_document(data, join_path(output, name))
    changes = Counter(row["change"] for row in rows)
    return {"source_id": source_id, "page": name, "slots": len(rows), "changes": dict(changes),
            "facts": document_facts(data)}


def conservation_section(document: Mapping[str, Any]) -> str:
    slots = document["conservation"]["slots"]
    rows = document["conservation"]["rows"]
    line = (f"{slots['slots_in_a_or_b']} slots in A or B = {slots['counted_in_transitions']} counted in transitions")
    table = _table(["run", *COMPARED_OUTPUTS],
                   [[e(run), *(f"{rows[run][o]['read']} of {rows[run][o]['listed']}"
                               + (f" ({rows[run][o]['unreadable']} unreadable)" if rows[run][o]["unreadable"] else "")
                               for o in COMPARED_OUTPUTS)] for run in RUNS])
    return section("conservation", "Conservation",
                   f"<p>{e(line)} — {verdict(bool(slots['holds']))}</p>"
                   f"<p>Rows read of the rows each run's manifest lists — {verdict(bool(rows['holds']))}</p>" + table)


def comparison_sections(document: Mapping[str, Any], pages: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The comparison as report sections (figures, transitions, families, requests, reason codes, what changed
    and what to do next, conservation): what ``compare.html`` shows, for a page of the report's style to
    include. With ``pages`` (compare.html itself), the index of the pages that list every changed slot."""
    total = document["total"]
    changes = total["changes"]
    cards = [figure(total["slots"]["in_a_or_b"], "slots in A or B"),
             figure(total["changed_slots"], "slots changed"),
             figure(changes["regression"], "regressions (accepted in A, not in B)", not changes["regression"]),
             figure(changes["fix"], "fixes (accepted in B, not in A)"),
             figure(changes["records_changed"], "accepted with other records"),
             figure(total["artifacts"]["unchanged"], "artifacts unchanged")]
    return "\n".join([
        '<div class="figures">' + "".join(cards) + "</div>",
        transitions_section(document), families_section(document), requests_section(document),
        reason_codes_section(document),
        situations_section(document, indexed=pages is not None),
        *([] if pages is None else [sources_section(pages)]),
        conservation_section(document),
    ])


def render_comparison(document: Mapping[str, Any], pages: Sequence[Mapping[str, Any]] = ()) -> str:
    """compare.html: static, no script, every value escaped; the same document and pages give the same bytes."""
    runs = document["runs"]
    meta = " · ".join(f"{run.upper()}: {runs[run]['folder']} ({runs[run].get('output_format') or '?'})"
                      for run in RUNS)
    return _page("notarius-reprocess comparison", "notarius-reprocess comparison",
                 f'<p class="meta">{e(meta)}</p>\n' + comparison_sections(document, pages)
                 + comparison_cost_section(document))


def _page(title: str, heading: str, body: str) -> str:
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title>",
        f"<style>{PAGE_STYLE}</style></head><body><main>",
        f"<h1>{e(heading)}</h1>",
        body,
        "</main></body></html>",
    ]) + "\n"


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
        # What the runs cost (contract §6.4): read here, beside the job, from both runs' rows.
        cost = comparison_cost(runs, prices[0], args.prices)
        send_stage_inputs_whole()  # see runners/workarounds.py
        with beam.Pipeline(options=options) as pipeline:
            build_pipeline(pipeline, runs, manifests, folder, args.output_format, recorded, standard.runner, cost)
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

