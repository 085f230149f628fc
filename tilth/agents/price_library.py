"""genai-prices' rates for models, looked up in a child process (`python -m tilth.agents.price_library`).

The library's bundled price table is a 1.6 MB Python module: imported, it holds ~7 MiB for the
life of the process that asked, for the one or two rows a session needs. So the runner asks a
short-lived child, which reads `[[model, provider_url], ...]` as JSON on stdin and writes one
`[prompt, completion, cached_prompt, cache_write]` (USD per million tokens) or `null` per model.
"""

from __future__ import annotations

import sys

import orjson

MILLION = 1_000_000

UNIT_USAGE = {
    "prompt": {"input_tokens": MILLION},
    "completion": {"output_tokens": MILLION},
    "cached_prompt": {"input_tokens": MILLION, "cache_read_tokens": MILLION},
    "cache_write": {"input_tokens": MILLION, "cache_write_tokens": MILLION},
}
"""A million tokens of each kind, priced once per model (tiered prices: the first tier's rate)."""


def rates_here(model: str, base_url: str | None = None) -> list[float] | None:
    """The model's four rates in this process (the provider found from the endpoint URL when the
    library knows it, else from the model name; an `org/model` name also as `model` at `org`)."""
    if not model:
        return None
    import genai_prices

    attempts: list[dict] = []
    if base_url:
        attempts.append({"provider_api_url": base_url})
    attempts.append({})
    if "/" in model:
        org, _, name = model.partition("/")
        attempts.append({"provider_id": org, "model": name})
    for attempt in attempts:
        ref = attempt.pop("model", model)
        try:
            return [float(genai_prices.calc_price(genai_prices.Usage(**usage), ref, **attempt).total_price)
                    for usage in UNIT_USAGE.values()]
        except (LookupError, ValueError):
            continue
    return None


def main() -> None:
    asked = orjson.loads(sys.stdin.buffer.read())
    sys.stdout.buffer.write(orjson.dumps([rates_here(model, url) for model, url in asked]))


if __name__ == "__main__":
    main()
