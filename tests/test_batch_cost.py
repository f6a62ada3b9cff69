"""What a batch costs (contract §6.4; issue 41 items 2 and 3): export-batch's estimate before sending,
by one documented rule and, with the operator's ``--prices``, in money; the import's billed
tokens beside that estimate for the same requests.

The domain first (the rule on fixed text, the prices file, the estimate block), then the loop on
the fixture archive: run, export for openai-chat, openai-responses and anthropic (one priced, one
not), answer every line with usage of its own in each provider's shape, import.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fake_provider as fake
from domain import counters as c
from domain.batch.estimate import RULE, estimate_block, estimate_summary, estimated_input_tokens, unpriced_line
from domain.batch.prices import ModelPrice, PricesError, PriceTable, parse_prices, token_cost, usage_cost
from domain.batch.prompts import ModelPrompt
from domain.usage import Usage
from fixture_archive import write_archive
from pipelines import batch_import
from test_batch_round_trip import MODEL, extra_failing_candidates, run_job

DOCS = Path(__file__).resolve().parent.parent / "docs"
PRICE = {"input_per_million": 0.4, "cached_input_per_million": 0.1, "output_per_million": 1.6, "batch_discount": 0.5}


# --- the rule --------------------------------------------------------------------------------

def test_the_rule_on_fixed_text():
    """ceil(UTF-8 bytes of system + user parts + schema as sent / 4): the curly apostrophe is 3 bytes."""
    system, excerpt, schema = "# Spells\n", "Vex\u2019ahlia", {"type": "object"}  # 9, 11 and 17 bytes
    assert estimated_input_tokens(ModelPrompt(system, excerpt, "fixx"), schema) == 11  # 41 bytes
    assert estimated_input_tokens(ModelPrompt(system, excerpt, ""), schema) == 10  # 37 bytes: a refresh has no feedback
    assert estimated_input_tokens(ModelPrompt("", "abcd", ""), {}) == 2  # 6 bytes ("{}" is 2)
    assert "UTF-8 bytes" in RULE and "/ 4" in RULE


# --- prices ------------------------------------------------------------------------------------

def documented_example() -> bytes:
    """The example prices file of docs/batch.md (invented numbers, marked so)."""
    text = (DOCS / "batch.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- example prices file -->\n```json\n(.*?)```", text, re.S)
    assert block, "docs/batch.md shows an example prices file"
    return block.group(1).encode()


def test_the_documented_example_file_parses_and_says_it_is_an_example():
    table = parse_prices(documented_example())
    assert "example" in (orjson.loads(documented_example()).get("note") or "").lower()
    assert table.price("openai-chat", "gpt-4.1-mini") is not None
    assert table.price("openai-chat", "a-model-it-does-not-name") is None


def prices_file(**models) -> bytes:
    return orjson.dumps({"currency": "USD", "models": models or {"openai-chat/m": PRICE}})


MALFORMED_PRICES = [
    (b"not json", "not valid JSON"),
    (b"\xff\xfe", "not UTF-8 text"),
    (b"[]", "a JSON array, expected an object"),
    (b'{"models": {}, "models": {}}', "key 'models' is given twice"),
    (b'{"model": {}}', "unknown key 'model'"),
    (b'{"currency": 5, "models": {}}', "currency 5 is not text"),
    (b'{"models": []}', "models (a JSON array) is not an object"),
    (prices_file(**{"gpt-4.1-mini": PRICE}), "models key 'gpt-4.1-mini' is not \"provider/model\""),
    (prices_file(**{"openai-chat/m": {**PRICE, "input_per_milion": 1}}), "unknown key 'input_per_milion'"),
    (prices_file(**{"openai-chat/m": {k: v for k, v in PRICE.items() if k != "batch_discount"}}),
     "models['openai-chat/m'].batch_discount is missing"),
    (prices_file(**{"openai-chat/m": {**PRICE, "output_per_million": -1}}), "output_per_million -1 is not a number from 0"),
    (prices_file(**{"openai-chat/m": {**PRICE, "output_per_million": "1.6"}}), "output_per_million '1.6' is not a number"),
    (prices_file(**{"openai-chat/m": {**PRICE, "input_per_million": True}}), "input_per_million True is not a number"),
    (prices_file(**{"openai-chat/m": {**PRICE, "batch_discount": 50}}), "batch_discount 50 is more than 1"),
    (b'{"models": {"openai-chat/m": {"input_per_million": NaN}}}', "NaN is not a price"),
    (b'{"models": {"openai-chat/m": {"input_per_million": 1e999, "cached_input_per_million": 0, '
     b'"output_per_million": 0, "batch_discount": 0}}}', "input_per_million inf is not a number from 0"),
    (b"[" * 50_000, "nested too deeply"),
]


@pytest.mark.parametrize("data, reason", MALFORMED_PRICES)
def test_a_malformed_prices_file_is_refused_naming_the_place(data, reason):
    with pytest.raises(PricesError) as refused:
        parse_prices(data)
    assert reason in str(refused.value) and "\n" not in str(refused.value)


def test_pricing_takes_cached_tokens_at_their_price_and_the_batch_discount_off():
    price = ModelPrice(2.0, 0.5, 8.0, 0.5)
    # 1M uncached at 2, 1M cached at 0.5, 0.5M output at 8: 2 + 0.5 + 4 = 6.5; half of it in a batch.
    assert math.isclose(token_cost(price, input_tokens=2_000_000, output_tokens=500_000, cached_input_tokens=1_000_000,
                                   batch=False), 6.5)
    assert math.isclose(token_cost(price, input_tokens=2_000_000, output_tokens=500_000, cached_input_tokens=1_000_000),
                        3.25)
    usage = Usage(input_tokens=2_000_000, output_tokens=500_000, cached_input_tokens=1_000_000, batch=True)
    assert math.isclose(usage_cost(price, usage), 3.25)
    unsaid = Usage(input_tokens=2_000_000, output_tokens=0, cached_input_tokens=None, batch=False)
    assert math.isclose(usage_cost(price, unsaid), 4.0)  # cached unknown: priced as uncached input
    assert usage_cost(None, usage) is None and usage_cost(price, None) is None  # unknown, never zero


# --- the estimate block ----------------------------------------------------------------------------

def estimate_counts(cells) -> dict[str, int]:
    counts = {}
    for (kind, family), (requests, tokens) in cells.items():
        counts[c.estimate(kind, family, c.ESTIMATE_REQUESTS)] = requests
        counts[c.estimate(kind, family, c.ESTIMATE_INPUT_TOKENS)] = tokens
    return counts


def test_the_estimate_states_tokens_per_kind_and_family_and_money_with_the_discount():
    counts = estimate_counts({("retry", "spells"): (3, 30_000), ("refresh", "spells"): (1, 12_000),
                              ("judge", "combat-turns"): (2, 9_000)})
    table = parse_prices(prices_file())
    block = estimate_block(counts, provider="openai-chat", model="m", max_output_tokens=1000, prices=table,
                           prices_file="prices.json")
    assert block["estimated"] is True and block["unpriced"] == []
    retry = block["by_kind"]["retry"]["spells"]
    assert (retry["requests"], retry["input_tokens"], retry["output_tokens_at_most"]) == (3, 30_000, 3000)
    # 30,000 input at 0.4/M = 0.012, 3,000 output at 1.6/M = 0.0048; half of each in a batch.
    assert retry["cost"] == {"input": 0.006, "output_at_most": 0.0024, "total_at_most": 0.0084}
    assert block["total"]["requests"] == 6 and block["total"]["input_tokens"] == 51_000
    assert block["total"]["output_tokens_at_most"] == 6000
    assert block["prices"]["price"]["batch_discount"] == 0.5 and block["prices"]["currency"] == "USD"
    line = estimate_summary(block)
    assert "6 requests (3 retry, 1 refresh, 2 judge)" in line and "51,000 input tokens" in line
    # 51,000 input at 0.4/M = 0.0204 and 6,000 output at 1.6/M = 0.0096, each halved.
    assert "cost 0.010200 USD input + at most 0.004800 USD output = at most 0.015000 USD" in line
    assert "batch discount 50% taken off" in line


def test_a_model_missing_from_the_prices_is_named_and_its_cost_unknown_never_zero():
    counts = estimate_counts({("retry", "spells"): (3, 30_000)})
    block = estimate_block(counts, provider="anthropic", model="claude-x", max_output_tokens=1000,
                           prices=parse_prices(prices_file()), prices_file="prices.json")
    assert block["unpriced"] == ["anthropic/claude-x"]
    assert block["total"]["cost"] is None and block["by_kind"]["retry"]["spells"]["cost"] is None
    assert unpriced_line(block) == ("--prices prices.json has no price for anthropic/claude-x: its cost is unknown "
                                    "(add the model to the file to price it)")
    assert "cost unknown (anthropic/claude-x has no price in prices.json)" in estimate_summary(block)
    without = estimate_block(counts, provider="anthropic", model="claude-x", max_output_tokens=1000, prices=None,
                             prices_file=None)
    assert without["unpriced"] == [] and without["total"]["cost"] is None and unpriced_line(without) is None
    assert estimate_summary(without).endswith("cost not stated (no --prices)")


cells = st.dictionaries(st.tuples(st.sampled_from(["retry", "refresh", "judge"]),
                                  st.sampled_from(["spells", "combat-turns", "npc-registry", "npc-reconciliation"])),
                        st.tuples(st.integers(1, 10_000), st.integers(0, 10**9)), max_size=12)
prices = st.builds(lambda *v: ModelPrice(*v), *[st.floats(0, 100, allow_nan=False)] * 3, st.floats(0, 1))


@settings(max_examples=200, deadline=None)
@given(cells, prices, st.integers(1, 2**31 - 1))
def test_the_cells_add_up_to_the_total(found, price, max_output):
    """Per kind and family, requests, tokens and money sum to the total (money to its rounding)."""
    block = estimate_block(estimate_counts(found), provider="openai-chat", model="m", max_output_tokens=max_output,
                           prices=PriceTable((("openai-chat/m", price),)), prices_file="p.json")
    listed = [cell for families in block["by_kind"].values() for cell in families.values()]
    assert len(listed) == len(found)
    for name in ("requests", "input_tokens", "output_tokens_at_most"):
        assert sum(cell[name] for cell in listed) == block["total"][name]
    for name in ("input", "output_at_most", "total_at_most"):
        total = block["total"]["cost"][name]
        assert math.isclose(sum(cell["cost"][name] for cell in listed), total, rel_tol=1e-9,
                            abs_tol=1e-6 * (len(listed) + 1))


# --- the loop: export with prices, answers with usage, import ---------------------------------------

EXPORTED = ("openai-chat", "openai-responses", "anthropic")


def export_batch(provider: str, retry_glob: str, transcripts: str, out: Path, *extra: str):
    """(exit code, stdout, stderr) of export-batch in a process of its own."""
    cmd = [sys.executable, "-m", "pipelines.cli", "export-batch", "--retry-requests", retry_glob,
           "--transcripts", transcripts, "--provider", provider, "--model", MODEL[provider], "--output", str(out),
           *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    root = tmp_path_factory.mktemp("cost")
    archive = root / "archive"
    write_archive(archive)
    (archive / "candidates-8-extra.jsonl").write_bytes(
        b"".join(orjson.dumps(cand) + b"\n" for cand in extra_failing_candidates()))
    run_job(archive, root / "run1")
    prices = root / "prices.json"  # openai-chat and openai-responses priced; anthropic not
    prices.write_bytes(orjson.dumps({"currency": "USD", "models": {
        "openai-chat/gpt-4.1-mini": PRICE, "openai-responses/gpt-4.1-mini": {**PRICE, "batch_discount": 0.25}}}))
    exports = {}
    for provider in EXPORTED:
        out = root / f"export-{provider}"
        exports[provider] = (out, *export_batch(provider, str(root / "run1" / "retry_requests" / "part-*"),
                                                 str(archive / "transcripts-*"), out, "--prices", str(prices)))
    return {"root": root, "archive": archive, "prices": prices, "exports": exports}


def index_rows(folder: Path) -> list[dict]:
    return [orjson.loads(line) for path in sorted(folder.glob("requests-*.index.jsonl"))
            for line in path.read_bytes().splitlines()]


def texts_of(provider: str, line: dict) -> tuple[str, list[str], dict]:
    """(system prompt, user parts, response schema) of an exported request line."""
    if provider == "openai-chat":
        body = line["body"]
        return (body["messages"][0]["content"], [p["text"] for p in body["messages"][1]["content"]],
                body["response_format"]["json_schema"]["schema"])
    if provider == "openai-responses":
        body = line["body"]
        return body["instructions"], [p["text"] for p in body["input"][0]["content"]], body["text"]["format"]["schema"]
    params = line["params"]
    return params["system"], [p["text"] for p in params["messages"][0]["content"]], params["output_config"]["format"]["schema"]


@pytest.mark.parametrize("provider", EXPORTED)
def test_each_index_row_carries_the_rule_applied_to_its_line(loop, provider):
    folder, code, _, stderr = loop["exports"][provider]
    assert code == 0, stderr[-2000:]
    lines = [orjson.loads(raw) for path in sorted(folder.glob("requests-*[0-9].jsonl"))
             for raw in path.read_bytes().splitlines()]
    rows = index_rows(folder)
    assert len(rows) == len(lines) > 5
    for line, row in zip(lines, rows):
        system, parts, schema = texts_of(provider, line)
        size = len(system.encode()) + sum(len(p.encode()) for p in parts) + len(orjson.dumps(schema))
        assert row["estimated_input_tokens"] == math.ceil(size / 4), row["request_id"]


@pytest.mark.parametrize("provider", EXPORTED)
def test_the_export_manifest_states_the_estimate_and_money_where_priced(loop, provider):
    folder, code, stdout, stderr = loop["exports"][provider]
    assert code == 0, stderr[-2000:]
    estimate = orjson.loads((folder / "export_manifest.json").read_bytes())["estimate"]
    rows = index_rows(folder)
    total = estimate["total"]
    assert total["requests"] == len(rows) and total["input_tokens"] == sum(r["estimated_input_tokens"] for r in rows)
    assert total["output_tokens_at_most"] == len(rows) * 8192  # the default --max-output-tokens
    for kind, families in estimate["by_kind"].items():
        for family, cell in families.items():
            mine = [r for r in rows if (r["kind"], r["family"]) == (kind, family)]
            assert (cell["requests"], cell["input_tokens"]) == (len(mine), sum(r["estimated_input_tokens"] for r in mine))
    [summary_line] = [line for line in stdout.splitlines() if line.startswith("estimate: ")]
    assert f"{total['input_tokens']:,} input tokens" in summary_line
    if provider == "anthropic":
        assert estimate["unpriced"] == ["anthropic/claude-sonnet-4-5"] and total["cost"] is None
        assert all(cell["cost"] is None for families in estimate["by_kind"].values() for cell in families.values())
        [named] = [line for line in stderr.splitlines() if "no price" in line]
        assert "anthropic/claude-sonnet-4-5" in named and "unknown" in named
        assert "cost unknown" in summary_line
    else:
        discount = 0.5 if provider == "openai-chat" else 0.25
        assert estimate["unpriced"] == [] and "no price" not in stderr
        expected_input = total["input_tokens"] * 0.4 / 1e6 * (1 - discount)
        expected_output = total["output_tokens_at_most"] * 1.6 / 1e6 * (1 - discount)
        assert math.isclose(total["cost"]["input"], expected_input, abs_tol=1e-6)
        assert math.isclose(total["cost"]["output_at_most"], expected_output, abs_tol=1e-6)
        assert f"{total['cost']['total_at_most']:.6f} USD" in summary_line


def test_a_malformed_prices_file_stops_the_export_in_one_line_with_nothing_written(loop, tmp_path):
    bad = tmp_path / "prices.json"
    bad.write_bytes(prices_file(**{"openai-chat/gpt-4.1-mini": {**PRICE, "batch_discount": 2}}))
    out = tmp_path / "export"
    code, stdout, stderr = export_batch("openai-chat", str(loop["root"] / "run1" / "retry_requests" / "part-*"),
                                        str(loop["archive"] / "transcripts-*"), out, "--prices", str(bad))
    assert code == 1 and stdout == ""
    assert stderr.strip().count("\n") == 0 and "batch_discount 2 is more than 1" in stderr and "Traceback" not in stderr
    assert not out.exists()


def with_billed_usage(provider: str, line: dict, n: int) -> dict:
    """``line`` with usage numbers of its own (``n``: the line's position), in the provider's shape."""
    prompt, cached, output = 1000 + 37 * n, 3 * n, 200 + 11 * n
    if provider == "openai-chat" and line.get("response") and line["response"]["status_code"] == 200:
        line["response"]["body"]["usage"] = {"prompt_tokens": prompt, "completion_tokens": output,
                                             "total_tokens": prompt + output,
                                             "prompt_tokens_details": {"cached_tokens": cached}}
    elif provider == "openai-responses" and line.get("response") and line["response"]["status_code"] == 200:
        line["response"]["body"]["usage"] = {"input_tokens": prompt, "output_tokens": output,
                                             "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
                                             "output_tokens_details": {"reasoning_tokens": 0},
                                             "total_tokens": prompt + output}
    elif provider == "anthropic" and line["result"]["type"] == "succeeded":
        line["result"]["message"]["usage"] = {"input_tokens": prompt - cached, "output_tokens": output,
                                              "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}
    else:
        return line
    line["_billed"] = {"input_tokens": prompt, "output_tokens": output, "cached_input_tokens": cached, "batch": True}
    return line


@pytest.fixture(scope="module")
def imports(loop):
    done = {}
    for provider in EXPORTED:
        folder = loop["exports"][provider][0]
        rows = index_rows(folder)
        fates = {r["request_id"]: fake.ANSWER for r in rows}
        fates[rows[0]["request_id"]] = fake.FAIL  # an errored request bills nothing and imports nothing
        results = fake.play(provider, sorted(folder.glob("requests-*[0-9].jsonl")), loop["root"] / f"results-{provider}",
                            fates, {}, model=MODEL[provider])
        billed = {}
        for path in results:  # every line its own usage; the numbers the provider billed, kept aside
            lines = [orjson.loads(raw) for raw in path.read_bytes().splitlines()]
            written = []
            for n, line in enumerate(lines, start=1):
                line = with_billed_usage(provider, line, n + 100 * len(billed))
                rid = line.get("custom_id")
                if "_billed" in line:
                    billed[rid] = line.pop("_billed")
                written.append(orjson.dumps(line))
            path.write_bytes(b"".join(raw + b"\n" for raw in written))
        out = loop["root"] / f"import-{provider}"
        assert batch_import.main(["--provider", provider, "--results", *map(str, results), "--requests",
                                  str(folder / "requests-*"), "--output", str(out)]) == 0
        done[provider] = (out, orjson.loads((out / batch_import.MANIFEST).read_bytes()), billed, rows)
    return done


@pytest.mark.parametrize("provider", EXPORTED)
def test_every_imported_candidate_carries_exactly_the_billed_numbers(imports, provider):
    out, manifest, billed, rows = imports[provider]
    ledger = {row["candidate_id"]: row["request_id"]
              for row in map(orjson.loads, (out / batch_import.LEDGER).read_bytes().splitlines()) if row["candidate_id"]}
    candidates = [orjson.loads(line) for line in (out / batch_import.CANDIDATES).read_bytes().splitlines()]
    assert len(candidates) == len(rows) - 1 == len(billed)
    for candidate in candidates:
        assert candidate["usage"] == billed[ledger[candidate["candidate_id"]]]
    assert len({orjson.dumps(u) for u in billed.values()}) == len(billed)  # distinct per line


@pytest.mark.parametrize("provider", EXPORTED)
def test_the_import_manifest_totals_the_billed_tokens_beside_the_estimate(imports, provider):
    _, manifest, billed, rows = imports[provider]
    usage = manifest["usage"]
    estimate = {r["request_id"]: r["estimated_input_tokens"] for r in rows}
    total = usage["total"]
    assert total["answers"] == total["with_usage"] == len(billed)
    for name in ("input_tokens", "cached_input_tokens", "output_tokens"):
        assert total[name] == sum(u[name] for u in billed.values()), name
    for kind, families in usage["by_kind"].items():
        for family, cell in families.items():
            mine = [r["request_id"] for r in rows if (r["kind"], r["family"]) == (kind, family) and r["request_id"] in billed]
            assert cell["input_tokens"] == sum(billed[rid]["input_tokens"] for rid in mine)
            assert cell["estimate"]["estimated_input_tokens"] == sum(estimate[rid] for rid in mine)
    estimated = sum(estimate[rid] for rid in billed)
    assert usage["calibration"] == {"provider": provider, "answers": len(billed),
                                    "billed_input_tokens": total["input_tokens"], "estimated_input_tokens": estimated,
                                    "billed_per_estimated": round(total["input_tokens"] / estimated, 4)}
