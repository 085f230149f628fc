"""The promises made to someone who walks away, each tested so that removing the code that
keeps it turns a test red: keys, the judged tree, the caps, the user's branch."""

from __future__ import annotations

import json
import signal
import uuid

import pytest

from conftest import git, task, wait_for_pause
from fake_openai import SUBMIT, FakeOpenAI, call, fault, reply


def verdict(decision: str, concern: str = "") -> tuple[str, str]:
    return call("submit_verdict", verdict=decision, category="none" if decision == "accept" else "acceptance_gap",
                concern=concern, evidence=[], next_step="" if decision == "accept" else "fix it")


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


@pytest.mark.slow
def test_keys_of_any_shape_never_reach_a_file_an_event_or_the_model(sandbox, server):
    # Neither key looks like a known key format, so only registering them keeps them out.
    worker_key, evaluator_key = f"wk{uuid.uuid4().hex}", f"ek{uuid.uuid4().hex}"
    server.enqueue("worker",
                   fault(400, {"error": {"message": f"invalid request for key {worker_key}", "type": "bad"}}))
    write = call("write_file", path="x.txt", content="x\n")
    server.enqueue("worker", reply(tool_calls=[write, SUBMIT]), reply(tool_calls=[write, SUBMIT]))
    server.enqueue("evaluator", reply(tool_calls=[verdict("reject", f"your evaluator key is {evaluator_key}")]),
                   reply(tool_calls=[verdict("accept")]))
    env = {"TILTH_BASE_URL": server.base_url, "TILTH_API_KEY": worker_key, "TILTH_WORKER_MODEL": "worker",
           "TILTH_EVALUATOR_MODEL": "evaluator", "TILTH_EVALUATOR_BASE_URL": server.base_url,
           "TILTH_EVALUATOR_API_KEY": evaluator_key, "TILTH_RETRY_BASE_DELAY": "0"}
    prd = sandbox.write_json("prd.json", [task("T-1")])
    first = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1", "--foreground",
                          env=env)
    assert first.returncode == 3 and "[redacted]" in first.stderr and worker_key not in first.stderr
    resumed = sandbox.tilth("resume", "s1", "--foreground", env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert worker_key not in resumed.stdout + resumed.stderr and evaluator_key not in resumed.stdout
    redacted = 0
    for path in sandbox.session_dir("s1").rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert worker_key not in text and evaluator_key not in text, path
            redacted += "[redacted]" in text
    assert redacted >= 2, "the provider error and the evaluator's concern were both written, redacted"
    sent = {r["body"].get("model"): r["headers"]["authorization"] for r in server.requests if r["body"]}
    assert sent == {"worker": f"Bearer {worker_key}", "evaluator": f"Bearer {evaluator_key}"}
    checked = {r["headers"]["authorization"] for r in server.requests if r["path"] == "/v1/models"}
    assert checked == {f"Bearer {worker_key}", f"Bearer {evaluator_key}"}, "the start's preflight, each with its key"
    for request in server.requests:
        body = json.dumps(request["body"])
        assert worker_key not in body and evaluator_key not in body
    assert "[redacted]" in json.dumps(server.requests[-2]["body"]), "the concern reached the worker, redacted"


def test_the_commit_holds_exactly_the_tree_the_evaluator_judged(sandbox):
    """The worktree changes after the accept verdict (the run is paused just before the commit)."""
    scenario = {"tasks": {"T-1": [{"write": {"judged.txt": "judged\n"}}]}}
    proc = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(sandbox.write_json("p.json", [task("T-1")])),
                         "--id", "s1", "--backend", "scripted", "--foreground", "--scenario",
                         str(sandbox.write_json("sc.json", scenario)), env={"TILTH_TEST_PAUSE_AT": "before_commit"})
    wait_for_pause(proc, "before_commit")
    worktree = sandbox.worktree("s1")
    (worktree / "judged.txt").write_text("changed after the verdict\n")
    (worktree / "late.txt").write_text("late\n")
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert git(sandbox.repo, "show", "session/s1:judged.txt") == "judged\n"
    assert "late.txt" not in git(sandbox.repo, "ls-tree", "--name-only", "session/s1")
    diffs = [e["diff_summary"] for e in sandbox.ledger("s1", "T-1")]
    assert diffs == ["1 files changed, +1 -0: judged.txt"]
    assert sorted(git(worktree, "status", "--porcelain").splitlines()) == [" M judged.txt", "?? late.txt"]


def paused_start(sandbox, point: str, task_id: str):
    """`tilth start` of T-1, T-2 (scripted), held at `point` of `task_id`."""
    proc = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd",
                         str(sandbox.write_json("p.json", [task("T-1"), task("T-2")])), "--id", "s1", "--backend",
                         "scripted", "--foreground", env={"TILTH_TEST_PAUSE_AT": f"{point}@{task_id}"})
    wait_for_pause(proc, point)
    return proc


@pytest.mark.slow
def test_a_stop_request_still_works_while_paused_at_a_test_point(sandbox):
    proc = paused_start(sandbox, "after_status", "T-1")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 3
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "pending"}
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "stopped"


@pytest.mark.slow
def test_a_stray_pause_point_without_the_test_switch_does_not_hold_a_foreground_run(sandbox):
    """A TILTH_TEST_PAUSE_AT left in a user's shell is ignored unless TILTH_TEST_FAULTS=1 arms it."""
    del sandbox.env["TILTH_TEST_FAULTS"]
    stray = {"TILTH_TEST_PAUSE_AT": "worker"}
    assert "WARNING" not in sandbox.tilth("config", env=stray).stdout
    run = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(sandbox.write_json("p.json", [task("T-1")])),
                        "--id", "s1", "--backend", "scripted", "--foreground", env=stray, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "paused at" not in run.stderr
    assert sandbox.statuses("s1") == {"T-1": "done"}


@pytest.mark.slow
def test_the_wall_clock_cap_stops_between_tasks_holds_across_resume_and_a_raised_one_finishes(sandbox):
    # T-1's worker takes 1.5 s of real work; the run may take 1 s: T-1 ends, T-2 never starts.
    scenario = {"tasks": {"T-1": [{"write": {"one.txt": "1"}, "run": ["sleep 1.5"]}]}}
    env = {"TILTH_MAX_WALL_CLOCK_S": "1"}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env=env)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "max_wall_clock_s reached" in result.stdout + result.stderr
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "pending"}
    capped = [e for e in sandbox.events("s1") if e["type"] == "cap_reached"]
    assert capped[0]["data"]["cap"] == "max_wall_clock_s" and capped[0]["data"]["value"] >= 1
    status = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert status["state"] == "stopped" and status["caps"]["max_wall_clock_s"]["value"] >= 1
    again = sandbox.tilth("resume", "s1", "--foreground", env=env)
    assert again.returncode == 3 and "max_wall_clock_s reached" in again.stdout, "the cap counts every run's time"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "pending"}
    resumed = sandbox.tilth("resume", "s1", "--foreground", env={"TILTH_MAX_WALL_CLOCK_S": "600"})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]


@pytest.mark.slow
def test_no_path_touches_the_users_branch_or_working_tree(sandbox, tmp_path):
    (sandbox.repo / "scratch.txt").write_text("the user's uncommitted work\n")
    git(sandbox.repo, "add", "scratch.txt")
    (sandbox.repo / "README.md").write_text("edited, not staged\n")
    before = {"main": git(sandbox.repo, "rev-parse", "main"), "head": git(sandbox.repo, "symbolic-ref", "HEAD"),
              "status": git(sandbox.repo, "status", "--porcelain"), "diff": git(sandbox.repo, "diff", "HEAD")}

    def untouched(where: str) -> None:
        now = {"main": git(sandbox.repo, "rev-parse", "main"), "head": git(sandbox.repo, "symbolic-ref", "HEAD"),
               "status": git(sandbox.repo, "status", "--porcelain"), "diff": git(sandbox.repo, "diff", "HEAD")}
        assert now == before, where

    reject = {"verdict": "reject", "concern": "not yet"}
    scenario = {"tasks": {"T-2": [{"write": {"two.txt": "2"}, "verdict": reject}, {"write": {"two.txt": "2!"}}]}}
    env = {"TILTH_MAX_ITERATIONS_PER_TASK": "1", "TILTH_STOP_ON_FAILURE": "true"}  # the placeholder stays at HEAD
    failed = sandbox.start("s1", [task("T-1"), task("T-2"), task("T-3")], scenario, "--base", "HEAD", env=env)
    assert failed.returncode == 1
    untouched("after a FAILED placeholder")
    crashed = sandbox.spawn("resume", "s1", "--foreground", env={"TILTH_TEST_PAUSE_AT": "after_commit@T-2"})
    wait_for_pause(crashed, "after_commit")
    crashed.kill()
    crashed.wait()
    untouched("after kill -9 mid-resume")
    resumed = sandbox.tilth("resume", "s1", "--foreground", env=env)
    assert resumed.returncode == 0 and [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2", "T-3"]
    untouched("after resume")
    remote = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(sandbox.repo, "remote", "add", "origin", str(remote))
    git(sandbox.repo, "push", "-q", "origin", "session/s1")
    git(remote, "branch", "-f", "main", "session/s1")  # merged upstream
    assert sandbox.tilth("cleanse", "s1").returncode == 0
    untouched("after cleanse")


@pytest.mark.slow
def test_git_locks_left_by_a_killed_writer_are_cleared_on_resume(sandbox):
    proc = paused_start(sandbox, "worker", "T-2")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # What a writer killed mid-update leaves behind: the worktree's index lock and the branch's ref lock.
    own_git_dir = sandbox.repo / ".git" / "worktrees" / "tilth-s1"
    locks = [own_git_dir / "index.lock", sandbox.repo / ".git" / "refs" / "heads" / "session" / "s1.lock"]
    for lock in locks:
        lock.write_text("")
    resumed = sandbox.tilth("resume", "s1", "--foreground")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]
    removed = [e["data"]["paths"] for e in sandbox.events("s1") if e["type"] == "stale_git_locks_removed"]
    assert removed and sorted(removed[0]) == sorted(str(p) for p in locks)
    assert not [p for p in locks if p.exists()]
