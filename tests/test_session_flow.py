"""End-to-end sessions with the scripted backend: real repos, real `tilth` processes."""

from __future__ import annotations

import json
import os
import re

import pytest

from conftest import git, task, wait_for_pause
from tilth.store.prompts import prompt_of

# For scenarios whose commands play a process outside the agent's sandbox (an observer writing
# to the test's dir, the user editing prd.json, a signal to tilth itself).
OBSERVER = {"TILTH_SANDBOX": "off"}
REJECT = {"verdict": "reject", "category": "weak_test", "concern": "no test covers it", "next_step": "add a test"}


@pytest.mark.slow
def test_happy_path_one_commit_per_task_with_trailers(sandbox):
    user_head = git(sandbox.repo, "rev-parse", "main").strip()
    result = sandbox.start("s1", [task("T-1", "Add greeting"), task("T-2"), task("T-3")], {
        "tasks": {"T-1": [{"write": {"greet.py": "print('hi')\n"},
                           "case": {"summary": "Added greet.py printing hi.",
                                    "criteria": [{"criterion": "T-1 is done", "evidence": "greet.py"}]}}]},
    })
    assert result.returncode == 0, result.stderr
    assert "scripted (test/demo backend" in result.stdout

    commits = sandbox.commits("s1")
    assert [c["task"] for c in commits] == ["T-1", "T-2", "T-3"]
    assert commits[0]["subject"] == "T-1: Add greeting"
    assert all(c["outcome"] == "" and c["iterations"] == "1" for c in commits)
    body = git(sandbox.repo, "log", "-1", "--format=%B", commits[0]["sha"])
    assert "Added greet.py printing hi." in body
    assert "Tilth-Session: s1" in body
    assert git(sandbox.repo, "show", f"{commits[0]['sha']}:greet.py") == "print('hi')\n"

    assert git(sandbox.repo, "rev-parse", "main").strip() == user_head, "the user's branch must not move"
    assert git(sandbox.repo, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done"}

    lines = sandbox.progress("s1")
    assert [line[1:3] for line in lines] == [["T-1", "done"], ["T-2", "done"], ["T-3", "done"]]
    ts, _, _, iters, commit, title = lines[0]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", ts)
    assert iters == "iter=1" and commit == f"commit={commits[0]['sha'][:7]}" and title == "Add greeting"

    session = json.loads((sandbox.session_dir("s1") / "session.json").read_text())
    assert session["state"] == "done" and session["branch"] == "session/s1"
    assert session["base_commit"] == user_head
    assert not session["worktree"].startswith(str(sandbox.session_dir("s1")))
    assert git(sandbox.worktree("s1"), "status", "--porcelain") == ""


@pytest.mark.slow
def test_reject_then_accept_records_the_ledger(sandbox):
    scenario = {"tasks": {"T-1": [
        {"write": {"app.py": "x = 1\n"}, "verdict": REJECT},
        {"write": {"app.py": "x = 1\n", "test_app.py": "def test(): pass\n"}},
    ]}}
    result = sandbox.start("s1", [task("T-1")], scenario)
    assert result.returncode == 0, result.stderr

    entries = sandbox.ledger("s1", "T-1")
    assert [e["iter"] for e in entries] == [1, 2]
    assert entries[0]["verdict"] == {**REJECT, "evidence": []}
    assert entries[1]["verdict"]["verdict"] == "accept"
    assert entries[0]["diff_summary"].startswith("1 files changed") and "app.py" in entries[0]["diff_summary"]
    assert "test_app.py" in entries[1]["diff_summary"]
    assert set(entries[0]) == {"ts", "iter", "diff_summary", "case", "verdict"}
    assert set(entries[0]["case"]) == {"summary", "criteria", "uncertainties"}

    commits = sandbox.commits("s1")
    assert len(commits) == 1 and commits[0]["iterations"] == "2"
    prompts = [prompt_of(e["data"], sandbox.session_dir("s1")) for e in sandbox.events("s1")
               if e["type"] == "prompt_assembled" and e["data"]["role"] == "worker"]
    assert "\n\nTask T-1: Task T-1\n" in prompts[0]
    assert "no test covers it" not in prompts[0]
    assert "no test covers it" in prompts[1] and "add a test" in prompts[1]


@pytest.mark.slow
def test_failed_placeholder_then_resume_soft_unwinds(sandbox):
    observe = sandbox.root / "observed"
    observe.mkdir()
    record = f"git rev-parse HEAD > {observe}/head; git status --porcelain > {observe}/status"
    scenario = {"tasks": {"T-2": [
        {"write": {"part.py": "half = True\n"}, "verdict": REJECT},
        {"write": {"part2.py": "more = True\n"}, "verdict": REJECT},
        {"write": {"done.py": "ok = True\n"}, "run": [record]},
    ]}}
    env = {"TILTH_MAX_ITERATIONS_PER_TASK": "2", "TILTH_STOP_ON_FAILURE": "true", **OBSERVER}
    result = sandbox.start("s1", [task("T-1"), task("T-2", "Hard one"), task("T-3")], scenario, env=env)
    assert result.returncode == 1, result.stderr

    commits = sandbox.commits("s1")
    assert [(c["task"], c["outcome"]) for c in commits] == [("T-1", ""), ("T-2", "failed")]
    placeholder = commits[1]
    assert placeholder["subject"] == "FAILED (T-2): Hard one"
    body = git(sandbox.repo, "log", "-1", "--format=%B", placeholder["sha"])
    assert "Tilth-Outcome: failed" in body and "Tilth-Reason: iterations_exhausted" in body
    assert git(sandbox.repo, "show", f"{placeholder['sha']}:part.py") == "half = True\n"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "failed", "T-3": "pending"}
    assert sandbox.progress("s1")[-1][1:3] == ["T-2", "failed:iterations_exhausted"]
    assert json.loads((sandbox.session_dir("s1") / "session.json").read_text())["state"] == "failed"

    result = sandbox.tilth("resume", "s1", "--foreground", env=env)
    assert result.returncode == 0, result.stderr

    assert (observe / "head").read_text().strip() == commits[0]["sha"], "retry starts at the placeholder's parent"
    status = (observe / "status").read_text()
    assert "part.py" in status and "part2.py" in status, "placeholder edits are uncommitted changes"
    after = sandbox.commits("s1")
    assert [(c["task"], c["outcome"]) for c in after] == [("T-1", ""), ("T-2", ""), ("T-3", "")]
    assert after[1]["iterations"] == "3"
    files = git(sandbox.repo, "show", "--name-only", "--format=", after[1]["sha"]).split()
    assert sorted(files) == ["done.py", "part.py", "part2.py"]
    assert [line[2] for line in sandbox.progress("s1")] == ["done", "failed:iterations_exhausted", "done", "done"]


@pytest.mark.slow
def test_a_failed_task_does_not_stop_later_tasks_by_default(sandbox):
    scenario = {"tasks": {"T-1": [{"verdict": REJECT}]}}
    env = {"TILTH_MAX_ITERATIONS_PER_TASK": "1"}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env=env)
    assert result.returncode == 1
    assert "a failed task does not stop the others" in result.stdout
    assert [(c["task"], c["outcome"]) for c in sandbox.commits("s1")] == [("T-2", ""), ("T-1", "failed")]
    assert sandbox.statuses("s1") == {"T-1": "failed", "T-2": "done"}


@pytest.mark.slow
def test_the_old_continue_after_failure_setting_still_decides(sandbox):
    scenario = {"tasks": {"T-1": [{"verdict": REJECT}]}}
    env = {"TILTH_MAX_ITERATIONS_PER_TASK": "1", "TILTH_CONTINUE_AFTER_FAILURE": "false"}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env=env)
    assert result.returncode == 1
    assert "the first failed task ends the session (stop_on_failure = true)" in result.stdout
    assert sandbox.statuses("s1") == {"T-1": "failed", "T-2": "pending"}
    config = sandbox.tilth("config", env=env).stdout
    assert "stop_on_failure = True  (env TILTH_CONTINUE_AFTER_FAILURE=false: deprecated, use TILTH_STOP_ON_FAILURE)" \
        in config


@pytest.mark.slow
def test_no_case_is_a_rejected_iteration(sandbox):
    scenario = {"tasks": {"T-1": [{"case": None}, {"write": {"a.txt": "a"}}]}}
    assert sandbox.start("s1", [task("T-1")], scenario).returncode == 0
    first = sandbox.ledger("s1", "T-1")[0]
    assert first["case"] is None and first["verdict"]["category"] == "no_case"


@pytest.mark.slow
def test_user_edits_to_the_plan_while_running_are_kept(sandbox):
    prd = sandbox.session_dir("s1") / "prd.json"
    edit = (
        "python3 - <<'PY'\n"
        "import json, os\n"
        f"path = {str(prd)!r}\n"
        "plan = json.load(open(path))\n"
        "plan[1]['description'] = 'Edited by the user mid-run.'\n"
        "plan.append({'id': 'T-9', 'title': 'Appended', 'description': 'new', 'acceptance_criteria': ['x']})\n"
        "json.dump(plan, open(path, 'w'))\n"
        "PY"
    )
    scenario = {"tasks": {"T-1": [{"run": [edit], "write": {"one.txt": "1"}}]}}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env=OBSERVER)
    assert result.returncode == 0, result.stderr
    plan = sandbox.plan("s1")
    assert [t["id"] for t in plan] == ["T-1", "T-2", "T-9"]
    assert plan[1]["description"] == "Edited by the user mid-run."
    assert all(t["status"] == "done" for t in plan)
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2", "T-9"]


def test_commits_without_any_git_identity_use_a_fallback_author(sandbox, tmp_path):
    empty_home = tmp_path / "nohome"
    empty_home.mkdir()
    env = {"HOME": str(empty_home), "XDG_CONFIG_HOME": str(empty_home), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull}
    result = sandbox.start("s1", [task("T-1")], None, env=env)
    assert result.returncode == 0, result.stderr
    author = git(sandbox.repo, "log", "-1", "--format=%an <%ae>", "session/s1").strip()
    assert author == "tilth <tilth@localhost>"


@pytest.mark.slow
def test_second_run_is_refused_while_one_holds_the_session(sandbox):
    created = sandbox.start("s1", [task("T-1")], None, env={"TILTH_MAX_ITERATIONS_PER_TASK": "0"})
    assert created.returncode == 2 and "TILTH_MAX_ITERATIONS_PER_TASK" in created.stderr
    assert not sandbox.session_dir("s1").exists()

    first = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(sandbox.write_json("p.json", [task("T-1")])),
                          "--id", "s1", "--backend", "scripted", "--foreground",
                          env={"TILTH_TEST_PAUSE_AT": "worker"})
    try:
        wait_for_pause(first, "worker")
        second = sandbox.tilth("run", "s1")
        assert second.returncode == 2
        assert "already running" in second.stderr and str(first.pid) in second.stderr
        assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "running"
    finally:
        first.kill()
        first.wait()
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "crashed"
    assert sandbox.tilth("resume", "s1", "--foreground").returncode == 0


@pytest.mark.slow
def test_status_lists_sessions_and_tasks(sandbox):
    sandbox.start("s1", [task("T-1", "Alpha"), task("T-2", "Beta")], None)
    sandbox.start("s2", [task("T-1")], {"tasks": {"T-1": [{"verdict": REJECT}]}},
                  env={"TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    one = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert one["id"] == "s1" and one["state"] == "done" and one["branch"] == "session/s1"
    assert one["worktree"] == str(sandbox.worktree("s1"))
    assert [{k: t[k] for k in ("id", "title", "status")} for t in one["tasks"]] == [
        {"id": "T-1", "title": "Alpha", "status": "done"}, {"id": "T-2", "title": "Beta", "status": "done"}]
    assert [t["attempts"] for t in one["tasks"]] == [1, 1], "each task's receipt"
    every = json.loads(sandbox.tilth("status", "--json").stdout)
    assert [(s["id"], s["state"]) for s in every] == [("s1", "done"), ("s2", "failed")]
    table = sandbox.tilth("status").stdout
    assert "s1" in table and "2/2" in table and "0/1" in table


@pytest.mark.slow
def test_sigterm_finishes_the_iteration_then_stops_resumably(sandbox):
    scenario = {"tasks": {"T-1": [
        {"write": {"wip.txt": "partial"}, "run": ["kill -TERM $PPID"], "verdict": REJECT},
        {"write": {"wip.txt": "complete"}},
    ]}}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env=OBSERVER)
    assert result.returncode == 3, result.stderr
    assert [e["iter"] for e in sandbox.ledger("s1", "T-1")] == [1], "the running iteration completed"
    assert sandbox.commits("s1") == []
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "stopped"
    assert (sandbox.worktree("s1") / "wip.txt").read_text() == "partial"

    resumed = sandbox.tilth("resume", "--foreground")
    assert resumed.returncode == 0, resumed.stderr
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]
    assert git(sandbox.repo, "show", "session/s1~1:wip.txt") == "complete"
