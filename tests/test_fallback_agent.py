"""A fallback agent (`worker_fallback`): the primary (the real Claude Code on tests/fake_anthropic.py)
hits a usage limit whose reset is further away than `fallback_after_s`, the fallback (tilth's own
`openai` loop on tests/fake_openai.py) finishes the task instead of the session pausing, the report
and status show each backend's cost, and the next task, started after the reset, goes back to the
primary."""

from __future__ import annotations

import json

import fake_anthropic as fa
import pytest
from conftest import git, task
from fake_anthropic import FakeAnthropic
from fake_openai import ACCEPT, SUBMIT, call, delay, reply
from test_cli_agents import ANTHROPIC_KEY, CASE, claude_env, fenced, of_type, start

RESET_S = 4


@pytest.mark.cli_agents
def test_a_fallback_finishes_the_task_the_primary_is_limited_on_and_the_primary_takes_the_next(sandbox, fake,
                                                                                               model_env):
    sandbox.home.mkdir()
    (sandbox.home / "config.toml").write_text("[prices.worker]\nprompt = 2.0\ncompletion = 10.0\n"
                                              "[prices.evaluator]\nprompt = 0\ncompletion = 0\n")
    with FakeAnthropic() as anthropic:
        replies = [lambda: fa.usage_limit(resets_in=RESET_S),  # its reset counted from the request
                   lambda: fa.reply(fa.tool_use("Write", file_path=str(sandbox.worktree("fb") / "b.txt"),
                                                content="b\n"), usage=fa.usage(1000, 50)),
                   lambda: fa.reply(fa.text(fenced(CASE)), usage=fa.usage(1200, 60))]
        anthropic.set_handler(lambda body: replies.pop(0)())
        fake.enqueue("worker", reply(tool_calls=[call("write_file", path="a.txt", content="a\n")],
                                     usage={"prompt_tokens": 800, "completion_tokens": 40, "total_tokens": 840}),
                     reply(tool_calls=[SUBMIT]))
        # T-1's verdict comes after the primary's reset: T-2 starts with the primary out no longer
        fake.enqueue("evaluator", delay(RESET_S + 0.5, reply(tool_calls=[ACCEPT])), reply(tool_calls=[ACCEPT]))
        env = {**model_env, **claude_env(anthropic, sandbox.root), "CLAUDE_CODE_OAUTH_TOKEN": ANTHROPIC_KEY,
               "TILTH_WORKER_FALLBACK": "openai", "TILTH_FALLBACK_AFTER_S": "1",
               "TILTH_MAX_ITERATIONS_PER_TASK": "1"}
        del env["ANTHROPIC_API_KEY"]
        result = start(sandbox, "fb", env, [task("T-1"), task("T-2", depends_on=["T-1"])])
    assert result.returncode == 0, result.stdout + result.stderr
    assert [c["task"] for c in sandbox.commits("fb")] == ["T-1", "T-2"]
    assert git(sandbox.repo, "show", "session/fb:a.txt") == "a\n" and git(sandbox.repo, "show", "session/fb:b.txt") == "b\n"
    assert not of_type(sandbox, "fb", "session_paused"), "the fallback took over instead of a pause"
    [switched] = of_type(sandbox, "fb", "agent_fallback")
    assert switched["task"] == "T-1" and switched["data"]["primary"] == "claude"
    assert switched["data"]["fallback"] == "openai" and switched["data"]["reset_given"] is True
    assert switched["data"]["reason"].startswith("usage limit: claude: You've hit your 5-hour limit")
    [back] = of_type(sandbox, "fb", "agent_primary_again")
    assert back["task"] == "T-2" and back["data"]["primary"] == "claude"
    assert sandbox.ledger("fb", "T-1")[0]["fallback"] == {"worker": "openai"}
    assert "fallback" not in sandbox.ledger("fb", "T-2")[0], "the primary did T-2"
    runs = [(e["task"], e["data"]["agent"], bool(e["data"]["limit"])) for e in of_type(sandbox, "fb", "agent_run")]
    assert runs == [("T-1", "claude", True), ("T-2", "claude", False)], runs
    status = json.loads(sandbox.tilth("status", "fb", "--json").stdout)
    costs = status["cost_by_backend"]
    assert set(costs) == {"claude", "openai"} and costs["claude"] > 0, costs
    assert costs["openai"] == pytest.approx((800 * 2.0 + 40 * 10.0 + 10 * 2.0 + 5 * 10.0) / 1e6), costs
    assert status["fallbacks"]["worker"]["back"] is True
    report = (sandbox.session_dir("fb") / "report.md").read_text()
    assert "Fallback:   worker claude -> openai at " in report and "claude again after" in report, report
    assert "By backend: claude $" in report and ", openai $0.0021" in report, report
