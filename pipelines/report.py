"""A self-contained HTML report of one run.

    python -m pipelines.report --output DIR [--truth FILE] [--html FILE] [--prices FILE]
        [--provider P] [--model M] [--max-output-tokens N]

Writes ``DIR/report.html`` (or ``--html``) and prints its path. Static HTML
with inline CSS and SVG: no script, no network (a Content-Security-Policy
forbids both), so it opens anywhere. Sections: outcomes per family,
conservation, stale candidates, the backfill after a prompt revision (with
``--baseline``: what it answered), the semantic judges (with ``--truth``: how right they were), what the
run cost (its attempts per family and verdict, its judges' verdicts, its open requests as export-batch
would send them to ``--provider``/``--model``, the retries canonicalization saved: tokens, and with
``--prices`` money; ``pipelines.run_cost``), top defect categories (with ``--truth``:
how the injected defect kinds map onto the reason codes), retries saved by
endpoint canonicalization, the retry economy (with ``--truth``), a few
retry requests as the model would read them and (with ``--baseline``) what
changed since the baseline run. Local paths are shown relative to the
report's folder. Every piece of data is HTML-escaped. The same run gives the
same bytes (no timestamps). The page is ``pipelines.pages.report``'s; this module is the command.
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m pipelines.report`: its first steps, then this module imported as itself
    from pipelines.entry import run_module

    run_module("pipelines.report")

import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import orjson

from analysis.compare_folder import COMPARE_JSON
from analysis.cost import unpriced_line
from domain.batch.prices import PriceTable
from domain.batch.providers import PROVIDERS
from pipelines.compare import compare
from pipelines.guards import file_to_write
from pipelines.interruption import command_named
from pipelines.options import PRICES_OPTION, JobOption, OptionsError, parse_command, read_prices
from pipelines.pages.report import render_report
from pipelines.retry_economy import RunFigures, load_figures, summary_lines
from pipelines.run_cost import DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_TARGET, RunCost, Target, cost_lines, run_cost
from pipelines.truth import ground_truth
from pipelines.verify import comparison_problems
from pipelines.folders import folder_state
from transforms.files import resolved_folder
from transforms.write import join_path, write_document


def write_report(figures: RunFigures, path: str | Path,
                 comparison: tuple[Mapping[str, Any], str] | None = None, cost: RunCost | None = None) -> str:
    return write_document(render_report(figures, comparison, report_folder(str(path)), cost).encode("utf-8"),
                          str(path))


def report_folder(path: str) -> str:
    """The folder a report file is written to (``gs://b/run/report.html`` -> ``gs://b/run``)."""
    return path.rsplit("/", 1)[0] if "://" in path else os.path.dirname(os.path.abspath(path))


PROG = "python -m pipelines.report"
REPORT_OPTIONS = (
    JobOption("--output", required=True, help="the job's output folder (local, gs://, s3://); it must verify"),
    JobOption("--truth", help="ground-truth file of the simulated producer, holding every candidate the run "
                                "evaluated (files joined end to end)", existing_file=True),
    JobOption("--html", help="where to write the report (default: OUTPUT/report.html); its folder is created"),
    JobOption("--baseline", help="an earlier run folder (it must verify): the report adds what changed since it, "
                                 "and links the comparison (notarius-reprocess compare BASELINE OUTPUT)"),
    JobOption("--comparison", help="with --baseline: the comparison folder to reuse or write (default: "
                                   "compare/ beside the report); a folder holding another comparison is refused"),
    PRICES_OPTION,
    JobOption("--provider", f"The provider the open requests would be sent to, as export-batch names it (default "
                            f"{DEFAULT_TARGET}): their input tokens are estimated by export-batch's rule for its "
                            "request shape.", default=DEFAULT_TARGET, choices=tuple(sorted(PROVIDERS))),
    JobOption("--model", "The model the open requests would be sent to (export-batch's --model): with --prices, "
                         "what they are expected to cost.", non_empty=True),
    JobOption("--max-output-tokens", f"The output token limit per request they would be sent with (export-batch's; "
                                     f"default {DEFAULT_MAX_OUTPUT_TOKENS}): the upper bound of their output.",
              default=DEFAULT_MAX_OUTPUT_TOKENS, type=int, minimum=1, maximum=2**31 - 1),
)


def baseline_comparison(baseline: str, output: str, folder: str) -> tuple[dict, str]:
    """The comparison of ``baseline`` (A) with ``output`` (B) in ``folder``: reused when the folder holds a
    committed comparison of exactly these two runs, else written there (an empty or absent folder)."""
    wanted = {"a": resolved_folder(baseline), "b": resolved_folder(output)}
    if folder_state(resolved_folder(folder)) == "not-empty":
        path = join_path(folder, COMPARE_JSON)
        problems = comparison_problems(folder)
        if not problems:
            with open(path, "rb") as handle:
                document = orjson.loads(handle.read())
            if {run: document["runs"][run]["folder"] for run in wanted} == wanted:
                return document, folder
        raise OptionsError(f"--comparison {folder!r} holds something other than the comparison of "
                           f"{baseline} with {output}; name an empty folder")
    return compare([baseline, output, "--output", folder])


@command_named(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_command(PROG, __doc__.split("\n")[0], REPORT_OPTIONS, list(argv) if argv is not None else sys.argv[1:])
    html = file_to_write("--html", args.html or join_path(args.output, "report.html"))
    # Before any work: a prices file that is not one ends the command in one line, as export-batch's.
    prices = read_prices(args.prices) if args.prices else None
    figures = load_figures(args.output, ground_truth(args.truth))  # a run that does not verify, a truth that is not one
    for line in summary_lines(figures):
        print(line)
    cost = figures_cost(figures, prices, args.prices, Target(args.provider, args.model, args.max_output_tokens))
    for line in cost_lines(cost):
        print(line)
    comparison = None
    if args.baseline:
        where = args.comparison or join_path(os.path.dirname(os.path.abspath(html)), "compare")
        document, folder = baseline_comparison(args.baseline, args.output, where)
        link = os.path.relpath(join_path(folder, "compare.html"), os.path.dirname(os.path.abspath(html)))
        comparison = (document, link)
    path = write_report(figures, html, comparison, cost)
    print(f"report: {path}")
    return 0


def figures_cost(figures: RunFigures, prices: PriceTable | None, prices_file: str | None,
                 target: Target = Target(), prog: str = PROG) -> RunCost:
    """The run's cost figures (``pipelines.run_cost``); a model the prices file has no price for is named on
    stderr, once."""
    cost = run_cost(figures.output_dir, figures.manifest, prices, prices_file, target)
    unpriced = unpriced_line(cost.unpriced, prices_file)
    if unpriced:
        print(f"{prog}: {unpriced}", file=sys.stderr)
    return cost

