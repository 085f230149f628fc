"""Bad input: a one-line error naming the problem, exit 2, and nothing created."""

from __future__ import annotations

import os

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


@pytest.mark.slow
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


@pytest.mark.slow
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


def one_line_refusal(result, *expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.startswith("tilth: ") and result.stderr.count("\n") == 1, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


def start_args(sandbox, *extra: str) -> list[str]:
    plan = sandbox.write_json("prd.json", [task("T-1")])
    return ["start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend", "scripted", *extra]


def test_a_huge_count_setting_is_refused(sandbox):
    result = sandbox.tilth(*start_args(sandbox, "--foreground"), env={"TILTH_JOURNAL_LINES": "9" * 30})
    one_line_refusal(result, "TILTH_JOURNAL_LINES", "too large")
    assert_nothing_created(sandbox)


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_infinite_or_nan_timeouts_are_refused(sandbox, value):
    result = sandbox.tilth(*start_args(sandbox), env={"TILTH_TOOL_TIMEOUT": value})  # handed over: no --foreground
    one_line_refusal(result, "TILTH_TOOL_TIMEOUT", "finite number")
    assert_nothing_created(sandbox)


def test_an_empty_check_is_refused(sandbox):
    result = sandbox.tilth(*start_args(sandbox, "--foreground", "--check", "true", "--check", " "))
    one_line_refusal(result, "--check #2 is empty")
    assert_nothing_created(sandbox)


def test_a_config_toml_that_is_a_directory_is_refused(sandbox):
    (sandbox.home / "config.toml").mkdir(parents=True)
    config = sandbox.tilth("config")
    one_line_refusal(config, "config.toml is not a file")
    one_line_refusal(sandbox.tilth("status"), "config.toml is not a file")
    one_line_refusal(sandbox.tilth(*start_args(sandbox, "--foreground")), "config.toml is not a file")
    assert_nothing_created(sandbox)


def test_a_digest_further_back_than_any_date_is_refused(sandbox):
    one_line_refusal(sandbox.tilth("digest", "--since", "99999999999d"), "--since '99999999999d'", "shorter span")


def test_start_dispatch_with_the_broker_down_is_one_line(sandbox):
    remote = sandbox.root / "remote.git"
    git(sandbox.root, "init", "-q", "--bare", str(remote))
    sandbox.home.mkdir(parents=True, exist_ok=True)
    (sandbox.home / "config.toml").write_text(f'[dispatch]\nbroker_url = "redis://127.0.0.1:1/0"\nremote = "{remote}"\n')
    result = sandbox.tilth(*start_args(sandbox, "--dispatch"))
    one_line_refusal(result, "broker redis://127.0.0.1:1/0 is unreachable", "nothing was created")
    assert git(remote, "for-each-ref") == ""
    assert not (sandbox.home / "clones").exists()


def test_dispatching_without_a_dispatch_section_is_one_line_wherever_it_is_entered(sandbox, monkeypatch, capsys):
    """`start_dispatched` and the worker pool read `[dispatch]` themselves: without one they say so
    (before: an AttributeError on None for whichever caller had not checked first)."""
    from tilth.core.config import Settings
    from tilth.core.errors import BadInput
    from tilth.dispatch.submit import start_dispatched
    from tilth.dispatch.workers import serve
    from tilth.store.session_record import BackendChoice

    with pytest.raises(BadInput, match=r"needs a \[dispatch\] section in config.toml"):
        start_dispatched(str(sandbox.root / "remote.git"), sandbox.root / "prd.json", "s1", None,
                         BackendChoice("scripted"), Settings(), [], None)
    monkeypatch.setenv("TILTH_HOME", str(sandbox.home))
    assert serve(1) == 2
    assert capsys.readouterr().err == "tilth worker: no [dispatch] section in config.toml\n"


@pytest.mark.bwrap
def test_a_read_only_repository_is_refused_before_anything_is_made(sandbox):
    import shutil
    import subprocess
    import sys

    from tilth.agents.sandbox import bwrap_works

    if not bwrap_works():
        if os.environ.get("TILTH_REQUIRE_BWRAP") == "1":
            pytest.fail("TILTH_REQUIRE_BWRAP=1 but bubblewrap cannot run here")
        pytest.skip("bubblewrap cannot run here to mount the repository read-only (apt-get install bubblewrap)")
    argv = [shutil.which("bwrap"), "--dev-bind", "/", "/", "--ro-bind", str(sandbox.repo), str(sandbox.repo),
            sys.executable, "-m", "tilth", *start_args(sandbox, "--foreground")]
    result = subprocess.run(argv, env=sandbox.env, capture_output=True, text=True, timeout=60, cwd=sandbox.root)
    one_line_refusal(result, f"{sandbox.repo}/.git is not writable", "read-only mount")
    assert_nothing_created(sandbox)


def test_a_remote_that_looks_like_an_option_is_only_a_repository_to_git(tmp_path):
    from tilth.git.carry import ensure_clone
    from tilth.git.gitcli import GitFailed

    marker = tmp_path / "ran"
    with pytest.raises(GitFailed) as refused:
        ensure_clone(tmp_path / "clones", f"--upload-pack=touch {marker}")
    assert "repository '--upload-pack=" in str(refused.value)
    assert not marker.exists()


def test_repo_defaults_to_the_repository_holding_the_current_directory(sandbox, tmp_path):
    plan = sandbox.write_json("prd.json", [task("T-1")])
    args = ["start", "--prd", str(plan), "--id", "s1", "--backend", "scripted", "--foreground"]
    outside = subprocess_in(sandbox, tmp_path, *args)
    one_line_refusal(outside, "no --repo given", f"{tmp_path} is not inside a git repository")
    assert_nothing_created(sandbox)
    (sandbox.repo / "sub").mkdir()
    inside = subprocess_in(sandbox, sandbox.repo / "sub", *args)
    assert inside.returncode == 0, inside.stderr
    assert git(sandbox.repo, "branch", "--list", "session/s1").strip().endswith("session/s1")


@pytest.mark.slow
def test_prd_dir_reads_its_prd_json_in_any_format(sandbox):
    import json

    ralph = sandbox.root / "ralph"
    ralph.mkdir()
    (ralph / "prd.json").write_text(json.dumps({"userStories": [
        {"id": "US-1", "title": "Add it", "description": "d", "acceptanceCriteria": ["`true` exits 0"],
         "priority": 1, "passes": False}]}))
    checked = sandbox.tilth("plan", "check", str(ralph))
    assert checked.returncode == 0 and "valid, 1 task" in checked.stdout, checked.stderr
    started = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(ralph), "--id", "s1",
                            "--backend", "scripted", "--foreground")
    assert started.returncode == 0, started.stderr
    assert sandbox.statuses("s1") == {"US-1": "done"}


def subprocess_in(sandbox, cwd, *args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "tilth", *args], env=sandbox.env, capture_output=True, text=True,
                          timeout=60, cwd=cwd)


@pytest.mark.parametrize("command, said", [
    (["wait", "--timeout", "nan"], "--timeout nan:"), (["wait", "--timeout=-1"], "--timeout -1:"),
    (["daemon", "stop", "--timeout", "inf"], "--timeout inf:"), (["daemon", "--rescan", "0"], "--rescan 0:"),
])
def test_a_number_of_seconds_that_is_not_one_is_refused(sandbox, command, said):
    one_line_refusal(sandbox.tilth(*command), said, "give a finite number of seconds")
    assert not (sandbox.home / "daemon.pid").exists()
