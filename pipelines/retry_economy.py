"""Retry economy of a run, from the simulated producer's ground truth.

    python -m pipelines.retry_economy --truth FILE --output DIR [--json FILE]

``--output`` is the job's output folder (any output format). Prints, and writes as JSON (default
``DIR/retry_economy.json``):

- defect recall: of the injected blocking defects a validator can see in the
  attempt a retry request replaces, how many the request's guidance names
  (by the record's quoted name or its cited range; see
  ``analysis.retry_economy.names_defect``);
- leaks: internal text in any guidance (ids, hashes, reason codes, validator
  keys, code paths, exception text); must be 0;
- requests per failing slot: must be 1 for every slot the truth says still
  fails (not deferred, budget left), and no request anywhere else;
- retries saved by endpoint canonicalization: accepted slots that would fail
  without it, as the job recorded them in the manifest (every passing attempt
  of the slot cited a reversed range), and the ground truth's count of the
  same;
- how often the job's verdict agrees with the truth's expectation.

Exits 1 when a must (no leaks, one request per failing slot) does not hold.

The figures take the ground truth as a value, with the words its producer counts defects in
(``pipelines.truth.GroundTruth``); nothing here imports the simulator.
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m pipelines.retry_economy`: its first steps, then this module imported as itself
    from pipelines.entry import run_module

    run_module("pipelines.retry_economy")

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import orjson

from domain.families import FAMILIES

from analysis.retry_economy import Leak, RetryEconomy, retry_economy
from analysis.savings import CanonicalizationSavings, recorded_savings
from analysis.run_summary import RunSummary, summarize_run
from pipelines.outputs import iter_rows, read_rows
from pipelines.interruption import command_named
from transforms.write import join_path, write_document
from pipelines.guards import file_to_write
from pipelines.options import JobOption, parse_command
from pipelines.truth import GroundTruth, TruthFileError, ground_truth, read_truth, uncovered
from pipelines.verify import require_verified

DEFAULT_MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class RunFigures:
    """Everything the report and this command show about one run."""

    output_dir: str
    manifest: Mapping[str, Any]
    summary: RunSummary  # streaming aggregates over the evaluations and retry requests
    savings: CanonicalizationSavings | None
    savings_note: str  # why savings are missing, or ""
    truth: GroundTruth | None
    truth_kinds: Mapping[str, int]  # injected defect kind -> count (empty without truth)
    economy: RetryEconomy | None

    @property
    def truth_path(self) -> str | None:
        return str(self.truth.path) if self.truth is not None else None

    @property
    def leaks(self) -> tuple[Leak, ...]:
        return self.summary.leaks

    @property
    def ok(self) -> bool:
        return not self.leaks and (self.economy is None or self.economy.ok)


def _savings(manifest: Mapping[str, Any]) -> tuple[CanonicalizationSavings | None, str]:
    """What endpoint ordering saved, as the job recorded it in the manifest (nothing re-evaluated)."""
    if "endpoint_ordering" not in manifest:
        return None, "the run's manifest predates recorded endpoint-ordering figures; run the job again"
    return recorded_savings(manifest), ""


def load_figures(out: str | Path, truth: GroundTruth | None = None) -> RunFigures:
    """The figures of one run (any output format), measured against ``truth`` when given.

    Without ``truth`` the rows are streamed (see ``analysis.run_summary``):
    memory does not grow with the run. The ground-truth comparison needs
    every evaluation and request at once, so with ``truth`` they are loaded.
    """
    manifest = require_verified(out)  # never figures from a half-written, mixed or altered run
    savings, note = _savings(manifest)
    economy, kinds = None, {}
    if truth is None:
        summary = summarize_run(lambda: iter_rows(join_path(str(out), "evaluations")),
                                lambda: iter_rows(join_path(str(out), "retry_requests")))
    else:
        evaluations = read_rows(join_path(str(out), "evaluations"))
        requests = read_rows(join_path(str(out), "retry_requests"))
        summary = summarize_run(lambda: evaluations, lambda: requests)
        rows = read_truth(truth)
        gap = uncovered(truth, rows, evaluations, str(out))
        if gap is not None:
            raise TruthFileError(gap)
        kinds = _kind_counts(rows)
        max_attempts = int(manifest.get("options", {}).get("max_attempts") or DEFAULT_MAX_ATTEMPTS)
        judged = None
        if (manifest.get("options") or {}).get("judges"):  # contract §4.3: the accepted attempts a judge passed
            judged = [a["provenance"]["candidate_id"] for key, spec in FAMILIES.items() if spec.judges
                      for a in iter_rows(join_path(str(out), "artifacts", key)) if a["provenance"].get("judged_by")]
        accepted = int((manifest.get("outputs") or {}).get("artifacts") or 0)
        economy = retry_economy(rows, evaluations, requests, max_attempts, truth.vocabulary, judged, accepted)
    return RunFigures(str(out), manifest, summary, savings, note, truth, kinds, economy)


def _kind_counts(rows) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        for defect in row.defects:
            counts[defect.kind] = counts.get(defect.kind, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


# --- presentation ------------------------------------------------------------------------------

def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def summary_lines(figures: RunFigures) -> list[str]:
    lines = []
    economy = figures.economy
    if economy is not None:
        recall = economy.recall
        lines.append(f"defect recall: {recall.named}/{recall.total} named ({percent(recall.named, recall.total)}); "
                     f"first attempts {recall.first_attempt_named}/{recall.first_attempt_total}; "
                     f"{recall.hidden} hidden behind a response that is not JSON or fails its schema")
    lines.append(f"leaks in retry guidance: {len(figures.leaks)}" + ("" if not figures.leaks else "  FAIL"))
    if economy is not None:
        coverage = economy.coverage
        shown = ", ".join(f"{slots} with {n}" for n, slots in coverage.requests_per_failing_slot.items()) or "none"
        flag = "" if coverage.ok else "  FAIL"
        lines.append(f"requests per failing slot: {coverage.failing_slots} failing slots ({shown}); "
                     f"{len(coverage.unexpected_requests)} requests for other slots{flag}")
    if figures.savings is not None:
        saved = figures.savings
        text = (f"retries saved by endpoint canonicalization: {saved.retries_saved} of {saved.accepted_slots} "
                f"accepted slots (recorded by the job)")
        if economy is not None:
            text += f"; ground truth: {sum(economy.saved_by_truth.values())}"
        if saved.deferrals_saved:
            text += f"; plus {saved.deferrals_saved} slots that would wait for a lost registry"
        lines.append(text)
    elif figures.savings_note:
        lines.append(f"retries saved by endpoint canonicalization: not computed ({figures.savings_note})")
    if economy is not None:
        agreement = economy.agreement
        lines.append(f"job verdicts agree with the ground truth: {agreement.agreeing}/{agreement.compared}")
    if economy is not None and economy.judges is not None:
        j = economy.judges
        lines.append(f"judges: {j.judged_fail} attempts failed ({j.true_fail} with a planted defect: precision "
                     f"{percent(j.true_fail, j.judged_fail)}), {j.missed} planted defects passed (recall "
                     f"{percent(j.true_fail, j.true_fail + j.missed)}); {j.retries_caused} retries caused; "
                     f"{j.judge_requests} judge requests for {j.accepted} accepted artifacts")
    return lines


def as_json(figures: RunFigures) -> dict[str, Any]:
    document: dict[str, Any] = {
        "output": figures.output_dir,
        "truth": figures.truth_path,
        "leaks": {"count": len(figures.leaks),
                  "found": [{"request_id": l.request_id, "what": l.what, "text": l.text} for l in figures.leaks]},
        "ok": figures.ok,
    }
    if figures.savings is not None:
        saved = figures.savings
        document["retries_saved_by_canonicalization"] = {
            "method": "recorded by the job: accepted slots whose every passing attempt cited a reversed range",
            "accepted_slots": saved.accepted_slots, "retries_saved": saved.retries_saved,
            "by_family": dict(saved.would_retry), "deferrals_saved": saved.deferrals_saved,
            "deferrals_by_family": dict(saved.would_defer), "unavailable_slots": saved.unavailable,
        }
    economy = figures.economy
    if economy is not None:
        recall, coverage, agreement = economy.recall, economy.coverage, economy.agreement
        document["defect_recall"] = {
            "named": recall.named, "total": recall.total, "rate": recall.rate, "hidden": recall.hidden,
            "first_attempt": {"named": recall.first_attempt_named, "total": recall.first_attempt_total},
            "requests_without_truth": recall.requests_without_truth,
            "missed": [{"request_id": m.request_id, "family": m.family, "replaced_attempt": m.replaced_attempt,
                        "kind": m.defect.kind, "record_name": m.defect.record_name,
                        "range": list(m.defect.range) if m.defect.range else None} for m in recall.missed],
        }
        document["requests_per_failing_slot"] = {
            "failing_slots": coverage.failing_slots,
            "histogram": {str(n): slots for n, slots in coverage.requests_per_failing_slot.items()},
            "unexpected_requests": [[slot.source_id, slot.chunk_id, slot.family] for slot in coverage.unexpected_requests],
            "ok": coverage.ok,
        }
        document["ground_truth_saved_by_canonicalization"] = {
            "slots": sum(economy.saved_by_truth.values()), "by_family": dict(economy.saved_by_truth)}
        if economy.judges is not None:
            j = economy.judges
            document["judges"] = {"judge_requests": j.judge_requests, "judged_fail": j.judged_fail,
                                  "judged_pass": j.judged_pass, "true_fail": j.true_fail, "false_fail": j.false_fail,
                                  "missed": j.missed, "precision": j.precision, "recall": j.recall,
                                  "retries_caused": j.retries_caused, "accepted": j.accepted,
                                  "requests_per_artifact": j.requests_per_artifact}
        document["verdict_agreement"] = {
            "agreeing": agreement.agreeing, "compared": agreement.compared,
            "disagreements": [{"candidate_id": d.candidate_id, "family": d.family,
                               "expected_pass": d.expected_pass, "verdict": d.verdict}
                              for d in agreement.disagreements],
        }
        document["injected_defects"] = dict(figures.truth_kinds)
    return document


def write_json(figures: RunFigures, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed: a full disk leaves no half file.
    write_document(orjson.dumps(as_json(figures), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n", str(path))


PROG = "python -m pipelines.retry_economy"
RETRY_ECONOMY_OPTIONS = (
    JobOption("--truth", required=True, existing_file=True,
              help="ground-truth file of the simulated producer, holding every candidate the run evaluated (files "
                   "joined end to end)"),
    JobOption("--output", required=True, help="the job's output folder; it must verify"),
    JobOption("--json", help="where to write the figures (default: OUTPUT/retry_economy.json)"),
)


@command_named(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_command(PROG, __doc__.split("\n")[0], RETRY_ECONOMY_OPTIONS,
                         list(argv) if argv is not None else sys.argv[1:])
    target = Path(file_to_write("--json", args.json or str(Path(args.output) / "retry_economy.json")))
    figures = load_figures(Path(args.output), ground_truth(args.truth))  # a run that does not verify, a truth that is not one
    for line in summary_lines(figures):
        print(line)
    write_json(figures, target)
    print(f"figures: {target}")
    return 0 if figures.ok else 1

