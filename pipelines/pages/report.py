"""The run report's page (``pipelines.report`` is the command): its sections, from a run's figures
(``pipelines.retry_economy.RunFigures``), its cost and, with a baseline, the comparison's sections
(``pipelines.pages.compare``). Static, no script, every piece of data escaped (``pipelines.pages.html``);
the same run gives the same bytes (no timestamps). Local paths are shown relative to the report's folder.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from analysis.run_summary import RunSummary
from domain.manifest import refresh_reasons
from pipelines.pages.compare import comparison_sections
from pipelines.pages.cost import report_cost_section
from pipelines.pages.html import bars, e, figure, legend, page, section, stacked_bars, verdict
from pipelines.retry_economy import RunFigures, percent
from pipelines.run_cost import RunCost

SLOT_OUTCOMES = (  # outcome, colour, meaning
    ("accepted", "#2e7d32", "one canonical artifact"),
    ("retry", "#f9a825", "one retry request written for the producer"),
    ("exhausted", "#c62828", "no attempt passed and the budget is spent"),
    ("deferred", "#757575", "waits: for an accepted registry, an entry list, or its judges' verdicts"),
)
CANDIDATE_COUNTS = ("superseded", "stale")
TOP_CATEGORIES = 12

def outcomes_section(manifest: Mapping[str, Any]) -> str:
    outcomes: Mapping[str, Mapping[str, int]] = manifest.get("outcomes", {})
    rows = [(family, tuple(int(counts.get(o, 0)) for o, _, _ in SLOT_OUTCOMES)) for family, counts in outcomes.items()]
    rows = [row for row in rows if sum(row[1])]  # families with no slot in this run stay in the table only
    chart = stacked_bars(rows, [c for _, c, _ in SLOT_OUTCOMES], [o for o, _, _ in SLOT_OUTCOMES],
                         "slot outcomes per family")
    head = "".join(f"<th>{e(name)}</th>" for name in (*(o for o, _, _ in SLOT_OUTCOMES), *CANDIDATE_COUNTS))
    body = "".join(
        f"<tr><td>{e(family)}</td>" + "".join(f"<td>{int(counts.get(o, 0))}</td>" for o, _, _ in SLOT_OUTCOMES)
        + "".join(f"<td>{int(counts.get(c, 0))}</td>" for c in CANDIDATE_COUNTS) + "</tr>"
        for family, counts in outcomes.items())
    totals = manifest.get("totals", {})
    foot = ("<tr><th>total</th>" + "".join(f"<th>{int(totals.get(o, 0))}</th>" for o, _, _ in SLOT_OUTCOMES)
            + "".join(f"<th>{int(totals.get(c, 0))}</th>" for c in CANDIDATE_COUNTS) + "</tr>")
    return section("outcomes", "Outcomes per family",
                   "<p>A slot is one chunk of one source for one family; each slot has one outcome. "
                   "Superseded and stale count candidates.</p>"
                   + legend((f"{o} ({meaning})", c) for o, c, meaning in SLOT_OUTCOMES) + chart
                   + f"<table><thead><tr><th>family</th>{head}</tr></thead><tbody>{body}</tbody>"
                     f"<tfoot>{foot}</tfoot></table>" + entry_list_note(manifest))


def entry_list_note(manifest: Mapping[str, Any]) -> str:
    """Reconciliation attempts made for an entry list that has since changed (contract §4.1); nothing when none."""
    refresh = manifest.get("refresh") or {}
    changed, waiting = int(refresh.get("entry_list_changed", 0)), int(refresh.get("entry_list_slots_waiting", 0))
    if not changed:
        return ""
    return (f"<p>{changed} reconciliation attempt(s) were made for an entry list that has changed since (the "
            "source's accepted chunk registries changed): they are deferred, not evaluated, and never corrected "
            f"(reason <code>entry_list_changed</code>). {waiting} reconciliation slot(s) are deferred, waiting for "
            "their entry list"
            + (" (each gets a refresh request carrying the current list with <code>--refresh-stale</code>)."
               if waiting else ".") + "</p>")


JUDGE_COLUMNS = (  # manifest key, column heading
    ("requests", "judge requests"), ("pass", "pass"), ("fail", "fail"), ("unsure", "unsure"),
    ("unusable", "unusable"), ("stale", "stale"), ("unmatched", "unmatched"), ("superseded", "superseded"),
    ("unjudged", "decided by the rules alone"), ("awaiting", "slots waiting"),
)


def judges_section(figures: RunFigures) -> str:
    """The semantic judges of the run (contract §4.3): per judge, its requests and what its verdicts came to;
    verdict conservation; with the ground truth, how right the judges were. Nothing without judges."""
    manifest = figures.manifest
    judges: Mapping[str, Mapping[str, Any]] = manifest.get("judges") or {}
    if not judges:
        return ""
    head = "".join(f"<th>{e(title)}</th>" for _, title in JUDGE_COLUMNS)
    body = "".join(
        f"<tr><td>{e(name)}</td><td>{e(str(counts.get('family', '')))}</td>"
        + "".join(f"<td>{int(counts.get(key, 0))}</td>" for key, _ in JUDGE_COLUMNS) + "</tr>"
        for name, counts in judges.items())
    v = manifest.get("verdict_conservation") or {}
    line = (f"{int(v.get('verdicts_in', 0))} verdicts in = {int(v.get('applied', 0))} applied + "
            f"{int(v.get('superseded', 0))} superseded + {int(v.get('unusable', 0))} unusable + "
            f"{int(v.get('stale', 0))} stale + {int(v.get('unmatched', 0))} unmatched + "
            f"{int(v.get('dead_letters', 0))} dead letters")
    truth = ""
    economy = figures.economy
    if economy is not None and economy.judges is not None:
        j = economy.judges
        truth = (f"<p>Against the ground truth: {j.judged_fail} attempts failed by a judge, {j.true_fail} of them "
                 f"with a planted semantic defect (precision {e(percent(j.true_fail, j.judged_fail))}); "
                 f"{j.missed} planted defects passed (recall {e(percent(j.true_fail, j.true_fail + j.missed))}); "
                 f"{j.retries_caused} retry requests built from an attempt a judge failed; {j.judge_requests} "
                 f"judge requests for {j.accepted} accepted artifacts.</p>")
    return section("judges", "Semantic judges",
                   "<p>A judge is asked only about attempts that pass every rule. A <code>fail</code> rejects "
                   "the attempt and its problems become the retry's guidance; a slot waits (deferred, "
                   "<code>awaiting_judgment</code>) until each judge of its family has a usable verdict on "
                   "it: export its judge requests (<code>export-batch --kinds judge</code>), import the answers "
                   "(<code>verdicts.jsonl</code>) and run again with <code>--verdicts</code>.</p>"
                   f"<table><thead><tr><th>judge</th><th>family</th>{head}</tr></thead><tbody>{body}</tbody>"
                   f"</table><p>{e(line)} — {verdict(bool(v.get('holds')))}</p>" + truth)


def conservation_section(manifest: Mapping[str, Any]) -> str:
    c = manifest.get("conservation", {})
    line = (f"{int(c.get('candidates_in', 0))} candidates in = {int(c.get('evaluations', 0))} evaluated + "
            f"{int(c.get('dead_letters', 0))} dead letters + {int(c.get('filtered', 0))} filtered")
    t = manifest.get("transcript_conservation", {})
    tline = (f"{int(t.get('transcripts_in', 0))} transcripts in = {int(t.get('usable', 0))} usable + "
             f"{int(t.get('dead_letters', 0))} dead letters")
    return section("conservation", "Conservation",
                   f"<p>{e(line)} — {verdict(bool(c.get('holds')))}</p><p>{e(tline)} — "
                   f"{verdict(bool(t.get('holds')))}</p>")


def stale_section(manifest: Mapping[str, Any]) -> str:
    outcomes = manifest.get("outcomes", {})
    rows = [(family, int(counts.get("stale", 0))) for family, counts in outcomes.items() if counts.get("stale")]
    total = sum(value for _, value in rows)
    return section("stale", "Stale candidates",
                   f"<p>{total} candidates were produced under another prompt or schema fingerprint than the "
                   "current assets. They are counted here and still evaluated under the current policy.</p>"
                   + (bars(rows, "#6a1b9a", "stale candidates per family") if rows else ""))


REFRESH_COLUMNS = (  # manifest key, column heading
    ("slots_to_refresh", "slots to refresh"),
    ("slots_on_earlier_prompt", "of which on an earlier prompt"),
    ("entry_list_slots_waiting", "reconciliations waiting for their entry list"),
    ("refresh_requests", "refresh requests"),
    ("excerpt_chars", "excerpt characters"),
    ("artifacts_current", "artifacts, current prompt"),
    ("artifacts_stale", "artifacts, earlier prompt"),
    ("current_over_stale", "current won over stale"),
)


def refresh_section(manifest: Mapping[str, Any], output_dir: str,
                    baseline: Mapping[str, Any] | None = None) -> str:
    """Prompt revisions (contract §6.1): what rests on an earlier prompt, the backfill planned, what it changed; with
    ``baseline`` (the comparison document of the baseline run with this one), what the backfill answered."""
    refresh = manifest.get("refresh")
    if not refresh:
        return section("refresh", "Backfill after a prompt revision", "<p>This run's manifest has no refresh counts.</p>")
    by_family = refresh.get("by_family", {})
    # Families touched by a revision: something stale, refreshed or replaced (the others are all current).
    touched = ("slots_to_refresh", "refresh_requests", "artifacts_stale", "current_over_stale",
               "entry_list_slots_waiting")
    rows = [(family, counts) for family, counts in by_family.items() if any(counts.get(k) for k in touched)]
    accepted = int(refresh.get("artifacts_current", 0)) + int(refresh.get("artifacts_stale", 0))
    to_refresh, requests = int(refresh.get("slots_to_refresh", 0)), int(refresh.get("refresh_requests", 0))
    nothing_to_refresh = not to_refresh and not requests
    on_earlier_prompt, waiting = refresh_reasons(refresh)
    cards = [] if nothing_to_refresh else [
        figure(on_earlier_prompt, "slots resting only on an earlier prompt"),
        *([figure(waiting, "reconciliation slots deferred, waiting for their entry list")] if waiting else []),
        figure(requests, "refresh requests written"),
        figure(f"{int(refresh.get('excerpt_chars', 0)):,}", "characters of excerpt they send")]
    if baseline is not None:
        cards += answered_cards(baseline)
    cards += [figure(f"{int(refresh.get('artifacts_current', 0))} of {accepted}", "artifacts from the current prompt"),
              figure(int(refresh.get("current_over_stale", 0)), "current answers that replaced an earlier prompt's")]
    body = ("<p>An attempt is current when its prompt and schema fingerprints are those of the installed assets, "
            "stale otherwise. A passing current attempt wins over every passing stale one. A slot with no current "
            "attempt that is neither deferred nor retried is a slot to refresh: with <code>--refresh-stale</code> it "
            "gets one refresh request, the plain current prompt over its chunk, once per revision. So does a "
            "reconciliation slot deferred, waiting for its entry list (its source's chunk registries changed, so "
            "its attempts were made for another list): its request carries the current list.</p>")
    if nothing_to_refresh:
        body += ("<p><b>Nothing to refresh:</b> no slot rests only on an earlier prompt in this run, so no refresh "
                 "request was written and no excerpt is sent.</p>")
    elif not on_earlier_prompt:
        body += ("<p><b>No slot rests only on an earlier prompt</b>: every slot to refresh is a reconciliation "
                 "waiting for its entry list.</p>")
    if baseline is not None:
        body += answered_text(baseline)
    body += '<div class="figures">' + "".join(cards) + "</div>"
    if rows:
        head = "".join(f"<th>{e(title)}</th>" for _, title in REFRESH_COLUMNS)
        table_rows = "".join(f"<tr><td>{e(family)}</td>" + "".join(f"<td>{_refresh_count(counts, k):,}</td>"
                                                                    for k, _ in REFRESH_COLUMNS) + "</tr>"
                             for family, counts in rows)
        per_family = [(family, int(counts.get("slots_to_refresh", 0))) for family, counts in rows
                      if counts.get("slots_to_refresh")]
        body += ((bars(per_family, "#00838f", "slots to refresh per family") if per_family else "")
                 + "<p>Per family (a slot to refresh rests only on an earlier prompt or waits for its entry "
                   "list):</p>"
                 + f"<table><thead><tr><th>family</th>{head}</tr></thead><tbody>{table_rows}</tbody></table>")
    where = f"{output_dir.rstrip('/')}/retry_requests/"
    if requests:
        body += (f"<p>The {requests} refresh requests are rows of <code>{e(where)}</code> with "
                 "<code>kind</code> <code>refresh</code>. Send them with "
                 f"<code>notarius-reprocess export-batch --retry-requests '{e(where)}part-*' --kinds refresh "
                 "--transcripts ... --provider P --model M --output DIR</code>, import the results with "
                 "<code>import-batch</code>, add the candidates to the archive and run the job again.</p>")
    elif to_refresh and not refresh.get("refresh_stale"):
        body += "<p>No refresh request was written: run the job with <code>--refresh-stale</code> to plan them.</p>"
    return section("refresh", "Backfill after a prompt revision", body)


def _refresh_count(counts: Mapping[str, Any], key: str) -> int:
    """One count of a family's refresh entry (``slots_on_earlier_prompt`` read as ``refresh_reasons`` does, for
    a run written before it was counted)."""
    if key == "slots_on_earlier_prompt":
        return refresh_reasons(counts)[0]
    return int(counts.get(key, 0))


# The request kinds of a comparison's ``requests_answered.by_kind``, in the order the backfill text names them.
ANSWERED_KINDS = ("refresh", "retry")


def _answered(document: Mapping[str, Any], kind: str) -> tuple[int, int, Mapping[str, int]]:
    """(requests of the baseline run, answered in this run, counts per answer status) of one request kind."""
    counts = document["total"]["requests_answered"]["by_kind"].get(kind, {})
    total = sum(int(v) for v in counts.values())
    return total, total - int(counts.get("unanswered", 0)), counts


def answered_cards(document: Mapping[str, Any]) -> list[str]:
    total, answered, counts = _answered(document, "refresh")
    if not total:
        return []
    return [figure(f"{answered} of {total}", "refresh requests of the baseline run answered in this run"),
            figure(int(counts.get("passed", 0)), "of those answers passed", answered == int(counts.get("passed", 0)))]


def answered_text(document: Mapping[str, Any]) -> str:
    """What the backfill answered: the baseline run's requests, per kind, as this run evaluated their slots."""
    parts = []
    for kind in ANSWERED_KINDS:
        total, answered, counts = _answered(document, kind)
        if not total:
            parts.append(f"no {kind} request")
            continue
        text = f"{answered} of {total} {kind} request{'s' if total != 1 else ''} answered"
        if answered:
            text += (f" ({int(counts.get('passed', 0))} passed, {int(counts.get('failed_again', 0))} failed again, "
                     f"{int(counts.get('deferred', 0))} deferred)")
        parts.append(text)
    return ("<p><b>What the backfill answered.</b> Of the requests the baseline run wrote (run A, see "
            '<a href="#baseline">Since the baseline run</a>), this run answered: ' + e("; ".join(parts)) + ". "
            "A request is answered when this run evaluated an attempt of its slot with the attempt number it asked "
            "for.</p>")


def top(counts: Mapping[str, int], limit: int = TOP_CATEGORIES) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


def defects_section(figures: RunFigures) -> str:
    codes = top(figures.summary.reason_codes)
    body = ("<h3>From the evaluations (issues by reason code)</h3>"
            + (bars(codes, "#1565c0", "issues by reason code") if codes else "<p>No issues.</p>"))
    if figures.truth is not None:
        vocabulary = figures.truth.vocabulary
        blocking = {k: v for k, v in figures.truth_kinds.items() if k not in vocabulary.benign}
        benign = {k: v for k, v in figures.truth_kinds.items() if k in vocabulary.benign}
        body += ("<h3>From the ground truth (injected defects)</h3>"
                 + (bars(top(blocking), "#c62828", "injected blocking defects") if blocking else "<p>None.</p>")
                 + "<p>Benign injections (the candidate still passes):</p>"
                 + (bars(top(benign), "#9e9e9e", "injected benign defects") if benign else "<p>None.</p>")
                 + vocabulary_note(figures.summary.reason_codes, blocking, figures.truth.reason_codes))
    return section("defects", "Top defect categories", body)


VOCABULARY_NOTE = (
    "The two charts count in different words. The evaluations count the issues the job's validators reported, "
    "by reason code; the ground truth counts the defects the simulated producer injected, by defect kind. One "
    "kind is reported under one or more codes: a blank name, for one, is reported per field ({blank}). The "
    "counts need not match one for one: a defect behind a response that is not JSON, or fails its schema, is "
    "not reported (it is hidden), and benign kinds are reported under no code. The mapping, with this run's "
    "counts:")


def vocabulary_note(reason_codes: Mapping[str, int], injected: Mapping[str, int],
                    mapping: Mapping[str, tuple[str, ...]]) -> str:
    """How the ground truth's defect kinds map onto the evaluations' reason codes (``mapping``: the reason codes
    each blocking kind is reported under, ``GroundTruth.reason_codes``)."""
    kinds = sorted((k for k in mapping if injected.get(k) or any(reason_codes.get(c) for c in mapping[k])),
                   key=lambda k: (-int(injected.get(k, 0)), k))
    rows = "".join(
        f"<tr><td><code>{e(kind)}</code></td><td>{int(injected.get(kind, 0))}</td><td>"
        + ", ".join(f"<code>{e(code)}</code> {int(reason_codes.get(code, 0))}" for code in mapping[kind])
        + f"</td><td>{sum(int(reason_codes.get(code, 0)) for code in mapping[kind])}</td></tr>"
        for kind in kinds)
    body = (f'<p class="method">{e(VOCABULARY_NOTE.format(blank=", ".join(mapping.get("blank_name", ()))))}</p>'
            + ("<table><thead><tr><th>injected defect kind</th><th>injected</th><th>reported as (reason code, "
               f"issues)</th><th>issues</th></tr></thead><tbody>{rows}</tbody></table>" if rows else ""))
    mapped = {code for codes in mapping.values() for code in codes}
    other = sorted(code for code in reason_codes if code not in mapped)
    if other:
        body += ('<p class="method">Reason codes no injected kind maps to (the simulated producer does not inject '
                 "them): " + ", ".join(f"<code>{e(c)}</code> {int(reason_codes[c])}" for c in other) + ".</p>")
    return body


CANONICALIZATION_METHOD = (
    "Method: recorded by the job, nothing is re-evaluated. Each evaluation row says how many of the response's "
    "cited ranges the job put in document order. A reversed range that reached the strict source-reference "
    "validator would be rejected, so an accepted slot is saved when every attempt of it that passed cited at "
    "least one reversed range: without endpoint ordering it would have needed a producer retry. Occurrence and "
    "reconciliation slots that still pass, but whose kind would then have no accepted chunk registry in the "
    "source, would be deferred, not retried, and are counted apart. Scene descriptions never reorder endpoints "
    "and are never saved.")
TRUTH_CROSS_CHECK = (
    "Ground-truth cross-check: accepted slots none of whose evaluated attempts is expected to pass once "
    "reversed-endpoint injections count as failures.")


def canonicalization_section(figures: RunFigures) -> str:
    saved = figures.savings
    if saved is None:
        return section("canonicalization", "Retries saved by endpoint canonicalization",
                       f"<p>Not computed: {e(figures.savings_note)}.</p>")
    cards = [figure(saved.retries_saved, f"retries saved, of {saved.accepted_slots} accepted slots"),
             figure(percent(saved.retries_saved, saved.accepted_slots), "of accepted slots")]
    if figures.economy is not None:
        cards.append(figure(sum(figures.economy.saved_by_truth.values()), "per the ground truth"))
    if saved.deferrals_saved:
        cards.append(figure(saved.deferrals_saved, "deferrals avoided too"))
    body = '<div class="figures">' + "".join(cards) + "</div>"
    if saved.would_retry:
        body += bars(list(saved.would_retry.items()), "#2e7d32", "retries saved per family")
    body += f'<p class="method">{e(CANONICALIZATION_METHOD)}</p>'
    if figures.economy is not None:
        body += f'<p class="method">{e(TRUTH_CROSS_CHECK)}</p>'
    return section("canonicalization", "Retries saved by endpoint canonicalization", body)


RECALL_METHOD = (
    "Defect recall: for every retry request, the ground truth of the attempt it replaces lists the injected "
    "defects. Benign kinds ({benign}) are not counted; behind a response that is not JSON, or fails its schema, "
    "the record-level defects cannot be seen and are counted as hidden. A defect is named when the guidance "
    "contains the record's name quoted as guidance quotes model text, or its cited range (\"units 40–44\"; "
    "either order for families that reorder endpoints); a defect without either (truncated JSON) is named by a "
    "line about the response as a whole. Leaks: ids, reason codes and validator keys of this run, hashes and "
    "fingerprints, code-style paths and exception text, searched for in every request's guidance.")


def economy_section(figures: RunFigures) -> str:
    economy = figures.economy
    leaks_card = figure(len(figures.leaks), "leaks in retry guidance (must be 0)", not figures.leaks)
    if economy is None:
        return section("retry-economy", "Retry economy",
                       '<div class="figures">' + leaks_card + "</div>"
                       "<p>Pass <code>--truth</code> (the simulated producer's ground truth) for defect recall "
                       "and requests per failing slot.</p>" + leaks_list(figures))
    recall, coverage, agreement = economy.recall, economy.coverage, economy.agreement
    per_slot = ", ".join(f"{slots} slots with {n}" for n, slots in coverage.requests_per_failing_slot.items())
    cards = [
        figure(percent(recall.named, recall.total), f"defect recall ({recall.named} of {recall.total} named)"),
        leaks_card,
        figure(_requests_per_slot(coverage.requests_per_failing_slot),
               f"requests per failing slot, {coverage.failing_slots} slots (must be 1)", coverage.ok),
        figure(percent(agreement.agreeing, agreement.compared),
               f"verdicts as the truth expects ({agreement.agreeing} of {agreement.compared})"),
    ]
    body = '<div class="figures">' + "".join(cards) + "</div>"
    body += (f"<p>First attempts: {recall.first_attempt_named} of {recall.first_attempt_total} defects named. "
             f"{recall.hidden} defects hidden behind a structural failure. "
             f"Failing slots: {e(per_slot or 'none')}; {len(coverage.unexpected_requests)} requests for slots "
             "that are not failing.</p>")
    if recall.missed:
        items = "".join(
            f"<li>{e(m.family)}, attempt {m.replaced_attempt}: {e(m.defect.kind)} on "
            f"{e(m.defect.record_name or '(no name)')}"
            + (f" ({e(_range_text(m.defect.range))})" if m.defect.range else "")
            + f"<pre>{e(m.guidance)}</pre></li>" for m in recall.missed)
        body += f"<h3>Defects not named</h3><ul>{items}</ul>"
    if coverage.unexpected_requests:
        items = "".join(f"<li>{e(s.family)} / {e(s.source_id)} / {e(s.chunk_id)}</li>"
                        for s in coverage.unexpected_requests)
        body += f"<h3>Requests for slots that are not failing</h3><ul>{items}</ul>"
    body += leaks_list(figures)
    benign = ", ".join(sorted(figures.truth.vocabulary.benign))
    body += f'<p class="method">{e(RECALL_METHOD.format(benign=benign))}</p>'
    return section("retry-economy", "Retry economy (ground truth)", body)


def _requests_per_slot(histogram: Mapping[int, int]) -> str:
    if not histogram:
        return "–"
    values = sorted(histogram)
    return str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"


def _range_text(value: Sequence[Any]) -> str:
    return f"{value[0]}–{value[1]}"


def leaks_list(figures: RunFigures) -> str:
    if not figures.leaks:
        return ""
    return "<h3>Leaks</h3><ul>" + "".join(f"<li>{e(leak.what)}: <code>{e(leak.text)}</code></li>"
                                          for leak in figures.leaks) + "</ul>"


def examples_section(summary: RunSummary) -> str:
    """A few informative requests (``analysis.run_summary``: most correction lines first, one per family)."""
    examples = summary.examples
    if not examples:
        return section("examples", "Example retry requests", "<p>This run sent no retry requests.</p>")
    body = (f"<p>{summary.requests} retry requests in all. Below, the <code>correction_guidance</code> of a few, "
            "exactly as the model reads it.</p>")
    body += "".join(f'<figure><figcaption>{e(r["family"])}, for attempt {e(r["attempt"])}</figcaption>'
                    f'<pre>{e(r["correction_guidance"])}</pre></figure>' for r in examples)
    return section("examples", "Example retry requests", body)


def baseline_section(comparison: tuple[Mapping[str, Any], str] | None, report_dir: str | None = None) -> str:
    """With ``--baseline``: what changed since the baseline run, and a link to the full comparison page."""
    if comparison is None:
        return ""
    document, link = comparison
    note = (f'<p>Run A (baseline): {e(shown_path(document["runs"]["a"]["folder"], report_dir))}; run B: this run. '
            f'The whole comparison, slot by slot: <a href="{e(link)}">{e(link)}</a>.</p>')
    return section("baseline", "Since the baseline run", note + comparison_sections(document))


def shown_path(path: str, report_dir: str | None) -> str:
    """A local path as the page shows it: relative to the report's folder (``.`` is that folder), so the page
    reads the same wherever the tree is; a remote path (gs://, s3://), or any path when the report's folder is
    not known, as given."""
    if report_dir is None or "://" in path or "://" in report_dir:
        return path
    try:
        return os.path.relpath(os.path.abspath(path), os.path.abspath(report_dir))
    except ValueError:  # another drive
        return path


def render_report(figures: RunFigures, comparison: tuple[Mapping[str, Any], str] | None = None,
                  report_dir: str | None = None, cost: RunCost | None = None) -> str:
    """The page; ``report_dir``: the folder the report is written to (local paths are shown relative to it);
    ``cost``: the run's cost figures (``pipelines.run_cost``), the section "What the run cost"."""
    manifest = figures.manifest
    outputs = shown_path(figures.output_dir, report_dir)
    truth = shown_path(figures.truth_path, report_dir) if figures.truth_path else None
    meta = f"Outputs: {outputs}{' (this folder)' if outputs == '.' else ''} · runner: {manifest.get('runner', '?')}"
    if truth is not None:
        meta += f" · ground truth: {truth}"
    if outputs != figures.output_dir or (truth is not None and truth != figures.truth_path):
        meta += " (paths relative to this report's folder)"
    title = "notarius-reprocess run report"
    return page(title, title, "\n".join([
        f'<p class="meta">{e(meta)}</p>',
        outcomes_section(manifest),
        conservation_section(manifest),
        stale_section(manifest),
        refresh_section(manifest, figures.output_dir, comparison[0] if comparison is not None else None),
        judges_section(figures),
        report_cost_section(cost) if cost is not None else "",
        defects_section(figures),
        canonicalization_section(figures),
        economy_section(figures),
        examples_section(figures.summary),
        baseline_section(comparison, report_dir),
    ]))
