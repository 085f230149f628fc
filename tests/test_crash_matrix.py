"""kill -9 a real `tilth run` at each point of the write order, then resume: no lost
work, no duplicate commit, no corrupt file."""

from __future__ import annotations

import json
import signal

import pytest

from conftest import git, task, wait_for_pause

REJECT = {"verdict": "reject", "category": "half_finished", "concern": "not finished", "next_step": "finish"}
COUNT_RUN = "echo run >> t2-runs.txt"

ACCEPTING = {"T-2": [{"write": {"t2.py": "two = 2\n"}, "run": [COUNT_RUN]}]}
FAILING_THEN_ACCEPTING = {"T-2": [
    {"write": {"t2.py": "two = 0\n"}, "run": [COUNT_RUN], "verdict": REJECT},
    {"run": [COUNT_RUN], "verdict": REJECT},
    {"write": {"t2.py": "two = 2\n"}, "run": [COUNT_RUN]},
]}


def assert_files_intact(sandbox, session_id):
    session_dir = sandbox.session_dir(session_id)
    for path in session_dir.rglob("*.json"):
        json.loads(path.read_text())
    for path in session_dir.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            json.loads(line)
    assert not list(session_dir.rglob("*.tmp"))


@pytest.mark.parametrize("point, tasks, runs_of_t2", [
    ("worker", ACCEPTING, 2),
    ("before_commit", ACCEPTING, 1),
    ("after_commit", ACCEPTING, 1),
    ("after_status", ACCEPTING, 1),
    ("before_failed_commit", FAILING_THEN_ACCEPTING, 3),
    ("after_failed_commit", FAILING_THEN_ACCEPTING, 3),
    ("after_failed_status", FAILING_THEN_ACCEPTING, 3),
])
@pytest.mark.slow
def test_kill_9_then_resume(sandbox, point, tasks, runs_of_t2):
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2"), task("T-3")])
    scenario = sandbox.write_json("scenario.json", {"tasks": tasks})
    created = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1",
                            "--backend", "scripted", "--scenario", str(scenario), "--foreground",
                            env={"TILTH_MAX_ITERATIONS_PER_TASK": "0"})
    assert created.returncode == 2, "an invalid setting must refuse before creating anything"
    assert not sandbox.session_dir("s1").exists()

    env = {"TILTH_MAX_ITERATIONS_PER_TASK": "2", "TILTH_TEST_PAUSE_AT": f"{point}@T-2"}
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1",
                          "--backend", "scripted", "--scenario", str(scenario), "--foreground", env=env)
    wait_for_pause(child, point)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "crashed"

    resumed = sandbox.tilth("resume", "s1", "--foreground", env={"TILTH_MAX_ITERATIONS_PER_TASK": "2"})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    commits = sandbox.commits("s1")
    assert [(c["task"], c["outcome"]) for c in commits] == [("T-1", ""), ("T-2", ""), ("T-3", "")]
    t2 = commits[1]["sha"]
    assert git(sandbox.repo, "show", f"{t2}:t2.py") == "two = 2\n"
    assert git(sandbox.repo, "show", f"{t2}:t2-runs.txt").count("run") == runs_of_t2
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done"}
    done_lines = [line[1] for line in sandbox.progress("s1") if line[2] == "done"]
    assert done_lines == ["T-1", "T-2", "T-3"]
    shas = [line[4] for line in sandbox.progress("s1")]
    assert len(shas) == len(set(shas)), "no outcome is journalled twice"
    assert git(sandbox.worktree("s1"), "status", "--porcelain") == ""
    assert_files_intact(sandbox, "s1")
    if point == "before_commit":
        assert len(sandbox.ledger("s1", "T-2")) == 1, "an accepted attempt is committed, not redone"


@pytest.mark.parametrize("point", ["lane_committed", "merge_shown"])
@pytest.mark.slow
def test_kill_9_in_a_parallel_landing_then_resume(sandbox, point):
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2"), task("T-3")])
    scenario = sandbox.write_json("scenario.json", {"tasks": ACCEPTING})
    env = {"TILTH_SANDBOX": "off", "TILTH_FINAL_REVIEW": "false", "TILTH_TEST_PAUSE_AT": f"{point}@T-2"}
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                          "scripted", "--scenario", str(scenario), "--foreground", "--parallel", "2", env=env)
    wait_for_pause(child, point)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    assert "tilth-lane/s1/T-2" in git(sandbox.repo, "branch", "--list", "tilth-lane/*")
    doctor = sandbox.tilth("doctor", "s1")
    assert doctor.returncode == 1 and "lanes a killed run left for T-2" in doctor.stdout, doctor.stdout

    resumed = sandbox.tilth("resume", "s1", "--foreground", env={"TILTH_SANDBOX": "off", "TILTH_FINAL_REVIEW": "false"})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    commits = sandbox.commits("s1")
    assert sorted(c["task"] for c in commits) == ["T-1", "T-2", "T-3"], "each task landed once"
    assert git(sandbox.repo, "show", "session/s1:t2.py") == "two = 2\n"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done"}
    shas = [line[4] for line in sandbox.progress("s1")]
    assert len(shas) == len(set(shas)) == 3, "no outcome is journalled twice"
    assert git(sandbox.worktree("s1"), "status", "--porcelain") == ""
    assert git(sandbox.repo, "branch", "--list", "tilth-lane/*") == "" and "+" not in git(
        sandbox.repo, "worktree", "list")
    assert sandbox.tilth("doctor", "s1").returncode == 0
    assert_files_intact(sandbox, "s1")


@pytest.mark.slow
def test_doctor_fix_clears_what_a_kill_in_a_landing_left_before_any_run(sandbox):
    """What `lane_cleanup.clear_lanes` itself leaves (no resumed run tidies up after it): the lanes
    gone, the session worktree back at the branch tip (the merge the kill cut short undone), the
    in-progress task's lane work kept as its partial ref and the task pending."""
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2")])
    scenario = sandbox.write_json("scenario.json", {"tasks": ACCEPTING})
    env = {"TILTH_SANDBOX": "off", "TILTH_FINAL_REVIEW": "false", "TILTH_TEST_PAUSE_AT": "merge_shown@T-2"}
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                          "scripted", "--scenario", str(scenario), "--foreground", "--parallel", "2", env=env)
    wait_for_pause(child, "merge_shown")
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    worktree, lanes = sandbox.worktree("s1"), sandbox.home / "lanes" / "s1"
    assert git(worktree, "status", "--porcelain") != "", "the kill cut a merge short in the session worktree"
    assert (lanes / "T-2").is_dir()

    fixed = sandbox.tilth("doctor", "s1", "--fix")
    assert "lanes removed: T-2" in fixed.stdout, fixed.stdout + fixed.stderr
    assert git(sandbox.repo, "branch", "--list", "tilth-lane/*") == ""
    assert "+" not in git(sandbox.repo, "worktree", "list") and not lanes.exists()
    assert git(worktree, "status", "--porcelain") == ""
    assert git(worktree, "rev-parse", "HEAD") == git(sandbox.repo, "rev-parse", "session/s1")
    kept = git(sandbox.repo, "for-each-ref", "--format=%(objectname)", "refs/tilth/partial/s1/T-2").strip()
    assert kept and git(sandbox.repo, "show", f"{kept}:t2.py") == "two = 2\n", "T-2's lane work kept"
    assert sandbox.statuses("s1")["T-2"] == "pending"
    assert_files_intact(sandbox, "s1")


@pytest.mark.slow
def test_conflicts_and_redos_survive_a_kill_9_in_the_reports_parallel_line(sandbox):
    """C2's change conflicts with C1's (both add shared.txt) and runs again on the new head; the run is
    killed while that redo lands, so the killed run's figures never reach lanes.json: the resumed
    session's report still counts the conflict and the redo, from the journal."""
    plan = sandbox.write_json("prd.json", [task("C1"), task("C2")])
    scenario = sandbox.write_json("scenario.json", {"tasks": {
        "C1": [{"write": {"shared.txt": "from C1\n"}}],
        "C2": [{"write": {"shared.txt": "from C2\n"}, "run": ["sleep 1"]}, {"write": {"c2.txt": "from C2\n"}}]}})
    env = {"TILTH_SANDBOX": "off", "TILTH_FINAL_REVIEW": "false"}
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                          "scripted", "--scenario", str(scenario), "--foreground", "--parallel", "2",
                          env={**env, "TILTH_TEST_PAUSE_AT": "merge_shown@C2"})
    wait_for_pause(child, "merge_shown")
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    kinds = [e["type"] for e in sandbox.events("s1")]
    assert kinds.count("merge_conflict") == 1 and "parallel_summary" not in kinds, "killed in the redo's landing"

    resumed = sandbox.tilth("resume", "s1", "--foreground", env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [c["task"] for c in sandbox.commits("s1")] == ["C1", "C2"]
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    line = next(x for x in report.splitlines() if x.startswith("Parallel:"))
    assert "1 conflicts, 1 redos (" in line, line
    shown = json.loads(sandbox.tilth("status", "s1", "--json").stdout)["parallel"]
    assert shown["conflicts"] == 1 and shown["redos"] == 1, shown
    assert_files_intact(sandbox, "s1")


def test_resume_removes_the_temp_files_a_killed_write_left(sandbox):
    """A kill -9 between write_atomic's mkstemp and its rename leaves `.<name>.<random>.tmp`
    (a lane thread may be mid-write when the main thread is killed); the next run removes it."""
    assert sandbox.start("s1", [task("T-1")], {"tasks": {}}, env={"TILTH_FINAL_REVIEW": "false"}).returncode == 0
    session_dir = sandbox.session_dir("s1")
    (session_dir / "prd.json").write_text(json.dumps([*sandbox.plan("s1"), task("T-2")]))  # something to resume for
    left = [session_dir / name for name in (".lanes.json.k1ll3d.tmp", ".prd.json.k1ll3d.tmp",
                                            ".progress-summary.md.k1ll3d.tmp", ".summary.json.k1ll3d.tmp")]
    for path in left:
        path.write_text("{\"half")
    resumed = sandbox.tilth("resume", "s1", "--foreground", env={"TILTH_FINAL_REVIEW": "false"})
    assert resumed.returncode == 0, resumed.stderr
    assert not [path for path in left if path.exists()]
    removed = [e for e in sandbox.events("s1") if e["type"] == "stale_temp_files_removed"]
    assert sorted(removed[0]["data"]["files"]) == sorted(path.name for path in left)
    assert_files_intact(sandbox, "s1")
