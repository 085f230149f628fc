"""Model-call accounting does not trust the provider's usage report: real `tilth` sessions
against the local fake Chat Completions server (tests/fake_openai.py), plus the usage model
and the event reader over bad inputs."""

from __future__ import annotations

import json
import math

import pytest

from conftest import task
from fake_openai import call, reply
from tilth.agents.accounting import Meter, Usage
from tilth.store.home import session_paths
from tilth.views.endreport import build_report



CASE = call("submit_case", summary="Wrote hello.py.", criteria=[{"criterion": "T-1 is done", "evidence": "hello.py"}])
WRITE = call("write_file", path="hello.py", content="print(1)\n")


def verdict(decision: str = "accept") -> tuple[str, str]:
    return call("submit_verdict", verdict=decision, category="none" if decision == "accept" else "acceptance_gap",
                concern="" if decision == "accept" else "missing piece", evidence=["hello.py"],
                next_step="" if decision == "accept" else "add the piece")


def prices(sandbox, **per_model: tuple[float, float]) -> None:
    """USD per million (prompt, completion) tokens in config.toml."""
    sandbox.home.mkdir(parents=True, exist_ok=True)
    (sandbox.home / "config.toml").write_text("".join(
        f'[prices.{model}]\nprompt = {p}\ncompletion = {c}\n' for model, (p, c) in per_model.items()))


def start(sandbox, env):
    prd = sandbox.write_json("prd.json", [task("T-1", "Say hello")])
    return sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1", "--foreground",
                         env=env)


def model_calls(sandbox) -> list[dict]:
    return [e["data"] for e in sandbox.events("s1") if e["type"] == "model_call"]


# --- through real sessions --------------------------------------------------------------

@pytest.mark.slow
def test_negative_prompt_tokens_cannot_lower_spend_below_the_cap(sandbox, fake, model_env):
    # $0.01 a token. The first worker call claims -1000 prompt tokens: taken at face value that is
    # -$9.50 and the session would run on to done; its valid 50 completion tokens alone are $0.50.
    prices(sandbox, worker=(10_000, 10_000), evaluator=(10_000, 10_000))
    fake.enqueue("worker", reply(tool_calls=[CASE], usage={"prompt_tokens": -1000, "completion_tokens": 50,
                                                            "total_tokens": -950}),
                 reply(tool_calls=[CASE]), reply(content="NONE"))
    fake.enqueue("evaluator", reply(tool_calls=[verdict("reject")]), reply(tool_calls=[verdict()]))
    result = start(sandbox, {**model_env, "TILTH_MAX_SPEND_USD": "0.6"})

    assert result.returncode == 3 and "max_spend_usd" in result.stdout, result.stdout + result.stderr
    # spend is checked after every call: the evaluator's call crossed the cap, so the attempt stopped there
    assert not (sandbox.home / "sessions/s1/ledger/T-1.jsonl").exists() and sandbox.commits("s1") == []
    first, evaluator = model_calls(sandbox)
    assert first["usage_known"] is False and first["cost_source"] == "unknown"
    assert "prompt_tokens=-1000 is negative" in first["usage_problem"]
    assert first["prompt_tokens"] is None and first["completion_tokens"] == 50
    assert first["cost_usd"] == pytest.approx(0.50)
    assert evaluator["usage_known"] is True and evaluator["usage_problem"] is None
    assert evaluator["cost_usd"] == pytest.approx(0.15) and evaluator["cost_source"] == "price_table"
    cap = next(e["data"] for e in sandbox.events("s1") if e["type"] == "cap_reached")
    assert cap["value"] == pytest.approx(0.65)

    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert summary["cost_usd"] == pytest.approx(0.65) and summary["cost_is_lower_bound"] is True
    assert summary["tokens"] == 65 and summary["unknown_usage_calls"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("stream", ["false", "true"])
def test_non_numeric_token_counts_with_a_price_do_not_crash_the_session(sandbox, fake, model_env, stream):
    prices(sandbox, worker=(10_000, 20_000), evaluator=(10_000, 20_000))
    # (the SDK itself turns a digit string such as "12" into 12, so the string here is not one)
    fake.enqueue("worker", reply(tool_calls=[WRITE], usage={"prompt_tokens": "twelve", "completion_tokens": 5,
                                                             "total_tokens": 17}),
                 reply(tool_calls=[CASE]), reply(content="NONE"))
    fake.enqueue("evaluator", reply(tool_calls=[verdict()], usage={"prompt_tokens": 10,
                                                                    "completion_tokens": {"n": 5}}))
    result = start(sandbox, {**model_env, "TILTH_STREAM": stream})

    assert result.returncode == 0, result.stdout + result.stderr
    assert sandbox.statuses("s1") == {"T-1": "done"} and len(sandbox.commits("s1")) == 1
    calls = model_calls(sandbox)
    worker = calls[0]
    evaluator = next(c for c in calls if c["role"] == "evaluator")
    assert worker["usage_known"] is False and worker["usage_problem"] == "prompt_tokens='twelve' is not a number"
    assert worker["cost_source"] == "unknown" and worker["total_tokens"] == 17
    # the floor: 5 completion tokens at $0.02, the other 12 of the total at the cheaper $0.01
    assert worker["cost_usd"] == pytest.approx(0.22)
    assert evaluator["usage_known"] is False
    assert evaluator["usage_problem"] == "completion_tokens={'n': 5} is not a number"
    assert evaluator["completion_tokens"] is None and evaluator["cost_usd"] == pytest.approx(0.10)


@pytest.mark.slow
@pytest.mark.parametrize("stream", ["false", "true"])
def test_null_usage_is_unknown_and_marked_in_status_and_the_report(sandbox, fake, model_env, stream):
    fake.enqueue("worker", reply(tool_calls=[WRITE], null_usage=True), reply(tool_calls=[CASE], cost=0.01),
                 reply(content="NONE", cost=0.0))
    fake.enqueue("evaluator", reply(tool_calls=[verdict()], cost=0.0023))
    result = start(sandbox, {**model_env, "TILTH_STREAM": stream})
    assert result.returncode == 0, result.stdout + result.stderr

    first = model_calls(sandbox)[0]
    assert first["usage_known"] is False and first["usage_problem"] == "usage missing"
    assert first["total_tokens"] is None and first["cost_source"] == "unknown" and first["cost_usd"] == 0

    report = (sandbox.session_dir("s1") / "report.md").read_text()
    assert "Tokens:     45+ (1 call with unknown usage)\n" in report
    assert "Cost:       ≥ $0.0123\n" in report
    rebuilt = build_report(session_paths("s1", sandbox.home))
    assert "45+ (1 call with unknown usage)" in rebuilt and "≥ $0.0123" in rebuilt

    one = sandbox.tilth("status", "s1").stdout
    assert "45+ tokens (1 call with unknown usage), ≥ $0.0123" in one
    table = sandbox.tilth("status").stdout
    row = next(line for line in table.splitlines() if line.startswith("s1 "))
    assert "45+" in row.split() and "≥ $0.01" in row
    assert "+ / ≥: 1 model call with unknown usage; those totals are lower bounds" in table


@pytest.mark.slow
@pytest.mark.parametrize("bad_cost", [-5.0, float("nan"), float("-inf"), "0.25"])
def test_a_bad_provider_cost_does_not_lower_spend(sandbox, fake, model_env, bad_cost):
    # The worker's own report of its cost is unusable, so its price-table cost ($0.20) counts;
    # with the evaluator's $0.40 the cap trips after the first iteration.
    prices(sandbox, worker=(10_000, 20_000), evaluator=(0, 0))
    fake.enqueue("worker", reply(tool_calls=[CASE], cost=bad_cost), reply(tool_calls=[CASE], cost=0.01),
                 reply(content="NONE", cost=0.0))
    fake.enqueue("evaluator", reply(tool_calls=[verdict("reject")], cost=0.4), reply(tool_calls=[verdict()], cost=0.01))
    result = start(sandbox, {**model_env, "TILTH_MAX_SPEND_USD": "0.5"})

    assert result.returncode == 3 and "max_spend_usd" in result.stdout, result.stdout + result.stderr
    worker = model_calls(sandbox)[0]
    assert worker["cost_source"] == "price_table" and worker["cost_usd"] == pytest.approx(0.20)
    assert worker["usage_known"] is True and worker["usage_problem"].startswith("cost=")
    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert summary["cost_usd"] == pytest.approx(0.60) and summary["cost_is_lower_bound"] is False


# --- the usage model and the event reader -----------------------------------------------

@pytest.mark.parametrize("raw, counts, tokens, problem", [
    ({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}, (10, 5, 15), 15, None),
    ({"prompt_tokens": 10.0, "completion_tokens": 5}, (10, 5, 15), 15, None),
    (None, (None, None, None), 0, "usage missing"),
    ("junk", (None, None, None), 0, "usage='junk' is not an object"),
    ({"total_tokens": 40}, (None, None, 40), 40, "prompt_tokens missing; completion_tokens missing"),
    ({"prompt_tokens": -5, "completion_tokens": 7, "total_tokens": 2}, (None, 7, 2), 7,
     "prompt_tokens=-5 is negative"),
    ({"prompt_tokens": True, "completion_tokens": 2.5, "total_tokens": float("nan")}, (None, None, None), 0,
     "prompt_tokens=True is not a number; completion_tokens=2.5 is not a whole number; total_tokens=nan is not finite"),
    ({"prompt_tokens": [1], "completion_tokens": None, "total_tokens": "9"}, (None, None, None), 0,
     "prompt_tokens=[1] is not a number; completion_tokens missing; total_tokens='9' is not a number"),
], ids=["valid", "integral-float-derived-total", "null", "not-an-object", "total-only", "negative",
        "bool-fraction-nan", "list-missing-string"])
def test_the_usage_model_drops_what_it_cannot_trust(raw, counts, tokens, problem):
    usage = Usage.model_validate(raw)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == counts
    assert usage.tokens == tokens and usage.problem == problem
    assert usage.known is (counts[0] is not None and counts[1] is not None)


def test_the_usage_model_names_an_inconsistent_total_and_a_bad_cost_but_keeps_the_counts():
    usage = Usage.model_validate({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 3,
                                  "cost": -0.5})
    assert usage.known and usage.total_tokens == 15 and usage.tokens == 15 and usage.cost is None
    assert usage.problem == "total_tokens=3 is less than prompt+completion=15; cost=-0.5 is negative"
    assert Usage.model_validate({"prompt_tokens": 1, "completion_tokens": 2, "cost": 0.5}).cost == 0.5
    assert math.isclose(Usage.model_validate({"prompt_tokens": 1, "completion_tokens": 2, "cost": 1}).cost, 1.0)


def test_the_meter_reads_old_null_and_damaged_events_without_lowering_spend():
    def event(**data):
        return {"type": "model_call", "task": "T-1", "data": {"role": "evaluator", **data}}

    meter = Meter.from_events([
        event(prompt_tokens=10, completion_tokens=5, total_tokens=15, cost_usd=0.25, cost_source="provider"),
        event(prompt_tokens=None, completion_tokens=None, total_tokens=None, cost_usd=0.0, cost_source="unknown",
              usage_known=False, usage_problem="usage missing"),
        event(prompt_tokens=-1000, completion_tokens=50, total_tokens=-950, cost_usd=-9.5,
              cost_source="price_table"),
        event(prompt_tokens=3, completion_tokens=2, total_tokens=5, cost_usd=float("nan"), cost_source="provider"),
        event(prompt_tokens=3, completion_tokens=2, total_tokens=5, cost_usd=0.0, cost_source="unknown"),
        {"type": "model_call", "task": None, "data": None},
    ])
    assert meter.model_calls == 6 and meter.tokens == 15 + 50 + 5 + 5
    assert meter.cost_usd == pytest.approx(0.25)
    assert meter.unknown_usage_calls == 3 and meter.unknown_cost_calls == 3 and meter.cost_is_lower_bound
    assert meter.unpriced_calls == 2 and meter.evaluator_calls["T-1"] == 5
