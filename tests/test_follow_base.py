"""`tilth follow` on a moving base: the real `gh` against tests/fake_github.py, whose bare repository's base
branch the test advances as someone merging elsewhere would; GitHub's mergeStateStatus follows from it (BEHIND),
and `mergeable` CONFLICTING is set as GitHub would set it."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from conftest import git, task, wait_for_pause
from fake_github import FakeGitHub
import test_follow
from test_follow import follow_once, shown_pr

github_fixture = test_follow.github
gh_installed = test_follow.gh_installed

SESSION = {"tasks": {"T-1": [{"write": {"README.md": "# sample\nsession line\n", "greet.txt": "hello\n"}}]}}


def opened(sandbox, scenario: dict, *extra: str) -> None:
    assert sandbox.start("s1", [task("T-1", "Add greeting")], scenario, *extra).returncode == 0
    pr = sandbox.tilth("pr", "s1", "--base", "main")
    assert pr.returncode == 0, pr.stderr


def advance(sandbox, github: FakeGitHub, branch: str, files: dict[str, str | None], name: str) -> str:
    """A commit on the forge's `branch` made elsewhere (None deletes a file); its sha."""
    clone = Path(sandbox.root) / f"elsewhere-{name}"
    subprocess.run(["git", "clone", "-q", "-b", branch, str(github.bare), str(clone)], check=True)
    for path, content in files.items():
        if content is None:
            (clone / path).unlink()
        else:
            (clone / path).write_text(content)
    git(clone, "add", "-A")
    git(clone, "-c", "user.name=Else", "-c", "user.email=else@example.com", "commit", "-q", "-m", name)
    git(clone, "push", "-q", "origin", branch)
    return github.tip(branch)


def messages(repo, span: str) -> list[str]:
    return git(repo, "log", "--format=%B%x00", span).split("\0")[:-1]


def pushes(github: FakeGitHub) -> int:
    return sum(1 for m, url, _ in github.requests if m == "POST" and url.endswith("git-receive-pack"))


@pytest.mark.slow
def test_a_base_that_moved_is_replayed_rechecked_fixed_by_a_task_and_pushed_with_a_lease(sandbox, github_fixture):
    github = github_fixture
    opened(sandbox, {**SESSION, "tasks": {**SESSION["tasks"], "BASE-1": [{"delete": ["broken.txt"]}]}},
           "--check", "test ! -e broken.txt")
    old = github.tip("session/s1")
    before = messages(sandbox.repo, f"main..{old}")
    base = advance(sandbox, github, "main", {"broken.txt": "x\n", "other.txt": "base\n"}, "base-moved")

    done = follow_once(sandbox)
    assert "rebased session/s1 onto main" in done.stdout, done.stdout + done.stderr
    [fix] = [t for t in sandbox.plan("s1") if t["id"].startswith("BASE-")]
    assert fix["status"] == "done" and "test ! -e broken.txt" in fix["description"], "the check the rebase broke"
    new = github.tip("session/s1")
    assert new == git(sandbox.repo, "rev-parse", "session/s1").strip()
    assert git(sandbox.repo, "merge-base", "--is-ancestor", base, new) == ""
    assert git(sandbox.repo, "rev-list", "--merges", f"{base}..{new}").strip() == "", "never a merge commit"
    assert messages(sandbox.repo, f"{base}..{new}~1") == before, "one commit per task, messages and trailers kept"
    assert github.file_at(new, "other.txt") == "base\n" and github.file_at(new, "broken.txt") is None
    worktree = sandbox.session_dir("s1")
    record = __import__("json").loads((worktree / "session.json").read_text())
    assert git(record["worktree"], "rev-parse", "HEAD").strip() == new, "the worktree moved with the branch"
    assert not (worktree / "rebase.json").exists()
    assert github.prs[1].state == "OPEN"
    again = follow_once(sandbox)
    assert "rebased" not in again.stdout and pushes(github) == 3, "main, the PR, the rebase: once (the base moved by a local push)"


@pytest.mark.slow
def test_a_push_meanwhile_refuses_the_lease_and_nothing_is_lost_and_a_restart_acts_once(sandbox, github_fixture):
    github = github_fixture
    opened(sandbox, SESSION)
    advance(sandbox, github, "main", {"other.txt": "base\n"}, "base-moved")
    killed = sandbox.spawn("follow", "s1", "--once", env={"TILTH_TEST_PAUSE_AT": "pr_rebase_push"})
    wait_for_pause(killed, "pr_rebase_push")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    replayed = git(sandbox.repo, "rev-parse", "session/s1").strip()

    lease = sandbox.spawn("follow", "s1", "--once", env={"TILTH_TEST_PAUSE_AT": "pr_rebase_push"})
    wait_for_pause(lease, "pr_rebase_push")
    assert git(sandbox.repo, "rev-parse", "session/s1").strip() == replayed, "the restart did not replay again"
    person = advance(sandbox, github, "session/s1", {"mine.txt": "a person's commit\n"}, "person")
    lease.send_signal(signal.SIGUSR1)
    assert lease.wait(timeout=60) == 1
    assert github.tip("session/s1") == person, "the lease (the PR's old head) refused the push: nothing lost"
    pr = shown_pr(sandbox)
    assert pr["state"] == "needs_person" and "not pushed" in pr["question"], pr


@pytest.mark.slow
def test_a_text_conflict_is_resolved_by_a_task_and_one_in_meaning_parks(sandbox, github_fixture):
    github = github_fixture
    resolved = "# sample\nbase line\nsession line\n"
    opened(sandbox, {"tasks": {**SESSION["tasks"], "BASE-1": [{"write": {"README.md": resolved}}]}})
    base = advance(sandbox, github, "main", {"README.md": "# sample\nbase line\n"}, "base-edit")
    github.prs[1].mergeable = "CONFLICTING"
    done = follow_once(sandbox)
    [fix] = [t for t in sandbox.plan("s1") if t["id"].startswith("BASE-")]
    assert fix["status"] == "done" and "README.md" in fix["description"] and base in fix["description"]
    assert "+session line" in fix["description"], "the session's change it re-applies"
    new = github.tip("session/s1")
    assert "rebased" in done.stdout and github.file_at(new, "README.md") == resolved
    assert git(sandbox.repo, "rev-list", "--merges", f"{base}..{new}").strip() == ""
    assert "<<<<<<<" not in git(sandbox.repo, "log", "-p", f"{base}..{new}"), "no commit carries markers"

    github.prs[1].mergeable = "MERGEABLE"
    advance(sandbox, github, "main", {"README.md": None}, "base-delete")
    github.prs[1].mergeable = "CONFLICTING"
    parked = sandbox.tilth("follow", "s1", "--once", timeout=120)
    assert parked.returncode == 1 and github.tip("session/s1") == new
    assert "modify/delete" in shown_pr(sandbox)["question"] or "deleted" in shown_pr(sandbox)["question"]


def test_moving_the_branch_never_goes_through_the_worktrees_own_git_file(tmp_path):
    """The worker may have rewritten its worktree's `.git` to point at a git dir of its own whose config runs a
    program (core.fsmonitor): the rebase's move runs git through the recorded git dir, so nothing of it runs."""
    from conftest import git, make_repo
    from tilth.git.rebase_trees import move

    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    git(repo, "branch", "session/s1")
    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(worktree), "session/s1")
    old = git(worktree, "rev-parse", "HEAD").strip()
    (repo / "b.txt").write_text("b\n")
    git(repo, "add", "b.txt")
    git(repo, "commit", "-qm", "new base")
    new = git(repo, "rev-parse", "HEAD").strip()
    real_git_dir = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip())
    fake = tmp_path / "fake.git"
    git(tmp_path, "init", "-q", "--bare", str(fake))
    marker = tmp_path / "ran"
    program = tmp_path / "evil.sh"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(0o755)
    git(fake, "config", "core.fsmonitor", str(program))
    (worktree / ".git").write_text(f"gitdir: {fake}\n")
    move(real_git_dir, worktree, "session/s1", old, new)
    assert not marker.exists(), "the worker's git dir decided what git ran"
    assert git(repo, "rev-parse", "session/s1").strip() == new
    assert (worktree / "b.txt").read_text() == "b\n"
