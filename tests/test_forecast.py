"""A plan's forecast cost (`tilth plan cost`, `tilth start`, `status --json`): from the receipts of
earlier real sessions in the same TILTH_HOME (against the local Chat Completions server, priced by
genai-prices), one line when there is too little history, and a range that holds the true cost of
the next run of a plan of the same shape."""

from __future__ import annotations

import json
import re

import pytest

from conftest import task
from fake_openai import ACCEPT, call, reply
from test_spend_caps import calls, start

MODEL = "gpt-4o-mini"  # $0.15 / $0.60 per million input / output tokens
PLAN = [task("T-1", "Parse the config"), task("T-2", "Add a --config flag")]


def run(sandbox, fake, model_env, session: str, prompt_tokens: int, cap: str | None = None):
    """A session of PLAN whose worker calls use `prompt_tokens` each (the task's cost scales with it)."""
    for tid in ("T-1", "T-2"):
        case = call("submit_case", summary="done", criteria=[{"criterion": f"{tid} is done", "evidence": "a.txt"}])
        fake.enqueue(MODEL, reply(tool_calls=[call("write_file", path=f"{tid}.txt", content="x\n"), case],
                                  usage={"prompt_tokens": prompt_tokens, "completion_tokens": 2_000,
                                         "total_tokens": prompt_tokens + 2_000}))
        fake.enqueue("evaluator", reply(tool_calls=[ACCEPT], usage={"prompt_tokens": 1_000, "completion_tokens": 100,
                                                                    "total_tokens": 1_100}))
    env = {**model_env, "TILTH_WORKER_MODEL": MODEL, "TILTH_EVALUATOR_MODEL": "evaluator", "TILTH_FINAL_REVIEW": "false",
           **({"TILTH_MAX_SPEND_USD": cap} if cap else {})}
    config = sandbox.home / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[prices.evaluator]\nprompt = 1\ncompletion = 1\n')
    return start(sandbox, env, session, PLAN)


def forecast_of(text: str) -> tuple[float, float, float]:
    low, high, median = re.search(r"forecast: \$([0-9.]+)–\$([0-9.]+) \(median \$([0-9.]+)\)", text).groups()
    return float(low), float(median), float(high)


@pytest.mark.slow
def test_the_forecast_says_when_history_is_too_short_then_holds_the_next_runs_cost(sandbox, fake, model_env):
    prd = sandbox.write_json("prd.json", PLAN)
    env = {**model_env, "TILTH_WORKER_MODEL": MODEL, "TILTH_EVALUATOR_MODEL": "evaluator"}
    nothing = sandbox.tilth("plan", "cost", str(prd), env=env)
    assert nothing.returncode == 0 and nothing.stdout.splitlines() == [
        f"forecast: too little history to forecast this plan (0 finished tasks with worker openai {MODEL}, "
        "evaluator openai evaluator in this TILTH_HOME; 5 needed)"], nothing.stdout

    for n, tokens in enumerate((100_000, 140_000, 120_000)):  # $0.0162-$0.0222 a task
        assert run(sandbox, fake, model_env, f"h{n}", tokens).returncode == 0
    shown = sandbox.tilth("plan", "cost", str(prd), env=env).stdout
    low, median, high = forecast_of(shown)
    assert f"for 2 tasks with worker openai {MODEL}, evaluator openai evaluator, from 6 past tasks in 3 sessions" in shown

    # the next run of the same shape costs what the range says
    again = run(sandbox, fake, model_env, "next", 130_000)
    assert again.returncode == 0, again.stdout + again.stderr
    true = sum(c["cost_usd"] for c in calls(sandbox, "next"))
    assert low <= true <= high, (low, true, high)
    assert f"forecast: ${low:.2f}–${high:.2f} (median ${median:.2f})" in again.stdout, again.stdout

    # start says the forecast, and that a cap below its low end will most likely stop the plan; status keeps it
    low, median, high = forecast_of(sandbox.tilth("plan", "cost", str(prd), env=env).stdout)
    capped = run(sandbox, fake, model_env, "capped", 130_000, cap="0.01")
    assert f"forecast: ${low:.2f}–${high:.2f} (median ${median:.2f}) for 2 tasks" in capped.stdout, capped.stdout
    assert f"the spend cap $0.01 is below the forecast's low end ${low:.2f}" in capped.stderr, capped.stderr
    summary = json.loads(sandbox.tilth("status", "capped", "--json").stdout)
    assert summary["forecast"]["median_usd"] == pytest.approx(median, abs=0.005), summary["forecast"]
    assert summary["forecast"]["tasks"] == 2 and summary["forecast"]["receipts"] == 8
