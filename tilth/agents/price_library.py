"""genai-prices' price sheets for models, looked up in a child process (`python -I <this file>`: it imports
nothing of tilth).

The library's bundled price table is a 1.6 MB Python module: imported, it holds ~7 MiB for the
life of the process that asked, for the one or two rows a session needs. So the runner asks a
short-lived child once per session, which reads `[[model, provider_url], ...]` as JSON on stdin and
writes one sheet (`sheet_here`) or `null` per model; each call is then priced in the runner from
the sheet (`pricing.Rates`), tiers and time-of-day prices included, as `genai_prices.calc_price`
would price it.

A sheet is the library's own data model, resolved for today:

    {"provider": "anthropic", "model": "claude-sonnet-4-5",
     "prices": [{"window": ["00:30:00", "16:30:00"] | null,      # UTC time of day it applies, or always
                 "rates": [prompt, completion, cached_prompt, cache_write, per_call],
                 "tiers": [[start, [prompt, completion, cached_prompt, cache_write, per_call]], ...]}, ...]}

Rates are USD per million tokens (`per_call`: USD per request). The first price whose window holds
the call's time applies (the library tries its conditional prices last to first; an undated price
ends the list). A tier's rates apply to every token of a call whose prompt tokens exceed its
start (the library's "cliff" model, cached and cache-write tokens counted in the prompt). A kind
the library does not price separately (cached reads, cache writes) is charged at the prompt rate
of the same tier, as the library charges it.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from genai_prices.types import TieredPrices

MILLION = 1_000_000

KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")
"""The library's price keys for the four kinds of token a Chat Completions call reports, in `Rates` order."""


def sheet_here(model: str, base_url: str | None = None) -> dict[str, Any] | None:
    """The model's sheet in this process (the provider found from the endpoint URL when the
    library knows it, else from the model name; an `org/model` name also as `model` at `org`)."""
    if not model:
        return None
    import genai_prices

    attempts: list[dict[str, Any]] = []
    if base_url:
        attempts.append({"provider_api_url": base_url})
    attempts.append({})
    if "/" in model:
        org, _, name = model.partition("/")
        attempts.append({"provider_id": org, "model": name})
    for attempt in attempts:
        ref = attempt.pop("model", model)
        try:
            found = genai_prices.calc_price(genai_prices.Usage(input_tokens=1, output_tokens=1), ref, **attempt)
        except (LookupError, ValueError):
            continue
        return {"provider": found.provider.id, "model": found.model.id, "prices": _prices(found.model.prices)}
    return None


def _prices(prices: Any) -> list[dict[str, Any]]:
    from genai_prices.types import ModelPrice, StartDateConstraint, TimeOfDateConstraint

    if isinstance(prices, ModelPrice):
        return [_entry(prices, None)]
    today = datetime.now(tz=UTC)
    found: list[dict[str, Any]] = []
    for conditional in reversed(prices):  # the library's order: the last that applies wins
        constraint = conditional.constraint
        if isinstance(constraint, TimeOfDateConstraint):
            window = [_utc(constraint.start_time), _utc(constraint.end_time)]
            found.append(_entry(conditional.prices, window))
        elif constraint is None or (isinstance(constraint, StartDateConstraint) and constraint.active(today)):
            found.append(_entry(conditional.prices, None))
            return found
    found.append(_entry(prices[0].prices, None))  # none applies: the library takes the first
    return found


def _utc(moment: Any) -> str:
    from genai_prices.types import _utc_timetz  # the library's own normalisation of a time of day

    return _utc_timetz(moment).replace(tzinfo=None).isoformat()


def _entry(price: Any, window: list[str] | None) -> dict[str, Any]:
    from genai_prices.types import TieredPrices

    values = [getattr(price, key) for key in KEYS]
    per_call = (price.requests_kcount or Decimal(0)) / 1000
    starts = sorted({tier.start for value in values if isinstance(value, TieredPrices) for tier in value.tiers})
    return {"window": window, "rates": _rates(values, per_call, -1),
            "tiers": [[start, _rates(values, per_call, start)] for start in starts]}


def _rates(values: list[Decimal | TieredPrices | None], per_call: Decimal, above: int) -> list[float]:
    """The four rates (and the per-call price) in force for a call of more than `above` prompt tokens."""
    from genai_prices.types import TieredPrices

    def at(value: Decimal | TieredPrices | None) -> Decimal | None:
        if not isinstance(value, TieredPrices):
            return value
        return next((tier.price for tier in reversed(value.tiers) if above >= tier.start), value.base)

    prompt, completion, cached, written = (at(value) for value in values)
    prompt = prompt or Decimal(0)
    return [float(prompt), float(completion or 0), float(prompt if cached is None else cached),
            float(prompt if written is None else written), float(per_call)]


def main() -> None:
    asked = orjson.loads(sys.stdin.buffer.read())
    sys.stdout.buffer.write(orjson.dumps([sheet_here(model, url) for model, url in asked]))


if __name__ == "__main__":
    main()
