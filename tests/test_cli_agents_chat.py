"""The REAL Qwen Code and OpenCode CLIs (Chat Completions agents) as worker and evaluator against the
local stub (tests/fake_openai.py). Installed by `make agents` (scripts/install-cli-agents.sh); on CI a
missing CLI fails the run. Each test bounds its session (both CLIs retry or hang on a dead endpoint)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from cli_agents import agent_bin
from conftest import git
from fake_openai import ACCEPT, Response, fault, reply
from test_cli_agents import ACCEPTED, CASE, fenced, of_type, require_bwrap, session_bytes, start

QWEN_MODEL, OPENCODE_MODEL = "qwen-stub", "opencode-stub"
KEY = "sk-chat-stub-0123456789abcdef"
HOME_MARKER = "USER-HOME-MARKER-7f3a"
PRICE = {"prompt": 2.0, "cached_prompt": 0.5, "completion": 10.0}
"""$ per million tokens of both stub models, in `[prices]`."""


def user_home(root: Path) -> Path:
    """The HOME tilth runs with: each CLI's own global instructions and settings there carry a marker
    that must never reach the endpoint."""
    home = root / "user-home"
    for name in (".qwen/QWEN.md", ".config/opencode/AGENTS.md", ".claude/CLAUDE.md"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(f"Always mention {HOME_MARKER}.\n")
    (home / ".qwen/settings.json").write_text(json.dumps({"model": {"name": HOME_MARKER}}))
    return home


def chat_env(sandbox, fake, worker: str = "openai", evaluator: str = "openai") -> dict[str, str]:
    (sandbox.home).mkdir(exist_ok=True)
    prices = "".join(f'[prices."{m}"]\n' + "".join(f"{k} = {v}\n" for k, v in PRICE.items())
                     for m in (QWEN_MODEL, OPENCODE_MODEL))
    (sandbox.home / "config.toml").write_text(prices + "[prices.evaluator]\nprompt = 0\ncompletion = 0\n")
    return {"TILTH_WORKER_BACKEND": worker, "TILTH_EVALUATOR_BACKEND": evaluator,
            "TILTH_QWEN_BIN": str(agent_bin("qwen")), "TILTH_OPENCODE_BIN": str(agent_bin("opencode")),
            "TILTH_QWEN_ARGS": f"-m {QWEN_MODEL}", "OPENAI_MODEL": OPENCODE_MODEL,
            "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": KEY, "HOME": str(user_home(sandbox.root)),
            "TILTH_FINAL_REVIEW": "false", "TILTH_AGENT_TIMEOUT_S": "90",
            # the registry at the stub: an install OpenCode tries shows as a request there
            "npm_config_registry": fake.root_url + "/npm/", "TILTH_AGENT_PASS_ENV": "npm_config_registry"}


def usage(prompt: int, completion: int, cached: int = 0) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def list_price(*usages: dict) -> float:
    """What the calls the server answered cost at PRICE, cached tokens at the cached rate."""
    total = 0.0
    for u in usages:
        cached = u["prompt_tokens_details"]["cached_tokens"]
        total += (u["prompt_tokens"] - cached) * PRICE["prompt"] + cached * PRICE["cached_prompt"] + \
            u["completion_tokens"] * PRICE["completion"]
    return total / 1_000_000


def posts(fake, model: str) -> list[dict]:
    return [r for r in fake.requests if r["body"] and r["body"].get("model") == model]


def tool(name: str, **args: object) -> tuple[str, str]:
    return name, json.dumps(args)


WRITE = {"qwen": lambda path: tool("write_file", file_path=str(path), content="hello\n"),
         "opencode": lambda path: tool("write", filePath=str(path), content="hello\n")}
SHELL = {"qwen": lambda command: tool("run_shell_command", command=command),
         "opencode": lambda command: tool("bash", command=command, description="run it")}
MODEL = {"qwen": QWEN_MODEL, "opencode": OPENCODE_MODEL}


def assert_private(sandbox, fake, sid: str) -> None:
    """The key went only to the endpoint; nothing of the user's HOME did; no registry install was tried."""
    sent = [r for r in fake.requests if r["body"] and r["body"].get("model") in MODEL.values()]
    assert sent and all(r["headers"]["authorization"] == f"Bearer {KEY}" for r in sent)
    assert not [r for r in sent if HOME_MARKER in json.dumps(r["body"])], "the user's HOME reached the endpoint"
    assert KEY.encode() not in session_bytes(sandbox, sid), "the key never reaches a session file"
    assert not [r["path"] for r in fake.requests if r["path"].startswith("/npm/")], "no registry install was tried"


@pytest.mark.bwrap
@pytest.mark.cli_agents
@pytest.mark.parametrize("worker,evaluator", [("qwen", "opencode"), ("opencode", "qwen")])
def test_one_works_and_commits_priced_by_its_tokens_and_the_other_judges_without_writing(sandbox, fake, worker,
                                                                                         evaluator):
    require_bwrap()
    sid = f"{worker}-works"
    first, second = usage(1000, 50, cached=200), usage(1300, 80)
    fake.enqueue(MODEL[worker], reply("Writing it.", tool_calls=[WRITE[worker](sandbox.worktree(sid) / "hello.txt")],
                                      usage=first), reply(fenced(CASE), usage=second))
    judged = usage(700, 30)
    fake.enqueue(MODEL[evaluator], reply(tool_calls=[SHELL[evaluator]("echo tampered > hello.txt; echo x > evil.txt")],
                                         usage=usage(500, 20)), reply(fenced(ACCEPTED), usage=judged))
    result = start(sandbox, sid, chat_env(sandbox, fake, worker, evaluator), timeout=150)
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(sandbox.repo, "show", f"session/{sid}:hello.txt") == "hello\n", "the evaluator's write was refused"
    assert "evil.txt" not in git(sandbox.repo, "ls-tree", "--name-only", f"session/{sid}")
    assert [c["task"] for c in sandbox.commits(sid)] == ["T-1"]
    [entry] = sandbox.ledger(sid, "T-1")
    assert entry["case"]["summary"] == "wrote hello.txt" and entry["verdict"]["verdict"] == "accept"
    calls = {e["data"]["role"]: e["data"] for e in of_type(sandbox, sid, "model_call") if e["task"] == "T-1"}
    work, judge = calls["worker"], calls["evaluator"]
    assert (work["model"], work["prompt_tokens"], work["cached_tokens"], work["completion_tokens"]) == \
        (MODEL[worker], 2300, 200, 130)
    assert work["cost_source"] == "price_table", f"{worker} reports no cost: the price table prices it"
    assert work["cost_usd"] == pytest.approx(list_price(first, second), rel=0.01)
    assert judge["cost_usd"] == pytest.approx(list_price(usage(500, 20), judged), rel=0.01)
    assert len(posts(fake, MODEL[worker])) == 2 and len(posts(fake, MODEL[evaluator])) == 2, "no hidden requests"
    steps = [e["data"] for e in of_type(sandbox, sid, "agent_step")]
    assert any(s["kind"] == "tool_use" and s["role"] == "worker" for s in steps), steps
    assert_private(sandbox, fake, sid)


def run_cap_test(sandbox, fake, model_env: dict[str, str], agent: str) -> None:
    # $2/M prompt tokens: each call of 50,000 prompt tokens is $0.10; a $0.25 cap is crossed by the third.
    turns = [reply(f"step {i}", tool_calls=[SHELL[agent](f"echo {i} > f{i}.txt")], usage=usage(50_000, 0))
             for i in range(8)]
    fake.enqueue(MODEL[agent], *turns)
    env = {**model_env, **chat_env(sandbox, fake, agent), "TILTH_MAX_SPEND_USD": "0.25", "TILTH_SANDBOX": "off"}
    result = start(sandbox, "cap", env, timeout=150)
    served = len(posts(fake, MODEL[agent]))
    assert result.returncode == 3 and "max_spend_usd" in result.stdout, result.stdout + result.stderr
    [run] = [e["data"] for e in of_type(sandbox, "cap", "agent_run")]
    assert run["stopped"] == "max_spend_usd reached", run
    [counted] = [e["data"] for e in of_type(sandbox, "cap", "model_call")]
    assert counted["prompt_tokens"] == 150_000 and counted["cost_usd"] == pytest.approx(0.30), counted
    assert served <= 4, f"killed within a call of the cap ({served} requests served)"
    assert_private(sandbox, fake, "cap")


@pytest.mark.cli_agents
@pytest.mark.parametrize("agent", ["qwen", "opencode"])
def test_a_spend_cap_crossed_mid_run_kills_it_within_a_call(sandbox, fake, model_env, agent):
    run_cap_test(sandbox, fake, model_env, agent)


LIMITS = {
    # Qwen Code fails a provider quota with a reset time at once; a 429 gets its 7 quick attempts.
    "qwen": (1, 7),
    # OpenCode retries any 429 five times (honouring Retry-After).
    "opencode": (6, 6),
}


def quota(resets: datetime) -> Response:
    message = f"You exceeded your current quota: it has been exhausted and will reset at {resets:%Y-%m-%dT%H:%M:%SZ}"
    return fault(429, {"error": {"message": message, "type": "insufficient_quota", "code": "insufficient_quota"}},
                 headers={"Retry-After": "0.01"})


@pytest.mark.cli_agents
@pytest.mark.parametrize("agent", ["qwen", "opencode"])
def test_a_quota_and_a_429_are_pauses_not_failures(sandbox, fake, model_env, agent):
    quotas, limited = LIMITS[agent]
    resets = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=3)
    fake.enqueue(MODEL[agent], *[quota(resets)] * quotas,
                 *[fault(429, "Rate limit reached for requests", headers={"Retry-After": "0.01"})] * limited,
                 reply(tool_calls=[WRITE[agent](sandbox.worktree("lim") / "hello.txt")]), reply(fenced(CASE)))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    env = {**model_env, **chat_env(sandbox, fake, agent), "TILTH_EVALUATOR_BACKEND": "openai",
           "TILTH_MAX_ITERATIONS_PER_TASK": "1", "TILTH_USAGE_LIMIT_BACKOFF_S": "1", "TILTH_SANDBOX": "off"}
    result = start(sandbox, "lim", env, timeout=150)
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = (e["data"] for e in of_type(sandbox, "lim", "session_paused"))
    assert first["reset_given"] is True and "quota" in first["reason"], first
    assert second["reset_given"] is False and "429" in second["reason"], second
    [entry] = sandbox.ledger("lim", "T-1")
    assert entry["iter"] == 1 and entry["verdict"]["verdict"] == "accept", "the limited runs were no attempts"
    assert git(sandbox.repo, "show", "session/lim:hello.txt") == "hello\n"
    assert [r["data"]["case"] for r in of_type(sandbox, "lim", "agent_run")] == ["none", "none", "parsed"]
    assert_private(sandbox, fake, "lim")


QWEN_AT_ITS_TURN_CAP = """#!/bin/sh
cat > /dev/null
echo '{"type":"system","subtype":"init","session_id":"s-53","model":"qwen-stub"}'
echo '{"type":"assistant","message":{"id":"m1","model":"qwen-stub","content":[{"type":"tool_use","id":"c0",'\
'"name":"run_shell_command","input":{"command":"echo 0"}}],"usage":{"input_tokens":10,"output_tokens":5}}}'
echo 'Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json.' >&2
exit 53
"""
"""What Qwen Code 0.24.4 does at `--max-session-turns` (seen on the real one): no `result` line, that line on stderr, exit 53."""


def test_qwen_at_its_turn_cap_is_said_in_words(sandbox, tmp_path):
    qwen = tmp_path / "qwen"
    qwen.write_text(QWEN_AT_ITS_TURN_CAP)
    qwen.chmod(0o755)
    env = {"TILTH_WORKER_BACKEND": "qwen", "TILTH_QWEN_BIN": str(qwen), "TILTH_QWEN_ARGS": "--max-session-turns 1",
           "TILTH_SANDBOX": "off", "TILTH_MAX_ITERATIONS_PER_TASK": "1", "TILTH_EVALUATOR_BACKEND": "command",
           "TILTH_EVALUATOR_COMMAND": "true", "TILTH_FINAL_REVIEW": "false"}
    result = start(sandbox, "turns", env)
    assert result.returncode == 1, result.stdout + result.stderr
    concern = sandbox.ledger("turns", "T-1")[0]["verdict"]["concern"]
    assert "the qwen agent stopped at its turn cap (--max-session-turns in TILTH_QWEN_ARGS) (exit code 53)" in concern, \
        concern
    assert "stopped at its turn cap" in result.stdout
