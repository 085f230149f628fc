"""The openai backend end to end: real `tilth` processes, the real SDK, and a real local
HTTP server speaking the Chat Completions wire format (tests/fake_openai.py)."""

from __future__ import annotations

import json

import pytest

from conftest import MODEL_KEY as KEY
from conftest import git, task
from fake_openai import call, drop, fault, raw, reply



def case(summary="Wrote hello.py printing 1.") -> tuple[str, str]:
    return call("submit_case", summary=summary, criteria=[{"criterion": "T-1 is done", "evidence": "hello.py"}])


def verdict(decision="accept", **extra) -> tuple[str, str]:
    body = {"verdict": decision, "category": "none" if decision == "accept" else "acceptance_gap",
            "concern": "" if decision == "accept" else "missing piece", "evidence": ["hello.py"],
            "next_step": "" if decision == "accept" else "add the piece"}
    return call("submit_verdict", **{**body, **extra})


WRITE = call("write_file", path="hello.py", content="print(1)\n")


def start(sandbox, env, plan=None, *extra):
    prd = sandbox.write_json("prd.json", plan or [task("T-1", "Say hello")])
    return sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1", "--foreground",
                         *extra, env=env)


def bodies(fake, model):
    return [r["body"] for r in fake.requests if r["body"] and r["body"].get("model") == model]


def first_user(body) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


@pytest.mark.slow
def test_whole_task_through_worker_tools_and_evaluator(sandbox, fake, model_env):
    fake.enqueue("worker", reply(tool_calls=[WRITE]), reply(tool_calls=[case()]))
    fake.enqueue("evaluator", reply(tool_calls=[call("read_file", path="hello.py")]),
                 reply(tool_calls=[verdict()], cost=0.25))
    result = start(sandbox, model_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "openai-compatible" in result.stdout

    commits = sandbox.commits("s1")
    assert len(commits) == 1 and git(sandbox.repo, "show", f"{commits[0]['sha']}:hello.py") == "print(1)\n"
    assert "Wrote hello.py printing 1." in git(sandbox.repo, "log", "-1", "--format=%B", "session/s1")
    entry = sandbox.ledger("s1", "T-1")[0]
    assert entry["case"]["summary"] == "Wrote hello.py printing 1." and entry["verdict"]["verdict"] == "accept"

    worker, evaluator = bodies(fake, "worker"), bodies(fake, "evaluator")
    assert "\n\nTask T-1: Say hello\n" in first_user(worker[0])
    assert first_user(evaluator[0]).startswith("Task T-1: Say hello\n")
    assert "+print(1)" in first_user(evaluator[0]) and "Wrote hello.py printing 1." in first_user(evaluator[0])
    assert {t["function"]["name"] for t in evaluator[0]["tools"]} == {"read_file", "list_files", "grep",
                                                                       "submit_verdict"}
    tool_result = worker[1]["messages"][-1]
    assert tool_result["role"] == "tool" and tool_result["tool_call_id"] == "call_0"
    assert "hello.py" in tool_result["content"] and not tool_result["content"].startswith("error")
    assert "print(1)" in evaluator[1]["messages"][-1]["content"]

    calls = [e for e in sandbox.events("s1") if e["type"] == "model_call"]
    assert [e["task"] for e in calls] == ["T-1"] * 4 + ["final-review"], "the session ends with the final review"
    calls = [e["data"] for e in calls[:4]]
    assert all(c["total_tokens"] == 15 and c["latency_ms"] >= 0 for c in calls)
    assert calls[-1]["cost_usd"] == 0.25 and calls[-1]["cost_source"] == "provider"
    assert calls[0]["cost_source"] == "unknown"


@pytest.mark.slow
def test_transient_faults_are_retried_and_each_attempt_is_an_event(sandbox, fake, model_env):
    fake.enqueue("worker", fault(429, headers={"Retry-After": "0"}), fault(503), drop(), raw(200, b"{}"),
                 raw(200, b'{"error": {"message": "overloaded"}}'), reply(tool_calls=[WRITE, case()]))
    fake.enqueue("evaluator", reply(tool_calls=[verdict()]))
    result = start(sandbox, model_env)
    assert result.returncode == 0, result.stdout + result.stderr
    attempts = [e["data"]["outcome"] for e in sandbox.events("s1")
                if e["type"] == "model_attempt" and e["data"]["role"] == "worker"]
    assert attempts == ["rate_limited", "server_error", "connection_error", "empty_reply", "empty_reply", "ok"]


@pytest.mark.slow
def test_persistent_failure_stops_resumably(sandbox, fake, model_env):
    fake.enqueue("worker", *[fault(500)] * 3)
    env = {**model_env, "TILTH_MAX_RETRIES": "2"}
    result = start(sandbox, env)
    assert result.returncode == 3, result.stderr
    assert "worker model (worker) call failed after 3 attempt(s)" in result.stderr
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "stopped"
    fake.enqueue("worker", reply(tool_calls=[WRITE, case()]))
    fake.enqueue("evaluator", reply(tool_calls=[verdict()]))
    assert sandbox.tilth("resume", "s1", "--foreground", env=env).returncode == 0
    assert len(sandbox.commits("s1")) == 1


@pytest.mark.slow
def test_client_errors_are_not_retried(sandbox, fake, model_env):
    fake.enqueue("worker", fault(401, {"error": {"message": "bad key"}}))
    result = start(sandbox, model_env)
    assert result.returncode == 3 and "AuthenticationError" in result.stderr
    assert len(bodies(fake, "worker")) == 1


@pytest.mark.slow
def test_malformed_arguments_unknown_tools_and_length_cutoffs_reach_the_model(sandbox, fake, model_env):
    fake.enqueue("worker",
                 reply(tool_calls=[("write_file", '{"path": "a.py", "content": ')]),
                 reply(tool_calls=[("launch_rockets", "{}")]),
                 reply(content="Let me think about this at great", finish_reason="length"),
                 reply(tool_calls=[call("read_file", path="../../etc/passwd")]),
                 reply(tool_calls=[WRITE, case()]))
    fake.enqueue("evaluator", reply(tool_calls=[verdict()]))
    result = start(sandbox, model_env)
    assert result.returncode == 0, result.stderr
    worker = bodies(fake, "worker")
    assert "not valid JSON" in worker[1]["messages"][-1]["content"]
    assert "no tool named 'launch_rockets'" in worker[2]["messages"][-1]["content"]
    assert "cut off by the length limit" in worker[3]["messages"][-1]["content"]
    refused = worker[4]["messages"][-1]["content"]
    assert refused.startswith("error:") and "root:" not in refused


@pytest.mark.slow
def test_step_cap_without_a_case_is_a_no_case_rejection(sandbox, fake, model_env):
    fake.enqueue("worker", *[reply(tool_calls=[call("list_files")])] * 2, reply(tool_calls=[WRITE, case()]))
    fake.enqueue("evaluator", reply(tool_calls=[verdict()]))
    env = {**model_env, "TILTH_WORKER_MAX_STEPS": "2", "TILTH_FINAL_REVIEW": "false"}  # counts the task's calls
    assert start(sandbox, env).returncode == 0
    entries = sandbox.ledger("s1", "T-1")
    assert entries[0]["case"] is None and entries[0]["verdict"]["category"] == "no_case"
    assert entries[1]["verdict"]["verdict"] == "accept"
    assert len(bodies(fake, "evaluator")) == 1, "no evaluator call for an iteration without a case"


@pytest.mark.slow
def test_unparseable_verdicts_are_retried_then_recorded_as_parse_failed(sandbox, fake, model_env):
    fake.enqueue("worker", reply(tool_calls=[WRITE, case()]), reply(tool_calls=[WRITE, case()]))
    fake.enqueue("evaluator", reply(content="Looks fine to me."),
                 reply(tool_calls=[("submit_verdict", '{"verdict": "maybe"}')]),
                 reply(content="still no"),
                 reply(content='Verdict: {"verdict": "accept", "category": "none", "concern": "", '
                               '"evidence": [], "next_step": ""}'))
    env = {**model_env, "TILTH_VERDICT_RETRIES": "2"}
    assert start(sandbox, env).returncode == 0
    entries = sandbox.ledger("s1", "T-1")
    assert entries[0]["verdict"]["verdict"] == "reject" and entries[0]["verdict"]["category"] == "parse_failed"
    assert entries[1]["verdict"]["verdict"] == "accept", "a JSON verdict in plain text is understood"
    evaluator = bodies(fake, "evaluator")
    assert "could not be parsed" in evaluator[1]["messages"][-1]["content"]


@pytest.mark.slow
def test_a_failing_check_can_never_be_accepted(sandbox, fake, model_env):
    fake.enqueue("worker", reply(tool_calls=[WRITE]), reply(tool_calls=[case()]))
    fake.enqueue("evaluator", reply(tool_calls=[verdict()]))
    env = {**model_env, "TILTH_MAX_ITERATIONS_PER_TASK": "1"}
    # the second check passes on the base commit and fails once hello.py exists: a regression
    result = start(sandbox, env, None, "--check", "test -f hello.py", "--check", "echo boom; test ! -f hello.py || exit 7")
    assert result.returncode == 1
    entry = sandbox.ledger("s1", "T-1")[0]
    assert entry["verdict"]["verdict"] == "reject" and entry["verdict"]["category"] == "check_failed"
    assert "exit 7" in entry["verdict"]["concern"]
    prompt = first_user(bodies(fake, "evaluator")[0])
    assert "$ test -f hello.py  -> exit code 0" in prompt and "$ echo boom; test ! -f hello.py || exit 7  -> exit code 7\n" in prompt
    assert "boom" in prompt
    assert sandbox.commits("s1")[0]["outcome"] == "failed"


@pytest.mark.slow
def test_spend_cap_stops_within_the_call_that_crosses_it_and_resumes_when_raised(sandbox, fake, model_env):
    sandbox.home.mkdir(parents=True, exist_ok=True)  # a $ cap needs every model priced (here the provider reports)
    (sandbox.home / "config.toml").write_text("[prices.worker]\nprompt = 0\ncompletion = 0\n"
                                              "[prices.evaluator]\nprompt = 0\ncompletion = 0\n")
    fake.enqueue("worker", reply(tool_calls=[WRITE, case()], cost=0.4), reply(tool_calls=[WRITE, case()]))
    fake.enqueue("evaluator", reply(tool_calls=[verdict("reject")], cost=0.4), reply(tool_calls=[verdict()]))
    env = {**model_env, "TILTH_MAX_SPEND_USD": "0.5"}
    result = start(sandbox, env)
    assert result.returncode == 3 and "max_spend_usd" in result.stdout
    assert not (sandbox.session_dir("s1") / "ledger").joinpath("T-1.jsonl").exists(), "stopped in the evaluator's call"
    assert sandbox.commits("s1") == []
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "stopped"

    still = sandbox.tilth("resume", "s1", "--foreground", env=env)
    assert still.returncode == 3, "spend is counted across resumes"
    raised = sandbox.tilth("resume", "s1", "--foreground", env={**env, "TILTH_MAX_SPEND_USD": "2"})
    assert raised.returncode == 0, raised.stdout + raised.stderr
    assert len(sandbox.commits("s1")) == 1


@pytest.mark.slow
def test_evaluator_call_cap_and_price_table(sandbox, fake, model_env):
    (sandbox.home).mkdir(parents=True, exist_ok=True)
    (sandbox.home / "config.toml").write_text('[prices.worker]\nprompt = 1000000\ncompletion = 0\n')
    fake.enqueue("worker", reply(tool_calls=[case()]), reply(tool_calls=[case()]))
    fake.enqueue("evaluator", reply(tool_calls=[call("list_files")]), reply(tool_calls=[verdict("reject")]))
    env = {**model_env, "TILTH_MAX_EVALUATOR_CALLS_PER_TASK": "2"}
    result = start(sandbox, env)
    assert result.returncode == 3 and "max_evaluator_calls_per_task" in result.stdout
    worker_calls = [e["data"] for e in sandbox.events("s1") if e["type"] == "model_call" and e["data"]["role"] == "worker"]
    assert worker_calls[0]["cost_usd"] == 10.0 and worker_calls[0]["cost_source"] == "price_table"


@pytest.mark.slow
def test_streaming_mode_runs_a_whole_task(sandbox, fake, model_env):
    fake.enqueue("worker", reply(tool_calls=[WRITE]), reply(tool_calls=[case()]))
    fake.enqueue("evaluator", reply(content="Checked.", tool_calls=[verdict()]))
    result = start(sandbox, {**model_env, "TILTH_STREAM": "true"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(b.get("stream") is True for b in bodies(fake, "worker") + bodies(fake, "evaluator"))
    assert git(sandbox.repo, "show", "session/s1:hello.py") == "print(1)\n"
    task_calls = [e["data"] for e in sandbox.events("s1") if e["type"] == "model_call" and e["task"] == "T-1"]
    assert len(task_calls) == 3 and all(c["total_tokens"] == 15 for c in task_calls)  # the final review's used none


@pytest.mark.slow
def test_the_api_key_never_reaches_the_session_dir_or_the_agent(sandbox, fake, model_env):
    fake.enqueue("worker", reply(tool_calls=[call("bash", command="env > seen-env.txt; echo done")]),
                 reply(tool_calls=[case(summary=f"The key is {KEY}")]))
    fake.enqueue("evaluator", reply(tool_calls=[verdict(concern=f"echo {KEY}")]))
    assert start(sandbox, model_env).returncode == 0
    for path in sandbox.session_dir("s1").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
    seen = git(sandbox.repo, "show", "session/s1:seen-env.txt")
    assert KEY not in seen and "TILTH_" not in seen and "PATH=" in seen
    assert fake.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"


@pytest.mark.slow
def test_missing_model_settings_are_named_and_nothing_is_created(sandbox, fake):
    cases = [
        ({"TILTH_BASE_URL": fake.base_url}, "TILTH_WORKER_MODEL"),
        ({"TILTH_BASE_URL": "openai", "TILTH_WORKER_MODEL": "gpt-4o-mini"}, "TILTH_API_KEY"),
        ({"TILTH_BASE_URL": "openrouter", "TILTH_WORKER_MODEL": "m", "TILTH_MAX_RETRIES": "-1"}, "TILTH_MAX_RETRIES"),
    ]
    for env, expected in cases:
        result = start(sandbox, env)
        assert result.returncode == 2 and expected in result.stderr, result.stderr
        assert not sandbox.session_dir("s1").exists()
        assert git(sandbox.repo, "branch", "--list", "session/s1") == ""
    assert fake.requests == []


def test_config_shows_sources_and_masks_keys(sandbox):
    sandbox.home.mkdir(parents=True)
    (sandbox.home / "config.toml").write_text('worker_model = "from-file"\nbase_url = "openrouter"\n')
    result = sandbox.tilth("config", env={"TILTH_API_KEY": KEY, "TILTH_WORKER_MODEL": "from-env"})
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert "worker_model = from-env  (env TILTH_WORKER_MODEL) [session]" in lines
    assert f"base_url = openrouter -> https://openrouter.ai/api/v1  ({sandbox.home / 'config.toml'}) [machine]" in lines
    assert "api_key = sk-...6789  (env TILTH_API_KEY) [secret]" in lines
    assert "max_iterations_per_task = 5  (default) [session]" in lines
    assert KEY not in result.stdout


@pytest.mark.slow
def test_notes_tools_and_nothing_sent_to_the_worker_model_names_harness_files(sandbox, fake, model_env):
    fake.enqueue("worker", reply(tool_calls=[call("note_write", name="layout", text="Entry: main.py\nmore")]),
                 reply(tool_calls=[call("note_read", name="layout"), call("note_read", name="../escape")]),
                 reply(tool_calls=[WRITE, case()]), reply(content="- Tests live in tests/"))
    fake.enqueue("evaluator", reply(tool_calls=[verdict()]))
    assert start(sandbox, model_env).returncode == 0
    assert (sandbox.session_dir("s1") / "kb" / "layout.md").read_text() == "Entry: main.py\nmore"
    worker = bodies(fake, "worker")
    assert worker[2]["messages"][-2]["content"] == "Entry: main.py\nmore"
    assert "not allowed" in worker[2]["messages"][-1]["content"]
    assert "- Tests live in tests/" in (sandbox.session_dir("s1") / "proposed-learnings.md").read_text()
    sent = json.dumps([b["messages"] for b in worker]).lower()
    for word in ["prd.json", "events.jsonl", "summary.json", "session.json", "ledger", "progress.txt",
                 "token", str(sandbox.home).lower()]:
        assert word not in sent, word


@pytest.mark.slow
def test_make_demo_uses_the_model_when_base_url_is_set(tmp_path, fake):
    import os
    import subprocess
    import sys

    written: list[int] = []

    def answer(body):
        names = {t["function"]["name"] for t in body.get("tools", [])}
        if "submit_verdict" in names:
            return reply(tool_calls=[verdict()])
        if "submit_case" in names:
            written.append(len(written))  # one new file per task: each task's diff is non-empty
            return reply(tool_calls=[call("write_file", path=f"demo-{len(written)}.txt", content="x\n"), case()])
        return reply(content="NONE")

    fake.set_handler(answer)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    env.update({"TILTH_BASE_URL": fake.base_url, "TILTH_WORKER_MODEL": "demo-model"})
    result = subprocess.run([sys.executable, "-m", "tilth.cli.demo", "--dir", str(tmp_path / "demo")],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Using the model demo-model" in result.stdout and "SCRIPTED" not in result.stdout
    assert "openai-compatible" in result.stdout
    assert result.stdout.count("[Tilth-Session=demo") == 3
    assert {r["body"]["model"] for r in fake.requests if r["body"]} == {"demo-model"}
