"""`tilth follow`: the real `gh` CLI against a local GitHub (tests/fake_github.py, the proxy of gh and git,
backed by a bare repository). CI is a function of the pushed files, so a follow-up commit really turns it green."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess

import pytest

from conftest import git, task, wait_for_pause
from fake_github import FakeGitHub, Job

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("gh") is None, reason="gh is not installed (apt-get install gh)")]

LOG = "collected 3 items\ntests/test_greet.py .F.\nFAILED tests/test_greet.py::test_hello - assert 'hi' == 'hello'\n"
FIX = {"tasks": {"CI-1": [{"write": {"fix.txt": "hello\n"}}]}}


def real_failure(github: FakeGitHub):
    """Red until fix.txt is on the pushed commit, whatever the attempt."""
    def ci(sha: str, _attempt: int) -> list[Job]:
        fixed = github.file_at(sha, "fix.txt") is not None
        return [Job("lint"), Job("tests", "success" if fixed else "failure", "Run pytest", LOG)]
    return ci


def flaky(_sha: str, attempt: int) -> list[Job]:
    return [Job("tests", "failure" if attempt == 1 else "success", "Run pytest", "connection reset by peer\n")]


@pytest.fixture
def github(sandbox):
    with FakeGitHub(sandbox.root) as fake:
        sandbox.env.update(fake.env(sandbox.root))
        git(sandbox.repo, "remote", "add", "origin", fake.clone_url)
        subprocess.run(["git", "-C", str(sandbox.repo), "push", "-q", "origin", "main"], env=sandbox.env, check=True)
        yield fake
    assert not fake.unknown, f"gh asked the fake something it does not speak: {fake.unknown}"


def opened(sandbox, github: FakeGitHub, scenario: dict | None = None) -> None:
    assert sandbox.start("s1", [task("T-1", "Add greeting")], scenario or {}).returncode == 0
    pr = sandbox.tilth("pr", "s1", "--base", "main")
    assert pr.returncode == 0, pr.stderr
    assert "https://github.localhost/acme/widgets/pull/1" in pr.stdout and "tilth follow s1" in pr.stdout
    assert github.prs[1].head == "session/s1"


def follow_once(sandbox) -> subprocess.CompletedProcess:
    done = sandbox.tilth("follow", "s1", "--once", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def shown_pr(sandbox) -> dict:
    return json.loads(sandbox.tilth("status", "s1", "--json").stdout)["pr"]


def ci_tasks(sandbox) -> list[dict]:
    return [t for t in sandbox.plan("s1") if t["id"].startswith("CI-")]


def test_a_red_pr_is_rerun_once_then_fixed_by_one_follow_up_commit_and_green(sandbox, github):
    github.ci = real_failure(github)
    opened(sandbox, github, FIX)
    first_head = github.tip("session/s1")

    first = follow_once(sandbox)
    assert github.calls("rerun-failed-jobs") == 1 and not ci_tasks(sandbox), "re-run once before any agent"
    assert "re-ran the failed jobs" in first.stdout
    assert shown_pr(sandbox)["state"] == "waiting_checks"

    second = follow_once(sandbox)
    assert github.calls("rerun-failed-jobs") == 1, "the same run is never re-run twice"
    [fix] = ci_tasks(sandbox)
    assert fix["status"] == "done", second.stdout + second.stderr
    for fact in ("'tests'", "Run pytest", "tests/test_greet.py::test_hello", "assert 'hi' == 'hello'",
                 "https://github.localhost/acme/widgets/actions/runs/"):
        assert fact in fix["description"], fact
    assert "'lint'" not in fix["description"], "only the failing checks"
    prompts = (sandbox.session_dir("s1") / "prompts.jsonl").read_text()
    assert "tests/test_greet.py::test_hello" in prompts, "the worker saw the failing test"
    head = github.tip("session/s1")
    assert head != first_head and head == git(sandbox.repo, "rev-parse", "session/s1").strip()
    assert github.file_at(head, "fix.txt") == "hello\n"
    assert git(sandbox.repo, "rev-list", "--count", f"{first_head}..{head}").strip() == "1", "one commit"

    third = follow_once(sandbox)
    assert "green" in third.stdout
    pr = shown_pr(sandbox)
    assert pr == {"number": 1, "url": "https://github.localhost/acme/widgets/pull/1", "state": "green",
                  "head": head, "fixes": 1, "question": ""}
    status = sandbox.tilth("status", "s1")
    assert "PR #1 green" in status.stdout and "1 follow-up fix pushed" in status.stdout
    assert github.prs[1].state == "OPEN", "tilth never merges nor closes"


def test_a_flaky_failure_is_rerun_once_and_goes_green_without_an_agent(sandbox, github):
    github.ci = flaky
    opened(sandbox, github)
    follow_once(sandbox)
    done = follow_once(sandbox)
    assert "green" in done.stdout
    assert github.calls("rerun-failed-jobs") == 1
    assert not ci_tasks(sandbox) and shown_pr(sandbox)["fixes"] == 0
    assert github.calls("--log-failed") == 0 and not any("/logs" in url for _, url, _ in github.requests)


def test_a_follower_killed_after_adding_the_task_acts_on_nothing_twice(sandbox, github):
    github.ci = real_failure(github)
    opened(sandbox, github, FIX)
    follow_once(sandbox)  # the re-run
    proc = sandbox.spawn("follow", "s1", "--once", env={"TILTH_TEST_PAUSE_AT": "pr_task_added"})
    wait_for_pause(proc, "pr_task_added")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert [t["status"] for t in ci_tasks(sandbox)] == ["pending"]

    follow_once(sandbox)
    follow_once(sandbox)
    assert [t["status"] for t in ci_tasks(sandbox)] == ["done"], "the task is not added twice"
    assert github.calls("rerun-failed-jobs") == 1
    pushes = [url for method, url, _ in github.requests if method == "POST" and url.endswith("git-receive-pack")]
    assert len(pushes) == 3, "main (the fixture), the branch at `tilth pr`, then the one fix"
    assert shown_pr(sandbox)["state"] == "green" and shown_pr(sandbox)["fixes"] == 1
