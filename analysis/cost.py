"""What a run's attempts cost (contract §6.4): the tokens the providers billed, and money at the operator's prices.

Pure computations over a run's rows and manifest (no Beam, no I/O); ``pipelines/run_cost.py``
reads the files, ``pipelines/report.py`` and ``pipelines/compare.py`` show the figures.

- Attempts: every evaluation row (one per evaluated candidate) carries who made the attempt
  (``producer``) and what it was billed (``usage``; null when the candidate said nothing). They
  are tallied per family and verdict, and within that per producer (the price is a producer's).
- Retries saved by endpoint canonicalization: the accepted slots none of whose passing attempts
  passes without endpoint ordering (the job's own rule, ``endpoints_reordered`` of its rows),
  each priced at its own accepted attempt's billed usage: the measured cost of answering that
  slot once, what the retry would have cost again.
- Judges: the manifest's ``verdict_usage`` (per judge and producer) beside the judge's verdicts.
- A revision's refresh round (compare): run B's attempts that answer run A's refresh requests
  (same slot, the attempt number the request asked for).

Money: a cell (a family's attempts of one verdict, say) is priced producer by producer with
``domain.batch.prices.token_cost`` and rounded to a millionth of the currency; families and
totals are sums of rounded cells, so they add up exactly. An attempt without usage, or whose
producer the prices file does not name, adds no money: it is counted ("cost known for 1,180
of 1,279"), never priced at zero, and an unpriced producer is named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from domain.batch.prices import PriceTable, price_key, token_cost
from domain.counters import JUDGE_STALE, JUDGE_SUPERSEDED, JUDGE_UNMATCHED, JUDGE_UNUSABLE
from domain.judges import JUDGE_VERDICTS
from domain.revision import KIND_REFRESH
from domain.rows import PASSING_VERDICTS, VERDICTS

Rows = Callable[[], Iterable[Mapping[str, Any]]]
ProducerKey = tuple[str, str, bool]  # provider, model, batch: what a price applies to

MICROS = 1_000_000
VERDICT_ORDER = VERDICTS  # the order the cost tables list verdicts in
SAVED = "saved"
VERDICTS_OUTCOME = "verdicts"
# A judge's verdict records: every one its counters count (domain.manifest.verdict_conservation's parts).
JUDGE_VERDICT_PARTS = (*JUDGE_VERDICTS, JUDGE_SUPERSEDED, JUDGE_UNUSABLE, JUDGE_STALE, JUDGE_UNMATCHED)


# --- tokens --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Tokens:
    """Billed tokens of some answers that had a usage (``with_usage`` of them). Cached input tokens
    are summed where the provider said them; ``cached_unknown`` counts the answers where it did not."""

    with_usage: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cached_unknown: int = 0
    output_tokens: int = 0

    def __add__(self, other: "Tokens") -> "Tokens":
        return Tokens(self.with_usage + other.with_usage, self.input_tokens + other.input_tokens,
                      self.cached_input_tokens + other.cached_input_tokens,
                      self.cached_unknown + other.cached_unknown, self.output_tokens + other.output_tokens)

    @staticmethod
    def of_usage(usage: Mapping[str, Any]) -> "Tokens":
        cached = usage.get("cached_input_tokens")
        return Tokens(1, int(usage["input_tokens"]), int(cached or 0), int(cached is None),
                      int(usage["output_tokens"]))

    @staticmethod
    def of_counts(counts: Mapping[str, int]) -> "Tokens":
        """From a manifest's usage cell (``with_usage``, ``input_tokens``, ...)."""
        return Tokens(*(int(counts.get(name, 0)) for name in TOKEN_FIELDS))

    def as_record(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in TOKEN_FIELDS}


TOKEN_FIELDS = ("with_usage", "input_tokens", "cached_input_tokens", "cached_unknown", "output_tokens")


def producer_micros(price_table: PriceTable, key: ProducerKey, tokens: Tokens) -> int | None:
    """What these tokens of one producer cost, in millionths of the currency; None when unpriced.
    Answers whose cached input the provider did not say are priced as uncached input (what a
    provider charges without a cache), as ``domain.batch.prices.usage_cost`` prices one."""
    provider, model, batch = key
    price = price_table.producer_price(provider, model)
    if price is None:
        return None
    return round(token_cost(price, input_tokens=tokens.input_tokens, output_tokens=tokens.output_tokens,
                            cached_input_tokens=tokens.cached_input_tokens, batch=batch) * MICROS)


# --- cells: some answers, their tokens per producer ----------------------------------------------

@dataclass(frozen=True)
class Cell:
    """Some attempts (or slots, or verdicts): how many, and the billed tokens of those with a usage,
    per producer. ``count - with_usage`` of them said nothing of what they cost."""

    count: int = 0
    by_producer: Mapping[ProducerKey, Tokens] = field(default_factory=dict)

    @property
    def tokens(self) -> Tokens:
        return sum(self.by_producer.values(), Tokens())


class Tally:
    """A builder of cells by (group, outcome): group a family or a judge, outcome a verdict. Tokens are
    summed as plain integers (``TOKEN_FIELDS``' order) and made ``Tokens`` once per cell and producer:
    compare tallies every attempt of both runs."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        self.tokens: dict[tuple[str, str], dict[ProducerKey, list[int]]] = {}

    def add(self, group: str, outcome: str, producer: Mapping[str, Any] | None, usage: Mapping[str, Any] | None,
            count: int = 1) -> None:
        key = (group, outcome)
        self.counts[key] = self.counts.get(key, 0) + count
        if usage is not None and producer is not None:
            sums = self._sums(key, (str(producer["provider"]), str(producer["model"]), bool(usage["batch"])))
            cached = usage.get("cached_input_tokens")  # as Tokens.of_usage
            sums[0] += 1
            sums[1] += int(usage["input_tokens"])
            sums[2] += int(cached or 0)
            sums[3] += int(cached is None)
            sums[4] += int(usage["output_tokens"])

    def add_tokens(self, group: str, outcome: str, key: ProducerKey, tokens: Tokens) -> None:
        sums = self._sums((group, outcome), key)
        for i, name in enumerate(TOKEN_FIELDS):
            sums[i] += getattr(tokens, name)

    def _sums(self, cell: tuple[str, str], key: ProducerKey) -> list[int]:
        cells = self.tokens.get(cell)
        if cells is None:
            cells = self.tokens[cell] = {}
        sums = cells.get(key)
        if sums is None:
            sums = cells[key] = [0] * len(TOKEN_FIELDS)
        return sums

    def cells(self) -> dict[str, dict[str, Cell]]:
        """Group -> outcome -> cell, sorted (the table's order)."""
        out: dict[str, dict[str, Cell]] = {}
        for group, outcome in sorted(self.counts.keys() | self.tokens.keys(), key=_cell_order):
            tokens = self.tokens.get((group, outcome), {})
            out.setdefault(group, {})[outcome] = Cell(self.counts.get((group, outcome), 0),
                                                      {key: Tokens(*tokens[key]) for key in sorted(tokens)})
        return out


def _cell_order(key: tuple[str, str]) -> tuple:
    group, outcome = key
    return (group, VERDICT_ORDER.index(outcome) if outcome in VERDICT_ORDER else len(VERDICT_ORDER), outcome)


# --- priced -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Priced:
    """Some answers with their tokens and, with prices, their money.

    ``priced``: of the ``count``, those with a usage whose producer has a price (None without
    prices). ``micros``: what those cost, in millionths of the currency; None without prices, or
    when there are answers and none of them could be priced (unknown, never zero)."""

    count: int
    tokens: Tokens
    priced: int | None
    micros: int | None
    unpriced: tuple[str, ...] = ()  # "provider/model" of the answers with usage and no price

    @property
    def cost(self) -> float | None:
        return None if self.micros is None else self.micros / MICROS

    def __add__(self, other: "Priced") -> "Priced":
        priced = None if self.priced is None or other.priced is None else self.priced + other.priced
        known = (self.micros or 0) + (other.micros or 0)
        count = self.count + other.count
        micros = None if priced is None or (count and not priced) else known
        return Priced(count, self.tokens + other.tokens, priced, micros,
                      tuple(sorted(set(self.unpriced) | set(other.unpriced))))


def zero(prices: PriceTable | None) -> Priced:
    return Priced(0, Tokens(), None if prices is None else 0, None if prices is None else 0)


def price_cell(cell: Cell, prices: PriceTable | None) -> Priced:
    """One cell at the operator's prices (producer by producer, then rounded)."""
    tokens = cell.tokens
    if prices is None:
        return Priced(cell.count, tokens, None, None)
    priced = micros = 0
    unpriced = set()
    for key, found in cell.by_producer.items():
        cost = producer_micros(prices, key, found)
        if cost is None:
            unpriced.add(price_key(key[0], key[1]))
        else:
            priced, micros = priced + found.with_usage, micros + cost
    return Priced(cell.count, tokens, priced, None if cell.count and not priced else micros, tuple(sorted(unpriced)))


@dataclass(frozen=True)
class CostTable:
    """Priced cells by group (a family, a judge) and outcome, with the sums: each group's total is the
    sum of its outcomes, the table's total the sum of its groups (``Priced.__add__``)."""

    noun: str  # what is counted: "attempts", "slots", "verdicts"
    groups: Mapping[str, Mapping[str, Priced]]
    has_prices: bool

    def group_total(self, group: str) -> Priced:
        return sum(self.groups[group].values(), zero(self._prices_marker()))

    @property
    def total(self) -> Priced:
        return sum((self.group_total(group) for group in self.groups), zero(self._prices_marker()))

    def _prices_marker(self) -> PriceTable | None:
        return _MARKER if self.has_prices else None

    @property
    def unpriced(self) -> tuple[str, ...]:
        return self.total.unpriced


_MARKER = PriceTable(())  # stands for "prices were given" where only that matters


def cost_table(noun: str, cells: Mapping[str, Mapping[str, Cell]], prices: PriceTable | None) -> CostTable:
    return CostTable(noun, {group: {outcome: price_cell(cell, prices) for outcome, cell in outcomes.items()}
                            for group, outcomes in cells.items()}, prices is not None)


# --- what the rows say ----------------------------------------------------------------------------

def attempt_cells(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Cell]]:
    """Every evaluation row, by family and verdict (rows of runs made before rows carried ``producer``
    and ``usage`` count as attempts without usage)."""
    return _attempts(rows).cells()


def _slot(row: Mapping[str, Any]) -> tuple[str, str, str]:
    return (row["source_id"], row["chunk_id"], row["family"])


def saved_retry_cells(rows: Rows, reordered: set[str] | None = None) -> dict[str, dict[str, Cell]]:
    """The retries endpoint canonicalization saved, by family (outcome ``saved``), each at its slot's
    accepted attempt's billed usage. A slot is saved when it is accepted and every passing attempt
    (accepted or superseded) cited a range whose endpoints the job put in order: the job's own rule
    (``domain.slot_decision.SlotDecision.survives``), read from its rows. Three passes over the rows:
    the slots some passing attempt had reordered (``note_reordered``; ``reordered`` when the caller
    took them on a pass of its own, and then spent), those of them a passing attempt needed no reordering
    for, then the accepted attempts of the rest. What is held is a key per reordered slot, never a row
    (the cells are sums: the order rows come in changes nothing)."""
    saved = reordered if reordered is not None else set()
    if reordered is None:
        for row in rows():
            note_reordered(row, saved)
    if not saved:
        return {}
    for row in rows():
        if row["verdict"] in PASSING_VERDICTS and not int(row.get("endpoints_reordered") or 0):
            saved.discard(_slot_key(row))
    tally = Tally()
    for row in rows():
        if row["verdict"] == "accepted" and saved:
            key = _slot_key(row)
            if key in saved:
                saved.discard(key)  # a slot's one accepted attempt
                tally.add(row["family"], SAVED, row.get("producer"), row.get("usage"))
    return tally.cells()


def note_reordered(row: Mapping[str, Any], reordered: set[str]) -> None:
    """Adds the row's slot to ``reordered`` when it is a passing attempt whose endpoints the job put in order
    (``saved_retry_cells``' first pass, one row at a time)."""
    if row["verdict"] in PASSING_VERDICTS and int(row.get("endpoints_reordered") or 0) > 0:
        reordered.add(_slot_key(row))


def _slot_key(row: Mapping[str, Any]) -> str:
    """A slot as one string (its parts length-prefixed, so no two slots share one): a third of a tuple's
    memory, kept per reordered slot."""
    source, chunk, family = _slot(row)
    return f"{len(source)}:{source}{len(chunk)}:{chunk}{family}"


def refresh_round_cells(requests_a: Iterable[Mapping[str, Any]], rows_b: Iterable[Mapping[str, Any]]
                        ) -> tuple[dict[str, dict[str, Cell]], dict[str, int]]:
    """Run B's attempts that answer run A's refresh requests (the request's slot, the attempt number it
    asked for), by family and B's verdict; and per family the refresh requests of A that B did not
    answer (no cost of theirs is known)."""
    tally, unanswered = _refresh_round(requests_a, rows_b)
    return tally.cells(), unanswered


def _refresh_round(requests_a: Iterable[Mapping[str, Any]], rows_b: Iterable[Mapping[str, Any]]
                   ) -> tuple[Tally, dict[str, int]]:
    asked: dict[tuple[str, str, str, int], str] = {}
    for request in requests_a:
        if request.get("kind") == KIND_REFRESH:
            asked[(*_slot(request), int(request["attempt"]))] = request["family"]
    tally = Tally()
    answered: set[tuple[str, str, str, int]] = set()
    for row in rows_b:
        key = (*_slot(row), int(row["attempt"]))
        if key in asked:
            answered.add(key)
            tally.add(row["family"], row["verdict"], row.get("producer"), row.get("usage"))
    unanswered: dict[str, int] = {}
    for key, family in sorted(asked.items()):
        if key not in answered:
            unanswered[family] = unanswered.get(family, 0) + 1
    return tally, unanswered


# --- compare: what two runs cost, summed over their sources ----------------------------------------

# compare.json's ``cost`` is counted per source, beside the comparison of the source's slots (the rows are
# read once), and summed: every figure is an integer (attempts and tokens; money is priced from the sums),
# and every key names its source's slots (a refresh request is answered by an attempt of its own slot), so
# the sums are the figures of the whole runs, in any order. As flat integer counts, keys below.
_COUNT, _TOKENS, _UNANSWERED, _REFRESH_ROUND = "count", "tokens", "unanswered", "refresh_round"


def _flat(part: str, tally: Tally, counts: dict[tuple, int]) -> None:
    for (group, outcome), n in tally.counts.items():
        counts[(part, _COUNT, group, outcome)] = n
    for (group, outcome), cells in tally.tokens.items():
        for key, sums in cells.items():
            for name, n in zip(TOKEN_FIELDS, sums):
                counts[(part, _TOKENS, group, outcome, *key, name)] = n


def _tally_of(part: str, counts: Mapping[tuple, int]) -> Tally:
    tally = Tally()
    fields: dict[tuple, dict[ProducerKey, dict[str, int]]] = {}
    for key, n in counts.items():
        if key[0] != part:
            continue
        if key[1] == _COUNT:
            tally.counts[key[2:4]] = n
        else:
            fields.setdefault(key[2:4], {}).setdefault(key[4:7], {})[key[7]] = n
    for (group, outcome), producers in fields.items():
        for producer, found in producers.items():
            tally.add_tokens(group, outcome, producer, Tokens(**found))
    return tally


def comparison_counts(evaluations: Mapping[str, Sequence[Mapping[str, Any]]], requests_a: Iterable[Mapping[str, Any]]
                      ) -> dict[tuple, int]:
    """Some rows' part of compare.json's ``cost`` (one source's, or the whole runs'), as integer counts
    to sum: ``evaluations`` per run (``a``, ``b``), and A's requests (its refresh requests are looked for
    among B's attempts)."""
    counts: dict[tuple, int] = {}
    for run, rows in evaluations.items():
        _flat(run, _attempts(rows), counts)
    refresh, unanswered = _refresh_round(requests_a, evaluations.get("b", ()))
    _flat(_REFRESH_ROUND, refresh, counts)
    for family, n in unanswered.items():
        counts[(_UNANSWERED, family)] = n
    return counts


def _attempts(rows: Iterable[Mapping[str, Any]]) -> Tally:
    tally = Tally()
    for row in rows:
        tally.add(row["family"], row["verdict"], row.get("producer"), row.get("usage"))
    return tally


def comparison_cost(counts: Mapping[tuple, int], runs: Sequence[str], prices: PriceTable | None,
                    prices_file: str | None) -> dict[str, Any]:
    """compare.json's ``cost`` from the summed :func:`comparison_counts`: each run's attempts (per family and
    verdict, B beside A) and the revision's refresh round (B's attempts answering A's refresh requests;
    those B did not answer, per family)."""
    tables = {run: cost_table("attempts", _tally_of(run, counts).cells(), prices) for run in runs}
    refresh = cost_table("attempts", _tally_of(_REFRESH_ROUND, counts).cells(), prices)
    unanswered = {key[1]: n for key, n in counts.items() if key[0] == _UNANSWERED}
    return {
        "prices": {"file": prices_file, "currency": prices.currency if prices is not None else None},
        "attempts": {run: table_record(table) for run, table in tables.items()},
        "refresh_round": {**table_record(refresh), "unanswered": dict(sorted(unanswered.items())),
                          "unanswered_total": sum(unanswered.values())},
        "unpriced": sorted(set(refresh.unpriced).union(*(t.unpriced for t in tables.values()))),
    }


def verdict_cells(manifest: Mapping[str, Any]) -> dict[str, dict[str, Cell]]:
    """Per judge of the run: its verdict records (every one its counters count) and, from the manifest's
    ``verdict_usage``, the billed tokens of those that carried a usage, per producer. Nothing for a run
    without judges (or made before ``verdict_usage``: every verdict then without usage)."""
    judges = manifest.get("judges") or {}
    usage = manifest.get("verdict_usage") or {}
    out: dict[str, dict[str, Cell]] = {}
    for name, counts in sorted(judges.items()):
        count = sum(int(counts.get(part, 0)) for part in JUDGE_VERDICT_PARTS)
        cells = (usage.get(name) or {}).get("by_producer") or []
        by_producer = {(str(c["provider"]), str(c["model"]), bool(c["batch"])): Tokens.of_counts(c) for c in cells}
        out[name] = {VERDICTS_OUTCOME: Cell(count, dict(sorted(by_producer.items())))}
    return out


# --- as documents and lines ----------------------------------------------------------------------

def priced_record(priced: Priced, noun: str) -> dict[str, Any]:
    """One priced cell as compare.json (and the report's figures) write it."""
    return {noun: priced.count, **priced.tokens.as_record(), "priced": priced.priced,
            "cost": None if priced.micros is None else round(priced.cost or 0.0, 6)}


def table_record(table: CostTable) -> dict[str, Any]:
    """A cost table: per group, its outcomes and its total; the table's total; the unpriced producers."""
    return {
        "by_group": {group: {"by_outcome": {outcome: priced_record(p, table.noun) for outcome, p in outcomes.items()},
                             "total": priced_record(table.group_total(group), table.noun)}
                     for group, outcomes in table.groups.items()},
        "total": priced_record(table.total, table.noun),
        "unpriced": list(table.unpriced),
    }


def money(micros: int | None, currency: str | None) -> str:
    if micros is None:
        return "unknown"
    return f"{micros / MICROS:.6f}" + (f" {currency}" if currency else "")


def known_text(priced: Priced, noun: str, has_prices: bool, currency: str | None) -> str:
    """"cost known for 1,180 of 1,279 attempts: 0.412000 USD" (tokens without prices)."""
    if not has_prices:
        return f"tokens known for {priced.tokens.with_usage:,} of {priced.count:,} {noun} (no --prices: cost not stated)"
    if priced.micros is None:
        return f"cost unknown for all {priced.count:,} {noun}"
    if priced.priced == priced.count:
        return f"cost of all {priced.count:,} {noun}: {money(priced.micros, currency)}"
    return f"cost known for {priced.priced:,} of {priced.count:,} {noun}: {money(priced.micros, currency)}"


def tokens_text(tokens: Tokens) -> str:
    cached = f"{tokens.cached_input_tokens:,} cached" + (
        f", {tokens.cached_unknown:,} answers not saying" if tokens.cached_unknown else "")
    return f"{tokens.input_tokens:,} input tokens ({cached}), {tokens.output_tokens:,} output tokens"


def table_line(title: str, table: CostTable, currency: str | None, by: Sequence[str] = ()) -> str:
    """One printed line: a table's total, its tokens and, per outcome (``by``), its money."""
    total = table.total
    if not total.count:
        return f"{title}: no {table.noun}"
    if not total.tokens.with_usage:
        return (f"{title}: {total.count:,} {table.noun}, none with billed usage: "
                + ("cost unknown" if table.has_prices else "tokens unknown"))
    line = f"{title}: {total.count:,} {table.noun}, billed {tokens_text(total.tokens)}; " + known_text(
        total, table.noun, table.has_prices, currency)
    if by and table.has_prices and total.micros is not None:
        outcomes = {outcome: sum((outs[outcome] for outs in table.groups.values() if outcome in outs),
                                 zero(_MARKER)) for outcome in by}
        parts = [f"{outcome} {money(p.micros, None)}" for outcome, p in outcomes.items() if p.count]
        if parts:
            line += " (" + ", ".join(parts) + ")"
    return line


def unpriced_line(unpriced: Iterable[str], prices_file: str | None) -> str | None:
    """The one line naming the producers the prices file has no price for; None when there is none."""
    names = sorted(set(unpriced))
    if not names:
        return None
    return (f"--prices {prices_file} has no price for {', '.join(names)}: their cost is unknown, not zero (add them "
            "to the file to price them)")
