"""`tilth resume` of a finished session: refused in one line while nothing is left to run (it used to
queue the session and run its final review again), taken once tasks were added to its plan."""

from __future__ import annotations

import json

import pytest

from conftest import task
from fake_openai import ACCEPT, SUBMIT, call, reply
from test_spend_caps import calls, start


@pytest.mark.slow
def test_a_done_session_is_resumed_only_for_tasks_added_to_its_plan(sandbox, fake, model_env):
    fake.enqueue("worker", reply(tool_calls=[call("write_file", path="a.txt", content="a\n"), SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    env = {**model_env, "TILTH_FINAL_REVIEW": "false"}
    assert start(sandbox, env).returncode == 0
    before = sandbox.events("s1")

    refused = sandbox.tilth("resume", "s1", env=env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"tilth: session s1 is done: every task of its plan is done, so there is nothing to resume; add tasks to "
        f"{sandbox.session_dir('s1') / 'prd.json'} to run them in it, or start a new session"]
    assert sandbox.events("s1") == before, "neither queued nor recorded"
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "done"

    plan = sandbox.session_dir("s1") / "prd.json"
    plan.write_text(json.dumps([*json.loads(plan.read_text()), task("T-2", "Say goodbye")]))
    fake.enqueue("worker", reply(tool_calls=[call("write_file", path="b.txt", content="b\n"),
                                             call("submit_case", summary="done", criteria=[
                                                 {"criterion": "T-2 is done", "evidence": "b.txt"}])]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    resumed = sandbox.tilth("resume", "s1", "--foreground", env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done"} and len(calls(sandbox)) == 4
