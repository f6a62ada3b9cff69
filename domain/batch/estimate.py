"""What a batch is expected to cost before it is sent (contract §6.4): export-batch's ``estimate``.

Input tokens are estimated, not counted: no tokenizer for any target works offline here (tiktoken
downloads its encodings on first use; Anthropic and Google count tokens through their APIs). One
rule for every provider::

    estimated input tokens = ceil(UTF-8 bytes of (system prompt + every user message part
                                                  + the response schema as sent) / 4)

Four is the rule of thumb the providers give for English text (about four characters a token).
Bytes rather than characters, so text outside ASCII (a curly apostrophe, an accented name),
which tokenizers split finer, weighs more. The response schema is counted because structured
output adds it to the prompt. The request's envelope (JSON keys, the model name) and each
provider's per-message overhead are not counted. It is a rule, not a count: import-batch puts
the billed input tokens of the same requests beside it (``usage.calibration``: billed per
estimated, per provider), so an operator learns how far off it is for their target.

Output tokens cannot be known before the model writes them: ``--max-output-tokens`` per request
is an upper bound.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import orjson

from domain import counters as c
from domain.batch.prices import PriceTable, estimate_cost, price_key
from domain.batch.prompts import ModelPrompt
from domain.revision import REQUEST_KINDS

BYTES_PER_TOKEN = 4
RULE = ("input tokens = ceil(UTF-8 bytes of the system prompt, the user message parts and the response schema as "
        f"sent / {BYTES_PER_TOKEN})")
OUTPUT_RULE = "output tokens: at most --max-output-tokens per request (an upper bound)"


def estimated_input_tokens(prompt: ModelPrompt, schema: Mapping[str, Any]) -> int:
    """The rule above for one request line."""
    size = (len(prompt.system.encode("utf-8")) + sum(len(part.encode("utf-8")) for part in prompt.user_parts)
            + len(orjson.dumps(schema)))
    return -(-size // BYTES_PER_TOKEN)


def estimate_counts(index: Mapping[str, Any]) -> dict[str, int]:
    """The counter keys one written line adds (its export index row)."""
    kind, family = index["kind"], index["family"]
    return {c.estimate(kind, family, c.ESTIMATE_REQUESTS): 1,
            c.estimate(kind, family, c.ESTIMATE_INPUT_TOKENS): index["estimated_input_tokens"]}


def estimate_block(counts: Mapping[str, int], *, provider: str, model: str, max_output_tokens: int,
                   prices: PriceTable | None, prices_file: str | None) -> dict[str, Any]:
    """The export manifest's ``estimate``: per request kind and family and in total, requests, the
    estimated input tokens, the output tokens at most and, with prices, money (batch discount taken
    off). A model the prices file does not name is listed in ``unpriced``: its cost is null."""
    price = prices.price(provider, model) if prices is not None else None
    key = price_key(provider, model)

    def cell(requests: int, input_tokens: int) -> dict[str, Any]:
        output_at_most = requests * max_output_tokens
        return {"requests": requests, "input_tokens": input_tokens, "output_tokens_at_most": output_at_most,
                "cost": estimate_cost(price, input_tokens=input_tokens, output_tokens_at_most=output_at_most)}

    found = c.estimates(counts)
    by_kind = {kind: {family: cell(m[c.ESTIMATE_REQUESTS], m[c.ESTIMATE_INPUT_TOKENS])
                      for family, m in sorted(found.get(kind, {}).items())} for kind in REQUEST_KINDS}
    cells = [m for families in found.values() for m in families.values()]
    return {
        "estimated": True,
        "rule": RULE,
        "output_rule": OUTPUT_RULE,
        "max_output_tokens": max_output_tokens,
        "by_kind": by_kind,
        "total": cell(sum(m[c.ESTIMATE_REQUESTS] for m in cells), sum(m[c.ESTIMATE_INPUT_TOKENS] for m in cells)),
        "prices": {
            "file": prices_file, "key": key, "currency": prices.currency if prices is not None else None,
            "price": dataclasses.asdict(price) if price is not None else None,
        },
        # Named, never priced at zero: the models --prices has no price for.
        "unpriced": [key] if prices is not None and price is None else [],
    }


def unpriced_line(block: Mapping[str, Any]) -> str | None:
    """The one line naming a model the prices file has no price for; None when there is none."""
    if not block["unpriced"]:
        return None
    return (f"--prices {block['prices']['file']} has no price for {', '.join(block['unpriced'])}: its cost is "
            "unknown (add the model to the file to price it)")


def estimate_summary(block: Mapping[str, Any]) -> str:
    """The summary's one line about the estimate."""
    total = block["total"]
    kinds = ", ".join(f"{sum(cell['requests'] for cell in families.values())} {kind}"
                      for kind, families in block["by_kind"].items() if families)
    line = (f"estimate: {total['requests']} requests ({kinds or 'none'}), about {total['input_tokens']:,} input "
            f"tokens (estimated: UTF-8 bytes / {BYTES_PER_TOKEN}), at most {total['output_tokens_at_most']:,} output "
            f"tokens ({block['max_output_tokens']:,} per request)")
    prices = block["prices"]
    if prices["file"] is None:
        return line + "; cost not stated (no --prices)"
    if total["cost"] is None:
        return line + f"; cost unknown ({prices['key']} has no price in {prices['file']})"
    cost, currency = total["cost"], f" {prices['currency']}" if prices["currency"] else ""
    return (line + f"; cost {cost['input']:.6f}{currency} input + at most {cost['output_at_most']:.6f}{currency} "
            f"output = at most {cost['total_at_most']:.6f}{currency} (batch discount "
            f"{prices['price']['batch_discount'] * 100:g}% taken off)")
