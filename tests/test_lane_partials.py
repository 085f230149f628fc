"""Parallel tasks across an interruption (run/lane_partials.py, git/partial_refs.py): a lane stopped by
`tilth stop` or killed with -9 keeps its work under `refs/tilth/partial/<session>/<task>` and the
task's next lane starts with it (or, when it no longer applies, clean with the ledger saying so);
and an answer is taken while other lanes run (run/lanes.py, run/parking.take_answers)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from conftest import git, task, wait_for_pause
from supervised import wait_until

ENV = {"TILTH_SANDBOX": "off", "TILTH_FINAL_REVIEW": "false", "TILTH_SELF_IMPROVEMENT": "false"}
REJECT = {"verdict": "reject", "category": "half_finished", "concern": "not finished", "next_step": "finish"}


def held(gates: Path, name: str) -> str:
    """A scenario command that says it arrived, then waits until the test releases it."""
    return f"touch {gates}/reached-{name}; while [ ! -e {gates}/go-{name} ]; do sleep 0.05; done"


def partial(sandbox, session_id: str, task_id: str) -> str:
    return git(sandbox.repo, "for-each-ref", "--format=%(objectname)", f"refs/tilth/partial/{session_id}/{task_id}")


def of_type(events: list[dict], kind: str, task_id: str) -> list[dict]:
    return [e for e in events if e["type"] == kind and e["task"] == task_id]


def no_lanes_left(sandbox) -> bool:
    return git(sandbox.repo, "branch", "--list", "tilth-lane/*") == "" and "+" not in git(sandbox.repo, "worktree", "list")


def start_args(sandbox, session_id: str, plan: list[dict], scenario: dict) -> list[str]:
    return ["start", "--repo", str(sandbox.repo), "--prd", str(sandbox.write_json(f"{session_id}-prd.json", plan)),
            "--id", session_id, "--backend", "scripted", "--foreground", "--parallel", "2",
            "--scenario", str(sandbox.write_json(f"{session_id}-scenario.json", scenario))]


@pytest.mark.parametrize("lanes", ["2", "1"])  # resumed in lanes, or one task at a time in the session worktree
@pytest.mark.slow
def test_a_stopped_lanes_work_is_kept_and_its_task_lands_with_it_on_resume(sandbox, lanes):
    sandbox.env.update(ENV)
    gates = sandbox.root / "gates"
    gates.mkdir()
    scenario = {"tasks": {"S": [{"write": {"s-half.txt": "half\n"}, "run": [held(gates, "S")], "verdict": REJECT},
                                {"write": {"s-whole.txt": "whole\n"}, "run": ["cp s-half.txt seen.txt"]}]},
                "default": [{"write": {"{task}.txt": "x\n"}}]}
    child = sandbox.spawn(*start_args(sandbox, "s1", [task("S"), task("T")], scenario))
    try:
        wait_until(gates, (gates / "reached-S").exists, "S's lane to reach its step")
        stopped = sandbox.tilth("stop", "s1")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    finally:
        (gates / "go-S").touch()
    assert child.wait(timeout=60) == 3, child.stderr.read()
    assert sandbox.statuses("s1")["S"] == "pending"
    kept = partial(sandbox, "s1", "S").strip()
    assert kept, "the stopped lane's work is kept under refs/tilth/partial/s1/S"
    assert git(sandbox.repo, "show", f"{kept}:s-half.txt") == "half\n"
    started = of_type(sandbox.events("s1"), "lane_started", "S")[-1]["data"]["start"]
    assert git(sandbox.repo, "rev-list", "--parents", "-n", "1", kept).split() == [kept, started], "one parent: no merge"
    assert git(sandbox.repo, "branch", "--contains", kept) == "", "never on a branch"
    assert of_type(sandbox.events("s1"), "partial_kept", "S")[-1]["data"]["sha"] == kept
    assert no_lanes_left(sandbox)

    resumed = sandbox.tilth("resume", "s1", "--foreground", "--parallel", lanes)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sandbox.statuses("s1") == {"S": "done", "T": "done"}
    landed = [c for c in sandbox.commits("s1") if c["task"] == "S"]
    assert [c["outcome"] for c in landed] == [""]
    assert git(sandbox.repo, "show", f"{landed[0]['sha']}:seen.txt") == "half\n", "the retry found the kept work"
    assert git(sandbox.repo, "show", f"{landed[0]['sha']}:s-half.txt") == "half\n", "and its commit holds it"
    events = sandbox.events("s1")
    assert [e["data"]["sha"] for e in of_type(events, "partial_restored", "S")] == [kept]
    assert partial(sandbox, "s1", "S") == "", "the ref goes once the task lands"
    assert git(sandbox.repo, "rev-list", "--merges", "main..session/s1") == ""
    assert no_lanes_left(sandbox)


@pytest.mark.slow
def test_a_lane_killed_with_9_keeps_its_work_for_the_resumed_task(sandbox):
    sandbox.env.update(ENV)
    scenario = {"tasks": {"K": [{"write": {"k-half.txt": "half\n"}, "run": ["echo run >> k-runs.txt"]}]},
                "default": [{"write": {"{task}.txt": "x\n"}}]}
    child = sandbox.spawn(*start_args(sandbox, "s1", [task("K"), task("T")], scenario),
                          env={"TILTH_TEST_PAUSE_AT": "worker@K"})
    wait_for_pause(child, "worker")
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    assert partial(sandbox, "s1", "K") == "", "nothing is kept while the run is alive"

    resumed = sandbox.tilth("resume", "s1", "--foreground")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sandbox.statuses("s1") == {"K": "done", "T": "done"}
    events = sandbox.events("s1")
    kept = of_type(events, "partial_kept", "K")
    assert len(kept) == 1 and kept[0]["data"]["why"] == "killed"
    assert [e["data"]["sha"] for e in of_type(events, "partial_restored", "K")] == [kept[0]["data"]["sha"]]
    assert git(sandbox.repo, "show", "session/s1:k-runs.txt") == "run\nrun\n", \
        "the killed attempt's edits were in place when the task ran again"
    assert partial(sandbox, "s1", "K") == ""
    assert git(sandbox.repo, "rev-list", "--merges", "main..session/s1") == ""
    assert no_lanes_left(sandbox)


@pytest.mark.slow
def test_kept_work_that_no_longer_applies_starts_the_task_clean_and_says_so(sandbox):
    sandbox.env.update(ENV)
    scenario = {"tasks": {"A": [{"write": {"shared.txt": "from A\n"}}], "B": [{"write": {"shared.txt": "from B\n"}}]}}
    child = sandbox.spawn(*start_args(sandbox, "s1", [task("A"), task("B")], scenario),
                          env={"TILTH_TEST_PAUSE_AT": "worker@A"})
    wait_for_pause(child, "worker")
    session_dir = sandbox.session_dir("s1")
    wait_until(session_dir, lambda: sandbox.statuses("s1")["B"] == "done", "B to land while A's lane is held")
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL

    resumed = sandbox.tilth("resume", "s1", "--foreground")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    events = sandbox.events("s1")
    dropped = of_type(events, "partial_dropped", "A")
    assert len(dropped) == 1 and dropped[0]["data"]["paths"] == ["shared.txt"]
    assert of_type(events, "partial_restored", "A") == []
    noted = [e for e in sandbox.ledger("s1", "A") if e["verdict"]["category"] == "partial_conflict"]
    assert len(noted) == 1 and "shared.txt" in noted[0]["verdict"]["concern"]
    prompts = (session_dir / "prompts.jsonl").read_text()
    assert "could not be applied to the current session head" in prompts, "the retry's prompt says so"
    assert sandbox.statuses("s1") == {"A": "done", "B": "done"}
    assert git(sandbox.repo, "show", "session/s1:shared.txt") == "from A\n"
    assert partial(sandbox, "s1", "A") == ""
    assert no_lanes_left(sandbox)


@pytest.mark.slow
def test_an_answer_lets_the_parked_task_run_while_another_lane_is_still_running(sandbox):
    sandbox.env.update(ENV)
    gates = sandbox.root / "gates"
    gates.mkdir()
    scenario = {"tasks": {"P": [{"needs_human": {"question": "Which colour?"}}, {"write": {"p.txt": "{task}\n"}}],
                          "L": [{"write": {"l.txt": "l\n"}, "run": [held(gates, "L")]}]}}
    child = sandbox.spawn(*start_args(sandbox, "s1", [task("P"), task("L")], scenario))
    session_dir = sandbox.session_dir("s1")
    try:
        wait_until(gates, (gates / "reached-L").exists, "L's lane to reach its step")
        wait_until(session_dir, lambda: sandbox.statuses("s1")["P"] == "parked", "P to park")
        answered = sandbox.tilth("answer", "s1", "P", "red")
        assert answered.returncode == 0, answered.stdout + answered.stderr
        wait_until(session_dir, lambda: len(of_type(sandbox.events("s1"), "lane_started", "P")) == 2,
                   "P's retry to start while L's lane runs", timeout=20)
    finally:
        (gates / "go-L").touch()
    assert child.wait(timeout=60) == 0, child.stderr.read()
    events = sandbox.events("s1")
    retry = events.index(of_type(events, "lane_started", "P")[1])
    assert retry < events.index(of_type(events, "lane_ended", "L")[0]), "P ran again before L's lane ended"
    assert [e["data"]["by"] for e in of_type(events, "task_answered", "P")] == ["cli"], "taken once, saying who answered"
    assert sandbox.statuses("s1") == {"P": "done", "L": "done"}
    assert git(sandbox.repo, "show", "session/s1:p.txt") == "P\n"
    assert no_lanes_left(sandbox)


@pytest.mark.slow
def test_doctor_fix_keeps_a_killed_lanes_work_and_reset_removes_it(sandbox):
    sandbox.env.update(ENV)
    scenario = {"tasks": {"K": [{"write": {"k-half.txt": "half\n"}}]}}
    child = sandbox.spawn(*start_args(sandbox, "s1", [task("K")], scenario), env={"TILTH_TEST_PAUSE_AT": "worker@K"})
    wait_for_pause(child, "worker")
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    fixed = sandbox.tilth("doctor", "s1", "--fix")
    assert "lanes removed: K" in fixed.stdout, fixed.stdout + fixed.stderr
    kept = partial(sandbox, "s1", "K").strip()
    assert kept and git(sandbox.repo, "show", f"{kept}:k-half.txt") == "half\n"
    assert no_lanes_left(sandbox)
    reset = sandbox.tilth("reset", "s1", "--yes")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert partial(sandbox, "s1", "K") == "", "reset removes the session's kept work"
