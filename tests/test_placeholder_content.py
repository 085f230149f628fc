"""A FAILED or PARKED placeholder holds a task's partial work without what the task may not keep
(run/keeping.py): deleted or weakened tests, protected paths, symlinks leading outside the worktree are
put back as the task's starting point has them, in the commit and in the worktree, and named in the
commit's message and the ledger; one task at a time and in lanes (`--parallel 2`), where the guard's
rejections end a task the same way."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

import test_confinement_home
from conftest import git, task, wait_for_pause

machine = test_confinement_home.machine  # as root and as an unprivileged user, outside /tmp

BASE = {
    "src/app.py": "VALUE = 1\n",
    "config.py": "DEBUG = False\n",
    "lib/util.py": "X = 1\n",
    "tests/test_app.py": "def test_app():\n    assert True\n",
    "checks/test_one.py": "def test_one():\n    assert 1\n",
    "checks/test_two.py": "def test_two():\n    assert 2\n",
    ".github/workflows/ci.yml": "on: push\n",
}
SKIPPED = "import pytest\n\n@pytest.mark.skip\ndef test_two():\n    assert 2\n"
ENV = {"TILTH_MAX_ITERATIONS_PER_TASK": "2", "TILTH_FINAL_REVIEW": "false"}


def refused_step(outside: Path, **extra) -> dict:
    """Every attempt: allowed partial work (src/app.py, notes.txt, a symlink inside) beside a deleted
    test, a weakened one, a protected file, and symlinks leading outside in place of `tests/`, of
    another directory, of a file and (relative, climbing out) in a new directory."""
    return {"write": {"src/app.py": "VALUE = 2\n", "notes.txt": "partial work\n", "checks/test_two.py": SKIPPED,
                      ".github/workflows/ci.yml": "on: never\n"},
            "delete": ["checks/test_one.py"],
            "run": [f"rm -rf tests config.py lib && ln -s {outside} tests && ln -s {outside}/secret config.py && "
                    f"ln -s {outside} lib && "
                    "mkdir -p sub && ln -sfn ../.. sub/up && ln -sfn src/app.py inner"],
            **extra}


LEFT_OUT = {"checks/test_one.py (deleted)", "checks/test_two.py (adds @pytest.mark.skip)",
            ".github/workflows/ci.yml (modified)", "tests/test_app.py (deleted)"}


def links_out(outside: Path) -> set[str]:
    return {f"config.py (symlink to {outside}/secret)", "sub/up (symlink to ../..)", f"tests (symlink to {outside})",
            f"lib (symlink to {outside})"}


def add_base(repo: Path) -> None:
    for name, text in BASE.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "-c", "safe.directory=*", "add", "-A")
    git(repo, "-c", "safe.directory=*", "commit", "-q", "-m", "tests, CI and config")


def outside_dir(root: Path) -> Path:
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret").write_text("outside the worktree\n")
    return outside


def tree(repo: Path, ref: str) -> dict[str, str]:
    """path -> mode of each entry of `ref`, with the git CLI."""
    out = git(repo, "-c", "safe.directory=*", "ls-tree", "-r", ref)
    return {line.split("\t", 1)[1]: line.split()[0] for line in out.splitlines()}


def check_placeholder(repo: Path, worktree: Path, ledger: list[dict], outside: Path, ref: str, placeholder: str) -> None:
    """The placeholder at `ref` (with the git CLI) and the worktree after it."""
    show = lambda path: git(repo, "-c", "safe.directory=*", "show", f"{ref}:{path}")  # noqa: E731
    modes = tree(repo, ref)
    assert {p for p, m in modes.items() if m == "120000"} == {"inner"}, modes  # the link inside is kept
    for name, text in BASE.items():
        if name != "src/app.py":
            assert modes[name] == "100644" and show(name) == text, name
    assert show("src/app.py") == "VALUE = 2\n" and show("notes.txt") == "partial work\n" and show("inner") == "src/app.py"
    assert "sub/up" not in modes
    message = git(repo, "-c", "safe.directory=*", "log", "-1", "--format=%B", ref)
    expected = LEFT_OUT | links_out(outside)
    assert "Left out (changes tilth refuses, restored as the task's starting point has them):" in message
    assert all(f"- {said}\n" in message for said in expected), message
    trailer = git(repo, "-c", "safe.directory=*", "log", "-1", "--format=%(trailers:key=Tilth-Left-Out,valueonly)", ref)
    assert "checks/test_one.py (deleted)" in trailer, message
    left = [e for e in ledger if e.get("kind") == "left_out"]
    assert [e["placeholder"] for e in left] == [placeholder] and set(left[0]["refused"]) == expected, left
    assert git(worktree, "-c", "safe.directory=*", "status", "--porcelain") == "", "the worktree is the placeholder"
    assert all((worktree / d).is_dir() and not (worktree / d).is_symlink() for d in ("tests", "lib"))
    assert not (worktree / "config.py").is_symlink() and not (worktree / "sub" / "up").is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert (outside / "secret").read_text() == "outside the worktree\n"


@pytest.mark.parametrize("lanes", ["1", "2"])
def test_a_failed_placeholder_holds_none_of_what_the_guard_refused(sandbox, lanes):
    add_base(sandbox.repo)
    outside = outside_dir(sandbox.root)
    plan = [task("T-1"), task("T-2")]
    scenario = {"tasks": {"T-1": [refused_step(outside)], "T-2": [{"write": {"t2.txt": "two\n"}}]}}
    result = sandbox.start("s1", plan, scenario, "--parallel", lanes, env={**ENV, "TILTH_SANDBOX": "off"})
    assert result.returncode == 1, result.stdout + result.stderr
    assert sandbox.statuses("s1") == {"T-1": "failed", "T-2": "done"}
    commits = {c["task"]: c for c in sandbox.commits("s1")}
    assert {t: c["outcome"] for t, c in commits.items()} == {"T-1": "failed", "T-2": ""}
    ledger = sandbox.ledger("s1", "T-1")
    check_placeholder(sandbox.repo, sandbox.worktree("s1"), ledger, outside, commits["T-1"]["sha"], "failed")
    verdicts = [e["verdict"] for e in ledger if "verdict" in e]
    assert [v["category"] for v in verdicts] == ["tests_weakened", "tests_weakened"]
    assert f"tests (symlink to {outside})" in verdicts[0]["evidence"], verdicts[0]
    events = [e for e in sandbox.events("s1") if e["type"] == "left_out"]
    assert len(events) == 1 and events[0]["task"] == "T-1" and ("lane" in events[0]["data"]) == (lanes == "2")
    logs = sandbox.tilth("logs", "s1").stdout
    assert "the FAILED placeholder left out what the task may not keep: .github/workflows/ci.yml (modified)" in logs
    assert git(sandbox.repo, "show", "session/s1:t2.txt") == "two\n"


def test_a_parked_placeholder_holds_none_of_it_either(sandbox):
    add_base(sandbox.repo)
    outside = outside_dir(sandbox.root)
    asks = refused_step(outside, needs_human={"question": "Which config?", "context": ""})
    result = sandbox.start("s1", [task("T-1")], {"tasks": {"T-1": [asks]}}, env={**ENV, "TILTH_SANDBOX": "off"})
    assert result.returncode == 5, result.stdout + result.stderr
    assert [c["outcome"] for c in sandbox.commits("s1")] == ["parked"]
    check_placeholder(sandbox.repo, sandbox.worktree("s1"), sandbox.ledger("s1", "T-1"), outside, "session/s1",
                      "parked")


def test_a_killed_lanes_kept_work_holds_none_of_it(sandbox):
    from test_lane_partials import partial, start_args

    add_base(sandbox.repo)
    outside = outside_dir(sandbox.root)
    child = sandbox.spawn(*start_args(sandbox, "s1", [task("S")], {"tasks": {"S": [refused_step(outside)]}}),
                          env={**ENV, "TILTH_SANDBOX": "off", "TILTH_TEST_PAUSE_AT": "worker@S"})
    wait_for_pause(child, "worker")
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    fixed = sandbox.tilth("doctor", "s1", "--fix")  # the killed lane's work kept, as a resume's start would
    assert "lanes removed: S" in fixed.stdout, fixed.stdout + fixed.stderr
    kept = partial(sandbox, "s1", "S").strip()
    modes = tree(sandbox.repo, kept)
    assert {p for p, m in modes.items() if m == "120000"} == {"inner"}, modes
    assert all(git(sandbox.repo, "show", f"{kept}:{name}") == text for name, text in BASE.items() if name != "src/app.py")
    assert git(sandbox.repo, "show", f"{kept}:src/app.py") == "VALUE = 2\n", "the allowed work is kept"
    left = [e for e in sandbox.ledger("s1", "S") if e.get("kind") == "left_out"]
    assert [e["placeholder"] for e in left] == ["partial"] and set(left[0]["refused"]) == LEFT_OUT | links_out(outside)


@pytest.mark.bwrap
def test_a_lanes_failed_placeholder_holds_none_of_it_as_either_user(machine):
    test_confinement_home.require_bwrap()
    add_base(machine.repo)
    machine.own(machine.repo)
    outside = outside_dir(machine.base)
    machine.own(outside)
    plan = [task("T-1"), task("T-2")]
    scenario = {"tasks": {"T-1": [refused_step(outside)], "T-2": [{"write": {"t2.txt": "two\n"}}]}}
    path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}  # this checkout's tilth
    result = machine.start("s1", plan, scenario, env={**ENV, **path, "TILTH_SANDBOX": "bwrap", "TILTH_PARALLEL_TASKS": "2"})
    assert result.returncode == 1, result.stdout + result.stderr
    placeholder = machine.git("log", "-1", "--format=%H", "--grep=^FAILED (T-1)", "session/s1").strip()
    ledger_file = machine.tilth_home / "sessions" / "s1" / "ledger" / "T-1.jsonl"
    ledger = [json.loads(line) for line in ledger_file.read_text().splitlines()]
    check_placeholder(machine.repo, machine.tilth_home / "worktrees" / "s1", ledger, outside, placeholder, "failed")


def test_a_symlink_is_followed_through_the_trees_own_symlinks():
    from tilth.git.left_out import leads_outside

    links = {"d/s": "..", "d/y": "s/..", "a": "b/../c", "loop1": "loop2", "loop2": "loop1", "abs": "/etc",
             "in": "src/app.py", "up": "d/../.."}
    assert [p for p in links if leads_outside(links, p)] == ["d/y", "loop1", "loop2", "abs", "up"]


def test_may_change_allows_a_test_or_a_protected_path_but_never_a_symlink_leading_outside():
    from tilth.agents.guard import findings, guard_rejection
    from tilth.git.gitops import FileChange

    deleted = FileChange("tests/test_a.py", "deleted", "tests/test_a.py", False, ())
    found = findings([deleted], [], ["tests/"], outside_links={"tests/data": "/etc"})
    assert found == {"symlink_outside": ["tests/data (symlink to /etc)"]}
    assert guard_rejection(found).category == "symlink_outside"
