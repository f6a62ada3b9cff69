"""What a run cost (contract §6.4, issue 41 item 4): billed usage on the run's rows, priced at the operator's
prices in the report and compare; per-family sums add up to the totals; attempts without usage are counted,
never priced; an unpriced model is named, its cost unknown, never zero.

The hand-made archive of ``test_retry_economy`` (decided by the real per-source entry point), its
candidates given distinct billed usage; the demo's end to end is in ``test_demo``."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.compare import RUNS
from analysis.cost import (Cell, Tokens, attempt_cells, comparison_cost, comparison_counts, cost_table,
                           refresh_round_cells, saved_retry_cells, table_record, verdict_cells)
from domain import counters
from domain.batch.prices import ModelPrice, PriceTable, parse_prices
from domain.manifest import build_manifest
from domain.reprocess import RunConfig, process_source
from domain.run_integrity import verify_run
from pipelines import report
from pipelines.compare import cost_summary_lines
from pipelines.pages.cost import comparison_cost_section
from pipelines.options import OptionsError
from pipelines.run_cost import Target, cost_lines, run_cost
from test_report import write_job
from test_retry_economy import MAX_ATTEMPTS, PLAN, hand_run, transcript_record

PRICES = {"currency": "USD", "note": "test prices",
          "models": {"hand/hand-1": {"input_per_million": 1.0, "cached_input_per_million": 0.25,
                                     "output_per_million": 4.0, "batch_discount": 0.5},
                     "openai-chat/gpt-x": {"input_per_million": 2.0, "cached_input_per_million": 0.5,
                                           "output_per_million": 8.0, "batch_discount": 0.5}}}
UNPRICED = ("elsewhere", "model-z")  # a producer the prices file does not name


def billed(n: int, candidate_id: str) -> tuple[dict, dict | None]:
    """The n-th candidate's producer and usage: distinct numbers; every fifth without usage, every seventh by an
    OpenAI import (priced through openai-chat's key), the candidate at 4 by a model the prices do not name."""
    producer = {"provider": "hand", "model": "hand-1"}
    if n % 7 == 3:
        producer = {"provider": "openai", "model": "gpt-x"}
    if n == 4:
        producer = {"provider": UNPRICED[0], "model": UNPRICED[1]}
    if n % 5 == 2:
        return producer, None
    return producer, {"input_tokens": 1000 + 37 * n, "output_tokens": 100 + 11 * n,
                      "cached_input_tokens": None if n % 4 == 1 else 10 * n, "batch": n % 2 == 0}


def billed_lines() -> list[bytes]:
    lines = []
    for n, planned in enumerate(PLAN):
        record = orjson.loads(planned.line())
        record["producer"], usage = billed(n, planned.candidate_id)
        if usage is not None:
            record["usage"] = usage
        lines.append(orjson.dumps(record))
    return lines


@pytest.fixture(scope="module")
def billed_run():
    """The hand run with billed usage on its candidates (``HandRun``, evaluations from those lines)."""
    run = hand_run()
    lines = billed_lines()
    evaluations, counts = [], {}
    for source_id in ("S1", "S2"):
        mine = [line for line, p in zip(lines, PLAN) if p.source_id == source_id]
        result = process_source(source_id, [orjson.dumps(transcript_record(source_id))], mine,
                                RunConfig(max_attempts=MAX_ATTEMPTS))
        evaluations += result.evaluations
        for key, value in result.counts.items():
            counts[key] = counts.get(key, 0) + value
    assert counts == {key: value for key, value in run.counts.items() if not key.endswith("_in")}, \
        "usage decides nothing: the counts are the run's without it"
    return dataclasses.replace(run, evaluations=tuple(evaluations))


def prices_table() -> PriceTable:
    return parse_prices(orjson.dumps(PRICES))


def micros(price: dict, usage: dict) -> float:
    cached = usage["cached_input_tokens"] or 0
    full = ((usage["input_tokens"] - cached) * price["input_per_million"] + cached * price["cached_input_per_million"]
            + usage["output_tokens"] * price["output_per_million"])
    return full * (1 - price["batch_discount"]) if usage["batch"] else full


# --- the rows ---------------------------------------------------------------------------------------

def test_each_evaluation_row_carries_its_attempts_producer_and_usage(billed_run):
    by_id = {p.candidate_id: billed(n, p.candidate_id) for n, p in enumerate(PLAN)}
    assert len(billed_run.evaluations) == len(PLAN)
    for row in billed_run.evaluations:
        producer, usage = by_id[row["candidate_id"]]
        assert (row["producer"], row["usage"]) == (producer, usage)


def test_the_attempts_cost_is_each_priced_attempt_and_counts_the_others(billed_run):
    table = cost_table("attempts", attempt_cells(billed_run.evaluations), prices_table())
    total = table.total
    usages = [billed(n, p.candidate_id) for n, p in enumerate(PLAN)]
    priced = [(producer, usage) for producer, usage in usages if usage is not None and producer["provider"] != UNPRICED[0]]
    key = {"hand": "hand/hand-1", "openai": "openai-chat/gpt-x"}
    expected = sum(micros(PRICES["models"][key[producer["provider"]]], usage) for producer, usage in priced)
    assert total.count == len(PLAN) and total.tokens.with_usage == sum(u is not None for _, u in usages)
    assert total.priced == len(priced) < total.tokens.with_usage < total.count
    assert abs(total.micros - expected) <= len(PLAN)  # each cell rounded to a millionth of the currency
    assert total.tokens.input_tokens == sum(u["input_tokens"] for _, u in usages if u)
    assert total.tokens.cached_unknown == sum(u["cached_input_tokens"] is None for _, u in usages if u)
    assert table.unpriced == ("elsewhere/model-z",)


def test_without_prices_tokens_are_shown_and_no_money(billed_run):
    table = cost_table("attempts", attempt_cells(billed_run.evaluations), None)
    assert table.total.micros is None and table.total.priced is None and table.total.tokens.with_usage > 0
    record = table_record(table)
    assert record["total"]["cost"] is None and record["unpriced"] == []


def test_rows_of_runs_made_before_usage_count_as_attempts_without_it(billed_run):
    older = [{k: v for k, v in row.items() if k not in ("producer", "usage")} for row in billed_run.evaluations]
    total = cost_table("attempts", attempt_cells(older), prices_table()).total
    assert (total.count, total.tokens.with_usage, total.priced, total.micros) == (len(PLAN), 0, 0, None)


ROWS = st.lists(st.fixed_dictionaries({
    "family": st.sampled_from(["spells", "npc-registry", "scene-descriptions"]),
    "verdict": st.sampled_from(["accepted", "superseded", "rejected", "deferred"]),
    "producer": st.sampled_from([{"provider": "hand", "model": "hand-1"}, {"provider": "openai", "model": "gpt-x"},
                                 {"provider": "elsewhere", "model": "model-z"}]),
    "usage": st.none() | st.builds(lambda i, o, c, b: {"input_tokens": i, "output_tokens": o,
                                                       "cached_input_tokens": None if c is None else min(c, i),
                                                       "batch": b},
                                   st.integers(0, 10**9), st.integers(0, 10**7), st.none() | st.integers(0, 10**9),
                                   st.booleans()),
}), max_size=40)


@settings(max_examples=150, deadline=None)
@given(rows=ROWS, with_prices=st.booleans())
def test_per_family_sums_add_up_to_the_total(rows, with_prices):
    prices = prices_table() if with_prices else None
    table = cost_table("attempts", attempt_cells(rows), prices)
    families = [table.group_total(group) for group in table.groups]
    total = table.total
    assert total.count == len(rows) == sum(f.count for f in families)
    for name in ("with_usage", "input_tokens", "cached_input_tokens", "cached_unknown", "output_tokens"):
        assert getattr(total.tokens, name) == sum(getattr(f.tokens, name) for f in families)
    for group, outcomes in table.groups.items():
        assert table.group_total(group).count == sum(p.count for p in outcomes.values())
        assert (table.group_total(group).micros or 0) == sum(p.micros or 0 for p in outcomes.values())
    if prices is None:
        assert total.micros is None and all(f.micros is None for f in families)
        return
    assert (total.micros or 0) == sum(f.micros or 0 for f in families)
    assert total.priced == sum(1 for r in rows if r["usage"] is not None and r["producer"]["provider"] != "elsewhere")
    # Unknown, never zero: no money when nothing of some attempts could be priced.
    assert (total.micros is None) == (bool(rows) and total.priced == 0)
    assert table.unpriced == (("elsewhere/model-z",) if any(
        r["usage"] is not None and r["producer"]["provider"] == "elsewhere" for r in rows) else ())
    record = table_record(table)
    assert sum(g["total"]["attempts"] for g in record["by_group"].values()) == record["total"]["attempts"]


def test_an_openai_import_is_priced_by_its_target_and_a_conflict_is_unknown():
    price = ModelPrice(1.0, 0.5, 2.0, 0.5)
    other = ModelPrice(9.0, 0.5, 2.0, 0.5)
    assert PriceTable((("openai-chat/m", price),)).producer_price("openai", "m") == price
    assert PriceTable((("openai-chat/m", price), ("openai-responses/m", price))).producer_price("openai", "m") == price
    assert PriceTable((("openai-chat/m", price), ("openai-responses/m", other))).producer_price("openai", "m") is None
    assert PriceTable((("openai/m", other), ("openai-chat/m", price))).producer_price("openai", "m") == other
    assert PriceTable((("anthropic/m", price),)).producer_price("anthropic", "m") == price
    assert PriceTable((("openai-chat/m", price),)).producer_price("anthropic", "m") is None


# --- saved retries, the refresh round, the judges -----------------------------------------------------

def test_each_saved_retry_is_priced_at_its_slots_accepted_attempt(billed_run):
    cells = saved_retry_cells(lambda: billed_run.evaluations)
    recorded = build_manifest(billed_run.counts, options={}, runner="hand")["endpoint_ordering"]["retries_saved"]
    assert {family: outcomes["saved"].count for family, outcomes in cells.items()} == {
        family: n for family, n in recorded["by_family"].items() if n}
    accepted = {(r["source_id"], r["chunk_id"], r["family"]): r for r in billed_run.evaluations
                if r["verdict"] == "accepted"}
    saved = [accepted[("S1", "x-1", "spells")], accepted[("S1", "x-2", "npc-registry")],
             accepted[("S2", "x-1", "npc-registry")]]
    tokens = sum((c["saved"].tokens for c in cells.values()), Tokens())
    assert tokens.input_tokens == sum(r["usage"]["input_tokens"] for r in saved if r["usage"])
    assert tokens.with_usage == sum(r["usage"] is not None for r in saved)


def test_the_refresh_round_is_bs_answers_to_as_refresh_requests():
    usage = {"input_tokens": 500, "output_tokens": 50, "cached_input_tokens": 0, "batch": True}
    producer = {"provider": "openai", "model": "gpt-x"}
    requests = [{"kind": "refresh", "family": "spells", "source_id": "S1", "chunk_id": "x-1", "attempt": 2},
                {"kind": "refresh", "family": "spells", "source_id": "S1", "chunk_id": "x-2", "attempt": 3},
                {"kind": "retry", "family": "spells", "source_id": "S2", "chunk_id": "x-1", "attempt": 2}]
    rows = [{"family": "spells", "source_id": "S1", "chunk_id": "x-1", "attempt": 1, "verdict": "superseded",
             "producer": producer, "usage": usage},
            {"family": "spells", "source_id": "S1", "chunk_id": "x-1", "attempt": 2, "verdict": "accepted",
             "producer": producer, "usage": usage},
            {"family": "spells", "source_id": "S2", "chunk_id": "x-1", "attempt": 2, "verdict": "accepted",
             "producer": producer, "usage": usage}]
    cells, unanswered = refresh_round_cells(requests, rows)
    assert {family: {o: c.count for o, c in outcomes.items()} for family, outcomes in cells.items()} == {
        "spells": {"accepted": 1}}
    assert unanswered == {"spells": 1}
    priced = cost_table("attempts", cells, prices_table()).total
    assert priced.micros == round(micros(PRICES["models"]["openai-chat/gpt-x"], usage))


def test_the_judges_verdicts_are_counted_with_their_usage_and_verify_checks_the_block():
    counts = {counters.judge("spell-cast", "pass"): 3, counters.judge("spell-cast", "unmatched"): 1}
    for measure, value in (("with_usage", 2), ("input_tokens", 800), ("cached_input_tokens", 100),
                           ("cached_unknown", 0), ("output_tokens", 40)):
        counts[counters.verdict_usage("spell-cast", "openai", "gpt-x", True, measure)] = value
    manifest = build_manifest(counts, options={"judges": ["spell-cast"]}, runner="hand")
    block = manifest["verdict_usage"]["spell-cast"]
    assert (block["with_usage"], block["input_tokens"], len(block["by_producer"])) == (2, 800, 1)
    cells = verdict_cells(manifest)
    assert cells["spell-cast"]["verdicts"] == Cell(4, {("openai", "gpt-x", True): Tokens(2, 800, 100, 0, 40)})
    assert not [p for p in verify_run({**manifest, "files": {}}, {}, []).problems if "verdict_usage" in p]
    forged = orjson.loads(orjson.dumps(manifest))
    forged["verdict_usage"]["spell-cast"]["input_tokens"] = 801
    forged["verdict_usage"]["spell-cast"]["with_usage"] = 5
    forged["verdict_usage"]["spell-cast"]["by_producer"][0]["with_usage"] = 5
    problems = [p for p in verify_run({**forged, "files": {}}, {}, []).problems if "verdict_usage" in p]
    assert any("verdict_usage.spell-cast.input_tokens 801" in p for p in problems)
    assert any("with_usage 5 > its 4 verdict records" in p for p in problems)


def test_the_job_counts_a_verdicts_usage_whatever_becomes_of_it():
    from domain.intake import parse_candidate
    from domain.rows import raw_response_sha256

    planned = next(p for p in PLAN if p.family == "spells")
    candidate = parse_candidate(planned.line())
    verdict = {"verdict_id": "v-1", "request_id": "j-1", "judge": "spell-cast", "judge_fingerprint": "sha256:x",
               "candidate_id": candidate.candidate_id, "candidate_sha256": raw_response_sha256(candidate.raw_response),
               "producer": {"provider": "openai", "model": "gpt-x"}, "raw_response": "{}",
               "received_at": "2026-10-02T09:00:00Z",
               "usage": {"input_tokens": 700, "output_tokens": 30, "cached_input_tokens": None, "batch": True}}
    unbilled = {**verdict, "verdict_id": "v-2", "usage": None}
    other_judge = {**verdict, "verdict_id": "v-3", "judge": "npc-identity"}
    result = process_source("S1", [orjson.dumps(transcript_record("S1"))], [planned.line()],
                            RunConfig(max_attempts=MAX_ATTEMPTS, judges=frozenset({"spell-cast"})),
                            verdict_lines=[orjson.dumps(v) for v in (verdict, unbilled, other_judge)])
    usage = counters.verdict_usages(result.counts)
    assert usage == {"spell-cast": {("openai", "gpt-x", True): {"with_usage": 1, "input_tokens": 700,
                                                                 "cached_input_tokens": 0, "cached_unknown": 1,
                                                                 "output_tokens": 30}}}


# --- the report and compare, over run folders --------------------------------------------------------

@pytest.fixture(scope="module")
def billed_job(billed_run, tmp_path_factory):
    root = tmp_path_factory.mktemp("cost")
    job, _ = write_job(billed_run, root)
    prices = root / "prices.json"
    prices.write_bytes(orjson.dumps(PRICES))
    return job, prices


def test_the_report_prints_and_shows_what_the_run_cost(billed_job, capsys):
    job, prices = billed_job
    assert report.main(["--output", str(job), "--prices", str(prices), "--model", "gpt-x"]) == 0
    captured = capsys.readouterr()
    attempts = next(line for line in captured.out.splitlines() if line.startswith("cost of the run's attempts"))
    with_usage = sum(billed(n, p.candidate_id)[1] is not None for n, p in enumerate(PLAN))
    assert f"{len(PLAN)} attempts" in attempts and f"cost known for {with_usage - 1} of {len(PLAN)} attempts" in attempts
    assert "USD" in attempts and "accepted " in attempts
    requests = next(line for line in captured.out.splitlines() if line.startswith("open requests"))
    assert "openai-chat/gpt-x" in requests and "2 requests (2 retry)" in requests and "at most" in requests
    assert "the retries endpoint canonicalization saved would have cost: 3 slots" in captured.out
    # The model the prices file lacks: named once, on stderr, its cost unknown, not zero.
    assert captured.err.count("has no price for elsewhere/model-z") == 1 and "not zero" in captured.err
    html = (job / "report.html").read_text(encoding="utf-8")
    assert '<section id="cost">' in html and "elsewhere/model-z" in html and "openai-chat/gpt-x" in html


def test_the_report_without_prices_shows_tokens_and_states_no_cost(billed_job, capsys):
    job, _ = billed_job
    assert report.main(["--output", str(job), "--html", str(job.parent / "plain.html")]) == 0
    out = capsys.readouterr().out
    assert "tokens known for" in out and "no --prices: cost not stated" in out
    assert "openai-chat (no --model)" in out and "USD" not in out


def test_a_prices_file_that_is_not_one_ends_the_report_in_one_line(billed_job, tmp_path):
    job, _ = billed_job
    bad = tmp_path / "prices.json"
    bad.write_text('{"models": {"hand/hand-1": {"input_per_million": -1}}}')
    with pytest.raises(OptionsError) as refused:
        report.main(["--output", str(job), "--prices", str(bad), "--html", str(tmp_path / "r.html")])
    line = refused.value.line("another command")  # what the report says: named for it
    assert line.startswith("python -m pipelines.report: --prices ") and "\n" not in line
    assert not (tmp_path / "r.html").exists()


def test_the_open_requests_are_estimated_by_export_batchs_code(billed_job):
    from domain.batch.estimate import estimate_counts
    from domain.batch.export import ExportConfig, export_source
    from domain.batch.providers import PROVIDERS, RequestSettings

    job, prices = billed_job
    manifest = orjson.loads((job / "manifest.json").read_bytes())
    cost = run_cost(str(job), manifest, prices_table(), str(prices), Target("anthropic", "claude-x", 1000))
    config = ExportConfig("anthropic", RequestSettings("claude-x", 1000), PROVIDERS["anthropic"].max_bytes)
    expected = 0
    for source_id in ("S1", "S2"):
        lines = [orjson.dumps(r) for r in hand_run().requests if r["source_id"] == source_id]
        rows, _, _ = export_source(source_id, [orjson.dumps(transcript_record(source_id))], lines, config)
        expected += sum(estimate_counts(row["index"])[counters.estimate(row["index"]["kind"], row["index"]["family"],
                                                                        "input_tokens")] for row in rows)
    block = cost.requests
    assert block["total"]["input_tokens"] == expected > 0 and block["total"]["output_tokens_at_most"] == 2000
    assert block["unpriced"] == ["anthropic/claude-x"] and block["total"]["cost"] is None
    assert "anthropic/claude-x" in cost.unpriced
    assert any("cost unknown" in line for line in cost_lines(cost) if line.startswith("open requests"))


def test_compare_sets_bs_attempts_beside_as_and_prices_the_refresh_round(billed_run, billed_job):
    _, prices = billed_job
    counts = comparison_counts({"a": billed_run.evaluations[:5], "b": billed_run.evaluations}, billed_run.requests)
    cost = comparison_cost(counts, RUNS, prices_table(), str(prices))
    a, b = cost["attempts"]["a"]["total"], cost["attempts"]["b"]["total"]
    assert (a["attempts"], b["attempts"]) == (5, len(PLAN)) and b["cost"] > a["cost"] > 0
    assert sum(g["total"]["attempts"] for g in cost["attempts"]["b"]["by_group"].values()) == b["attempts"]
    assert cost["refresh_round"]["total"]["attempts"] == 0 and cost["unpriced"] == ["elsewhere/model-z"]
    document = {"cost": cost}
    lines = cost_summary_lines(document)
    assert lines[0].startswith("cost of the attempts: A ") and "USD" in lines[0]
    html = comparison_cost_section(document)
    assert '<section id="cost">' in html and "elsewhere/model-z" in html


def test_compares_cost_counted_per_source_and_summed_is_the_whole_runs_cost(billed_run):
    """compare counts the cost beside each source's comparison and sums the counts (pipelines.compare): the
    same block as each run's attempts tallied whole and B's answers to A's refresh requests looked up over
    the whole runs, with sources whose refresh requests B answered, did not answer, or answered twice."""
    usage = {"input_tokens": 500, "output_tokens": 50, "cached_input_tokens": None, "batch": True}
    producer = {"provider": "openai-chat", "model": "gpt-x"}
    refreshes = [{"kind": "refresh", "family": "spells", "source_id": source, "chunk_id": chunk, "attempt": 2}
                 for source in ("S1", "S2") for chunk in ("r-1", "r-2")]
    answers = [{"family": "spells", "source_id": source, "chunk_id": "r-1", "attempt": 2, "verdict": verdict,
                "producer": producer, "usage": usage if verdict != "rejected" else None}
               for source, verdict in (("S1", "accepted"), ("S2", "rejected"), ("S2", "accepted"))]
    evaluations = {"a": billed_run.evaluations[:7], "b": [*billed_run.evaluations, *answers]}
    requests_a = [*billed_run.requests, *refreshes]
    sources = sorted({row["source_id"] for rows in (*evaluations.values(), requests_a) for row in rows})
    assert len(sources) > 1
    summed: dict = {}
    for source in sources:
        part = comparison_counts({run: [r for r in rows if r["source_id"] == source] for run, rows in evaluations.items()},
                                 [r for r in requests_a if r["source_id"] == source])
        for key, n in part.items():
            summed[key] = summed.get(key, 0) + n
    assert summed == comparison_counts(evaluations, requests_a)
    prices = prices_table()
    cost = comparison_cost(dict(sorted(summed.items(), reverse=True)), RUNS, prices, "prices.json")
    cells, unanswered = refresh_round_cells(requests_a, evaluations["b"])
    assert unanswered == {"spells": 2} and cost["refresh_round"]["total"]["attempts"] == 3
    assert cost["attempts"] == {run: table_record(cost_table("attempts", attempt_cells(rows), prices))
                                for run, rows in evaluations.items()}
    assert {k: v for k, v in cost["refresh_round"].items() if not k.startswith("unanswered")} == table_record(
        cost_table("attempts", cells, prices))
    assert cost["refresh_round"]["unanswered"] == unanswered and cost["refresh_round"]["unanswered_total"] == 2
