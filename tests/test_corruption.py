"""Damage tilth did not cause: a damaged object in the user's repository is a one-line error
naming it (and a `stopped` session, not a crashed one); a torn or garbage line anywhere in a
journal is skipped and the lines after it are still read."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import git, task

import tilth.store.answers  # noqa: F401 (registers `task_answered`, the event these tests write)
from tilth.store.events import EventLog
from tilth.store.jsonio import append_line
from tilth.views.follow import Tail

OFF = {"TILTH_SANDBOX": "off"}  # the scenario's command damages the repository itself


def loose_object(repo: Path, sha: str) -> Path:
    return repo / ".git" / "objects" / sha[:2] / sha[2:]


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    assert stderr.startswith("tilth: ") and stderr.count("\n") == 1, stderr
    return stderr


def empty_loose_object(rev: str, backup: Path) -> str:
    """A scenario command: the first time, empty the loose object `rev` names (as a power loss can
    leave a freshly written file), keeping a copy to repair it with."""
    return (f'test -e {backup} || {{ obj=$(git rev-parse {rev}); '
            'f="$(git rev-parse --git-common-dir)/objects/${obj:0:2}/${obj:2}"; '
            f'cp "$f" {backup} && chmod u+w "$f" && : > "$f"; }}')


@pytest.mark.slow
def test_a_damaged_object_met_mid_run_stops_the_session_with_its_name(sandbox):
    backup = sandbox.root / "readme.bak"
    blob = git(sandbox.repo, "rev-parse", "main:README.md").strip()
    # T-2 edits README.md, so the diff the evaluator gets needs the damaged old version.
    scenario = {"tasks": {"T-2": [{"write": {"README.md": "# changed\n"},
                                   "run": [empty_loose_object("HEAD:README.md", backup)]}]}}
    result = sandbox.start("s1", [task("T-1"), task("T-2"), task("T-3")], scenario, env=OFF)
    assert backup.is_file() and loose_object(sandbox.repo, blob).stat().st_size == 0

    assert result.returncode == 2
    assert blob in one_line(result.stderr) and "git fsck" in result.stderr
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "stopped"
    ends = [e["data"] for e in sandbox.events("s1") if e["type"] == "session_end"]
    assert [e["state"] for e in ends] == ["stopped"] and blob in ends[0]["reason"]

    again = sandbox.tilth("resume", "s1", "--foreground", env=OFF)
    assert again.returncode == 2 and blob in one_line(again.stderr)
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "stopped"

    shutil.copyfile(backup, loose_object(sandbox.repo, blob))
    resumed = sandbox.tilth("resume", "s1", "--foreground", env=OFF)
    assert resumed.returncode == 0, resumed.stderr
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2", "T-3"]


@pytest.mark.slow
def test_a_damaged_branch_tip_is_named_by_every_command_that_reads_it(sandbox):
    assert sandbox.start("s1", [task("T-1"), task("T-2")], None, env=OFF).returncode == 0
    prd = sandbox.session_dir("s1") / "prd.json"
    prd.write_text(json.dumps([*sandbox.plan("s1"), task("T-3")]))  # something to resume for
    tip = git(sandbox.repo, "rev-parse", "session/s1").strip()
    damaged = loose_object(sandbox.repo, tip)
    damaged.chmod(0o644)
    damaged.write_bytes(damaged.read_bytes()[:40])  # cut short: libgit2 itself would never return

    for command in (["resume", "s1", "--foreground"], ["run", "s1"], ["diff", "s1"], ["log", "s1"]):
        refused = sandbox.tilth(*command, env=OFF)
        assert refused.returncode == 2 and tip in one_line(refused.stderr), (command, refused.stderr)
    for command in (["status"], ["status", "s1"], ["logs", "s1"]):
        assert sandbox.tilth(*command).returncode == 0, command
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "done"


TORN = [
    b'{"ts": "2026-01-01T00:00:00.000Z", "type": "verdict", "task": "T-1", "it',  # an append cut short
    b"\x00" * 24,  # a block the filesystem allocated but never wrote
    b"\xff\xfe not json at all \x01",
    b"42",
    b'"a string"',
    b"[1, 2, 3]",
    b"null",
    b'{"an": "object, but no journal entry"}',
]


def tear_the_middle(path: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) >= 2, path
    middle = len(lines) // 2
    path.write_bytes(b"".join(lines[:middle]) + b"\n".join(TORN) + b"\n" + b"".join(lines[middle:]))


@pytest.mark.slow
def test_torn_lines_in_the_middle_of_every_journal_are_skipped(sandbox):
    reject = {"verdict": "reject", "category": "half_finished", "concern": "not yet", "next_step": "finish"}
    scenario = {"tasks": {"T-1": [{"write": {"a.txt": "0\n"}, "verdict": reject}, {"write": {"a.txt": "1\n"}}]}}
    plan = [task("T-1"), task("T-2"), task("T-3")]
    assert sandbox.start("s1", plan, scenario, env={"TILTH_MAX_ITERATIONS_PER_TASK": "3"}).returncode == 0
    session = sandbox.session_dir("s1")
    logs_before = sandbox.tilth("logs", "s1").stdout
    events_before = len(sandbox.events("s1"))
    for journal in (session / "events.jsonl", session / "ledger" / "T-1.jsonl", session / "progress.txt"):
        tear_the_middle(journal)

    for command in (["status"], ["status", "s1"], ["status", "--json"]):
        shown = sandbox.tilth(*command)
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert summary["state"] == "done" and summary["progress"] == "3/3"

    logs = sandbox.tilth("logs", "s1")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout == logs_before, "every event on both sides of the torn lines is shown"

    prd = session / "prd.json"  # a done session resumes only for work added to its plan
    prd.write_text(json.dumps([*json.loads(prd.read_text()), task("T-4")]))
    resumed = sandbox.tilth("resume", "s1", "--foreground")
    assert resumed.returncode == 0, resumed.stderr
    assert "Attempts:   5" in resumed.stdout, "both ledger entries of T-1 are still read"
    events = [json.loads(line) for line in (session / "events.jsonl").read_bytes().splitlines()
              if line.startswith(b'{"ts"') and line.endswith(b"}")]
    assert len(events) > events_before
    new = {e["type"] for e in events[events_before:]}
    assert "progress_restored" not in new, "progress lines after the torn ones were read, not rewritten"
    assert [e["task"] for e in events[events_before:] if e["type"] == "task_started"] == ["T-4"], \
        "no finished task runs again"
    assert [line.split(b"\t")[1] for line in (session / "progress.txt").read_bytes().splitlines()
            if line.count(b"\t") == 5] == [b"T-1", b"T-2", b"T-3", b"T-4"]


def test_a_follower_skips_a_torn_line_and_reads_on(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    tail = Tail(log.path)
    log.emit("task_answered", "T-1")
    with open(log.path, "ab") as f:
        f.write(b'{"ts": "2026-01-01T00:00:00.000Z", "type": "task_ans')  # a writer killed mid-append
        f.flush()
        os.fsync(f.fileno())
    assert [e["task"] for e in tail.read()] == ["T-1"]
    append_line(log.path, b"12345")
    log.emit("task_answered", "T-2")
    assert [e["task"] for e in tail.read()] == ["T-2"]
    assert [e["task"] for e in log.read()] == ["T-1", "T-2"]
