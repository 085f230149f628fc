"""The `command` worker: a real process (a small Python agent committed in the repository)
does the worker's turns, tilth's `openai` evaluator judges them against the local
Chat Completions server. Each run is a fresh process in the worktree, in its own process
group and behind the sandbox; a failed or hung agent is a rejected iteration, never a crash."""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import git, task
from fake_openai import ACCEPT, reply
from supervised import alive

PYTHON = os.path.realpath(sys.executable)
"""The interpreter itself, not the venv's link to it: a venv under /tmp is hidden by the sandbox's private /tmp."""

AGENT = r'''
import os, re, subprocess, sys, time
mode, prompt_file = sys.argv[1], sys.argv[2]
prompt = sys.stdin.read()
assert prompt == open(prompt_file).read(), "the prompt arrives on stdin and in {prompt_file}"
task = re.search(r"Task (\S+):", prompt).group(1)
print("working on", task, "; env has TILTH_API_KEY:", "TILTH_API_KEY" in os.environ)
if mode == "fail-first" and "previous verdicts" not in prompt:
    print("boom: could not finish", file=sys.stderr)
    sys.exit(3)
if mode == "hang":
    child = subprocess.Popen(["sleep", "300"])
    open("pids.txt", "w").write(f"{os.getpid()} {child.pid}\n")
    time.sleep(300)
os.makedirs("agent", exist_ok=True)
open(f"agent/{task}.txt", "w").write(f"done {task}\n")
if mode == "no-case":
    print("All finished, I think.")
    sys.exit(0)
print("Here is my case: {not json} and some {\"noise\": 1}")
print("```json")
print('{"summary": "wrote agent/%s.txt", "criteria": [{"criterion": "%s is done", "evidence": "cat agent/%s.txt"}]}'
      % (task, task, task))
print("```")
'''


def start(sandbox, model_env, mode: str, plan: list[dict], **env: str):
    repo = sandbox.repo
    (repo / "tools").mkdir()
    (repo / "tools" / "agent.py").write_text(AGENT)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the agent")
    command = f"{PYTHON} tools/agent.py {mode} {{prompt_file}}"
    return sandbox.tilth("start", "--repo", str(repo), "--prd", str(sandbox.write_json("p.json", plan)), "--id", mode,
                         "--foreground", env={**model_env, "TILTH_WORKER_BACKEND": "command",
                                              "TILTH_WORKER_COMMAND": command, "TILTH_SELF_IMPROVEMENT": "false",
                                              "TILTH_PREFLIGHT": "false", **env}), repo


@pytest.mark.slow
def test_a_cli_agent_does_the_work_and_the_openai_evaluator_judges_it(sandbox, fake, model_env):
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    result, repo = start(sandbox, model_env, "ok", [task("T-1")])
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(repo, "show", "session/ok:agent/T-1.txt") == "done T-1\n"
    assert [c["task"] for c in sandbox.commits("ok")] == ["T-1"]
    entry = sandbox.ledger("ok", "T-1")[0]
    assert entry["case"]["summary"] == "wrote agent/T-1.txt" and entry["verdict"]["verdict"] == "accept"
    run = next(e["data"] for e in sandbox.events("ok") if e["type"] == "agent_run")
    assert run["exit_code"] == 0 and run["case"] == "parsed" and run["stopped"] is None
    out = (sandbox.session_dir("ok") / run["log"]).read_text()
    assert "working on T-1 ; env has TILTH_API_KEY: False" in out, "no key reaches the agent unless passed"
    judged = [r["body"] for r in fake.requests if r["body"] and r["body"]["model"] == "evaluator"]
    assert "wrote agent/T-1.txt" in json.dumps(judged[0]["messages"]), "the evaluator saw the agent's case"
    assert not [r for r in fake.requests if r["body"] and r["body"]["model"] == "worker"], "no worker model call"
    assert f"[T-1 #1] agent {PYTHON}: exit 0, " in result.stdout and "case parsed" in result.stdout


@pytest.mark.slow
def test_an_agent_that_fails_is_a_rejected_iteration_and_the_next_attempt_goes_on(sandbox, fake, model_env):
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    result, repo = start(sandbox, model_env, "fail-first", [task("T-1")])
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = sandbox.ledger("fail-first", "T-1")
    assert first["verdict"]["category"] == "agent_failed"
    assert "exited with code 3: boom: could not finish" in first["verdict"]["concern"]
    assert second["verdict"]["verdict"] == "accept" and [c["task"] for c in sandbox.commits("fail-first")] == ["T-1"]
    assert "worker failed: the command agent exited with code 3" in result.stdout


@pytest.mark.slow
def test_an_agent_without_a_case_is_still_evaluated_with_a_case_built_from_its_output(sandbox, fake, model_env):
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    result, _ = start(sandbox, model_env, "no-case", [task("T-1")])
    assert result.returncode == 0, result.stdout + result.stderr
    case = sandbox.ledger("no-case", "T-1")[0]["case"]
    assert case["summary"].startswith("(The agent printed no case; this is the end of its output.)")
    assert "All finished, I think." in case["summary"] and case["uncertainties"] and case["built_from_output"] is True


@pytest.mark.slow
def test_a_hung_agent_is_killed_with_everything_it_started(sandbox, fake, model_env):
    result, repo = start(sandbox, model_env, "hang", [task("T-1")], TILTH_AGENT_TIMEOUT_S="2",
                         TILTH_MAX_ITERATIONS_PER_TASK="1", TILTH_SANDBOX="off")
    assert result.returncode == 1, result.stdout + result.stderr
    verdict = sandbox.ledger("hang", "T-1")[0]["verdict"]
    assert verdict["category"] == "agent_failed" and "stopped (timeout, 2 s)" in verdict["concern"]
    agent, child = (int(p) for p in (sandbox.worktree("hang") / "pids.txt").read_text().split())
    assert not alive(agent) and not alive(child), "the agent and the process it started are gone"
    assert sandbox.statuses("hang") == {"T-1": "failed"}


EVALUATOR = r'''
import sys
sys.stdin.read()
for name, text in (("agent/T-1.txt", "tampered\n"), ("evil.txt", "planted\n")):
    try:
        with open(name, "w") as f:
            f.write(text)
        print("wrote", name)
    except OSError as exc:
        print("refused", name, exc.strerror)
print("```json")
print('{"verdict": "accept", "category": "", "concern": "", "evidence": ["read agent/T-1.txt"]}')
print("```")
'''


@pytest.mark.slow
@pytest.mark.bwrap
def test_a_command_evaluator_reads_the_worktree_and_cannot_write_it(sandbox, fake, model_env):
    """security.md: the evaluator gets the session's worktree read-only (under bubblewrap)."""
    from tilth.agents.sandbox import bwrap_works

    if not bwrap_works():
        if os.environ.get("TILTH_REQUIRE_BWRAP") == "1":
            pytest.fail("TILTH_REQUIRE_BWRAP=1 but bubblewrap cannot run here")
        pytest.skip("bubblewrap is not installed or cannot create namespaces here (apt-get install bubblewrap)")
    (sandbox.repo / "evaluator.py").write_text(EVALUATOR)  # committed with the worker's agent by `start`
    result, repo = start(sandbox, model_env, "ok", [task("T-1")], TILTH_SANDBOX="bwrap",
                         TILTH_EVALUATOR_BACKEND="command",
                         TILTH_EVALUATOR_COMMAND=f"{PYTHON} evaluator.py {{prompt_file}}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(repo, "show", "session/ok:agent/T-1.txt") == "done T-1\n", "the evaluator's write was refused"
    assert "evil.txt" not in git(repo, "ls-tree", "-r", "--name-only", "session/ok")
    judged = [e["data"] for e in sandbox.events("ok") if e["type"] == "agent_run" and e["data"]["role"] == "evaluator"]
    said = (sandbox.session_dir("ok") / judged[0]["log"]).read_text()
    assert said.count("refused") == 2 and "Read-only file system" in said, said
    assert sandbox.ledger("ok", "T-1")[0]["verdict"]["verdict"] == "accept"


def test_a_command_worker_without_its_command_is_refused_at_start(sandbox, model_env):
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(sandbox.write_json("p.json", [task("T-1")])),
                           "--id", "s1", env={**model_env, "TILTH_WORKER_BACKEND": "command", "TILTH_PREFLIGHT": "false"})
    assert result.returncode == 2 and "set TILTH_WORKER_COMMAND" in result.stderr, result.stderr
    assert not sandbox.session_dir("s1").exists()
