"""Bad input: a one-line error naming the problem, exit 2, and nothing created."""

from __future__ import annotations

import pytest

from conftest import git, task


def assert_nothing_created(sandbox, session_id="s1"):
    assert not sandbox.session_dir(session_id).exists()
    assert not sandbox.worktree(session_id).exists()
    assert git(sandbox.repo, "branch", "--list", f"session/{session_id}") == ""
    assert git(sandbox.repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    sessions = sandbox.home / "sessions"
    assert not sessions.exists() or not any(sessions.iterdir())


def bad_start(sandbox, plan_text: str, *extra: str):
    path = sandbox.root / "bad-prd.json"
    path.write_text(plan_text)
    return sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(path), "--id", "s1",
                         "--backend", "scripted", "--foreground", *extra)


def dumps(tasks):
    import json
    return json.dumps(tasks)


@pytest.mark.parametrize("plan_text, expected", [
    ("{not json", "not valid JSON"),
    ('{"id": "T-1"}', "must be a JSON array"),
    ("[]", "no tasks"),
    (dumps([task("T-1"), {k: v for k, v in task("T-2").items() if k != "title"}]), "task 'T-2' (#2), field title"),
    (dumps([task("T-1", acceptance_criteria=[])]), "task 'T-1' (#1), field acceptance_criteria"),
    (dumps([task("T-1", acceptance_criteria=["ok", "  "])]), "task 'T-1' (#1), field acceptance_criteria.1"),
    (dumps([task("T-1", status="finished")]), "task 'T-1' (#1), field status"),
    (dumps([task("T-1"), task("T-1")]), "task 'T-1' (#2), field id: duplicate"),
    (dumps([task("bad id/with slash")]), "field id"),
    (dumps([task("T-1", description=3)]), "task 'T-1' (#1), field description"),
    (dumps(["just a string"]), "task #1"),
])
@pytest.mark.slow
def test_invalid_plans_are_refused_and_nothing_is_created(sandbox, plan_text, expected):
    result = bad_start(sandbox, plan_text)
    assert result.returncode == 2
    assert expected in result.stderr, result.stderr
    assert result.stderr.startswith("tilth: ") and result.stderr.count("\n") == 1
    assert_nothing_created(sandbox)


def test_bad_repo_base_and_ids_are_refused(sandbox, tmp_path):
    plan = sandbox.write_json("prd.json", [task("T-1")])
    not_git = tmp_path / "plain"
    not_git.mkdir()
    cases = [
        (["--repo", str(not_git)], "is not a git repository"),
        (["--base", "no-such-rev"], "does not name a commit"),
        (["--id", "../escape"], "invalid session id"),
        (["--id", "a..b"], "invalid session id"),  # no branch session/a..b in git
        (["--id", "ends."], "invalid session id"),
        (["--scenario", str(tmp_path / "missing.json")], "scenario file"),
    ]
    for extra, expected in cases:
        options = {"--repo": str(sandbox.repo), "--prd": str(plan), "--id": "s1", "--backend": "scripted"}
        options.update(dict(zip(extra[::2], extra[1::2])))
        args = ["start", *[part for pair in options.items() for part in pair], "--foreground"]
        result = sandbox.tilth(*args)
        assert result.returncode == 2, (extra, result.stderr)
        assert expected in result.stderr, (extra, result.stderr)
        assert_nothing_created(sandbox)


def test_missing_backend_and_missing_plan(sandbox):
    plan = sandbox.write_json("prd.json", [task("T-1")])
    no_backend = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--foreground")
    assert no_backend.returncode == 2 and "no model configured: set TILTH_BASE_URL" in no_backend.stderr
    missing = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", "nope.json", "--backend", "scripted",
                            "--foreground")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    assert not (sandbox.home / "sessions").exists() or not any((sandbox.home / "sessions").iterdir())


def test_repo_without_commits_is_refused(sandbox, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    plan = sandbox.write_json("prd.json", [task("T-1")])
    result = sandbox.tilth("start", "--repo", str(empty), "--prd", str(plan), "--id", "s1",
                           "--backend", "scripted", "--foreground")
    assert result.returncode == 2 and "has no commits" in result.stderr
    assert not sandbox.session_dir("s1").exists()


@pytest.mark.slow
def test_existing_session_branch_or_worktree_is_refused(sandbox):
    assert sandbox.start("s1", [task("T-1")], None).returncode == 0
    again = sandbox.start("s1", [task("T-1")], None)
    assert again.returncode == 2 and "already exists" in again.stderr

    git(sandbox.repo, "branch", "session/s2")
    taken = sandbox.start("s2", [task("T-1")], None)
    assert taken.returncode == 2 and "branch 'session/s2' already exists" in taken.stderr
    assert not sandbox.session_dir("s2").exists() and not sandbox.worktree("s2").exists()

    sandbox.worktree("s3").mkdir(parents=True)
    blocked = sandbox.start("s3", [task("T-1")], None)
    assert blocked.returncode == 2 and "already exists" in blocked.stderr
    assert git(sandbox.repo, "branch", "--list", "session/s3") == ""


def test_unknown_session_and_resume_without_sessions(sandbox):
    assert "no session 'nope'" in sandbox.tilth("run", "nope").stderr
    result = sandbox.tilth("resume", "--foreground")
    assert result.returncode == 2 and "no sessions yet" in result.stderr


def test_plan_broken_mid_run_stops_the_session_resumably(sandbox):
    prd = sandbox.session_dir("s1") / "prd.json"
    scenario = {"tasks": {"T-1": [{"run": [f"echo '[oops' > {prd}"], "write": {"t.txt": "t\n"}}]}}
    # The scenario plays the user editing prd.json, which no sandboxed command can reach.
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env={"TILTH_SANDBOX": "off"})
    assert result.returncode == 2 and "now invalid" in result.stderr
    assert "stopped" in sandbox.tilth("status").stdout
    prd.write_text(dumps([task("T-1", status="in_progress"), task("T-2")]))
    assert sandbox.tilth("resume", "s1", "--foreground").returncode == 0
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done"}


@pytest.mark.slow
def test_dirty_or_detached_checkouts_need_an_explicit_base(sandbox):
    plan = sandbox.write_json("prd.json", [task("T-1")])
    args = ["start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend", "scripted",
            "--foreground"]
    (sandbox.repo / "README.md").write_text("edited but not committed\n")
    dirty = sandbox.tilth(*args)
    assert dirty.returncode == 2 and "uncommitted changes" in dirty.stderr and "--base HEAD" in dirty.stderr
    assert_nothing_created(sandbox)
    git(sandbox.repo, "checkout", "-q", "--", "README.md")

    git(sandbox.repo, "checkout", "-q", "--detach")
    detached = sandbox.tilth(*args)
    assert detached.returncode == 2 and "detached HEAD" in detached.stderr
    assert_nothing_created(sandbox)

    explicit = sandbox.tilth(*args, "--base", "HEAD")
    assert explicit.returncode == 0, explicit.stderr


def test_an_unusable_tilth_home_is_refused(sandbox):
    blocker = sandbox.root / "a-file"
    blocker.write_text("")
    plan = sandbox.write_json("prd.json", [task("T-1")])
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1",
                           "--backend", "scripted", "--foreground", env={"TILTH_HOME": str(blocker / "home")})
    assert result.returncode == 2 and "TILTH_HOME" in result.stderr and "cannot be used" in result.stderr
    assert result.stderr.count("\n") == 1
    assert git(sandbox.repo, "branch", "--list", "session/s1") == ""
    assert git(sandbox.repo, "worktree", "list", "--porcelain").count("worktree ") == 1
