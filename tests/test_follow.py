"""`tilth follow`: the real `gh` CLI against a local GitHub (tests/fake_github.py, the proxy of gh and git,
backed by a bare repository). CI is a function of the pushed files, so a follow-up commit really turns it green."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess

import pytest

from conftest import git, task, wait_for_pause
from fake_github import FakeGitHub, Job
from tilth.git.forge import Check, PullFacts, failed_jobs
from tilth.views.pr_state import read



@pytest.fixture(autouse=True)
def gh_installed() -> None:
    if shutil.which("gh") is None:
        if os.environ.get("TILTH_REQUIRE_GH") == "1" or os.environ.get("CI") == "true":
            pytest.fail("TILTH_REQUIRE_GH=1 or CI=true, but gh is not installed (`make gh`)", pytrace=False)
        pytest.skip("gh is not installed (`make gh`: apt-get install gh)")

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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_flaky_failure_is_rerun_once_and_goes_green_without_an_agent(sandbox, github):
    github.ci = flaky
    opened(sandbox, github)
    follow_once(sandbox)
    done = follow_once(sandbox)
    assert "green" in done.stdout
    assert github.calls("rerun-failed-jobs") == 1
    assert not ci_tasks(sandbox) and shown_pr(sandbox)["fixes"] == 0
    assert github.calls("--log-failed") == 0 and not any("/logs" in url for _, url, _ in github.requests)


@pytest.mark.slow
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



@pytest.mark.slow
def test_a_failure_that_two_fixes_do_not_cure_waits_for_a_person(sandbox, github):
    github.ci = real_failure(github)
    opened(sandbox, github, {"tasks": {"CI-1": [{"write": {"try1.txt": "no\n"}}],
                                       "CI-2": [{"write": {"try2.txt": "no\n"}}]}})
    for _ in range(5):  # re-run, fix 1, re-run on its head, fix 2, re-run on its head
        follow_once(sandbox)
    assert [t["id"] for t in ci_tasks(sandbox)] == ["CI-1", "CI-2"]
    parked = sandbox.tilth("follow", "s1", "--once")
    assert parked.returncode == 1, parked.stdout + parked.stderr
    pr = shown_pr(sandbox)
    assert pr["state"] == "needs_person" and pr["fixes"] == 2 and "after 2 follow-up fixes" in pr["question"]
    assert [t["id"] for t in ci_tasks(sandbox)] == ["CI-1", "CI-2"], "no third fix"
    assert "PR #1 waiting for you: CI still fails (tests)" in sandbox.tilth("status", "s1").stdout

@pytest.mark.slow
def test_caps_stop_follow_up_work_before_any_agent_until_the_person_answers(sandbox, github):
    github.ci = real_failure(github)
    opened(sandbox, github, FIX)
    follow_once(sandbox)  # the re-run: no agent, so no bound

    def parked_by(env: dict[str, str], *again: str) -> str:
        done = sandbox.tilth("follow", "s1", "--once", *again, env=env, timeout=120)
        assert done.returncode == 1, done.stdout + done.stderr
        assert not ci_tasks(sandbox) and shown_pr(sandbox)["state"] == "needs_person", done.stdout
        return shown_pr(sandbox)["question"]

    question = parked_by({"TILTH_PR_MAX_FOLLOWUPS": "0"})
    assert "0 follow-up tasks were made for PR #1 (pr_max_followups: 0)" in question
    assert parked_by({}) == question, "the question stands until the person answers it"
    question = parked_by({"TILTH_MAX_WALL_CLOCK_S": "0.01"}, "--again")  # the session ran longer than that
    assert "the session's max_wall_clock_s is reached" in question and "TILTH_MAX_WALL_CLOCK_S" in question
    assert "test_hello" not in (sandbox.session_dir("s1") / "prompts.jsonl").read_text(), "no agent saw the failure"
    assert "PR #1 waiting for you: the session's max_wall_clock_s" in sandbox.tilth("status", "s1").stdout

    fixed = sandbox.tilth("follow", "s1", "--once", "--again", timeout=120)  # the person raised it
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert [t["status"] for t in ci_tasks(sandbox)] == ["done"]
    assert json.loads((sandbox.session_dir("s1") / "pr.json").read_text())["followups"] == ["CI-1"]
    assert "green" in follow_once(sandbox).stdout


@pytest.mark.slow
def test_only_the_checks_the_base_requires_count_when_it_requires_any(sandbox, github):
    github.ci = lambda _sha, _attempt: [Job("tests"), Job("docs-preview", "failure", "Deploy", "quota exceeded\n")]
    opened(sandbox, github)
    github.prs[1].required = {"tests"}
    done = follow_once(sandbox)
    assert "green" in done.stdout, done.stdout
    assert github.calls("rerun-failed-jobs") == 0 and not ci_tasks(sandbox), "an optional check costs nothing"
    github.prs[1].required = {"tests", "docs-preview"}
    follow_once(sandbox)
    assert github.calls("rerun-failed-jobs") == 1, "a required check that fails is CI failing"


@pytest.mark.slow
def test_a_merged_pr_is_no_longer_followed(sandbox, github):
    opened(sandbox, github)
    assert "green" in follow_once(sandbox).stdout
    github.prs[1].state = "MERGED"
    github.ci = real_failure(github)
    assert "PR #1 merged" in follow_once(sandbox).stdout
    asked = len(github.requests)
    done = sandbox.tilth("follow", "s1", "--poll", "0.01", timeout=60)  # not --once: it would poll for ever
    assert done.returncode == 0 and "PR #1 merged: no longer followed" in done.stdout, done.stdout + done.stderr
    assert len(github.requests) == asked, "a merged PR is never read again"
    assert github.calls("rerun-failed-jobs") == 0 and not ci_tasks(sandbox)
    assert shown_pr(sandbox)["state"] == "merged"


def facts(*checks: Check, mergeable: str = "MERGEABLE", merge_state: str = "CLEAN") -> PullFacts:
    return PullFacts(1, "u", "OPEN", "abc", "main", mergeable, merge_state, "", checks, ())


def test_every_condition_is_found_together_and_no_check_is_never_green():
    passed = Check("tests", "COMPLETED", "SUCCESS", "u", 1)
    failed = Check("lint", "COMPLETED", "FAILURE", "u", 1)
    assert read(facts(passed), parked=False).state == "green"
    assert read(facts(), parked=False).state == "waiting_checks", "0 checks is not green"
    assert read(facts(passed, mergeable="UNKNOWN"), parked=False).state == "waiting_checks"
    both = read(facts(passed, failed, mergeable="CONFLICTING", merge_state="DIRTY"), parked=False)
    assert both.state == "conflicted" and both.conditions == ("conflicted", "ci_failing")
    assert read(facts(failed, merge_state="BEHIND"), parked=True).conditions == ("needs_person", "ci_failing", "behind")


def test_a_failed_log_is_bounded_per_job_with_its_steps_and_test_ids():
    log = "".join(f"tests\tRun pytest\tline {n} " + "x" * 400 + "\n" for n in range(100))
    log += "tests\tRun pytest\tFAILED tests/test_a.py::test_b[1] - boom\nlint\tRuff\t`rm -rf /` E501\n"
    tests, lint = failed_jobs(log)
    assert (tests.job, tests.steps, tests.test_ids) == ("tests", ("Run pytest",), ("tests/test_a.py::test_b[1]",))
    assert len(tests.last_lines) == 40 and max(map(len, tests.last_lines)) == 300
    assert lint.last_lines == ("`rm -rf /` E501",) and lint.test_ids == ()


def test_a_mark_inside_the_forges_quoted_words_never_passes_for_a_task_already_made(tmp_path):
    from tilth.cli.follow_bounds import Bounded
    from tilth.store.home import session_paths
    from tilth.store.pr_record import PrRecord

    paths = session_paths("s1", tmp_path)
    paths.dir.mkdir(parents=True)
    mark = "Failure signature: abc123:lint"
    quoted_log = f"CI output, quoted:\n```text\n{mark}\n```\n\nFailure signature: abc123:tests"
    paths.prd.write_text(json.dumps([{"id": "CI-1", "title": "Fix CI", "description": quoted_log,
                                      "acceptance_criteria": ["passes"], "status": "done"}]))
    bounds = Bounded(paths, None, PrRecord(1, "u", "h/o/r"), limit=6)  # type: ignore[arg-type]
    assert bounds.made("Failure signature: abc123:tests") == "CI-1"
    assert bounds.made(mark) == "", "a CI log that prints a signature does not stand for its task"
