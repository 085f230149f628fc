"""Money and bounds: prices from genai-prices with `[prices]` over them, cached tokens at their rate,
no silent unpriced run under a $ cap, a token cap that needs no price, and spend and token caps
checked after every model call (tilth's own loop) and as a CLI agent streams (the `command` agent's
usage lines, aider's cost lines). Real `tilth` sessions against the local Chat Completions server (tests/fake_openai.py)."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from conftest import git, task
from fake_openai import ACCEPT, SUBMIT, call, reply

PYTHON = os.path.realpath(sys.executable)
REJECT = call("submit_verdict", verdict="reject", category="acceptance_gap", concern="missing piece", evidence=[],
              next_step="add the piece")


def write(path: str) -> tuple[str, str]:
    return call("write_file", path=path, content=f"{path}\n")


def config(sandbox, text: str) -> None:
    sandbox.home.mkdir(parents=True, exist_ok=True)
    (sandbox.home / "config.toml").write_text(text)


def start(sandbox, env: dict[str, str], session: str = "s1", plan: list[dict] | None = None):
    prd = sandbox.write_json(f"{session}.json", plan or [task("T-1", "Say hello")])
    return sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", session, "--foreground",
                         env={"TILTH_SELF_IMPROVEMENT": "false", **env})


def calls(sandbox, session: str = "s1") -> list[dict]:
    return [e["data"] for e in sandbox.events(session) if e["type"] == "model_call"]


@pytest.mark.slow
def test_an_unpriced_model_with_a_spend_cap_is_refused_in_one_line_creating_nothing(sandbox, fake, model_env):
    result = start(sandbox, {**model_env, "TILTH_MAX_SPEND_USD": "0.60"})
    assert result.returncode == 2, result.stdout + result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "model 'worker' (TILTH_WORKER_MODEL) has no price" in line
    assert '[prices."worker"]' in line and "nothing was created" in line
    assert not (sandbox.home / "sessions" / "s1").exists()
    assert "session/s1" not in git(sandbox.repo, "branch", "--list")
    assert fake.requests == [], "refused before any model call"
    shown = sandbox.tilth("config", env={**model_env, "TILTH_MAX_SPEND_USD": "0.60"}).stdout
    assert "price: none for model 'worker' (TILTH_WORKER_MODEL)" in shown and "tilth start refuses it" in shown

    # without a cap it runs, and start says once that this model's spend is unknown
    fake.enqueue("worker", reply(tool_calls=[write("a.txt"), SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    result = start(sandbox, model_env, "s2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.count("spend is unknown for model 'worker'") == 1
    assert result.stderr.count("spend is unknown for model 'evaluator'") == 1
    assert "bounds: no spend cap" in result.stdout and "nothing bounds what this night spends" in result.stdout


@pytest.mark.slow
def test_a_known_model_is_priced_without_prices_and_cached_tokens_at_the_cached_rate(sandbox, fake, model_env):
    # gpt-4o-mini: $0.15 input, $0.075 cached input, $0.60 output per million (genai-prices' bundled data);
    # gpt-4.1-mini has a [prices] entry that overrides the library's, cached_prompt included
    config(sandbox, '[prices."gpt-4.1-mini"]\nprompt = 1000\ncompletion = 2000\ncached_prompt = 100\n')
    cached = {"prompt_tokens": 1_000_000, "completion_tokens": 100_000, "total_tokens": 1_100_000,
              "prompt_tokens_details": {"cached_tokens": 800_000}}
    fake.enqueue("gpt-4o-mini", reply(tool_calls=[write("a.txt"), SUBMIT], usage=cached))
    fake.enqueue("gpt-4.1-mini", reply(tool_calls=[ACCEPT], usage={
        "prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010, "prompt_tokens_details": {"cached_tokens": 600}}))
    env = {**model_env, "TILTH_WORKER_MODEL": "gpt-4o-mini", "TILTH_EVALUATOR_MODEL": "gpt-4.1-mini",
           "TILTH_MAX_SPEND_USD": "5", "TILTH_FINAL_REVIEW": "false"}  # about the task's two calls' prices
    result = start(sandbox, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "bounds: spend $5" in result.stdout
    worker, evaluator = calls(sandbox)
    assert worker["cost_source"] == "price_table" and worker["cached_tokens"] == 800_000
    assert worker["prompt_tokens"] == 1_000_000 and worker["completion_tokens"] == 100_000
    assert worker["cost_usd"] == pytest.approx(0.2 * 0.15 + 0.8 * 0.075 + 0.1 * 0.60)  # not 0.15 + 0.06
    assert evaluator["cost_usd"] == pytest.approx((400 * 1000 + 600 * 100 + 10 * 2000) / 1e6)
    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert summary["cost_usd"] == pytest.approx(0.15 + 0.48) and summary["cost_is_lower_bound"] is False
    [line] = summary["tasks"]
    assert line["tokens"] == {"input": 200_400, "cached": 800_600, "output": 100_010}
    assert line["cost_usd"] == pytest.approx(0.63) and line["attempts"] == 1


def test_the_price_library_answers_from_its_bundled_table_and_fetches_nothing(sandbox, model_env):
    """configuration.md: nothing is fetched at run time and genai-prices' auto-update is never started;
    every proxy variable points at a listener here, which no connection reaches."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    proxy = f"http://127.0.0.1:{listener.getsockname()[1]}"
    proxies = {name: proxy for variable in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
               for name in (variable, variable.lower())}
    try:
        shown = sandbox.tilth("config", env={**model_env, **proxies, "TILTH_WORKER_MODEL": "gpt-4o-mini"})
        assert shown.returncode == 0, shown.stderr
        assert "price: model 'gpt-4o-mini' (TILTH_WORKER_MODEL): $0.15 prompt / $0.075 cached" in shown.stdout
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


def test_an_unknown_price_key_is_an_error(sandbox, model_env):
    config(sandbox, '[prices.worker]\nprompt = 1\ncompletion = 2\ncached_promt = 0.5\n')
    result = start(sandbox, model_env)
    assert result.returncode == 2 and "prices.worker.cached_promt" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (sandbox.home / "sessions" / "s1").exists()


@pytest.mark.slow
def test_a_token_cap_needs_no_price_and_stops_within_the_call_that_crosses_it(sandbox, fake, model_env):
    fake.enqueue("worker", *[reply(tool_calls=[write(f"f{i}.txt")]) for i in range(10)])
    result = start(sandbox, {**model_env, "TILTH_MAX_TOKENS_TOTAL": "40"})
    assert result.returncode == 3 and "max_tokens_total" in result.stdout, result.stdout + result.stderr
    assert len(calls(sandbox)) == 3, "15 tokens a call: the third takes it to 45 >= 40 and nothing follows"
    cap = next(e["data"] for e in sandbox.events("s1") if e["type"] == "cap_reached")
    assert (cap["cap"], cap["value"]) == ("max_tokens_total", 45)
    assert "bounds: no spend cap, 40 tokens" in result.stdout
    status = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert status["state"] == "stopped" and status["caps"]["max_tokens_total"]["reached"] is True


@pytest.mark.slow
def test_a_cap_crossed_by_the_final_review_loses_only_the_review_and_the_session_is_done(sandbox, fake, model_env):
    fake.enqueue("worker", reply(tool_calls=[write("hello.txt")]), reply(tool_calls=[SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]), reply(tool_calls=[ACCEPT]))
    result = start(sandbox, {**model_env, "TILTH_MAX_TOKENS_TOTAL": "50"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(calls(sandbox)) == 4, "15 tokens a call: the task takes 45, the review's call crosses 50"
    [review] = [e["data"] for e in sandbox.events("s1") if e["type"] == "final_review"]
    assert review["verdict"] is None and "max_tokens_total reached (60 >= 50)" in review["error"], review
    assert sandbox.statuses("s1") == {"T-1": "done"}
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    assert "Final review of the whole diff: not done (max_tokens_total reached" in report, report


@pytest.mark.slow
def test_the_built_in_loop_stops_within_the_call_that_crosses_the_spend_cap_and_resume_goes_on(sandbox, fake,
                                                                                             model_env):
    # $0.10 a call (10 prompt tokens at $10,000 per million), a 40-step worker turn, a $0.35 cap
    config(sandbox, "[prices.worker]\nprompt = 10000\ncompletion = 0\n[prices.evaluator]\nprompt = 0\ncompletion = 0\n")
    fake.enqueue("worker", *[reply(tool_calls=[write(f"f{i}.txt")]) for i in range(5)], reply(tool_calls=[SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    result = start(sandbox, {**model_env, "TILTH_MAX_SPEND_USD": "0.35"})
    assert result.returncode == 3 and "max_spend_usd" in result.stdout, result.stdout + result.stderr
    spent = calls(sandbox)
    assert len(spent) == 4 and sum(c["cost_usd"] for c in spent) == pytest.approx(0.40), "one call over, no more"
    worktree = sandbox.worktree("s1")
    assert sorted(p.name for p in worktree.glob("f*.txt")) == ["f0.txt", "f1.txt", "f2.txt"]
    assert sandbox.commits("s1") == []
    # a session a cap stopped waits on a person (raise the cap, resume): the dashboard's "needs you" says so
    from tilth.views.status_data import all_summaries
    from tilth.web.data import needs_you

    [need] = needs_you(sandbox.home, all_summaries(sandbox.home))["attention"]
    assert need["session"] == "s1" and need["state"] == "stopped", need
    assert "max_spend_usd reached" in need["reason"] and "TILTH_MAX_SPEND_USD" in need["reason"], need

    resumed = sandbox.tilth("resume", "s1", "--foreground", env={**model_env, "TILTH_MAX_SPEND_USD": "5"})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sandbox.statuses("s1") == {"T-1": "done"}
    files = git(sandbox.repo, "ls-tree", "--name-only", "session/s1").split()
    assert {"f0.txt", "f1.txt", "f2.txt", "f4.txt"} <= set(files), "the capped attempt's edits were kept"

    # the task's receipt counts every call of every attempt and run, the capped one's too
    [line] = json.loads(sandbox.tilth("status", "s1", "--json").stdout)["tasks"]
    assert line["attempts"] == 1 and line["cost_usd"] == pytest.approx(0.60) and line["cost_is_lower_bound"] is False
    assert line["tokens"] == {"input": 70, "cached": 0, "output": 35} and line["wall_s"] > 0
    shown = sandbox.tilth("status", "s1").stdout
    assert "1 attempt, 70 in + 0 cached + 35 out tokens, $0.6000" in shown, shown
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.strip().startswith("T-1 "))
    assert "70/0/35" in row and "$0.6000" in row, report


COMMAND_AGENT = r'''
import json, re, sys, time
prompt = sys.stdin.read()
task = re.search(r"Task (\S+):", prompt).group(1)
print(json.dumps({"type": "usage", "model": "my-model", "prompt_tokens": 1000, "cached_tokens": 400,
                  "completion_tokens": 50, "cost": 1.5}), flush=True)
if "previous verdicts" in prompt:
    time.sleep(60)  # a long second attempt: the cap must stop it, not its end
open(f"{task}.txt", "w").write("done\n")
print("```json")
print(json.dumps({"summary": "wrote it", "criteria": [{"criterion": "done", "evidence": f"{task}.txt"}]}))
print("```")
'''


@pytest.mark.slow
def test_the_command_agents_spend_counts_and_it_is_killed_once_its_usage_crosses_the_cap(sandbox, fake, model_env):
    config(sandbox, "[prices.evaluator]\nprompt = 0\ncompletion = 0\n")
    (sandbox.repo / "tools").mkdir()
    (sandbox.repo / "tools" / "agent.py").write_text(COMMAND_AGENT)
    git(sandbox.repo, "add", "-A")
    git(sandbox.repo, "commit", "-q", "-m", "the agent")
    fake.enqueue("evaluator", reply(tool_calls=[REJECT]), reply(tool_calls=[REJECT]), reply(tool_calls=[REJECT]))
    started = time.monotonic()
    result = start(sandbox, {**model_env, "TILTH_WORKER_BACKEND": "command", "TILTH_PREFLIGHT": "false",
                             "TILTH_WORKER_COMMAND": f"{PYTHON} tools/agent.py {{prompt_file}}",
                             "TILTH_MAX_SPEND_USD": "2"})
    took = time.monotonic() - started
    assert result.returncode == 3 and "max_spend_usd" in result.stdout, result.stdout + result.stderr
    assert took < 40, f"the second run was killed at the cap, not waited for ({took:.0f} s)"
    workers = [c for c in calls(sandbox) if c["role"] == "worker"]
    assert [(c["cost_usd"], c["cost_source"], c["model"], c["cached_tokens"]) for c in workers] == \
        [(1.5, "provider", "my-model", 400)] * 2
    runs = [e["data"] for e in sandbox.events("s1") if e["type"] == "agent_run"]
    assert [r["stopped"] for r in runs] == [None, "max_spend_usd reached"]
    status = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert status["cost_usd"] == pytest.approx(3.0) and status["caps"]["max_spend_usd"]["reached"] is True


AIDER_STAND_IN = r'''#!{python}
import sys, time
# aider 0.86.2's own lines with --no-pretty --no-stream: a banner, then a reply and a Tokens line per exchange
print("Aider v0.86.2\nModel: openai/aider-model with whole edit format\nGit repo: none\nRepo-map: disabled", flush=True)
print("I will start.\n\nTokens: 1.2k sent, 300 received. Cost: $0.90 message, $0.90 session.", flush=True)
print("Going on.\n\nTokens: 1.5k sent, 310 received. Cost: $1.20 message, $2.10 session.", flush=True)
time.sleep(60)  # a long run: the cap must stop it, not its end
'''


def test_aiders_cost_lines_count_as_it_streams_and_it_is_killed_once_they_cross_the_cap(sandbox, fake, model_env):
    config(sandbox, "[prices.evaluator]\nprompt = 0\ncompletion = 0\n"
                    '[prices."openai/aider-model"]\nprompt = 1\ncompletion = 1\n')
    aider = sandbox.root / "aider"
    aider.write_text(AIDER_STAND_IN.format(python=PYTHON))
    aider.chmod(0o755)
    (sandbox.root / "aider-home").mkdir()
    started = time.monotonic()
    result = start(sandbox, {**model_env, "TILTH_WORKER_BACKEND": "aider", "TILTH_AIDER_BIN": str(aider),
                             "TILTH_AIDER_ARGS": "--model openai/aider-model", "TILTH_PREFLIGHT": "false",
                             "TILTH_SANDBOX": "off", "HOME": str(sandbox.root / "aider-home"),
                             "TILTH_MAX_SPEND_USD": "2"})
    took = time.monotonic() - started
    assert result.returncode == 3 and "max_spend_usd" in result.stdout, result.stdout + result.stderr
    assert took < 40, f"aider was killed at the cap, not waited for ({took:.0f} s)"
    [run] = [e["data"] for e in sandbox.events("s1") if e["type"] == "agent_run"]
    assert run["stopped"] == "max_spend_usd reached", run
    [counted] = calls(sandbox)
    assert (counted["cost_usd"], counted["cost_source"], counted["prompt_tokens"], counted["completion_tokens"]) == \
        (2.10, "provider", 2700, 610)
    status = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert status["cost_usd"] == pytest.approx(2.10) and status["caps"]["max_spend_usd"]["reached"] is True


@pytest.mark.slow
def test_a_streaming_claude_run_is_killed_within_a_turn_of_the_cap_and_its_streamed_turns_are_counted(
        sandbox, fake, model_env):
    import fake_anthropic as fa
    from fake_anthropic import FakeAnthropic
    from test_cli_agents import CLAUDE_MODEL, claude_env

    # $100 per million input tokens for the stub model: each turn of 1,000 input tokens is $0.10; a $0.25 cap.
    # Claude Code reports its cost only in its final result, which a killed run never prints.
    config(sandbox, f'[prices."{CLAUDE_MODEL}"]\nprompt = 100\ncompletion = 0\n'
                    "[prices.evaluator]\nprompt = 0\ncompletion = 0\n")
    with FakeAnthropic() as anthropic:
        turns = [fa.reply(fa.text(f"step {i}"), fa.tool_use("Write", file_path=str(sandbox.worktree("s1") / f"f{i}.txt"),
                                                               content=f"{i}\n"), usage=fa.usage(1000, 40))
                 for i in range(12)]
        anthropic.enqueue(CLAUDE_MODEL, *turns)
        result = start(sandbox, {**model_env, **claude_env(anthropic, sandbox.root), "TILTH_PREFLIGHT": "false",
                                 "TILTH_MAX_SPEND_USD": "0.25"})
        served = len(anthropic.posts())
    assert result.returncode == 3 and "max_spend_usd" in result.stdout, result.stdout + result.stderr
    [run] = [e["data"] for e in sandbox.events("s1") if e["type"] == "agent_run"]
    assert run["stopped"] == "max_spend_usd reached", run
    [counted] = calls(sandbox)
    assert counted["prompt_tokens"] == 3000 and counted["cost_usd"] == pytest.approx(0.30), counted
    assert counted["cost_source"] == "price_table", "its streamed turns, each message once, not $0"
    assert served <= 4, f"killed within a turn of the cap ({served} requests served)"
    status = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert status["cost_usd"] == pytest.approx(0.30) and status["caps"]["max_spend_usd"]["reached"] is True


HANGING_AGENT = r'''
import subprocess, time
child = subprocess.Popen(["sleep", "300"])
open("pids.txt", "w").write(f"{child.pid}\n")
time.sleep(300)
'''


@pytest.mark.slow
def test_the_wall_clock_cap_also_ends_a_cli_agent_run_that_hangs(sandbox, fake, model_env):
    from supervised import alive

    (sandbox.repo / "tools").mkdir()
    (sandbox.repo / "tools" / "agent.py").write_text(HANGING_AGENT)
    git(sandbox.repo, "add", "-A")
    git(sandbox.repo, "commit", "-q", "-m", "the agent")
    started = time.monotonic()
    result = start(sandbox, {**model_env, "TILTH_WORKER_BACKEND": "command", "TILTH_PREFLIGHT": "false",
                             "TILTH_WORKER_COMMAND": f"{PYTHON} tools/agent.py", "TILTH_SANDBOX": "off",
                             "TILTH_MAX_WALL_CLOCK_S": "4"})
    took = time.monotonic() - started
    assert result.returncode == 3 and "max_wall_clock_s reached" in result.stdout, result.stdout + result.stderr
    assert took < 25, f"the agent's 1800 s timeout did not apply: the cap did ({took:.0f} s)"
    [run] = [e["data"] for e in sandbox.events("s1") if e["type"] == "agent_run"]
    assert run["stopped"] == "max_wall_clock_s reached"
    assert not alive(int((sandbox.worktree("s1") / "pids.txt").read_text())), "everything it started was killed"
    assert not (sandbox.session_dir("s1") / "ledger" / "T-1.jsonl").exists(), "not a rejected attempt: a capped one"


@pytest.mark.slow
def test_a_task_rejected_three_times_for_the_same_concern_parks_while_an_independent_task_gets_done(sandbox):
    def rejected(n: int) -> dict:
        return {"write": {"t1.txt": f"try {n}\n"}, "case": {"summary": f"try {n}"},
                "verdict": {"verdict": "reject", "category": "weak_test",
                            "concern": f"Attempt {n}: the test for parse() still does not cover an empty input"}}

    scenario = {"tasks": {"T-1": [rejected(n) for n in range(1, 6)],
                          "T-2": [{"write": {"t2.txt": "ok\n"}, "case": {"summary": "done"}}]}}
    plan = [task("T-1", "Parse"), task("T-2", "Independent"), task("T-3", "After T-1", depends_on=["T-1"])]
    result = sandbox.start("s1", plan, scenario)
    assert result.returncode == 5, result.stdout + result.stderr  # waiting for a person
    assert len(sandbox.ledger("s1", "T-1")) == 3, "parked after three evaluations, not five"
    assert sandbox.statuses("s1") == {"T-1": "parked", "T-2": "done", "T-3": "pending"}
    [stalled] = [e["data"] for e in sandbox.events("s1") if e["type"] == "task_stalled"]
    assert stalled["count"] == 3 and stalled["category"] == "weak_test" and stalled["same"] == "concern"
    status = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    [question] = status["questions"]
    assert question["task"] == "T-1" and "rejected 3 times in a row for the same reason (weak_test)" in \
        question["question"] and "empty input" in question["question"]
    # tilth asked it, not the evaluator; the concern (no final stop of its own) ends before the question starts,
    # and nothing in it is markdown a terminal or the dashboard shows raw
    assert question["asked_by"] == "stall breaker", question
    assert 'does not cover an empty input". What should change?' in question["question"] and "`" not in \
        question["question"], question["question"]
    shown = sandbox.tilth("status", "s1").stdout
    assert "question T-1 (stall breaker asked) T-1 was rejected 3 times" in shown, shown
    assert '(attempt 3: waits for an answer: "T-1 was rejected 3 times in a row' in shown, shown

    # off: every attempt is spent
    off = sandbox.start("s2", plan, scenario, env={"TILTH_STALL_AFTER": "0"})
    assert off.returncode in (0, 1), off.stdout + off.stderr
    assert len(sandbox.ledger("s2", "T-1")) == 5 and sandbox.statuses("s2")["T-1"] == "failed"


@pytest.mark.slow
def test_attempts_per_task_have_a_total_across_resumes_that_a_resume_must_raise(sandbox):
    scenario = {"tasks": {"T-1": [{"write": {"t1.txt": "x\n"}, "case": {"summary": "try"},
                                   "verdict": {"verdict": "reject", "category": "weak_test", "concern": "thin"}}]}}
    env = {"TILTH_MAX_ITERATIONS_PER_TASK": "2", "TILTH_MAX_ATTEMPTS_PER_TASK_TOTAL": "3", "TILTH_STALL_AFTER": "0"}
    first = sandbox.start("s1", [task("T-1")], scenario, env=env)
    assert first.returncode == 1 and len(sandbox.ledger("s1", "T-1")) == 2, first.stdout + first.stderr
    second = sandbox.tilth("resume", "s1", "--foreground", env=env)
    assert second.returncode == 1 and len(sandbox.ledger("s1", "T-1")) == 3, "one more, up to the total"
    third = sandbox.tilth("resume", "s1", "--foreground", env=env)
    assert third.returncode == 1 and len(sandbox.ledger("s1", "T-1")) == 3, "no attempt past the total"
    assert "raise TILTH_MAX_ATTEMPTS_PER_TASK_TOTAL" in third.stdout, third.stdout
    raised = sandbox.tilth("resume", "s1", "--foreground", env={**env, "TILTH_MAX_ATTEMPTS_PER_TASK_TOTAL": "5"})
    assert raised.returncode == 1 and len(sandbox.ledger("s1", "T-1")) == 5


def test_ten_ten_cent_calls_reach_a_one_dollar_cap():
    from tilth.agents.accounting import Meter
    from tilth.store.calls import Counted

    meter = Meter(spend_limit=1.0)
    for _ in range(10):
        meter.add("worker", "T-1", Counted(15, 0.1, True, True))
    assert meter.cost_usd < 1.0 and meter.crossing(0.0, 0) == "max_spend_usd", "0.9999999999999999 is the cap"


def test_a_spend_cap_of_zero_is_refused_in_one_line_creating_nothing(sandbox, model_env):
    # it used to make a session and a branch that stopped at once
    result = start(sandbox, {**model_env, "TILTH_MAX_SPEND_USD": "0"})
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip() == ("tilth: env TILTH_MAX_SPEND_USD: max_spend_usd: Input should be greater than 0; "
                                     "fix the setting and retry")
    assert not (sandbox.home / "sessions" / "s1").exists() and "session/s1" not in git(sandbox.repo, "branch", "--list")


@pytest.mark.slow
def test_a_task_a_cap_stopped_at_its_verdict_counts_its_attempt_and_every_view_says_stopped(sandbox, fake, model_env):
    # the worker's whole turn, then the evaluator's call crosses the cap: the attempt was made, the verdict lost
    config(sandbox, "[prices.worker]\nprompt = 10000\ncompletion = 0\n[prices.evaluator]\nprompt = 10000\ncompletion = 0\n")
    fake.enqueue("worker", reply(tool_calls=[write("a.txt"), SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    result = start(sandbox, {**model_env, "TILTH_MAX_SPEND_USD": "0.15"})
    assert result.returncode == 3 and "max_spend_usd" in result.stdout, result.stdout + result.stderr
    [line] = json.loads(sandbox.tilth("status", "s1", "--json").stdout)["tasks"]
    assert line["attempts"] == 1 and line["status"] == "in_progress" and line["outcome"] == "stopped", line
    shown = sandbox.tilth("status", "s1").stdout
    assert "stopped     T-1: Say hello" in shown and "1 attempt, 20 in" in shown, shown
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    assert "T-1   stopped  1 " in report and "Attempts:   1" in report, report
