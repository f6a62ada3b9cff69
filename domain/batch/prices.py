"""Prices are the operator's (contract §6.4): a ``--prices FILE`` read by export-batch, the report and
compare, never a number built into the code.

The file (JSON)::

    {"currency": "USD", "note": "...",
     "models": {"openai-chat/gpt-4.1-mini": {"input_per_million": 0.4, "cached_input_per_million": 0.1,
                                             "output_per_million": 1.6, "batch_discount": 0.5}}}

A model is keyed ``<provider>/<model>``: the export's provider name (``openai-chat``,
``openai-responses``, ``anthropic``, ``gemini``, ``vertex``) and the model as ``--model`` spells
it. Prices are per million tokens, before the batch discount; ``batch_discount`` is the fraction
taken off every price when the tokens went through a batch API (0.5: half price). ``currency``
and ``note`` are optional text. Anything else, a key twice, a price that is not a number from 0,
a discount outside 0..1: the file is refused with one line naming the place.

A model missing from the file has no price: its cost is unknown (None), never zero. Pure, and
free of Beam.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from domain.errors import NotariusError
from domain.records import shown_value
from domain.usage import Usage

PRICE_FIELDS = ("input_per_million", "cached_input_per_million", "output_per_million", "batch_discount")
_TOP_LEVEL = ("currency", "note", "models")
_MILLION = 1_000_000


class PricesError(NotariusError, ValueError):
    """A prices file that is not one; the message names the first problem."""


@dataclass(frozen=True, slots=True)
class ModelPrice:
    input_per_million: float
    cached_input_per_million: float
    output_per_million: float
    batch_discount: float  # a fraction of every price, taken off for batch traffic


@dataclass(frozen=True, slots=True)
class PriceTable:
    """The operator's prices: ``(key, price)`` pairs sorted by key (a tuple, so the table is a value)."""

    models: tuple[tuple[str, ModelPrice], ...]
    currency: str | None = None

    def price(self, provider: str, model: str) -> ModelPrice | None:
        """The price of ``provider/model``; None when the file has none (cost unknown, never zero)."""
        return dict(self.models).get(price_key(provider, model))

    def producer_price(self, provider: str, model: str) -> ModelPrice | None:
        """The price of an answer by the producer a candidate or verdict names (``producer.provider``,
        ``producer.model``): ``provider/model`` when the file has it. Answers imported from the two
        OpenAI targets name provider ``openai`` (``domain.batch.providers``: a target's ``producer``),
        so without an ``openai/<model>`` key the file's ``openai-chat/<model>`` or
        ``openai-responses/<model>`` price is used: the one given, or both when they are the same.
        None otherwise (cost unknown, never zero)."""
        exact = self.price(provider, model)
        if exact is not None:
            return exact
        found = {price for target in targets_of_producer(provider)
                 if (price := self.price(target, model)) is not None}
        return found.pop() if len(found) == 1 else None


def price_key(provider: str, model: str) -> str:
    return f"{provider}/{model}"


def targets_of_producer(producer: str) -> tuple[str, ...]:
    """The export targets whose imported answers name ``producer`` as their provider, other than a
    target of that very name (``openai`` -> ``openai-chat``, ``openai-responses``)."""
    from domain.batch.providers import PROVIDERS  # on first use: the request shapes are not needed to parse prices

    return tuple(sorted(name for name, target in PROVIDERS.items() if target.producer == producer and name != producer))


def parse_prices(data: bytes) -> PriceTable:
    """A prices file's bytes -> the table. Raises :class:`PricesError` naming the first problem."""
    try:
        document = json.loads(data.decode("utf-8-sig"), object_pairs_hook=_no_repeated_keys,
                              parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise PricesError(f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise PricesError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise PricesError("nested too deeply to be a prices file") from None
    if not isinstance(document, dict):
        kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(document), "number")
        raise PricesError(f"a JSON {kind}, expected an object with \"models\"")
    unknown = sorted(set(document) - set(_TOP_LEVEL))
    if unknown:
        raise PricesError(f"unknown key {unknown[0]!r} (a prices file holds {', '.join(_TOP_LEVEL)})")
    for name in ("currency", "note"):
        value = document.get(name)
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise PricesError(f"{name} {shown_value(value)} is not text")
    models = document.get("models")
    if not isinstance(models, dict):
        raise PricesError(f"models {shown_value(models)} is not an object of \"provider/model\": prices")
    table = []
    for key, fields in sorted(models.items()):
        provider, slash, model = key.partition("/")
        if not (slash and provider.strip() and model.strip()):
            raise PricesError(f"models key {key!r} is not \"provider/model\" (e.g. \"openai-chat/gpt-4.1-mini\")")
        table.append((key, _model_price(key, fields)))
    return PriceTable(tuple(table), document.get("currency"))


def _model_price(key: str, fields: Any) -> ModelPrice:
    where = f"models[{key!r}]"
    if not isinstance(fields, dict):
        raise PricesError(f"{where} {shown_value(fields)} is not an object of {', '.join(PRICE_FIELDS)}")
    unknown = sorted(set(fields) - set(PRICE_FIELDS))
    if unknown:
        raise PricesError(f"{where}: unknown key {unknown[0]!r} (a price holds {', '.join(PRICE_FIELDS)})")
    values = []
    for name in PRICE_FIELDS:
        if name not in fields:
            raise PricesError(f"{where}.{name} is missing")
        value = _number(fields[name])
        if value is None:
            raise PricesError(f"{where}.{name} {shown_value(fields[name])} is not a number from 0")
        values.append(value)
    price = ModelPrice(*values)
    if price.batch_discount > 1:
        raise PricesError(f"{where}.batch_discount {fields['batch_discount']!r} is more than 1 (a fraction: 0.5 is "
                          "half price)")
    return price


def _number(value: Any) -> float | None:
    """A finite number from 0 as a float; None for anything else (booleans, text, 1e400, 10**400)."""
    if type(value) not in (int, float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise PricesError(f"key {key!r} is given twice")
        seen[key] = value
    return seen


def _no_constant(name: str):
    raise PricesError(f"{name} is not a price")


# --- pricing ------------------------------------------------------------------------------------

def token_cost(price: ModelPrice, *, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0,
               batch: bool = True) -> float:
    """What these tokens cost at ``price``: uncached input, cached input and output tokens each at
    their price per million, less the batch discount when they went through a batch API."""
    uncached = input_tokens - cached_input_tokens
    full = (uncached * price.input_per_million + cached_input_tokens * price.cached_input_per_million
            + output_tokens * price.output_per_million) / _MILLION
    return full * (1 - price.batch_discount) if batch else full


def usage_cost(price: ModelPrice | None, usage: Usage | None) -> float | None:
    """What one answer's billed usage cost; None when its price or its usage is unknown. Unknown
    cached input tokens are priced as uncached input (what the provider charges without a cache)."""
    if price is None or usage is None:
        return None
    return token_cost(price, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                      cached_input_tokens=usage.cached_input_tokens or 0, batch=usage.batch)


def estimate_cost(price: ModelPrice | None, *, input_tokens: int, output_tokens_at_most: int,
                  batch: bool = True) -> dict[str, float] | None:
    """The money of an estimate before sending: its input tokens (none assumed cached) and, as an
    upper bound, its output tokens at the limit. None when there is no price (unknown, never zero)."""
    if price is None:
        return None
    input_cost = token_cost(price, input_tokens=input_tokens, output_tokens=0, batch=batch)
    output_cost = token_cost(price, input_tokens=0, output_tokens=output_tokens_at_most, batch=batch)
    return {"input": money(input_cost), "output_at_most": money(output_cost),
            "total_at_most": money(input_cost + output_cost)}


def money(amount: float) -> float:
    """An amount as written to a manifest: rounded to a millionth of the currency unit."""
    return round(amount, 6)
