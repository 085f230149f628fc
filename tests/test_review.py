"""Handing a session to a reviewer (push, pr, diff, log), retiring it (cleanse, reset), and
the end-of-session report. Real repos, a local bare `origin`, a fake `gh` on PATH."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git, task, wait_for_pause
from tilth.cli.review import compare_url, parse_remote_url, pr_body, pr_title
from tilth.store.home import session_paths
from tilth.store.jsonio import append_jsonl
from tilth.views.endreport import build_report, record_report
from tilth.views.tally import SessionTally, TaskTally

REJECT = {"verdict": "reject", "category": "weak_test", "concern": "no test covers it", "next_step": "add a test"}
FAILING = {"tasks": {
    "T-1": [{"write": {"greet.py": "print('hi')\n# \x1b]0;retitled\x07\x1b[2J\n"}}],
    "T-2": [{"write": {"part.py": "half = True\n"}, "verdict": REJECT}],
}}
TWO_TRIES = {"TILTH_MAX_ITERATIONS_PER_TASK": "2"}
FAKE_GH = """#!/bin/sh
printf '%s\\n' "$@" > "$FAKE_GH_LOG/args"
while [ $# -gt 0 ]; do
  if [ "$1" = "--body-file" ]; then cp "$2" "$FAKE_GH_LOG/body"; fi
  shift
done
echo "https://github.com/acme/widgets/pull/7"
"""


def path_without_gh() -> str:
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(d for d in dirs if d and not (Path(d) / "gh").exists())


@pytest.fixture
def origin(sandbox) -> Path:
    bare = sandbox.root / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    git(sandbox.repo, "remote", "add", "origin", str(bare))
    return bare


@pytest.fixture
def gh(sandbox) -> tuple[dict[str, str], Path]:
    """A fake `gh` first on PATH that records its arguments and the body file's content."""
    bin_dir, log = sandbox.root / "bin", sandbox.root / "gh-log"
    bin_dir.mkdir()
    log.mkdir()
    script = bin_dir / "gh"
    script.write_text(FAKE_GH)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{bin_dir}{os.pathsep}{path_without_gh()}", "FAKE_GH_LOG": str(log)}, log


def remote_sha(bare: Path, branch: str) -> str:
    out = subprocess.run(["git", "ls-remote", str(bare), f"refs/heads/{branch}"], check=True,
                         capture_output=True, text=True).stdout.split()
    return out[0] if out else ""


def branch_sha(sandbox, session_id: str) -> str:
    return git(sandbox.repo, "rev-parse", f"session/{session_id}").strip()


def has_branch(sandbox, session_id: str) -> bool:
    return git(sandbox.repo, "branch", "--list", f"session/{session_id}").strip() != ""


def registered_worktrees(sandbox) -> int:
    return git(sandbox.repo, "worktree", "list", "--porcelain").count("worktree ")


def state(sandbox, session_id: str) -> str:
    return json.loads((sandbox.session_dir(session_id) / "session.json").read_text())["state"]


def start_failing(sandbox, session_id: str = "s1"):
    result = sandbox.start(session_id, [task("T-1", "Add greeting"), task("T-2", "Hard one")], FAILING, env=TWO_TRIES)
    assert result.returncode == 1, result.stderr
    return result


def add_model_call(sandbox, session_id: str, task_id: str, tokens: int, cost: float, source: str = "provider"):
    append_jsonl(sandbox.session_dir(session_id) / "events.jsonl", {
        "ts": "2026-01-01T00:00:30.000Z", "type": "model_call", "task": task_id, "iter": 1,
        "data": {"role": "worker", "model": "m", "prompt_tokens": tokens - 10, "completion_tokens": 10,
                 "total_tokens": tokens, "latency_ms": 5, "cost_usd": cost, "cost_source": source,
                 "finish_reason": "stop"}})


def add_spend(sandbox, session_id: str = "s1"):
    add_model_call(sandbox, session_id, "T-1", 100, 0.001)
    add_model_call(sandbox, session_id, "T-2", 150, 0.002)
    add_model_call(sandbox, session_id, "T-2", 50, 0.001)


def tilth_with_input(sandbox, text: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tilth", *args], env=sandbox.env, input=text,
                          capture_output=True, text=True, timeout=60, cwd=sandbox.root)


# --- push -------------------------------------------------------------------------------

@pytest.mark.slow
def test_push_puts_the_branch_on_the_remote_and_defaults_to_the_newest(sandbox, origin):
    assert sandbox.start("s1", [task("T-1")]).returncode == 0
    assert sandbox.start("s2", [task("T-1")]).returncode == 0

    pushed = sandbox.tilth("push", "s1")
    assert pushed.returncode == 0, pushed.stderr
    assert remote_sha(origin, "session/s1") == branch_sha(sandbox, "s1")
    assert f"pushed session/s1 ({branch_sha(sandbox, 's1')[:7]}) to origin" in pushed.stdout
    assert remote_sha(origin, "session/s2") == ""

    again = sandbox.tilth("push", "s1")
    assert again.returncode == 0 and "origin already has session/s1" in again.stdout

    newest = sandbox.tilth("push")
    assert newest.returncode == 0, newest.stderr
    assert remote_sha(origin, "session/s2") == branch_sha(sandbox, "s2")

    missing = sandbox.tilth("push", "s1", "--remote", "upstream")
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1 and "no remote 'upstream'" in missing.stderr


# --- pr ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_pr_pushes_and_calls_gh_with_the_failed_task_first(sandbox, origin, gh):
    env, log = gh
    start_failing(sandbox)
    add_spend(sandbox)

    result = sandbox.tilth("pr", "s1", env=env)
    assert result.returncode == 0, result.stderr
    assert remote_sha(origin, "session/s1") == branch_sha(sandbox, "s1")
    assert "pushed session/s1" in result.stdout and "pull/7" in result.stdout

    body_file = sandbox.session_dir("s1") / "pr.md"
    assert (log / "args").read_text().splitlines() == [
        "pr", "create", "--head", "session/s1", "--base", "main",
        "--title", "tilth: 2 tasks from session s1 (1 failed)", "--body-file", str(body_file)]
    body = (log / "body").read_text()
    assert body == body_file.read_text()

    top, table = body.split("| task |", 1)
    assert top.startswith("**1 task failed.**")
    assert "`tilth resume s1`" in top
    assert ('- **T-2** Hard one: failed after 2 attempts: the evaluator found the tests too weak: "no test covers it"'
            in top)
    assert "Tasks from tilth session `s1` on `session/s1`" in top and "2 commits: 1 task commit, 1 placeholder" in top
    assert "| T-1 | Add greeting | done | 1 | accepted | 100 | $0.0010 |" in table
    assert ('| T-2 | Hard one | **failed** | 2 | rejected: the evaluator found the tests too weak: "no test covers it" '
            '| 200 | $0.0030 |') in table
    assert "**Totals:** 1/2 tasks done, 1 failed; 3 attempts; 300 tokens; $0.0040." in table

    git(sandbox.repo, "checkout", "-q", "-b", "feature")
    second = sandbox.tilth("pr", "--web", env=env)
    assert second.returncode == 0, second.stderr
    assert "origin already has session/s1" in second.stdout
    args = (log / "args").read_text().splitlines()
    assert args[args.index("--base") + 1] == "feature" and args[-1] == "--web"


@pytest.mark.slow
def test_pr_without_gh_prints_the_github_compare_url(sandbox, origin):
    git(sandbox.repo, "remote", "set-url", "origin", "git@github.com:acme/widgets.git")
    git(sandbox.repo, "remote", "set-url", "--push", "origin", str(origin))
    assert sandbox.start("s1", [task("T-1")]).returncode == 0

    result = sandbox.tilth("pr", "s1", env={"PATH": path_without_gh()})
    assert result.returncode == 0, result.stderr
    assert "https://github.com/acme/widgets/compare/main...session/s1?expand=1" in result.stdout
    assert remote_sha(origin, "session/s1") == branch_sha(sandbox, "s1")
    body_file = sandbox.session_dir("s1") / "pr.md"
    assert str(body_file) in result.stdout
    assert "failed.**" not in body_file.read_text() and "1/1 tasks done, 0 failed" in body_file.read_text()


@pytest.mark.parametrize("url, expected", [
    ("https://github.com/acme/widgets.git", "https://github.com/acme/widgets/compare/main...session/s1?expand=1"),
    ("git@github.com:acme/widgets.git", "https://github.com/acme/widgets/compare/main...session/s1?expand=1"),
    ("ssh://git@github.com:22/acme/widgets", "https://github.com/acme/widgets/compare/main...session/s1?expand=1"),
    ("git@gitlab.com:group/sub/widgets.git", "https://gitlab.com/group/sub/widgets/-/merge_requests/new"
     "?merge_request[source_branch]=session/s1&merge_request[target_branch]=main"),
    ("https://gitlab.example.com:8443/g/w.git", "https://gitlab.example.com:8443/g/w/-/merge_requests/new"
     "?merge_request[source_branch]=session/s1&merge_request[target_branch]=main"),
    ("git@bitbucket.org:acme/widgets.git", None),
    ("/srv/git/widgets.git", None),
    ("../widgets.git", None),
])
def test_remote_urls_map_to_compare_pages(url, expected):
    web = parse_remote_url(url)
    assert (compare_url(web, "main", "session/s1") if web else None) == expected


def test_pr_body_lists_unfinished_work_and_escapes_cells():
    tasks = [
        TaskTally("T-1", "Pipe | in title", "done", 1, "accept", "accepted", 1234, 0.5, ""),
        TaskTally("T-2", "Later", "pending", 0, "", "", 0, 0.0, ""),
    ]
    facts = SessionTally("s9", "stopped", "session/s9", "a" * 40, "b" * 40, tasks, 1234, 0.5, 2, 10.0)
    body = pr_body(facts)
    assert pr_title(facts) == "tilth: 2 tasks from session s9"
    assert body.startswith("**Not finished yet:** T-2 (pending). Continue with `tilth resume s9`.")
    assert "failed.**" not in body
    assert "| T-1 | Pipe \\| in title | done | 1 | accepted | 1,234 | $0.5000 |" in body
    assert "| T-2 | Later | pending | 0 | - | 0 | $0.0000 |" in body
    assert "(2 model calls without a price)" in body


# --- diff and log -----------------------------------------------------------------------

@pytest.mark.slow
def test_diff_and_log_show_the_branch_against_its_base(sandbox):
    start_failing(sandbox)
    log = sandbox.tilth("log", "s1")
    assert log.returncode == 0, log.stderr
    lines = log.stdout.splitlines()
    assert len(lines) == 2
    shas = [git(sandbox.repo, "rev-parse", "--short", rev).strip() for rev in ("session/s1~1", "session/s1")]
    assert lines[0].split() == [shas[0], "T-1", "iter=1", "done", "T-1:", "Add", "greeting"]
    assert lines[1].split() == [shas[1], "T-2", "iter=2", "failed", "FAILED", "(T-2):", "Hard", "one"]

    diff = sandbox.tilth("diff", "s1")
    assert diff.returncode == 0, diff.stderr
    assert "+++ b/greet.py" in diff.stdout and "+print('hi')" in diff.stdout
    assert "+++ b/part.py" in diff.stdout
    assert "\x1b" not in diff.stdout and "\x07" not in diff.stdout, "a file's bytes never reach the terminal raw"
    assert "\\x1b]0;retitled\\x07" in diff.stdout

    waited = sandbox.tilth("wait", "s1")
    assert waited.returncode == 1, waited.stderr
    assert waited.stdout == "session s1: failed (task T-2 failed)\n", waited.stdout


@pytest.mark.slow
def test_diff_feeds_the_workers_files_to_no_diff_driver_or_textconv(sandbox):
    """security.md: the branch's files are the worker's; a diff driver or textconv the user's checkout
    selects for them (its `.gitattributes`, its config) is not run by `tilth diff`."""
    ran = sandbox.root / "driver-ran"
    driver = sandbox.root / "driver.sh"
    driver.write_text(f"#!/bin/sh\necho $0 >> {ran}\ncat \"$1\"\n")
    driver.chmod(0o755)
    git(sandbox.repo, "config", "diff.fancy.command", str(driver))
    git(sandbox.repo, "config", "diff.fancy.textconv", str(driver))
    (sandbox.repo / ".gitattributes").write_text("*.txt diff=fancy\n")
    git(sandbox.repo, "add", ".gitattributes")
    git(sandbox.repo, "commit", "-qm", "a diff driver for text files")
    scenario = {"tasks": {"T-1": [{"write": {"a.txt": "plain\n"}}]}}
    assert sandbox.start("s1", [task("T-1")], scenario).returncode == 0
    shown = sandbox.tilth("diff", "s1")
    assert shown.returncode == 0, shown.stderr
    assert "+++ b/a.txt" in shown.stdout and "+plain" in shown.stdout
    assert not ran.exists(), "a diff driver or textconv ran"


# --- cleanse ----------------------------------------------------------------------------

@pytest.mark.slow
def test_cleanse_refuses_an_unpushed_branch_and_archives_a_pushed_one(sandbox, origin):
    assert sandbox.start("s1", [task("T-1")]).returncode == 0

    refused = sandbox.tilth("cleanse", "s1")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "`tilth push s1` first" in refused.stderr
    assert sandbox.worktree("s1").is_dir() and has_branch(sandbox, "s1") and state(sandbox, "s1") == "done"

    assert sandbox.tilth("push", "s1").returncode == 0
    (sandbox.worktree("s1") / "stray.txt").write_text("unsaved")
    dirty = sandbox.tilth("cleanse", "s1")
    assert dirty.returncode == 2 and "uncommitted changes" in dirty.stderr
    assert sandbox.worktree("s1").is_dir()
    (sandbox.worktree("s1") / "stray.txt").unlink()

    done = sandbox.tilth("cleanse", "s1")
    assert done.returncode == 0, done.stderr
    assert "refs/remotes/origin/session/s1" in done.stdout
    assert not sandbox.worktree("s1").exists() and registered_worktrees(sandbox) == 1
    assert not has_branch(sandbox, "s1")
    assert remote_sha(origin, "session/s1") != ""
    assert (sandbox.session_dir("s1") / "prd.json").is_file() and state(sandbox, "s1") == "archived"
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "archived"

    again = sandbox.tilth("cleanse", "s1")
    assert again.returncode == 0 and "already archived" in again.stdout


def test_cleanse_accepts_a_branch_merged_into_another_branch(sandbox):
    assert sandbox.start("s1", [task("T-1")]).returncode == 0
    git(sandbox.repo, "merge", "-q", "--ff-only", "session/s1")
    result = sandbox.tilth("cleanse", "s1")
    assert result.returncode == 0, result.stderr
    assert "refs/heads/main" in result.stdout
    assert not has_branch(sandbox, "s1") and state(sandbox, "s1") == "archived"


# --- reset ------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("worktree_deleted_by_hand", [False, True])
def test_reset_removes_worktree_branch_and_session_dir(sandbox, worktree_deleted_by_hand):
    start_failing(sandbox)
    if worktree_deleted_by_hand:
        shutil.rmtree(sandbox.worktree("s1"))
    result = sandbox.tilth("reset", "s1", "--yes")
    assert result.returncode == 0, result.stderr
    assert not sandbox.session_dir("s1").exists() and not sandbox.worktree("s1").exists()
    assert not has_branch(sandbox, "s1")
    assert registered_worktrees(sandbox) == 1
    assert list((sandbox.home / "sessions").iterdir()) == []
    assert sandbox.tilth("status", "s1").returncode == 2


@pytest.mark.slow
def test_reset_asks_and_keeps_everything_unless_told_yes(sandbox):
    assert sandbox.start("s1", [task("T-1")]).returncode == 0
    for answer in ("n\n", "", "whatever\n"):
        kept = tilth_with_input(sandbox, answer, "reset", "s1")
        assert kept.returncode == 1, kept.stderr
        assert "Remove session s1, its branch and worktree? [y/N]" in kept.stdout
        assert sandbox.session_dir("s1").is_dir() and sandbox.worktree("s1").is_dir() and has_branch(sandbox, "s1")

    removed = tilth_with_input(sandbox, "yes\n", "reset", "s1")
    assert removed.returncode == 0, removed.stderr
    assert not sandbox.session_dir("s1").exists() and not has_branch(sandbox, "s1")


@pytest.mark.slow
def test_cleanse_and_reset_refuse_while_the_session_runs(sandbox, origin):
    runner = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(sandbox.write_json("p.json", [task("T-1")])),
                           "--id", "s1", "--backend", "scripted", "--foreground", env={"TILTH_TEST_PAUSE_AT": "worker"})
    try:
        wait_for_pause(runner, "worker")
        git(sandbox.repo, "push", "-q", "origin", "session/s1")
        for args in (("cleanse", "s1"), ("reset", "s1", "--yes")):
            refused = sandbox.tilth(*args)
            assert refused.returncode == 2 and "s1 is running" in refused.stderr, refused.stderr
        assert sandbox.session_dir("s1").is_dir() and sandbox.worktree("s1").is_dir() and has_branch(sandbox, "s1")
    finally:
        runner.kill()
        runner.wait()


# --- end-of-session report --------------------------------------------------------------

def set_run_times(sandbox, session_id: str, started: str, ended: str) -> None:
    path = sandbox.session_dir(session_id) / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    next(e for e in events if e["type"] == "session_started")["ts"] = started
    [e for e in events if e["type"] == "session_end"][-1]["ts"] = ended
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def test_build_report_for_one_done_and_one_failed_task(sandbox):
    start_failing(sandbox)
    add_spend(sandbox)
    set_run_times(sandbox, "s1", "2026-01-01T00:00:00.000Z", "2026-01-01T00:01:05.250Z")
    paths = session_paths("s1", sandbox.home)
    base = git(sandbox.repo, "rev-parse", "--short=7", "main").strip()
    head = branch_sha(sandbox, "s1")[:7]
    first = branch_sha(sandbox, "s1~1")[:7]

    text = build_report(paths)
    assert text == (
        "Session s1: failed\n"
        "Tasks:      1/2 done, 1 failed\n"
        "  task  outcome  attempts  rejections                checks (last attempt)  commit   tokens in/cached/out  cost"
        "     time\n"
        f"  T-1   done     1         0                         -                      {first}  90/0/10               $0.0010"
        "  0s\n"
        f"  T-2   failed   2         2 (weak_test, weak_test)  -                      {head}  180/0/20              $0.0030"
        "  0s\n"
        '  FAILED T-2 Hard one: failed after 2 attempts: the evaluator found the tests too weak: "no test covers it"\n'
        "Attempts:   3\n"
        "Tokens:     300\n"
        "Cost:       $0.0040\n"
        "Wall time:  1m 05s\n"
        f"Git: {base} -> {head} on session/s1\n"
        f"Commits:    2 commits: 1 task commit, 1 placeholder above them holding partial work: `{head}` FAILED (T-2)\n"
        "Next: tilth resume s1\n"
    )
    assert record_report(paths) == text
    assert (sandbox.session_dir("s1") / "report.md").read_text() == text


def test_build_report_points_at_pr_when_every_task_is_done(sandbox):
    assert sandbox.start("s2", [task("T-1")]).returncode == 0
    text = build_report(session_paths("s2", sandbox.home))
    assert "Tasks:      1/1 done, 0 failed\n" in text
    assert text.endswith("Next: tilth pr s2\n")


@pytest.mark.slow
def test_an_archived_session_cannot_be_run_or_resumed(sandbox):
    import json as _json
    assert sandbox.start("s1", [task("T-1")], None).returncode == 0
    path = sandbox.session_dir("s1") / "session.json"
    record = _json.loads(path.read_text())
    path.write_text(_json.dumps({**record, "state": "archived"}))
    for args in (("run", "s1"), ("resume", "s1", "--foreground"), ("resume", "s1")):
        result = sandbox.tilth(*args)
        assert result.returncode == 2 and "archived" in result.stderr, (args, result.stderr)
