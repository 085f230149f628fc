"""Placeholders live above the task commits: a later independent task never sees a failed task's
partial work, `tilth resume` retries a placeholder from the top so the branch ends with exactly one
commit per task, and a kill -9 at every step of moving placeholders loses and duplicates nothing."""

from __future__ import annotations

import signal

import pytest

from conftest import git, path_without_gh, task, wait_for_pause

REJECT = {"verdict": "reject", "category": "half_finished", "concern": "not finished", "next_step": "finish"}
ONE_TRY = {"TILTH_MAX_ITERATIONS_PER_TASK": "1"}


def files_of(sandbox, sha: str) -> list[str]:
    """The paths a commit changes against its parent."""
    return sorted(git(sandbox.repo, "show", "--name-only", "--format=", sha).split())


def layout(sandbox, session_id: str) -> list[tuple[str, str]]:
    return [(c["task"], c["outcome"]) for c in sandbox.commits(session_id)]


def tilth_refs(sandbox) -> list[str]:
    return git(sandbox.repo, "for-each-ref", "--format=%(refname)", "refs/tilth").split()


def assert_one_commit_per_task(sandbox, session_id: str, owned: dict[str, list[str]]) -> None:
    """Every task exactly one commit, no placeholder, no merge, each commit holding its own files only."""
    commits = sandbox.commits(session_id)
    assert sorted(c["task"] for c in commits) == sorted(owned), layout(sandbox, session_id)
    assert all(c["outcome"] == "" for c in commits), layout(sandbox, session_id)
    assert git(sandbox.repo, "rev-list", "--merges", f"main..session/{session_id}") == ""
    for c in commits:
        assert files_of(sandbox, c["sha"]) == owned[c["task"]], (c["task"], files_of(sandbox, c["sha"]))
    assert not [r for r in tilth_refs(sandbox) if "/shelf/" in r or "/partial/" in r], "nothing left on the shelf"


def test_a_failure_stays_above_the_later_tasks_and_its_retry_is_one_commit(sandbox):
    scenario = {"tasks": {"T-2": [{"write": {"t2.py": "half = 2\n"}, "verdict": REJECT},
                                  {"write": {"t2b.py": "rest = 2\n"}}]}}
    plan = [task("T-1"), task("T-2"), task("T-3"), task("T-4", depends_on=["T-2"])]
    first = sandbox.start("s1", plan, scenario, env=ONE_TRY)
    assert first.returncode == 1, first.stderr
    assert layout(sandbox, "s1") == [("T-1", ""), ("T-3", ""), ("T-2", "failed")], "the placeholder is on top"
    t3 = sandbox.commits("s1")[1]["sha"]
    assert "t2.py" not in git(sandbox.repo, "ls-tree", "-r", "--name-only", t3).split(), \
        "the independent task was built without the failed task's edits"
    assert git(sandbox.repo, "show", "session/s1:t2.py") == "half = 2\n", "the placeholder holds the partial work"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "failed", "T-3": "done", "T-4": "pending"}
    assert git(sandbox.worktree("s1"), "status", "--porcelain") == ""
    placeholder = sandbox.commits("s1")[2]["sha"][:7]
    assert f"commits  2 task commits, then 1 placeholder above them: {placeholder} FAILED (T-2)" in \
        sandbox.tilth("status", "s1").stdout
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    assert f"Commits:    3 commits: 2 task commits, 1 placeholder above them holding partial work: `{placeholder}` " \
           "FAILED (T-2)" in report

    resumed = sandbox.tilth("resume", "s1", "--foreground", env=ONE_TRY)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert layout(sandbox, "s1") == [("T-1", ""), ("T-3", ""), ("T-2", ""), ("T-4", "")]
    done = {c["task"]: c["sha"] for c in sandbox.commits("s1")}
    assert files_of(sandbox, done["T-2"]) == ["t2.py", "t2b.py"], "the retry continued from its partial work"
    assert git(sandbox.repo, "show", f"{done['T-2']}:t2.py") == "half = 2\n"
    assert git(sandbox.repo, "rev-list", "--merges", "main..session/s1") == ""
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done", "T-4": "done"}
    assert tilth_refs(sandbox) == [], "no shelf or partial ref outlives the retry"
    assert "commits  4 task commits\n" in sandbox.tilth("status", "s1").stdout
    assert git(sandbox.worktree("s1"), "status", "--porcelain") == ""


@pytest.mark.slow
def test_two_failures_each_retry_ends_as_one_commit_and_the_other_waits_on_top(sandbox):
    scenario = {"tasks": {"T-1": [{"write": {"t1.py": "half = 1\n"}, "verdict": REJECT},
                                  {"write": {"t1b.py": "rest = 1\n"}}],
                          "T-2": [{"write": {"t2.py": "half = 2\n"}, "verdict": REJECT},
                                  {"write": {"t2c.py": "more = 2\n"}, "verdict": REJECT},
                                  {"write": {"t2b.py": "rest = 2\n"}}]}}
    plan = [task("T-1"), task("T-2"), task("T-3")]
    assert sandbox.start("s1", plan, scenario, env=ONE_TRY).returncode == 1
    assert layout(sandbox, "s1") == [("T-3", ""), ("T-2", "failed"), ("T-1", "failed")]

    once = sandbox.tilth("resume", "s1", "--foreground", env=ONE_TRY)
    assert once.returncode == 1, once.stderr
    assert layout(sandbox, "s1") == [("T-3", ""), ("T-1", ""), ("T-2", "failed")], \
        "T-1's retry is one commit below T-2's placeholder, which waits on top for its own retry"
    commits = {c["task"]: c["sha"] for c in sandbox.commits("s1")}
    assert files_of(sandbox, commits["T-1"]) == ["t1.py", "t1b.py"]
    assert files_of(sandbox, commits["T-2"]) == ["t2.py", "t2c.py"], "one placeholder holds both attempts' work"

    twice = sandbox.tilth("resume", "s1", "--foreground", env=ONE_TRY)
    assert twice.returncode == 0, twice.stderr
    assert layout(sandbox, "s1") == [("T-3", ""), ("T-1", ""), ("T-2", "")]
    assert_one_commit_per_task(sandbox, "s1", {"T-1": ["t1.py", "t1b.py"], "T-2": ["t2.py", "t2b.py", "t2c.py"],
                                               "T-3": ["scripted/T-3.md"]})


CRASH_SCENARIO = {"tasks": {"T-1": [{"write": {"t1.py": "half = 1\n"}, "verdict": REJECT},
                                    {"write": {"t1b.py": "rest = 1\n"}}],
                            "T-2": [{"write": {"t2.py": "half = 2\n"}, "verdict": REJECT},
                                    {"write": {"t2b.py": "rest = 2\n"}}]}}
OWNED = {"T-1": ["t1.py", "t1b.py"], "T-2": ["t2.py", "t2b.py"], "T-3": ["scripted/T-3.md"]}


@pytest.mark.parametrize("point, when", [
    ("placeholders_shelved@T-3", "first run"),
    ("placeholders_lowered@T-3", "first run"),
    ("placeholder_reapplied@T-3", "first run"),
    ("placeholder_taken@T-1", "resume"),
    ("placeholder_reapplied@T-1", "resume"),
])
@pytest.mark.slow
def test_kill_9_while_placeholders_move_loses_and_repeats_nothing(sandbox, point, when):
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2"), task("T-3")])
    scenario = sandbox.write_json("scenario.json", CRASH_SCENARIO)
    start = ["start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend", "scripted",
             "--scenario", str(scenario), "--foreground"]
    if when == "resume":
        assert sandbox.tilth(*start, env=ONE_TRY).returncode == 1
    child = sandbox.spawn(*(start if when == "first run" else ["resume", "s1", "--foreground"]),
                          env={**ONE_TRY, "TILTH_TEST_PAUSE_AT": point})
    wait_for_pause(child, point.split("@")[0])
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL

    if when == "first run":
        rerun = sandbox.tilth("run", "s1", env=ONE_TRY)  # recovery, no retry: both placeholders back on top
        assert rerun.returncode == 1, rerun.stderr
        assert layout(sandbox, "s1")[0] == ("T-3", "")
        assert sorted(layout(sandbox, "s1")[1:]) == [("T-1", "failed"), ("T-2", "failed")]
        placeholders = {c["task"]: c["sha"] for c in sandbox.commits("s1")[1:]}
        assert files_of(sandbox, placeholders["T-1"]) == ["t1.py"] and files_of(sandbox, placeholders["T-2"]) == ["t2.py"]
    resumed = sandbox.tilth("resume", "s1", "--foreground", env=ONE_TRY)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_one_commit_per_task(sandbox, "s1", OWNED)
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done"}
    outcomes = [(line[1], line[2]) for line in sandbox.progress("s1")]
    assert sorted(outcomes) == [("T-1", "done"), ("T-1", "failed:iterations_exhausted"), ("T-2", "done"),
                                ("T-2", "failed:iterations_exhausted"), ("T-3", "done")], \
        "each outcome journalled once, a re-applied placeholder never again"
    memory = [line for day in (sandbox.home / "memory").glob("*.md") for line in day.read_text().splitlines()
              if "s1" in line]
    assert len(memory) == 5, memory
    assert git(sandbox.worktree("s1"), "status", "--porcelain") == ""


@pytest.mark.slow
def test_a_pushed_branch_is_rewritten_only_with_a_lease_on_its_old_tip(sandbox, tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(sandbox.repo, "remote", "add", "origin", str(remote))
    scenario = {"tasks": {"T-1": [{"write": {"t1.py": "half = 1\n"}, "verdict": REJECT},
                                  {"write": {"t1b.py": "rest = 1\n"}}]}}
    assert sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env=ONE_TRY).returncode == 1
    first = sandbox.tilth("push", "s1")
    assert first.returncode == 0 and "rewritten" not in first.stdout, first.stdout + first.stderr
    pushed = git(sandbox.repo, "rev-parse", "session/s1").strip()
    assert sandbox.tilth("resume", "s1", "--foreground", env=ONE_TRY).returncode == 0
    assert layout(sandbox, "s1") == [("T-2", ""), ("T-1", "")]
    rewritten = git(sandbox.repo, "rev-parse", "session/s1").strip()

    moved = git(sandbox.repo, "commit-tree", "-p", pushed, "-m", "someone else's work",
                f"{pushed}^{{tree}}").strip()
    git(sandbox.repo, "push", "-q", "origin", f"{moved}:refs/heads/session/s1")
    refused = sandbox.tilth("push", "s1")
    assert refused.returncode != 0
    assert refused.stderr.count("\n") == 1 and f"no longer at {pushed[:7]}" in refused.stderr, refused.stderr
    assert git(remote, "rev-parse", "session/s1").strip() == moved, "nothing on the remote was overwritten"
    assert git(sandbox.repo, "rev-parse", "session/s1").strip() == rewritten, "nothing here was lost"

    git(sandbox.repo, "push", "-q", "--force", "origin", f"{pushed}:refs/heads/session/s1")  # they take theirs back
    opened = sandbox.tilth("pr", "s1", env={"PATH": path_without_gh()})
    assert opened.returncode == 0, opened.stdout + opened.stderr
    assert f"rewritten: it replaces {pushed[:7]} (--force-with-lease" in opened.stdout
    assert git(remote, "rev-parse", "session/s1").strip() == rewritten
    body = (sandbox.session_dir("s1") / "pr.md").read_text()
    assert f"**The branch was rewritten** since it was pushed at `{pushed[:7]}`" in body


LANES = {"TILTH_SANDBOX": "off", "TILTH_FINAL_REVIEW": "false", **ONE_TRY}


@pytest.mark.parametrize("point", ["placeholders_lowered@B", "placeholder_reapplied@B"])
@pytest.mark.slow
def test_kill_9_while_a_lane_lands_below_a_placeholder_then_resume(sandbox, point):
    """--parallel 2: B's commit lands below A's placeholder (shelved for it, then re-applied); a kill at
    either step, then `resume`: one commit per task, A's retry from its work, nothing twice."""
    scenario = sandbox.write_json("scenario.json", {
        "tasks": {"A": [{"write": {"a.txt": "half\n"}, "verdict": REJECT}, {"write": {"a2.txt": "rest\n"}}]},
        "default": [{"write": {"{task}.txt": "x\n"}, "run": ["sleep 0.5"]}]})
    plan = sandbox.write_json("prd.json", [task("A"), task("B"), task("C", depends_on=["A"])])
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "r1", "--backend",
                          "scripted", "--scenario", str(scenario), "--foreground", "--parallel", "2",
                          env={**LANES, "TILTH_TEST_PAUSE_AT": point})
    wait_for_pause(child, point.split("@")[0])
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL

    resumed = sandbox.tilth("resume", "r1", "--foreground", "--parallel", "2", env=LANES)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_one_commit_per_task(sandbox, "r1", {"A": ["a.txt", "a2.txt"], "B": ["B.txt"], "C": ["C.txt"]})
    order = [c["task"] for c in sandbox.commits("r1")]
    assert order.index("A") < order.index("C")
    assert sorted((line[1], line[2]) for line in sandbox.progress("r1")) == [
        ("A", "done"), ("A", "failed:iterations_exhausted"), ("B", "done"), ("C", "done")]
