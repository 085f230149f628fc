"""transcript.md: the human-readable record, appended as the run goes, through a reject, a
check, a kill -9 and a resume, and with tilth's own tool loop (thought, action, result)."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from conftest import task, wait_for_pause
from fake_openai import ACCEPT, SUBMIT, call, reply

REJECT = {"verdict": "reject", "category": "half_finished", "concern": "the edge case is missing",
          "next_step": "handle the empty input"}
SCENARIO = {"tasks": {"T-1": [{"write": {"a.py": "a = 0\n"}, "verdict": REJECT},
                              {"write": {"a.py": "a = 1\n"}}]}}


def blocks(text: str) -> list[str]:
    return re.findall(r"^### Step \d+\n\n- at: \S+\n- thought:\n```text\n.*?\n```\n- action:\n```json\n.*?\n```\n"
                      r"- execution_result:\n```text\n.*?\n```\n", text, re.S | re.M)


@pytest.mark.slow
def test_a_session_with_a_reject_a_check_and_a_kill_reads_as_one_record(sandbox):
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2")])
    scenario = sandbox.write_json("scenario.json", SCENARIO)
    args = ["start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend", "scripted",
            "--scenario", str(scenario), "--check", "test -f a.py || test -f scripted/T-2.md", "--foreground"]
    child = sandbox.spawn(*args, env={"TILTH_TEST_PAUSE_AT": "worker@T-2"})
    wait_for_pause(child, "worker")
    transcript = sandbox.session_dir("s1") / "transcript.md"
    mid_run = transcript.read_text()
    assert "### Verdict\n\n- reject (half_finished): the edge case is missing" in mid_run, "readable mid-run"
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    resumed = sandbox.tilth("resume", "s1", "--foreground")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    text = transcript.read_text()
    assert text.startswith(mid_run), "appended, never rewritten"
    header = text.split("\n\n## ")[0]
    assert header.startswith("# tilth session s1\n\n- id: s1\n- started_at: ")
    assert "- backends: scripted (test/demo backend" in header and f"- repo: {sandbox.repo}" in header
    assert "- branch: session/s1" in header
    assert text.count("## Run resumed at ") == 1
    attempts = re.findall(r"^## (T-\d) · Task T-\d · attempt (\d)$", text, re.M)
    assert attempts == [("T-1", "1"), ("T-1", "2"), ("T-2", "1"), ("T-2", "1")], "T-2 started again after the kill"
    assert len(blocks(text)) >= 5, "every step has at, thought, action and execution_result"
    assert '"checks": [\n    "test -f a.py || test -f scripted/T-2.md"\n  ]' in text
    assert "test -f a.py || test -f scripted/T-2.md: exit 0" in text
    verdicts = re.findall(r"^### Verdict\n\n- (\w+)", text, re.M)
    assert verdicts == ["reject", "accept", "accept"]
    assert "  - next step: handle the empty input" in text
    assert len(re.findall(r"^### Outcome\n\ndone: commit [0-9a-f]{40}$", text, re.M)) == 2
    runs = sorted((sandbox.session_dir("s1") / "runs").glob("run-*/result.json"))
    assert len(runs) == 4, "each check run (once on the base commit, two for T-1, one for T-2 after the resume) " \
                           "left its script artifact"
    datas = [json.loads(result.read_text()) for result in runs]
    outcomes = sorted((d["ok"], d["exitCode"]) for d in datas)  # run ids need not sort by time
    assert outcomes == [(False, 1)] + [(True, 0)] * 3, "fails on the base commit only"
    for data in datas:
        assert set(data) == {"ok", "runId", "runDir", "scriptPath", "exitCode", "timedOut", "durationMs", "stdout",
                             "stderr"}
        assert Path(data["scriptPath"]).read_text().strip() == "test -f a.py || test -f scripted/T-2.md"
    final = text.split("\n## Final\n\n")[-1]
    assert final.startswith("- status: SUCCESS\n- ended_at: ") and "### Message" in final
    assert "Session s1: done" in final and "Next: tilth pr s1" in final


@pytest.mark.slow
def test_tilths_own_loop_shows_the_models_words_the_call_and_what_came_back(sandbox, fake, model_env):
    backticks = call("bash", command="printf '%s\\n' '```hi```'")
    fake.enqueue("worker", reply("I will write the file first.", tool_calls=[backticks]),
                 reply(tool_calls=[call("write_file", path="a.txt", content="a\n")]), reply(tool_calls=[SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    plan = sandbox.write_json("prd.json", [task("T-1")])
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "m", "--foreground",
                           env={**model_env, "TILTH_SELF_IMPROVEMENT": "false", "TILTH_PREFLIGHT": "false"})
    assert result.returncode == 0, result.stdout + result.stderr
    text = (sandbox.session_dir("m") / "transcript.md").read_text()
    first = text.split("### Step 1\n")[1].split("### Step 2")[0]
    assert "- thought:\n```text\nI will write the file first.\n```" in first
    assert '"tool": "bash"' in first and "```hi```" in first.split("- action:")[1].split("- execution_result")[0]
    # The command's output holds a run of backticks: its block is fenced with a longer one.
    assert "- execution_result:\n````text\n```hi```\n[exit code 0]\n````" in first
    assert "- thought:\n```text\n(empty)\n```" in text.split("### Step 2\n")[1]
    assert "### Case\n\n```text\ndone\n```\n- T-1 is done: x" in text
