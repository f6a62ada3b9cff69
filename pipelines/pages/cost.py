"""The cost sections of the report and of the comparison page (contract §6.4), rendered from the cost
records ``analysis.cost.table_record`` writes (the report's from its run, compare.html's from
compare.json's ``cost``): one look for both. Every piece of data goes through ``e``."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from analysis.cost import SAVED, VERDICT_ORDER, VERDICTS_OUTCOME
from domain.batch.estimate import BYTES_PER_TOKEN
from pipelines.pages.html import e, figure, section

COST_METHOD = (
    "Tokens are what the providers billed, as each attempt's candidate carried them (usage; import-batch fills "
    "it from every provider's result). Money is at the prices of --prices (yours: none are built in), per "
    "provider/model as the attempt names its producer, the batch discount taken off batch traffic; each cell "
    "is rounded to a millionth and the totals are the sums of the cells. An attempt without usage, or whose "
    "model the prices file does not name, is counted, never priced at zero: \"n of m\" says how many of the "
    "cell's attempts the money covers.")
SAVED_METHOD = (
    "Each retry endpoint canonicalization saved (an accepted slot whose every passing attempt cited a range "
    "whose endpoints the job put in order) is priced at its slot's own accepted attempt: what answering that "
    "slot once was billed, what a retry would have cost again.")


def _count(cell: Mapping[str, Any], noun: str) -> int:
    return int(cell.get(noun, 0))


def cell_text(cell: Mapping[str, Any], noun: str, has_prices: bool) -> str:
    """One cell: money with prices (and how much of it is known), tokens without."""
    count = _count(cell, noun)
    if not count:
        return "–"
    if has_prices:
        known = int(cell.get("priced") or 0)
        shown = "unknown" if cell.get("cost") is None else f"{cell['cost']:.6f}"
        return e(shown) + ("" if known == count else f' <small>({known:,} of {count:,})</small>')
    with_usage = int(cell.get("with_usage", 0))
    text = f"{int(cell.get('input_tokens', 0)):,} in · {int(cell.get('output_tokens', 0)):,} out"
    return e(text) + ("" if with_usage == count else f' <small>({with_usage:,} of {count:,})</small>')


def table_html(record: Mapping[str, Any], noun: str, has_prices: bool, group_title: str,
               outcomes: Sequence[str] | None = None) -> str:
    """A cost record as a table: a row per group, a column per outcome, the group's total and its tokens; the
    total row last."""
    groups: Mapping[str, Any] = record["by_group"]
    if outcomes is None:
        found = {o for g in groups.values() for o in g["by_outcome"]}
        outcomes = [o for o in VERDICT_ORDER if o in found] + sorted(found - set(VERDICT_ORDER))
    show_outcomes = list(outcomes) if len(outcomes) > 1 else []
    head = "".join(f"<th>{e(h)}</th>" for h in (group_title, noun, "with usage", "input tokens (cached)",
                                                  "output tokens", *show_outcomes, "cost" if has_prices else "tokens"))

    def row(name: str, by_outcome: Mapping[str, Any], total: Mapping[str, Any], tag: str = "td") -> str:
        cells = [e(name), f"{_count(total, noun):,}", f"{int(total['with_usage']):,}",
                 f"{int(total['input_tokens']):,} ({int(total['cached_input_tokens']):,})",
                 f"{int(total['output_tokens']):,}"]
        cells += [cell_text(by_outcome.get(o, {}), noun, has_prices) for o in show_outcomes]
        cells.append(cell_text(total, noun, has_prices))
        return "<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>"

    body = "".join(row(name, g["by_outcome"], g["total"]) for name, g in groups.items())
    totals = {o: _sum_cells([g["by_outcome"][o] for g in groups.values() if o in g["by_outcome"]], noun)
              for o in show_outcomes}
    foot = row("total", totals, record["total"], "th")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody><tfoot>{foot}</tfoot></table>"


def _sum_cells(cells: Sequence[Mapping[str, Any]], noun: str) -> dict[str, Any]:
    """The cells of one outcome over every group (the total row's outcome columns)."""
    out: dict[str, Any] = {noun: sum(_count(c, noun) for c in cells)}
    for name in ("with_usage", "input_tokens", "cached_input_tokens", "cached_unknown", "output_tokens"):
        out[name] = sum(int(c.get(name, 0)) for c in cells)
    priced = [c.get("priced") for c in cells]
    out["priced"] = None if any(p is None for p in priced) else sum(priced)
    known = [c["cost"] for c in cells if c.get("cost") is not None]
    out["cost"] = None if out["priced"] is None or (out[noun] and not out["priced"]) else round(sum(known), 6)
    return out


def unpriced_html(names: Sequence[str], prices_file: str | None) -> str:
    if not names:
        return ""
    return (f'<p class="fail">{e(prices_file)} has no price for {e(", ".join(names))}: their cost is unknown, not '
            "zero (add them to the prices file to price them).</p>")


def prices_html(prices_file: str | None, currency: str | None) -> str:
    if prices_file is None:
        return ("<p>No <code>--prices</code>: tokens only. Prices are yours (a JSON file per provider/model, "
                "<code>docs/batch.md</code>); none are built in.</p>")
    return f"<p>Prices: <code>{e(prices_file)}</code>" + (f", in {e(currency)}" if currency else "") + ".</p>"


# --- the report ------------------------------------------------------------------------------------

def report_cost_section(cost: Any) -> str:
    """The report's ``cost`` section (``pipelines.run_cost.RunCost``): the run's attempts per family and
    verdict, the judges' verdicts, the open requests' estimate, the retries endpoint canonicalization saved."""
    from analysis.cost import table_record

    has_prices = cost.prices_file is not None
    attempts, verdicts, saved = (table_record(t) for t in (cost.attempts, cost.verdicts, cost.saved))
    total = attempts["total"]
    cards = [figure(f"{int(total['with_usage']):,} of {_count(total, 'attempts'):,}", "attempts with billed usage")]
    if has_prices:
        cards.append(figure("unknown" if total["cost"] is None else f"{total['cost']:.6f}",
                            f"cost of the attempts priced ({int(total['priced'] or 0):,})"
                            + (f", {cost.currency}" if cost.currency else "")))
    body = prices_html(cost.prices_file, cost.currency) + unpriced_html(list(cost.unpriced), cost.prices_file)
    body += '<div class="figures">' + "".join(cards) + "</div>"
    body += "<h3>The run's attempts, per family and verdict</h3>" + table_html(attempts, "attempts", has_prices,
                                                                              "family")
    if verdicts["by_group"]:
        body += ("<h3>The judges' verdicts</h3><p>Every verdict record of a judge of the run (applied, superseded, "
                 "unusable, stale or unmatched), with what its answer was billed.</p>"
                 + table_html(verdicts, "verdicts", has_prices, "judge", [VERDICTS_OUTCOME]))
    body += "<h3>The open requests, before they are sent</h3>" + requests_html(cost.requests, cost.requests_note)
    body += "<h3>The retries endpoint canonicalization saved</h3>"
    if saved["by_group"]:
        body += table_html(saved, "slots", has_prices, "family", [SAVED])
    else:
        body += "<p>No retry was saved in this run.</p>"
    if cost.saved_recorded is not None and cost.saved_recorded != _count(saved["total"], "slots"):
        body += (f'<p class="fail">The manifest records {int(cost.saved_recorded)} retries saved; its rows say '
                 f"{_count(saved['total'], 'slots')}.</p>")
    body += f'<p class="method">{e(SAVED_METHOD)}</p><p class="method">{e(COST_METHOD)}</p>'
    return section("cost", "What the run cost", body)


def requests_html(block: Mapping[str, Any] | None, note: str) -> str:
    """export-batch's ``estimate`` of the open requests, per kind and family."""
    if block is None:
        return f"<p>Not estimated: {e(note)}.</p>"
    total = block["total"]
    if not total["requests"] and not block["not_estimated"]["requests"]:
        return "<p>This run has no open request.</p>"
    has_cost = total["cost"] is not None
    head = "".join(f"<th>{e(h)}</th>" for h in ("kind", "family", "requests", "input tokens (estimated)",
                                                  "output tokens at most", *(("cost at most",) if has_cost else ())))

    def cells(cell: Mapping[str, Any]) -> str:
        values = [f"{cell['requests']:,}", f"{cell['input_tokens']:,}", f"{cell['output_tokens_at_most']:,}"]
        if has_cost:
            values.append(f"{cell['cost']['total_at_most']:.6f}")
        return "".join(f"<td>{v}</td>" for v in values)

    body = "".join(f"<tr><td>{e(kind)}</td><td>{e(family)}</td>{cells(cell)}</tr>"
                   for kind, families in block["by_kind"].items() for family, cell in families.items())
    foot = "<tr><th>total</th><th></th>" + cells(total).replace("<td>", "<th>").replace("</td>", "</th>") + "</tr>"
    text = (f"<p>As export-batch would send them to <code>{e(block['target'])}</code>: input tokens by its rule (UTF-8 bytes "
            f"of the rendered request / {BYTES_PER_TOKEN}: estimated), output tokens at most "
            f"{int(block['max_output_tokens']):,} per request (an upper bound). ")
    if not block["model_named"]:
        text += "Name the model they go to (<code>--model</code>) to price them. "
    elif block["prices"]["file"] is None:
        text += "With <code>--prices</code>, money too. "
    text += "</p>"
    refused = block["not_estimated"]
    if refused["requests"]:
        reasons = "; ".join(f"{r['requests']}: {r['reason']}" for r in refused["reasons"])
        text += (f'<p class="fail">{refused["requests"]} request(s) export-batch would refuse are not counted '
                 f"({e(reasons)}).</p>")
    return text + f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody><tfoot>{foot}</tfoot></table>"


# --- compare.html ---------------------------------------------------------------------------------

def comparison_cost_section(document: Mapping[str, Any]) -> str:
    """compare.html's ``cost`` section: B's attempts beside A's, and the revision's refresh round."""
    cost = document.get("cost")
    if not cost:
        return ""
    prices = cost["prices"]
    has_prices = prices["file"] is not None
    a, b = cost["attempts"]["a"]["total"], cost["attempts"]["b"]["total"]
    families = sorted(set(cost["attempts"]["a"]["by_group"]) | set(cost["attempts"]["b"]["by_group"]))
    empty = {"attempts": 0, "with_usage": 0, "input_tokens": 0, "cached_input_tokens": 0, "cached_unknown": 0,
             "output_tokens": 0, "priced": 0 if has_prices else None, "cost": 0.0 if has_prices else None}

    def of(run: str, family: str) -> Mapping[str, Any]:
        return (cost["attempts"][run]["by_group"].get(family) or {}).get("total") or empty

    head = "".join(f"<th>{e(h)}</th>" for h in ("family", "attempts A", "attempts B", "A", "B"))
    rows = "".join(f"<tr><td>{e(f)}</td><td>{_count(of('a', f), 'attempts'):,}</td>"
                   f"<td>{_count(of('b', f), 'attempts'):,}</td><td>{cell_text(of('a', f), 'attempts', has_prices)}"
                   f"</td><td>{cell_text(of('b', f), 'attempts', has_prices)}</td></tr>" for f in families)
    foot = (f"<tr><th>total</th><th>{_count(a, 'attempts'):,}</th><th>{_count(b, 'attempts'):,}</th>"
            f"<th>{cell_text(a, 'attempts', has_prices)}</th><th>{cell_text(b, 'attempts', has_prices)}</th></tr>")
    body = prices_html(prices["file"], prices["currency"]) + unpriced_html(cost["unpriced"], prices["file"])
    body += ("<h3>The attempts of each run</h3><p>Every attempt each run evaluated (a run re-reads the archive: "
             "B's attempts include A's when the archive only grew).</p>"
             f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody><tfoot>{foot}</tfoot></table>")
    refresh = cost["refresh_round"]
    body += ("<h3>The revision's refresh round</h3><p>B's attempts that answer A's refresh requests (the slot, and "
             "the attempt number the request asked for), by B's verdict on them"
             + (f"; {refresh['unanswered_total']} refresh request(s) of A have no answer in B" if
                refresh["unanswered_total"] else "") + ".</p>")
    body += (table_html(refresh, "attempts", has_prices, "family") if refresh["by_group"]
             else "<p>No refresh request of A is answered in B.</p>")
    body += f'<p class="method">{e(COST_METHOD)}</p>'
    return section("cost", "What the runs cost", body)
