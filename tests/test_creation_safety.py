"""`tilth start` creates a session whole or not at all: a kill -9 mid-creation is reclaimed by
the next start, a live creation is never touched, and invalid settings create nothing."""

from __future__ import annotations

import json
import signal

import pytest

from conftest import git, task, wait_for_pause

PLAN = [task("T-1"), task("T-2")]


def start_args(sandbox, session_id: str) -> list[str]:
    plan = sandbox.write_json(f"{session_id}-prd.json", PLAN)
    return ["start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", session_id, "--backend", "scripted",
            "--foreground"]


def paused_start(sandbox, session_id: str, point: str):
    child = sandbox.spawn(*start_args(sandbox, session_id), env={"TILTH_TEST_PAUSE_AT": f"{point}@{session_id}"})
    wait_for_pause(child, point)
    return child


def kill_9(child) -> None:
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL


def session_branches(sandbox) -> list[str]:
    return git(sandbox.repo, "branch", "--list", "--format=%(refname:short)", "session/*").split()


def worktree_admin_dirs(sandbox) -> list[str]:
    admin = sandbox.repo / ".git" / "worktrees"
    return sorted(p.name for p in admin.iterdir()) if admin.is_dir() else []


def staging_dirs(sandbox) -> list[str]:
    return sorted(p.name for p in (sandbox.home / "sessions").glob(".creating-*"))


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_worktree", "before_session_dir"])
def test_a_creation_killed_midway_is_reclaimed_by_the_next_start(sandbox, point):
    kill_9(paused_start(sandbox, "s1", point))
    assert session_branches(sandbox) == ["session/s1"]
    assert sandbox.worktree("s1").is_dir() and worktree_admin_dirs(sandbox) == ["tilth-s1"]
    assert staging_dirs(sandbox) == [".creating-s1"] and not sandbox.session_dir("s1").exists()

    status = sandbox.tilth("status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout) == [], "a half-created session is not a session"

    again = sandbox.tilth(*start_args(sandbox, "s1"))
    assert again.returncode == 0, again.stderr
    reclaimed = [line for line in again.stderr.splitlines() if "reclaimed" in line]
    assert len(reclaimed) == 1 and "session s1" in reclaimed[0] and "removed branch session/s1" in reclaimed[0]
    assert staging_dirs(sandbox) == []
    assert worktree_admin_dirs(sandbox) == ["tilth-s1"]
    assert git(sandbox.repo, "worktree", "list", "--porcelain").count("worktree ") == 2
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "done"
    assert not (sandbox.session_dir("s1") / "creating.json").exists()


@pytest.mark.slow
def test_a_creation_in_progress_is_left_alone_by_another_start(sandbox):
    child = paused_start(sandbox, "s1", "after_worktree")
    try:
        other = sandbox.tilth(*start_args(sandbox, "s2"))
        assert other.returncode == 0, other.stderr
        assert "reclaimed" not in other.stderr
        assert staging_dirs(sandbox) == [".creating-s1"], "the live creator's staging dir is untouched"
        assert sandbox.worktree("s1").is_dir() and "tilth-s1" in worktree_admin_dirs(sandbox)

        same = sandbox.tilth(*start_args(sandbox, "s1"))
        assert same.returncode == 2 and "being created by another" in same.stderr, same.stderr
    finally:
        child.send_signal(signal.SIGUSR1)
    assert child.wait(timeout=60) == 0, child.stderr.read()
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "done"
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]


@pytest.mark.slow
def test_reclaiming_keeps_a_branch_that_has_commits(sandbox):
    kill_9(paused_start(sandbox, "s1", "after_worktree"))
    worktree = sandbox.worktree("s1")
    (worktree / "mine.txt").write_text("work someone did on the branch\n")
    git(worktree, "add", "mine.txt")
    git(worktree, "commit", "-q", "-m", "by hand")
    tip = git(sandbox.repo, "rev-parse", "session/s1").strip()

    other = sandbox.tilth(*start_args(sandbox, "s2"))
    assert other.returncode == 0, other.stderr
    assert "kept branch session/s1" in other.stderr
    assert git(sandbox.repo, "rev-parse", "session/s1").strip() == tip
    assert not worktree.exists() and staging_dirs(sandbox) == []
    assert worktree_admin_dirs(sandbox) == ["tilth-s2"]


@pytest.mark.parametrize("env, names", [
    ({"TILTH_SANDBOX": "bogus"}, "sandbox"),
    ({"TILTH_AGENT_NETWORK": "bogus"}, "agent_network"),
    ({"TILTH_MAX_WALL_CLOCK_S": "inf"}, "max_wall_clock_s"),
])
def test_an_invalid_setting_refuses_before_anything_is_created(sandbox, env, names):
    result = sandbox.tilth(*start_args(sandbox, "s1"), env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("tilth: ") and result.stderr.count("\n") == 1, result.stderr
    assert names in result.stderr
    assert_nothing_created(sandbox)


def test_a_required_sandbox_that_cannot_run_refuses_before_anything_is_created(sandbox, tmp_path):
    empty_path = tmp_path / "no-bwrap-here"
    empty_path.mkdir()
    result = sandbox.tilth(*start_args(sandbox, "s1"), env={"TILTH_SANDBOX": "bwrap", "PATH": str(empty_path)})
    assert result.returncode == 2, result.stderr
    assert "bubblewrap" in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert_nothing_created(sandbox)


def assert_nothing_created(sandbox) -> None:
    assert session_branches(sandbox) == []
    assert worktree_admin_dirs(sandbox) == []
    for sub in ("sessions", "worktrees"):
        where = sandbox.home / sub
        assert not where.exists() or not any(where.iterdir()), list(where.iterdir())


def test_what_tilth_creates_in_its_home_is_closed_to_other_users(tmp_path):
    """Sessions hold prompts, diffs and spend; worktrees hold the user's code: another local user may not
    list them, whether tilth made TILTH_HOME or the user made it open (0755) beforehand."""
    import os
    import shutil
    import subprocess
    import sys

    from conftest import make_repo
    from users import NOBODY, outside_tmp

    root = outside_tmp("tilth-home-modes-")
    try:
        os.chmod(root, 0o755)
        repo = make_repo(root / "repo")
        plan = root / "prd.json"
        plan.write_text(json.dumps([task("T-1")]))
        open_home = root / "open-home"
        open_home.mkdir(mode=0o755)
        for number, home in enumerate((root / "fresh" / "home", open_home)):
            env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
            env["TILTH_HOME"] = str(home)
            started = subprocess.run([sys.executable, "-m", "tilth", "start", "--repo", str(repo), "--prd", str(plan),
                                      "--id", f"s{number}", "--backend", "scripted", "--foreground"],
                                     env=env, capture_output=True, text=True, timeout=120)
            assert started.returncode == 0, started.stderr
            for made in (home / "sessions", home / "worktrees"):
                assert made.stat().st_mode & 0o777 == 0o700, made
            if home != open_home:
                assert home.stat().st_mode & 0o777 == 0o700
            if os.geteuid() == 0 and shutil.which("setpriv"):
                listed = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                                         "ls", str(home / "sessions" / f"s{number}")], capture_output=True, text=True)
                assert listed.returncode != 0 and "Permission denied" in listed.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)
