"""The REAL Copilot CLI and Gemini CLI as worker and evaluator, inside tilth's bubblewrap sandbox,
against local stub servers: Copilot through its own provider (Chat Completions, tests/fake_openai.py),
Gemini through the Gemini API (tests/fake_gemini.py). Installed by `make agents`; on CI a missing
CLI fails the run. Each run is bounded by TILTH_AGENT_TIMEOUT_S: both CLIs retry a dead endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import fake_gemini as fg
import pytest
from cli_agents import agent_bin
from conftest import git
from fake_gemini import FakeGemini
from fake_http import held
from fake_openai import ACCEPT, call, fault, reply
from test_cli_agents import ACCEPTED, CASE, fenced, of_type, require_bwrap, session_bytes, start

COPILOT_MODEL = "copilot-model"
GEMINI_MODEL = "gemini-stub"
COPILOT_KEY = "sk-copilot-stub-0123456789abcdef"
GEMINI_KEY = "AIzaStubGeminiKey0123456789abcdef"
HOME_MARKER = "user-home-marker-7f3a"
"""Written in the user's own instruction files (~/.copilot, ~/.gemini): never in a request."""
RATES = {"prompt": 2.0, "cached_prompt": 0.5, "completion": 10.0}


def user_home(sandbox) -> Path:
    """A HOME of the person running tilth: their agents' config dirs with instructions of their own."""
    home = sandbox.root / "userhome"
    (home / ".copilot").mkdir(parents=True, exist_ok=True)
    (home / ".copilot" / "copilot-instructions.md").write_text(f"Always mention {HOME_MARKER}.\n")
    (home / ".copilot" / "config.json").write_text("{}\n")
    (home / ".gemini").mkdir(exist_ok=True)
    (home / ".gemini" / "GEMINI.md").write_text(f"Always mention {HOME_MARKER}.\n")
    # one attempt per model call, so a 429 ends the run at once (the default is 10 with backoff)
    (home / ".gemini" / "settings.json").write_text(json.dumps({"general": {"maxAttempts": 1}}))
    return home


def prices(sandbox, model: str, prompt: float = RATES["prompt"], completion: float = RATES["completion"]) -> None:
    sandbox.home.mkdir(exist_ok=True)
    (sandbox.home / "config.toml").write_text(
        f'[prices."{model}"]\nprompt = {prompt}\ncached_prompt = {RATES["cached_prompt"]}\ncompletion = {completion}\n'
        '[prices.evaluator]\nprompt = 0\ncompletion = 0\n[prices.worker]\nprompt = 0\ncompletion = 0\n')


def list_price(calls: list[tuple[int, int, int]]) -> float:
    """(prompt, cached, completion) per call, at RATES per million."""
    return sum((p - c) * RATES["prompt"] + c * RATES["cached_prompt"] + o * RATES["completion"]
               for p, c, o in calls) / 1e6


def copilot_env(sandbox, fake, role: str = "worker") -> dict[str, str]:
    return {f"TILTH_{role.upper()}_BACKEND": "copilot", "TILTH_COPILOT_BIN": str(agent_bin("copilot")),
            "TILTH_COPILOT_ARGS": f"--model {COPILOT_MODEL}", "COPILOT_PROVIDER_BASE_URL": fake.base_url,
            "COPILOT_PROVIDER_TYPE": "openai", "COPILOT_PROVIDER_API_KEY": COPILOT_KEY, "HOME": str(user_home(sandbox)),
            "XDG_CACHE_HOME": str(Path.home() / ".cache"), "TILTH_AGENT_TIMEOUT_S": "90"}


def gemini_env(sandbox, gemini: FakeGemini, role: str = "worker") -> dict[str, str]:
    return {f"TILTH_{role.upper()}_BACKEND": "gemini", "TILTH_GEMINI_BIN": str(agent_bin("gemini")),
            "TILTH_GEMINI_ARGS": f"-m {GEMINI_MODEL}", "GOOGLE_GEMINI_BASE_URL": gemini.root_url,
            "GEMINI_API_KEY": GEMINI_KEY, "HOME": str(user_home(sandbox)), "TILTH_AGENT_TIMEOUT_S": "90"}


def worker_calls(sandbox, sid: str) -> list[dict]:
    return [e["data"] for e in of_type(sandbox, sid, "model_call") if e["data"]["role"] == "worker"]


def copilot_usage(prompt: int, completion: int, cached: int = 0) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


@pytest.fixture
def gemini():
    with FakeGemini() as server:
        yield server


@pytest.mark.bwrap
@pytest.mark.cli_agents
def test_copilot_pauses_on_a_quota_and_a_429_then_works_priced_and_without_the_users_home(sandbox, fake, model_env):
    require_bwrap()
    target = sandbox.worktree("cp") / "hello.txt"
    quota = {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota",
                       "code": "insufficient_quota"}}
    served = [(1000, 200, 50), (1300, 0, 80)]
    # A quota that resets in an hour: Copilot gives up at once. A plain 429: after its 5 retries.
    fake.enqueue(COPILOT_MODEL, fault(429, quota, headers={"Retry-After": "3600"}),
                 *[fault(429, "slow down", headers={"Retry-After": "0"})] * 6,
                 reply("Writing it.", tool_calls=[call("create", path=str(target), file_text="hello\n")],
                       usage=copilot_usage(*served[0][::2], cached=served[0][1])),
                 reply(fenced(CASE), usage=copilot_usage(*served[1][::2])))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    prices(sandbox, COPILOT_MODEL)
    env = {**model_env, **copilot_env(sandbox, fake), "TILTH_MAX_ITERATIONS_PER_TASK": "1",
           "TILTH_USAGE_LIMIT_BACKOFF_S": "0.5"}
    result = start(sandbox, "cp", env)
    assert result.returncode == 0, result.stdout + result.stderr
    paused = [e["data"] for e in of_type(sandbox, "cp", "session_paused")]
    assert len(paused) == 2 and "quota" in paused[0]["reason"] and "retried 5 times" in paused[1]["reason"], paused
    assert git(sandbox.repo, "show", "session/cp:hello.txt") == "hello\n"
    assert [c["task"] for c in sandbox.commits("cp")] == ["T-1"]
    assert sandbox.ledger("cp", "T-1")[0]["case"]["summary"] == "wrote hello.txt"
    counted = [c for c in worker_calls(sandbox, "cp") if c["prompt_tokens"]]
    assert len(counted) == 1 and counted[0]["prompt_tokens"] == 2300 and counted[0]["cached_tokens"] == 200
    assert counted[0]["completion_tokens"] == 130 and counted[0]["cost_source"] == "price_table"
    assert counted[0]["cost_usd"] == pytest.approx(list_price(served), rel=0.01)
    limited = [e["data"] for e in of_type(sandbox, "cp", "agent_run") if e["data"]["limit"]]
    assert len(limited) == 2 and all(run["case"] == "none" for run in limited)
    bodies = [json.dumps(r["body"]) for r in fake.requests if r["body"] and r["body"].get("model") == COPILOT_MODEL]
    assert len(bodies) == 9 and not [b for b in bodies if HOME_MARKER in b], "nothing of the user's HOME is sent"
    assert [r["headers"]["authorization"] for r in fake.requests if r["body"] and
            r["body"].get("model") == COPILOT_MODEL][-1] == f"Bearer {COPILOT_KEY}"
    assert COPILOT_KEY.encode() not in session_bytes(sandbox, "cp")
    status = json.loads(sandbox.tilth("status", "cp", "--json").stdout)
    assert status["cost_usd"] == pytest.approx(list_price(served), rel=0.01)


@pytest.mark.bwrap
@pytest.mark.cli_agents
def test_a_copilot_evaluator_cannot_change_the_worktree(sandbox, fake, model_env):
    require_bwrap()
    fake.enqueue("worker", reply(tool_calls=[call("write_file", path="a.txt", content="a\n")]),
                 reply(tool_calls=[call("submit_case", summary="done", criteria=[])]))
    tree = sandbox.worktree("cpe")
    fake.enqueue(COPILOT_MODEL,
                 reply(tool_calls=[call("bash", command="echo tampered > a.txt; echo x > evil.txt",
                                        description="tamper")]),
                 reply(tool_calls=[call("create", path=str(tree / "evil2.txt"), file_text="x\n")]),
                 reply(fenced(ACCEPTED)))
    result = start(sandbox, "cpe", {**model_env, **copilot_env(sandbox, fake, "evaluator"), "TILTH_FINAL_REVIEW": "false"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert sandbox.ledger("cpe", "T-1")[0]["verdict"]["verdict"] == "accept"
    assert git(sandbox.repo, "show", "session/cpe:a.txt") == "a\n", "the evaluator's write was refused"
    assert not {"evil.txt", "evil2.txt"} & set(git(sandbox.repo, "ls-tree", "--name-only", "session/cpe").split())
    assert not (tree / "evil.txt").exists() and not (tree / "evil2.txt").exists()
    results = [e["data"] for e in of_type(sandbox, "cpe", "agent_step") if e["data"]["kind"] == "tool_result"]
    assert [r["name"] for r in results] == ["bash", "create"], results


@pytest.mark.bwrap
@pytest.mark.cli_agents
def test_a_spend_cap_stops_copilot_within_a_call_of_crossing_it(sandbox, fake, model_env):
    require_bwrap()
    # $100 per million prompt tokens: each call of 1,000 is $0.10, a $0.25 cap crossed by the third.
    prices(sandbox, COPILOT_MODEL, prompt=100, completion=0)
    tree = sandbox.worktree("cpc")
    # Its stdout says nothing (as it may say nothing for a while on a loaded machine), and the call
    # after the crossing one is held until Copilot hangs up: only its usage file can stop it in time.
    quiet = sandbox.root / "quiet-copilot"
    quiet.write_text(f'#!/bin/sh\nexec {agent_bin("copilot")} "$@" >/dev/null\n')
    quiet.chmod(0o755)
    steps = [reply(f"step {i}", tool_calls=[call("create", path=str(tree / f"f{i}.txt"), file_text=f"{i}\n")],
                   usage=copilot_usage(1000, 40)) for i in range(12)]
    fake.enqueue(COPILOT_MODEL, *steps[:3], held(30, steps[3]), *steps[4:])
    result = start(sandbox, "cpc", {**model_env, **copilot_env(sandbox, fake), "TILTH_COPILOT_BIN": str(quiet),
                                    "TILTH_SANDBOX_EXPOSE": str(agent_bin("copilot").parents[2]),
                                    "TILTH_MAX_SPEND_USD": "0.25"})
    served = len([r for r in fake.requests if r["body"] and r["body"].get("model") == COPILOT_MODEL])
    answered = served - fake.hung_up
    assert answered == 3 and served <= 4, f"{answered} calls answered of {served}: not killed while the 4th waited"
    assert result.returncode == 3 and "max_spend_usd" in result.stdout, result.stdout + result.stderr
    [run] = [e["data"] for e in of_type(sandbox, "cpc", "agent_run")]
    assert run["stopped"] == "max_spend_usd reached" and run["duration_ms"] < 30_000, run
    [counted] = worker_calls(sandbox, "cpc")
    assert counted["prompt_tokens"] == 3000 and counted["cost_usd"] == pytest.approx(0.30), counted


@pytest.mark.bwrap
@pytest.mark.cli_agents
def test_gemini_pauses_on_a_daily_quota_and_a_429_then_works_priced_and_without_the_users_home(
        sandbox, fake, model_env, gemini):
    require_bwrap()
    target = sandbox.worktree("gm") / "hello.txt"
    daily = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
              "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]
    # (prompt, cached, output + thoughts): thoughts are billed as output
    served = [(1000, 200, 50 + 30), (1300, 0, 80)]
    gemini.enqueue(GEMINI_MODEL, fg.fault(429, "You exceeded your current quota.", details=daily),
                   fg.fault(429, "Resource has been exhausted (e.g. check quota)."),
                   fg.reply(fg.text("Writing it."), fg.function_call("write_file", file_path=str(target),
                                                                     content="hello\n"),
                            usage=fg.usage(1000, 50, cached=200, thoughts=30)),
                   fg.reply(fg.text(fenced(CASE)), usage=fg.usage(1300, 80)))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    prices(sandbox, GEMINI_MODEL)
    # a cap far off: its usage is read while it runs, and its streamed answer still arrives whole
    env = {**model_env, **gemini_env(sandbox, gemini), "TILTH_MAX_ITERATIONS_PER_TASK": "1",
           "TILTH_USAGE_LIMIT_BACKOFF_S": "0.5", "TILTH_MAX_SPEND_USD": "100"}
    result = start(sandbox, "gm", env)
    assert result.returncode == 0, result.stdout + result.stderr
    paused = [e["data"] for e in of_type(sandbox, "gm", "session_paused")]
    assert len(paused) == 2 and "daily quota" in paused[0]["reason"] and "exhausted" in paused[1]["reason"], paused
    assert git(sandbox.repo, "show", "session/gm:hello.txt") == "hello\n"
    assert [c["task"] for c in sandbox.commits("gm")] == ["T-1"]
    assert sandbox.ledger("gm", "T-1")[0]["case"]["summary"] == "wrote hello.txt"
    counted = [c for c in worker_calls(sandbox, "gm") if c["prompt_tokens"]]
    assert len(counted) == 1 and counted[0]["prompt_tokens"] == 2300 and counted[0]["cached_tokens"] == 200
    assert counted[0]["completion_tokens"] == 160 and counted[0]["cost_source"] == "price_table"
    assert counted[0]["cost_usd"] == pytest.approx(list_price(served), rel=0.01)
    bodies = [json.dumps(r["body"]) for r in gemini.calls()]
    assert len(bodies) == 4 and not [b for b in bodies if HOME_MARKER in b], "nothing of the user's HOME is sent"
    assert gemini.calls()[-1]["headers"]["x-goog-api-key"] == GEMINI_KEY
    assert GEMINI_KEY.encode() not in session_bytes(sandbox, "gm")


@pytest.mark.bwrap
@pytest.mark.cli_agents
def test_a_gemini_evaluator_cannot_change_the_worktree(sandbox, fake, model_env, gemini):
    require_bwrap()
    fake.enqueue("worker", reply(tool_calls=[call("write_file", path="a.txt", content="a\n")]),
                 reply(tool_calls=[call("submit_case", summary="done", criteria=[])]))
    tree = sandbox.worktree("gme")
    gemini.enqueue(GEMINI_MODEL,
                   fg.reply(fg.function_call("run_shell_command", command="echo tampered > a.txt; echo x > evil.txt")),
                   fg.reply(fg.function_call("write_file", file_path=str(tree / "evil2.txt"), content="x\n")),
                   fg.reply(fg.text(fenced(ACCEPTED))))
    result = start(sandbox, "gme", {**model_env, **gemini_env(sandbox, gemini, "evaluator"), "TILTH_FINAL_REVIEW": "false"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert sandbox.ledger("gme", "T-1")[0]["verdict"]["verdict"] == "accept"
    assert git(sandbox.repo, "show", "session/gme:a.txt") == "a\n", "the evaluator's write was refused"
    assert not (tree / "evil.txt").exists() and not (tree / "evil2.txt").exists()
    results = [e["data"] for e in of_type(sandbox, "gme", "agent_step") if e["data"]["kind"] == "tool_result"]
    assert [r["name"] for r in results] == ["run_shell_command", "write_file"], results


@pytest.mark.bwrap
@pytest.mark.cli_agents
def test_a_spend_cap_stops_gemini_within_a_call_of_crossing_it(sandbox, fake, model_env, gemini):
    require_bwrap()
    prices(sandbox, GEMINI_MODEL, prompt=100, completion=0)
    tree = sandbox.worktree("gmc")
    # As for Copilot: quiet after its first line (`init`, which names its chat record), the call after
    # the crossing one held until Gemini hangs up.
    quiet = sandbox.root / "quiet-gemini"
    quiet.write_text(f'#!/bin/sh\n{agent_bin("gemini")} "$@" | {{ head -n 1; cat >/dev/null; }}\n')
    quiet.chmod(0o755)
    steps = [fg.reply(fg.text(f"step {i}"), fg.function_call("write_file", file_path=str(tree / f"f{i}.txt"),
                                                            content=f"{i}\n"), usage=fg.usage(1000, 40))
             for i in range(12)]
    gemini.enqueue(GEMINI_MODEL, *steps[:3], held(30, steps[3]), *steps[4:])
    result = start(sandbox, "gmc", {**model_env, **gemini_env(sandbox, gemini), "TILTH_GEMINI_BIN": str(quiet),
                                    "TILTH_SANDBOX_EXPOSE": str(agent_bin("gemini").parents[2]),
                                    "TILTH_MAX_SPEND_USD": "0.25"})
    served = len(gemini.calls())
    answered = served - gemini.hung_up
    assert answered == 3 and served <= 4, f"{answered} calls answered of {served}: not killed while the 4th waited"
    assert result.returncode == 3 and "max_spend_usd" in result.stdout, result.stdout + result.stderr
    [run] = [e["data"] for e in of_type(sandbox, "gmc", "agent_run")]
    assert run["stopped"] == "max_spend_usd reached" and run["duration_ms"] < 30_000, run
    [counted] = worker_calls(sandbox, "gmc")
    assert counted["prompt_tokens"] == 3000 and counted["cost_usd"] == pytest.approx(0.30), counted


def test_a_copilot_or_gemini_cli_that_is_not_installed_is_refused_at_start(sandbox):
    for name in ("copilot", "gemini"):
        env = {"TILTH_WORKER_BACKEND": name, f"TILTH_{name.upper()}_BIN": f"/nonexistent/{name}",
               "TILTH_EVALUATOR_BACKEND": name}
        result = start(sandbox, f"no{name}", env)
        assert result.returncode == 2 and f"the {name} agent binary '/nonexistent/{name}' is not found" in \
            result.stderr, result.stderr
        assert not sandbox.session_dir(f"no{name}").exists()
