"""Each call priced at its own usage: the sheet the price-library child hands back, priced in the
runner, agrees with genai-prices' own `calc_price` for every model it knows (tiers, time-of-day
prices, per-request fees), and real sessions against the local Chat Completions server record a
tiered model's calls at the tier their prompt tokens fall in."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from fake_openai import ACCEPT, SUBMIT, call, reply
from test_spend_caps import calls, start
from tilth.agents.price_library import _prices
from tilth.agents.pricing import Sheet, Tokens

USAGES = [(20_000, 12_000, 0, 800), (1_000, 0, 0, 10), (250_000, 10_000, 2_000, 1_000), (130_000, 0, 5_000, 3_000),
          (0, 0, 0, 0), (200_000, 0, 0, 1), (200_001, 0, 0, 1), (1_500_000, 400_000, 0, 20_000)]
TODAY = datetime.now(tz=UTC)
MOMENTS = [TODAY.replace(hour=hour, minute=0) for hour in (3, 12, 20)]
"""A sheet is today's prices (dated ones resolved), at any time of day."""


@pytest.mark.slow
def test_the_sheet_prices_every_library_model_as_the_library_does():
    import genai_prices
    from genai_prices.data_snapshot import get_snapshot

    compared = tiered = timed = 0
    for provider in get_snapshot().providers:
        for model in provider.models:
            sheet = Sheet.from_json({"provider": provider.id, "model": model.id, "prices": _prices(model.prices)})
            timed += len(sheet.prices) > 1
            tiered += any(rates.tiers for _, rates in sheet.prices)
            for moment in MOMENTS:
                for prompt, cached, written, completion in USAGES:
                    usage = genai_prices.Usage(input_tokens=prompt, cache_read_tokens=cached,
                                               cache_write_tokens=written, output_tokens=completion)
                    try:
                        expected = float(model.calc_price(usage, provider, genai_request_timestamp=moment).total_price)
                    except (ValueError, LookupError):
                        continue  # the library cannot price this usage for the model (no token prices)
                    got = sheet.at(moment).cost(Tokens(prompt, completion, cached, written))
                    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12), (provider.id, model.id, moment,
                                                                                  prompt, cached, written, completion)
                    compared += 1
    assert compared > 10_000 and tiered > 10 and timed >= 3, (compared, tiered, timed)


SONNET_SMALL = {"prompt_tokens": 20_000, "completion_tokens": 800, "total_tokens": 20_800,
                "prompt_tokens_details": {"cached_tokens": 12_000}}
SONNET_LARGE = {"prompt_tokens": 250_000, "completion_tokens": 1_000, "total_tokens": 251_000,
                "prompt_tokens_details": {"cached_tokens": 10_000, "cache_write_tokens": 2_000}}
MINI = {"prompt_tokens": 10_000, "completion_tokens": 100, "total_tokens": 10_100,
        "prompt_tokens_details": {"cached_tokens": 4_000}}


@pytest.mark.slow
def test_a_tiered_models_calls_are_priced_at_their_own_tier_and_a_night_under_its_cap_runs(sandbox, fake, model_env):
    # claude-sonnet-4-5 list prices per million: $3 input, $0.30 cached, $3.75 cache write, $15 output up to
    # 200k prompt tokens; $6 / $0.60 / $7.50 / $22.50 for every token of a call above that
    fake.enqueue("claude-sonnet-4-5",
                 reply(tool_calls=[call("write_file", path="a.txt", content="a\n")], usage=SONNET_SMALL),
                 reply(tool_calls=[SUBMIT], usage=SONNET_LARGE))
    fake.enqueue("gpt-4o-mini", reply(tool_calls=[ACCEPT], usage=MINI))
    small = (8_000 * 3 + 12_000 * 0.30 + 800 * 15) / 1e6
    large = (238_000 * 6 + 10_000 * 0.60 + 2_000 * 7.50 + 1_000 * 22.50) / 1e6
    mini = (6_000 * 0.15 + 4_000 * 0.075 + 100 * 0.60) / 1e6
    # priced at the upper tier, the first call alone would be $0.0672 and this cap would stop the night
    cap = round(small + large + mini + 0.01, 4)
    env = {**model_env, "TILTH_WORKER_MODEL": "claude-sonnet-4-5", "TILTH_EVALUATOR_MODEL": "gpt-4o-mini",
           "TILTH_MAX_SPEND_USD": str(cap), "TILTH_FINAL_REVIEW": "false"}
    result = start(sandbox, env)
    assert result.returncode == 0, result.stdout + result.stderr
    first, second, evaluator = calls(sandbox)
    assert small == pytest.approx(0.0396)
    assert first["cost_usd"] == pytest.approx(0.0396, rel=0.01) and first["cost_source"] == "price_table"
    assert second["cost_usd"] == pytest.approx(large) and second["cache_write_tokens"] == 2_000
    assert evaluator["cost_usd"] == pytest.approx(mini)
    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert summary["state"] == "done" and summary["cost_usd"] == pytest.approx(small + large + mini)

    # the rates in force, and where they came from, for each configured model
    sonnet = ("price: model 'claude-sonnet-4-5' (TILTH_WORKER_MODEL): $3 prompt / $0.3 cached / $3.75 cache write / "
              "$15 completion per million tokens; above 200,000 prompt tokens $6 prompt / $0.6 cached / "
              "$7.5 cache write / $22.5 completion per million tokens (genai-prices: anthropic claude-sonnet-4-5)")
    mini = "price: model 'gpt-4o-mini' (TILTH_EVALUATOR_MODEL): $0.15 prompt / $0.075 cached"
    shown = sandbox.tilth("config", env=env).stdout
    assert sonnet in shown and mini in shown, shown
    doctor = sandbox.tilth("doctor", "s1", env={**env, "TILTH_WORKER_MODEL": "x"}).stdout  # the session's models
    assert f"s1  ok              {sonnet}" in doctor and mini in doctor, doctor
