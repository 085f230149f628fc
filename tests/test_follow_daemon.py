"""`follow_pr`: the supervisor follows a pull request tilth opened by itself, one `tilth follow --once` child
per poll, with the real `gh` against tests/fake_github.py."""

from __future__ import annotations

import json

import pytest

from supervised import start_supervisor, wait_until
from fake_github import Job
from test_dashboard import served  # noqa: F401 (a fixture)
from test_follow import FIX, ci_tasks, flaky, follow_once, gh_installed, github, opened  # noqa: F401 (fixtures)


@pytest.mark.slow
def test_with_follow_pr_the_supervisor_reruns_a_flaky_pr_once_and_sees_it_green(sandbox, daemon, github):  # noqa: F811
    github.ci = flaky
    opened(sandbox, github)
    pr_file = sandbox.session_dir("s1") / "pr.json"
    start_supervisor(sandbox, env={"TILTH_FOLLOW_PR": "true", "TILTH_FOLLOW_POLL_S": "0.3"})

    wait_until(sandbox.session_dir("s1"), lambda: json.loads(pr_file.read_text())["state"] == "green",
               "the supervisor to carry the PR to green", timeout=60)
    assert github.calls("rerun-failed-jobs") == 1, "re-run once, by the supervisor's own poll"
    assert not ci_tasks(sandbox), "a flaky failure reaches no agent"
    polls = [e for e in sandbox.events("s1") if e["type"] == "pr_polled"]
    assert polls[-1]["data"]["state"] == "green" and len(polls) >= 2


HOSTILE = "<x-check onload=alert(1)>"


@pytest.mark.slow
def test_the_dashboard_and_report_show_the_pr_and_its_follow_ups_with_forge_text_as_text(sandbox, github, served):  # noqa: F811
    def ci(sha: str, _attempt: int) -> list[Job]:
        fixed = github.file_at(sha, "fix.txt") is not None
        return [Job(HOSTILE, "success" if fixed else "failure", f"step {HOSTILE}", f"{HOSTILE}\n")]

    github.ci = ci
    opened(sandbox, github, FIX)
    follow_once(sandbox)  # the re-run
    follow_once(sandbox)  # CI-1 made, run and pushed
    [fix] = ci_tasks(sandbox)
    assert fix["status"] == "done" and HOSTILE in fix["title"]

    server = served()
    pages = {path: server.get(path) for path in ("/", "/s/s1")}
    for path, (status, body, _) in pages.items():
        assert status == 200 and "<x-" not in body, (path, body[max(0, body.find("<x-") - 300):body.find("<x-") + 100])
    _, overview, _ = pages["/"]
    _, session, _ = pages["/s/s1"]
    assert '<div class="pr muted">PR #1 ' in overview
    assert 'data-pr-state="' in session and "https://github.localhost/acme/widgets/pull/1" in session
    followup = session[session.index('data-followup="CI-1"'):]
    assert followup.startswith('data-followup="CI-1">CI-1 Fix CI on PR #1: &lt;x-check onload=alert(1)&gt;: done'), \
        followup[:200]

    report = (sandbox.session_dir("s1") / "report.md").read_text()
    [line] = [line for line in report.splitlines() if line.startswith("PR:")]
    assert line.startswith("PR:         PR #1 ") and line.endswith("(https://github.localhost/acme/widgets/pull/1)"), line
