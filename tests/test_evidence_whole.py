"""Evidence whole for the reviewer: every check of a task's last attempt, passing or not, by command
and result, and each rejection (attempt, category, concern) in report.md and the PR description; a task
commit's body says what tilth verified and quotes the worker's summary only as the worker's."""

from __future__ import annotations

from conftest import git, task
from tilth.cli.review import pr_body
from tilth.store.home import session_paths
from tilth.views.tally import tally

HELLO = {"text": "hello.txt says hello", "verify": "grep -q hello hello.txt"}


def test_checks_rejections_and_what_tilth_verified_reach_the_reviewer(sandbox):
    (sandbox.repo / "broken").write_text("left over\n")
    git(sandbox.repo, "add", "-A")
    git(sandbox.repo, "commit", "-q", "-m", "broken")
    scenario = {"tasks": {"T-1": [{"write": {"hello.txt": "bye\n"}},
                                  {"write": {"hello.txt": "hello\n"},
                                   "case": {"summary": "Wrote T-001.txt",
                                            "criteria": [{"criterion": "hello.txt says hello", "evidence": "x"}]}}]}}
    result = sandbox.start("s1", [task("T-1", acceptance_criteria=[HELLO])], scenario,
                           "--check", "test -f README.md", "--check", "test ! -f broken")
    assert result.returncode == 0, result.stdout + result.stderr

    checks = ("Checks on each task's last attempt (the commands tilth ran itself and their exit status):\n"
              "- T-1 (done): ✓ `test -f README.md` exit 0; ✗ `test ! -f broken` exit 1 (it failed on the base "
              "commit too: not blamed)\n")
    rejections = "- T-1 (done)\n  - attempt 1: verify_failed: tilth ran the criteria's verify commands and 1 failed"
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    body = pr_body(tally(session_paths("s1", sandbox.home)))
    for text in (report, body):
        assert checks in text and rejections in text, text

    commit = sandbox.commits("s1")[0]
    assert commit["task"] == "T-1" and commit["iterations"] == "2"  # the trailers recovery reads, intact
    message = git(sandbox.repo, "log", "-1", "--format=%B", commit["sha"])
    verified = ("Verified by tilth on the accepted attempt, before this commit:\n"
                "- guard: passed (no test deleted, emptied or newly skipped; no protected path or symlink leaving "
                "the worktree beyond what the task's may_change allows)\n"
                "- check `test -f README.md`: passed (exit 0)\n"
                "- check `test ! -f broken`: exit 1, failing the same way on the base commit (not blamed)\n"
                "- verify `grep -q hello hello.txt` (criterion: hello.txt says hello): passed (exit 0)\n"
                "- evaluator: accepted attempt 2\n\n"
                "Worker's summary: Wrote T-001.txt\n\nTilth-Session: s1\n")
    assert verified in message, message
