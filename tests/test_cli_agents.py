"""The REAL Claude Code and Codex CLIs as worker and evaluator, against the local stub servers
(tests/fake_anthropic.py: the Messages API; tests/fake_responses.py: the Responses API) and
tilth's own `openai` loop against tests/fake_openai.py. Installed by `make agents`
(scripts/install-cli-agents.sh); on CI a missing CLI fails the run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import fake_anthropic as fa
import fake_responses as fr
import pytest
from cli_agents import agent_bin
from conftest import git, task
from fake_anthropic import FakeAnthropic
from fake_openai import ACCEPT, SUBMIT, call, fault, reply
from fake_responses import FakeResponses
from supervised import start_supervisor

from tilth.agents.sandbox import bwrap_works

CLAUDE_MODEL = "claude-stub-model"
CODEX_MODEL = "gpt-5.5"
ANTHROPIC_KEY = "sk-ant-stubkey-0123456789abcdef"
CODEX_KEY = "stub-codex-key-0123456789"


def require_bwrap() -> None:
    if not bwrap_works():
        if os.environ.get("TILTH_REQUIRE_BWRAP") == "1":
            pytest.fail("TILTH_REQUIRE_BWRAP=1 but bubblewrap cannot run here")
        pytest.skip("bubblewrap is not installed or cannot create namespaces here (apt-get install bubblewrap)")


@pytest.fixture
def anthropic():
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def responses():
    with FakeResponses() as server:
        yield server


def claude_env(server: FakeAnthropic, root: Path, role: str = "worker") -> dict[str, str]:
    backend = {"worker": {"TILTH_WORKER_BACKEND": "claude"}, "evaluator": {"TILTH_EVALUATOR_BACKEND": "claude"},
               "panel": {}}[role]
    return {**backend, "TILTH_CLAUDE_BIN": str(agent_bin("claude")), "TILTH_CLAUDE_ARGS": f"--model {CLAUDE_MODEL}",
            "ANTHROPIC_BASE_URL": server.root_url, "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
            "CLAUDE_CONFIG_DIR": str(root / "claude-config"), "CLAUDE_CODE_MAX_RETRIES": "0"}


def codex_env(server: FakeResponses, root: Path, role: str = "evaluator") -> dict[str, str]:
    backend = {"worker": {"TILTH_WORKER_BACKEND": "codex"}, "evaluator": {"TILTH_EVALUATOR_BACKEND": "codex"},
               "panel": {}}[role]
    provider = (f'model_providers.stub={{name="stub",base_url="{server.base_url}",env_key="STUB_CODEX_KEY",'
                'wire_api="responses",request_max_retries=0,stream_max_retries=0}')
    return {**backend, "TILTH_CODEX_BIN": str(agent_bin("codex")),
            "TILTH_CODEX_ARGS": f"-m {CODEX_MODEL} -c model_provider=stub -c '{provider}'",
            "STUB_CODEX_KEY": CODEX_KEY, "TILTH_AGENT_PASS_ENV": "STUB_CODEX_KEY",
            "CODEX_HOME": str(root / "codex-home")}


def fenced(obj: dict) -> str:
    return "Here it is.\n```json\n" + json.dumps(obj) + "\n```\n"


CASE = {"summary": "wrote hello.txt", "criteria": [{"criterion": "T-1 is done", "evidence": "cat hello.txt"}]}
ACCEPTED = {"verdict": "accept", "category": "none", "concern": "", "evidence": ["read hello.txt"], "next_step": ""}
REJECTED = {"verdict": "reject", "category": "weak_test", "concern": "no test covers it", "evidence": ["no test"],
            "next_step": "add a test"}


def start(sandbox, sid: str, env: dict[str, str], plan: list[dict] | None = None, timeout: float = 240):
    prd = sandbox.write_json(f"{sid}.json", plan or [task("T-1")])
    return sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", sid, "--foreground",
                         env={"TILTH_SELF_IMPROVEMENT": "false", "TILTH_PREFLIGHT": "false", **env}, timeout=timeout)


def of_type(sandbox, sid: str, kind: str) -> list[dict]:
    return [e for e in sandbox.events(sid) if e["type"] == kind]


def session_bytes(sandbox, sid: str) -> bytes:
    return b"".join(p.read_bytes() for p in sandbox.session_dir(sid).rglob("*") if p.is_file())


@pytest.mark.cli_agents
def test_claude_code_works_and_the_openai_evaluator_judges(sandbox, fake, model_env, anthropic):
    target = sandbox.worktree("cc") / "hello.txt"
    anthropic.enqueue(CLAUDE_MODEL,
                      fa.reply(fa.text("Writing it."), fa.tool_use("Write", file_path=str(target), content="hello\n"),
                               usage=fa.usage(1000, 50, cache_read_input_tokens=200)),
                      fa.reply(fa.text(fenced(CASE)), usage=fa.usage(1300, 80)),
                      fa.reply(fa.text("- greet with hello.txt"), usage=fa.usage(300, 10)))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    result = start(sandbox, "cc", {**model_env, **claude_env(anthropic, sandbox.root), "TILTH_SELF_IMPROVEMENT": "true"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(sandbox.repo, "show", "session/cc:hello.txt") == "hello\n"
    assert [c["task"] for c in sandbox.commits("cc")] == ["T-1"]
    entry = sandbox.ledger("cc", "T-1")[0]
    assert entry["case"]["summary"] == "wrote hello.txt" and "built_from_output" not in entry["case"]
    assert entry["verdict"]["verdict"] == "accept"
    calls = [e["data"] for e in of_type(sandbox, "cc", "model_call") if e["data"]["role"] == "worker"]
    assert len(calls) == 1 and calls[0]["model"] == CLAUDE_MODEL
    [learned] = of_type(sandbox, "cc", "learnings_proposed")
    assert learned["data"]["count"] == 1, "the learner is Claude Code too, read-only"
    assert "greet with hello.txt" in (sandbox.session_dir("cc") / "proposed-learnings.md").read_text()
    assert calls[0]["prompt_tokens"] == 2500 and calls[0]["completion_tokens"] == 130
    assert calls[0]["cost_source"] == "provider" and calls[0]["cost_usd"] > 0
    steps = [e["data"] for e in of_type(sandbox, "cc", "agent_step")]
    assert any(s["kind"] == "tool_use" and s["name"] == "Write" for s in steps), steps
    transcript = (sandbox.session_dir("cc") / "transcript.md").read_text()
    step = next(block for block in transcript.split("### Step ") if '"tool_use": "Write"' in block)
    assert "- thought:\n```text\nWriting it.\n```" in step and "File created successfully" in step, step
    run, learner = (e["data"] for e in of_type(sandbox, "cc", "agent_run"))
    assert learner["role"] == "learner"
    assert run["agent"] == "claude" and run["case"] == "parsed" and run["exit_code"] == 0
    assert not [r for r in fake.requests if r["body"] and r["body"]["model"] == "worker"], "no worker model call"
    assert anthropic.posts()[0]["headers"]["x-api-key"] == ANTHROPIC_KEY
    assert ANTHROPIC_KEY.encode() not in session_bytes(sandbox, "cc"), "the agent's key never reaches a session file"
    status = json.loads(sandbox.tilth("status", "cc", "--json").stdout)
    assert status["tokens"] >= 2630 and status["cost_usd"] > 0, status


@pytest.mark.bwrap
@pytest.mark.cli_agents
def test_the_openai_worker_is_judged_by_codex_which_cannot_write(sandbox, fake, model_env, responses):
    require_bwrap()
    sandbox.home.mkdir()
    (sandbox.home / "config.toml").write_text(f'[prices."{CODEX_MODEL}"]\nprompt = 2.0\ncompletion = 10.0\n')
    fake.enqueue("worker", reply(tool_calls=[call("write_file", path="a.txt", content="a\n")]),
                 reply(tool_calls=[SUBMIT]))
    responses.enqueue(CODEX_MODEL,
                      fr.reply(fr.exec_command("echo tampered > a.txt; echo x > evil.txt"), usage=fr.usage(500, 20)),
                      fr.reply(fr.message(fenced(ACCEPTED)), usage=fr.usage(700, 30)))
    result = start(sandbox, "cx", {**model_env, **codex_env(responses, sandbox.root)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(sandbox.repo, "show", "session/cx:a.txt") == "a\n", "the evaluator's write was refused"
    assert "evil.txt" not in git(sandbox.repo, "ls-tree", "--name-only", "session/cx")
    assert sandbox.ledger("cx", "T-1")[0]["verdict"]["verdict"] == "accept"
    commands = [e["data"] for e in of_type(sandbox, "cx", "agent_step") if e["data"]["kind"] == "command"]
    assert commands and commands[0]["role"] == "evaluator"
    calls = [e["data"] for e in of_type(sandbox, "cx", "model_call")
             if e["data"]["role"] == "evaluator" and e["task"] == "T-1"]  # not the final review's
    assert len(calls) == 1 and calls[0]["prompt_tokens"] == 1200 and calls[0]["completion_tokens"] == 50
    assert calls[0]["cost_source"] == "price_table", "Codex reports no cost: the price table prices it"
    assert calls[0]["cost_usd"] == pytest.approx((1200 * 2.0 + 50 * 10.0) / 1_000_000)
    assert responses.posts()[0]["headers"]["authorization"] == f"Bearer {CODEX_KEY}"
    assert CODEX_KEY.encode() not in session_bytes(sandbox, "cx")


@pytest.mark.cli_agents
def test_a_panel_where_one_rejects_rejects_under_all_and_the_worker_sees_each_concern(sandbox, fake, model_env,
                                                                                     anthropic):
    write = reply(tool_calls=[call("write_file", path="a.txt", content="a\n")])
    fake.enqueue("worker", write, reply(tool_calls=[SUBMIT]), write, reply(tool_calls=[SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]), reply(tool_calls=[ACCEPT]))
    anthropic.enqueue(CLAUDE_MODEL, fa.reply(fa.text(fenced(REJECTED))), fa.reply(fa.text(fenced(ACCEPTED))))
    env = {**model_env, **claude_env(anthropic, sandbox.root, "panel"), "TILTH_EVALUATORS": "claude,openai",
           "TILTH_EVALUATOR_POLICY": "all", "TILTH_MAX_ITERATIONS_PER_TASK": "2"}
    result = start(sandbox, "all", env)
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = (entry["verdict"] for entry in sandbox.ledger("all", "T-1"))
    assert first["verdict"] == "reject" and first["concern"] == "claude: no test covers it"
    assert [(v["evaluator"], v["verdict"]) for v in first["panel"]] == [("claude", "reject"), ("openai", "accept")]
    assert second["verdict"] == "accept" and len(second["panel"]) == 2
    retry = [r["body"] for r in fake.requests if r["body"] and r["body"]["model"] == "worker"][2]
    assert "- claude: reject (weak_test). Concern: no test covers it Next step: add a test" in \
        retry["messages"][1]["content"], "the retrying worker sees each evaluator's concern"


def test_a_panel_under_all_rejects_on_any_one_rejection_and_under_majority_accepts_over_it():
    from tilth.agents.backends.panel import decide
    from tilth.store.ledger import Verdict

    said = [Verdict(verdict="accept", evaluator="claude"), Verdict(verdict="reject", category="weak_test",
                                                                  concern="no test", evaluator="codex"),
            Verdict(verdict="accept", evaluator="openai")]
    under_all, under_majority = decide(said, "all"), decide(said, "majority")
    assert (under_all.verdict, under_all.concern, under_all.category) == ("reject", "codex: no test", "weak_test")
    assert under_all.evidence == ["2 of 3 evaluators accepted (all needed)"] and under_all.panel == said
    assert under_majority.verdict == "accept" and under_majority.evidence == ["2 of 3 evaluators accepted (majority needed)"]


@pytest.mark.cli_agents
def test_a_majority_panel_of_three_accepts_over_one_rejection(sandbox, fake, model_env, anthropic, responses):
    fake.enqueue("worker", reply(tool_calls=[call("write_file", path="a.txt", content="a\n")]),
                 reply(tool_calls=[SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    anthropic.enqueue(CLAUDE_MODEL, fa.reply(fa.text(fenced(ACCEPTED))))
    responses.enqueue(CODEX_MODEL, fr.reply(fr.message(fenced(REJECTED))))
    env = {**model_env, **claude_env(anthropic, sandbox.root, "panel"), **codex_env(responses, sandbox.root, "panel"),
           "TILTH_EVALUATORS": "claude,codex,openai", "TILTH_EVALUATOR_POLICY": "majority"}
    result = start(sandbox, "maj", env)
    assert result.returncode == 0, result.stdout + result.stderr
    verdict = sandbox.ledger("maj", "T-1")[0]["verdict"]
    assert verdict["verdict"] == "accept" and verdict["evidence"] == ["2 of 3 evaluators accepted (majority needed)"]
    assert [(v["evaluator"], v["verdict"]) for v in verdict["panel"]] == [
        ("claude", "accept"), ("codex", "reject"), ("openai", "accept")]
    assert [c["task"] for c in sandbox.commits("maj")] == ["T-1"]


@pytest.mark.cli_agents
def test_a_stub_500_is_a_rejected_iteration_and_the_next_one_goes_on(sandbox, fake, model_env, anthropic):
    target = sandbox.worktree("f500") / "hello.txt"
    anthropic.enqueue(CLAUDE_MODEL, fa.fault(500, "stub exploded"),
                      fa.reply(fa.tool_use("Write", file_path=str(target), content="hello\n")),
                      fa.reply(fa.text(fenced(CASE))))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    result = start(sandbox, "f500", {**model_env, **claude_env(anthropic, sandbox.root)})
    assert result.returncode == 0, result.stdout + result.stderr
    first, second = sandbox.ledger("f500", "T-1")
    assert first["verdict"]["category"] == "agent_failed" and "500" in first["verdict"]["concern"]
    assert second["verdict"]["verdict"] == "accept"
    assert not of_type(sandbox, "f500", "session_paused"), "a server error is not a usage limit"


@pytest.mark.cli_agents
def test_a_hung_endpoint_is_bounded_by_the_timeout_which_kills_the_whole_agent(sandbox, fake, model_env, anthropic):
    anthropic.enqueue(CLAUDE_MODEL, fa.hang())
    env = {**model_env, **claude_env(anthropic, sandbox.root), "TILTH_AGENT_TIMEOUT_S": "6",
           "TILTH_MAX_ITERATIONS_PER_TASK": "1"}
    result = start(sandbox, "hang", env)
    assert result.returncode == 1, result.stdout + result.stderr
    verdict = sandbox.ledger("hang", "T-1")[0]["verdict"]
    assert verdict["category"] == "agent_failed" and "stopped (timeout, 6 s)" in verdict["concern"]
    worktree = str(sandbox.worktree("hang"))
    assert not [pid for pid in running_pids() if cwd_of(pid) == worktree], "no agent process is left in the worktree"


def running_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != "Z":
                pids.append(int(entry.name))
    return pids


def cwd_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


@pytest.mark.cli_agents
def test_commits_the_agent_makes_are_folded_into_the_one_task_commit(sandbox, fake, model_env, anthropic):
    anthropic.enqueue(CLAUDE_MODEL,
                      fa.reply(fa.tool_use("Bash", command="echo one > one.txt && git add one.txt && "
                                                           "git -c user.name=a -c user.email=a@b commit -qm agent-1")),
                      fa.reply(fa.text(fenced(CASE))))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    env = {**model_env, **claude_env(anthropic, sandbox.root), "TILTH_SANDBOX": "off",
           "TILTH_CLAUDE_ARGS": f"--model {CLAUDE_MODEL} --dangerously-skip-permissions",
           "IS_SANDBOX": "1", "TILTH_AGENT_PASS_ENV": "IS_SANDBOX"}
    result = start(sandbox, "fold", env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert of_type(sandbox, "fold", "worker_commits_folded"), "the agent's own commit was folded"
    commits = sandbox.commits("fold")
    assert [c["task"] for c in commits] == ["T-1"]
    assert "agent-1" not in git(sandbox.repo, "log", "--format=%s", "main..session/fold")
    assert git(sandbox.repo, "show", "session/fold:one.txt") == "one\n"


@pytest.mark.cli_agents
def test_a_usage_limit_pauses_the_session_and_the_supervisor_resumes_it(sandbox, daemon, fake, model_env, anthropic):
    target = sandbox.worktree("lim") / "hello.txt"
    anthropic.enqueue(CLAUDE_MODEL, fa.usage_limit(resets_in=4),
                      fa.reply(fa.tool_use("Write", file_path=str(target), content="hello\n")),
                      fa.reply(fa.text(fenced(CASE))))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    # A subscription login (the OAuth token), whose limits say when they reset. One attempt per
    # task: had the limited run counted, the task would end FAILED.
    env = {**model_env, **claude_env(anthropic, sandbox.root), "TILTH_MAX_ITERATIONS_PER_TASK": "1",
           "TILTH_SELF_IMPROVEMENT": "false", "TILTH_PREFLIGHT": "false", "CLAUDE_CODE_OAUTH_TOKEN": ANTHROPIC_KEY}
    del env["ANTHROPIC_API_KEY"]
    sandbox.env.update(env)
    start_supervisor(sandbox)
    prd = sandbox.write_json("lim.json", [task("T-1")])
    assert sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "lim").returncode == 0

    paused = daemon.wait_for("lim", lambda r: r["state"] in ("paused", "queued", "running", "done")
                             and bool(daemon.events("lim", "session_paused")), "lim to pause")
    [event] = daemon.events("lim", "session_paused")
    assert event["data"]["reset_given"] is True and event["data"]["in_process"] is False
    assert "usage limit" in event["data"]["reason"]
    assert paused["state"] != "failed" and not (sandbox.session_dir("lim") / "ledger" / "T-1.jsonl").exists(), \
        "the limited attempt left no ledger entry"
    daemon.done("lim")
    assert daemon.events("lim", "session_unpaused"), "the supervisor resumed it by itself"
    [entry] = sandbox.ledger("lim", "T-1")
    assert entry["iter"] == 1 and entry["verdict"]["verdict"] == "accept"
    assert [c["task"] for c in sandbox.commits("lim")] == ["T-1"]
    assert git(sandbox.repo, "show", "session/lim:hello.txt") == "hello\n"
    limited = [e["data"] for e in of_type(sandbox, "lim", "agent_run") if e["data"]["limit"]]
    assert len(limited) == 1 and limited[0]["case"] == "none"


@pytest.mark.cli_agents
def test_a_foreground_run_waits_out_a_limit_without_a_reset_time(sandbox, fake, model_env, anthropic):
    target = sandbox.worktree("fg") / "hello.txt"
    anthropic.enqueue(CLAUDE_MODEL, fa.usage_limit(resets_in=3600),
                      fa.reply(fa.tool_use("Write", file_path=str(target), content="hello\n")),
                      fa.reply(fa.text(fenced(CASE))))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    env = {**model_env, **claude_env(anthropic, sandbox.root), "TILTH_MAX_ITERATIONS_PER_TASK": "1",
           "TILTH_USAGE_LIMIT_BACKOFF_S": "1"}
    result = start(sandbox, "fg", env)
    assert result.returncode == 0, result.stdout + result.stderr
    [paused] = of_type(sandbox, "fg", "session_paused")
    # With an API key Claude Code reports the 429 but not when the account's limit resets: back off.
    assert paused["data"]["reset_given"] is False and paused["data"]["wait_s"] == 1.0
    assert paused["data"]["in_process"] is True and of_type(sandbox, "fg", "pause_over")
    assert [e["verdict"]["verdict"] for e in sandbox.ledger("fg", "T-1")] == ["accept"]
    assert "paused until" in result.stdout and "usage limit" in result.stdout


@pytest.mark.slow
def test_an_openai_429_that_outlasts_the_retries_pauses_too(sandbox, fake, model_env):
    fake.enqueue("worker", fault(429, headers={"Retry-After": "1"}),
                 reply(tool_calls=[call("write_file", path="a.txt", content="a\n")]), reply(tool_calls=[SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    result = start(sandbox, "oa", {**model_env, "TILTH_MAX_RETRIES": "0", "TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    [paused] = of_type(sandbox, "oa", "session_paused")
    assert paused["data"]["reset_given"] is True and 0 < paused["data"]["wait_s"] <= 1.0
    assert "HTTP 429" in paused["data"]["reason"]
    assert [e["verdict"]["verdict"] for e in sandbox.ledger("oa", "T-1")] == ["accept"]


@pytest.mark.cli_agents
def test_a_cli_evaluator_gets_one_retry_for_an_unreadable_verdict(sandbox, fake, model_env, anthropic):
    write = reply(tool_calls=[call("write_file", path="a.txt", content="a\n")])
    fake.enqueue("worker", write, reply(tool_calls=[SUBMIT]),
                 reply(tool_calls=[call("write_file", path="b.txt", content="b\n")]),
                 reply(tool_calls=[call("submit_case", summary="done", criteria=[])]))
    anthropic.enqueue(CLAUDE_MODEL, fa.reply(fa.text("Looks fine to me.")), fa.reply(fa.text(fenced(ACCEPTED))),
                      fa.reply(fa.text('```json\n{"verdict": "maybe"}\n```')), fa.reply(fa.text("Still thinking.")))
    env = {**model_env, **claude_env(anthropic, sandbox.root, "evaluator"), "TILTH_MAX_ITERATIONS_PER_TASK": "1"}
    result = start(sandbox, "ev", env, [task("T-1"), task("T-2")])
    assert result.returncode == 1, result.stdout + result.stderr
    assert sandbox.ledger("ev", "T-1")[0]["verdict"]["verdict"] == "accept"
    retried = "".join(part["text"] for part in anthropic.posts()[1]["body"]["messages"][0]["content"])
    assert 'Your previous answer could not be read: no JSON object with a "verdict" was found' in retried
    failed = sandbox.ledger("ev", "T-2")[0]["verdict"]
    assert failed["category"] == "parse_failed" and "could not be parsed" in failed["concern"]
    runs = [(e["task"], e["data"]["verdict"]) for e in of_type(sandbox, "ev", "agent_run")]
    assert runs == [("T-1", "built"), ("T-1", "parsed"), ("T-2", "built"), ("T-2", "built")]
    assert sandbox.statuses("ev") == {"T-1": "done", "T-2": "failed"}


def test_a_cli_agent_that_is_not_installed_is_refused_at_start(sandbox):
    env = {"TILTH_WORKER_BACKEND": "claude", "TILTH_EVALUATOR_BACKEND": "codex", "TILTH_CLAUDE_BIN": "/nonexistent/claude"}
    result = start(sandbox, "nobin", env)
    assert result.returncode == 2
    assert "the claude agent binary '/nonexistent/claude' is not found" in result.stderr
    assert "set TILTH_CLAUDE_BIN" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not sandbox.session_dir("nobin").exists()


@pytest.mark.cli_agents
def test_aider_works_and_the_openai_evaluator_judges(sandbox, fake, model_env):
    aider = agent_bin("aider")
    # The model's price, where aider looks for it in the repository (the sandbox's /tmp is private:
    # a file of the test's own tmp dir would not be seen).
    (sandbox.repo / ".aider.model.metadata.json").write_text(json.dumps({"openai/aider-model": {
        "max_input_tokens": 128000, "max_output_tokens": 4096, "input_cost_per_token": 2e-6,
        "output_cost_per_token": 1e-5, "litellm_provider": "openai", "mode": "chat"}}))
    git(sandbox.repo, "add", "-A")
    git(sandbox.repo, "commit", "-qm", "the model's price")
    # aider's edit format: a file's name on its own line, then its whole content fenced; the case
    # as a bare JSON object (a fenced one would read as a file to write).
    edits = "I will create hello.txt.\n\nhello.txt\n```\nhello\n```\n\n" + json.dumps(CASE) + "\n"
    fake.enqueue("aider-model", reply(edits, usage={"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    (sandbox.root / "aider-home").mkdir()
    env = {**model_env, "TILTH_WORKER_BACKEND": "aider", "TILTH_AIDER_BIN": str(aider),
           "TILTH_AIDER_ARGS": "--model openai/aider-model",
           "OPENAI_API_BASE": fake.base_url, "OPENAI_API_KEY": "sk-aider-stub-0123456789",
           "HOME": str(sandbox.root / "aider-home")}
    result = start(sandbox, "ai", env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert git(sandbox.repo, "show", "session/ai:hello.txt") == "hello\n"
    assert [c["task"] for c in sandbox.commits("ai")] == ["T-1"]
    assert sandbox.ledger("ai", "T-1")[0]["case"]["summary"] == "wrote hello.txt"
    [worker] = [e["data"] for e in of_type(sandbox, "ai", "model_call") if e["data"]["role"] == "worker"]
    assert worker["prompt_tokens"] == 900 and worker["completion_tokens"] == 40
    assert worker["cost_usd"] == pytest.approx(900 * 2e-6 + 40 * 1e-5, rel=0.05) and worker["cost_source"] == "provider"
    assert not (sandbox.worktree("ai") / ".aider.chat.history.md").exists()


@pytest.mark.slow
def test_a_supervisor_without_the_agents_key_is_refused_before_the_session_is_handed_over(sandbox, daemon):
    start_supervisor(sandbox)  # from an environment without ANTHROPIC_API_KEY
    env = {"TILTH_WORKER_BACKEND": "claude", "TILTH_EVALUATOR_BACKEND": "claude", "TILTH_CLAUDE_BIN": "/bin/true",
           "ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    prd = sandbox.write_json("k.json", [task("T-1")])
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "k", env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "was started without ANTHROPIC_API_KEY, which this session needs" in result.stderr
    assert "config.toml" not in result.stderr and not sandbox.session_dir("k").exists()
    # A foreground session records which credential it started with (by name, never the value):
    # a run without it stops at once and says where it is missing.
    foreground = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "f", "--foreground",
                               env={**env, "TILTH_CLAUDE_BIN": "/bin/false"})
    record = json.loads((sandbox.session_dir("f") / "session.json").read_text())
    assert record["keys"] == ["ANTHROPIC_API_KEY"] and ANTHROPIC_KEY not in json.dumps(record), foreground.stdout
    again = sandbox.tilth("resume", "f", "--foreground", env={"TILTH_CLAUDE_BIN": "/bin/false"})
    assert again.returncode == 2
    assert "was started with ANTHROPIC_API_KEY, which this process does not have" in again.stderr
    assert "set it in the supervisor's environment" in again.stderr


def test_a_cli_agent_cut_off_the_network_is_refused_at_start(sandbox):
    env = {"TILTH_WORKER_BACKEND": "codex", "TILTH_EVALUATOR_BACKEND": "codex", "TILTH_CODEX_BIN": "/bin/true",
           "TILTH_AGENT_NETWORK": "off"}
    result = start(sandbox, "offline", env)
    assert result.returncode == 2 and "would cut codex off its own model endpoint" in result.stderr, result.stderr
    assert not sandbox.session_dir("offline").exists()


@pytest.mark.cli_agents
@pytest.mark.slow
def test_claude_code_works_in_parallel_lanes(sandbox, fake, model_env, anthropic):
    """Two tasks at once, each a real Claude Code in its own lane worktree: each writes its own
    file there (found by the task id in its prompt), each lands one commit, nothing of one lane
    reaches the other."""

    def worker(body: dict) -> fa.Response:
        said = json.dumps(body.get("messages", []))
        if "tool_result" in said:
            task_id = next(t for t in ("T-1", "T-2") if f"{t}.txt" in said)
            return fa.reply(fa.text(fenced({"summary": f"wrote {task_id}.txt",
                                            "criteria": [{"criterion": f"{task_id} is done",
                                                          "evidence": f"cat {task_id}.txt"}]})))
        task_id = next(t for t in ("T-1", "T-2") if f"Do {t}." in said)
        return fa.reply(fa.text("Writing it."), fa.tool_use("Bash", command=f"echo {task_id} > {task_id}.txt",
                                                            description="write the file"))

    anthropic.set_handler(worker)
    fake.set_handler(lambda body: reply(tool_calls=[ACCEPT]))
    result = start(sandbox, "cl", {**model_env, **claude_env(anthropic, sandbox.root), "TILTH_PARALLEL_TASKS": "2"},
                   plan=[task("T-1"), task("T-2")])
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(c["task"] for c in sandbox.commits("cl")) == ["T-1", "T-2"]
    assert git(sandbox.repo, "rev-list", "--merges", "main..session/cl") == ""
    for task_id in ("T-1", "T-2"):
        assert git(sandbox.repo, "show", f"session/cl:{task_id}.txt") == f"{task_id}\n"
    lanes = {e["data"]["lane"] for e in of_type(sandbox, "cl", "lane_started")}
    runs = of_type(sandbox, "cl", "agent_run")
    assert lanes == {1, 2} and {r["data"]["lane"] for r in runs if r["data"]["role"] == "worker"} == {1, 2}
    assert all(r["data"]["exit_code"] == 0 for r in runs), runs
