"""`tilth note`: a person steers a running session at the next task boundary, never mid-iteration."""

from __future__ import annotations

import json
import signal

import pytest

from conftest import task, wait_for_pause


def prompts(sandbox, sid: str) -> list[dict]:
    path = sandbox.session_dir(sid) / "prompts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_note_sent_mid_task_reaches_the_next_tasks_prompts_and_not_the_current_ones(sandbox):
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2"), task("T-3")])
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                          "scripted", "--foreground", env={"TILTH_TEST_PAUSE_AT": "worker@T-1"})
    wait_for_pause(child, "worker")
    for args in (["prefer the v2 API"], ["T-2 only: keep the old name", "--task", "T-2"]):
        said = sandbox.tilth("note", "s1", *args)
        assert said.returncode == 0 and said.stderr == "", said.stderr
        assert "the runner takes it at the next task boundary" in said.stdout
    child.send_signal(signal.SIGUSR1)
    assert child.wait(timeout=60) == 0, child.stderr.read()

    seen = {(p["task"], p["role"]): p["prompt"] for p in prompts(sandbox, "s1") if p["role"] != "self_improvement"}
    assert "prefer the v2 API" not in seen[("T-1", "worker")] + seen[("T-1", "evaluator")], \
        "the iteration under way is never steered"
    for role in ("worker", "evaluator"):
        assert "Notes from the person running this session" in seen[("T-2", role)]
        assert "prefer the v2 API" in seen[("T-2", role)]
        assert "(for T-2) T-2 only: keep the old name" in seen[("T-2", role)]
    assert "prefer the v2 API" in seen[("T-3", "worker")] and "keep the old name" not in seen[("T-3", "worker")]
    [taken] = [e for e in sandbox.events("s1") if e["type"] == "notes_taken"]
    assert taken["task"] == "T-2" and taken["data"]["count"] == 2
    read = json.loads((sandbox.session_dir("s1") / "inbox.read.json").read_text())
    assert len(read["taken"]) == 2


@pytest.mark.slow
def test_a_bad_note_is_refused_in_one_line_and_nothing_is_written(sandbox):
    plan = sandbox.write_json("prd.json", [task("T-1")])
    assert sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                         "scripted", "--foreground").returncode == 0
    for args, said in ((["s1", "   "], "the note is empty"), (["s1", "x", "--task", "T-9"], "has no task 'T-9'"),
                       (["nope", "x"], "no session 'nope'")):
        result = sandbox.tilth("note", *args)
        assert result.returncode == 2 and said in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (sandbox.session_dir("s1") / "inbox.jsonl").exists()
