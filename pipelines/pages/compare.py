"""compare.html and its pages (contract §6.3): the comparison's counts at a glance, where each changed slot stands
in B and what to do next, and one page per source listing its changed slots. Static, no script, every value
escaped (``pipelines.pages.html``); the same document and pages give the same bytes. The report includes the
same sections for its baseline (``pipelines.pages.report``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from analysis.compare import (ANSWER_STATUSES, ARTIFACT_CHANGES, COMPARED_OUTPUTS, RUN_A, RUN_B, RUNS,
                              SITUATION_ABSENT, SITUATION_ENTRY_LIST, SITUATION_EXHAUSTED, SITUATION_JUDGES,
                              SITUATION_NEWLY_ACCEPTED, SITUATION_RECORDS_CHANGED, SITUATION_REFRESH,
                              SITUATION_REGISTRY, SITUATION_RETRY, SITUATIONS, SLOT_CHANGES, SLOT_OUTCOMES,
                              situation_of_row)
from analysis.compare_folder import COMPARE_HTML, document_facts, page_name, slot_row_order
from analysis.record_diff import RECORD_ADDED, RECORD_REMOVED
from pipelines.pages.cost import comparison_cost_section
from pipelines.pages.html import STYLE, e, figure, legend, page, section, stacked_bars, table, verdict
from transforms.write import join_path, write_document

OUTCOME_COLOURS = {"accepted": "#2e7d32", "retry": "#f9a825", "refresh": "#00838f", "exhausted": "#c62828",
                   "deferred": "#757575", "absent": "#bdbdbd"}
CHANGE_COLOURS = {"regression": "#c62828", "fix": "#2e7d32", "records_changed": "#1565c0", "other": "#9e9e9e"}
TOP_REASON_CODES = 15
# The report's style, and tables of text (slots, attempts) read from the left.
PAGE_STYLE = STYLE + ("table.text td,table.text th{text-align:left;vertical-align:top}\n"
                      "ul.records{margin:0;padding-left:0;list-style:none}ul.records li{margin:0 0 2px}\n"
                      "li.added{color:#2e7d32}li.removed{color:#c62828}span.counts{color:#555;font-size:.85em}\n"
                      "span.attempts{font-size:.8em;color:#555;word-break:break-all}\n")


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
                   + table(["A \\ B", *SLOT_OUTCOMES], rows) + chart)


def families_section(document: Mapping[str, Any]) -> str:
    head = ["family", "slots A", "slots B", *SLOT_CHANGES, *(f"artifacts {a}" for a in ARTIFACT_CHANGES)]

    def cells(name: str, block: Mapping[str, Any]) -> list:
        return [e(name), block["slots"]["in_a"], block["slots"]["in_b"], *(block["changes"][c] for c in SLOT_CHANGES),
                *(block["artifacts"][a] for a in ARTIFACT_CHANGES)]

    rows = [cells(f, b) for f, b in document["by_family"].items() if b["slots"]["in_a_or_b"]]
    return section("families", "Per family",
                   "<p>A regression was accepted in A and is not in B; a fix the reverse; records changed: accepted "
                   "in both, with other records (compared by a hash of the records, not of provenance).</p>"
                   + table(head, rows, cells("total", document["total"])))


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
            + (table(head, rows, ["total", total["requests"], *(total[s] for s in ANSWER_STATUSES)]) if rows
               else "<p>Run A made no request.</p>"))
    body += ("<h3>Failed after their registry changed</h3><p>Occurrence attempts that passed in A and fail in B "
             "because a name is not in the registry (the attempt is the same; the registry it is checked against "
             "changed): "
             f"<b>{e(document['total'].get('failed_after_registry_change', 0))}</b>.</p>")
    if registry:
        body += table(["family", "attempts"], [[e(f), n] for f, n in registry])
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
                   + table(["reason code", "A", "B", "B − A"], rows))


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
                   + table(["situation", "slots", "what it means", "what to do next"], rows, text=True))


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
                   + table(["source", "changed slots", *SLOT_CHANGES], rows, text=True))


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
        parts.append(section(f"family-{e(family)}", f"{family} ({len(found)})", table(
            ["chunk", "A → B", "change: situation", "records", "deciding attempt in A, in B"],
            [[e(r["chunk_id"]), f"{e(r['transition']['from'])} → {e(r['transition']['to'])}",
              _change_text(index, r), records_html(r.get("records")),
              f'<span class="attempts">A: {_attempt_text(r["deciding_a"])}<br>B: {_attempt_text(r["deciding_b"])}'
              "</span>"] for r in found], text=True)))
    return page(f"notarius-reprocess comparison: {source_id}", f"Changed slots of {source_id}", "\n".join(parts),
                PAGE_STYLE)


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
    counts = table(["run", *COMPARED_OUTPUTS],
                   [[e(run), *(f"{rows[run][o]['read']} of {rows[run][o]['listed']}"
                               + (f" ({rows[run][o]['unreadable']} unreadable)" if rows[run][o]["unreadable"] else "")
                               for o in COMPARED_OUTPUTS)] for run in RUNS])
    return section("conservation", "Conservation",
                   f"<p>{e(line)} — {verdict(bool(slots['holds']))}</p>"
                   f"<p>Rows read of the rows each run's manifest lists — {verdict(bool(rows['holds']))}</p>" + counts)


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
    return page("notarius-reprocess comparison", "notarius-reprocess comparison",
                f'<p class="meta">{e(meta)}</p>\n' + comparison_sections(document, pages)
                + comparison_cost_section(document), PAGE_STYLE)
