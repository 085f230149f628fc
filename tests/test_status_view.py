"""What `tilth status`, `tilth wait` and `tilth logs` show of a session: read without pydantic
yet exactly as the models read it (a damaged file gives the one line it always gave), a crashed
session waiting for its auto-resume, one the supervisor resumed, and one `tilth cleanse` retired."""

from __future__ import annotations

import importlib
import json
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from conftest import git, task
from test_fuzz import NEAR_VALID_BYTES, UNIT, WILD_VALUES, encode, mangled_bytes
from tilth.core.errors import BadInput
from tilth.store.events import EventLog
from tilth.store.home import session_paths
from tilth.store.prd import load_plan
from tilth.store.prd_peek import peek_plan
from tilth.store.session import SessionState, load_session, save_session
from tilth.store.session_peek import peek_session

importlib.import_module("tilth.daemon.transitions")  # it documents the supervisor's events emitted below


def assert_peek_agrees(paths) -> None:
    """The peek reads what the model reads, or fails with the model's very line."""
    try:
        expected = load_session(paths)
    except BadInput as exc:
        with pytest.raises(BadInput) as caught:
            peek_session(paths)
        assert str(caught.value) == str(exc)
    else:
        assert peek_session(paths) == expected


@pytest.mark.parametrize("change", [
    {}, {"pid": 123, "reason": "why", "supervised": True, "auto_resumes": 2, "auto_resume_at": "2026-01-01T00:00:00Z"},
    {"pid": "123"}, {"pid": 12.0}, {"supervised": 1}, {"auto_resumes": "2"}, {"state": "nonsense"}, {"pid": "x"},
    {"branch": 5}, {"backend": {"scenario": None}}, {"backend": "scripted"}, {"checks": "pytest"}, {"id": None},
    {"updated": None}, {"keys": [1]}, {"settings": []}, {"extra_field": {"kept": "ignored"}},
], ids=lambda c: json.dumps(c)[:40])
@pytest.mark.slow
def test_the_peek_reads_what_the_model_reads_or_fails_as_it_fails(sandbox, change):
    assert sandbox.start("s1", [task("T-1")]).returncode == 0
    paths = session_paths("s1", sandbox.home)
    raw = json.loads(paths.session_json.read_text())
    raw.update(change)
    paths.session_json.write_text(json.dumps(raw))
    assert_peek_agrees(paths)


RECORD = {"id": "s1", "repo": "/r", "base_commit": "0" * 40, "branch": "session/s1", "worktree": "/w/s1",
          "state": "crashed", "reason": "why", "backend": {"name": "scripted", "scenario": None},
          "created": "2026-01-01T00:00:00Z", "updated": "2026-01-01T00:00:00Z", "sandbox": "off", "checks": ["true"],
          "settings": {"max_parallel_sessions": 2}, "keys": [], "pid": None, "supervised": True, "start_at": None,
          "resume_requested": False, "auto_resumes": 1, "auto_resume_at": "2026-01-01T00:01:00.000Z"}


@UNIT
@given(changes=st.dictionaries(st.sampled_from([*RECORD, "backend.name", "extra"]),
                               st.one_of(WILD_VALUES, st.sampled_from(["queued", "archived", True, 0, 1.0])),
                               max_size=3),
       dropped=st.sets(st.sampled_from(list(RECORD)), max_size=2), style=st.integers(0, 3))
@pytest.mark.slow
def test_the_session_peek_agrees_with_the_model_on_fuzzed_records(changes, dropped, style):
    raw = {k: v for k, v in RECORD.items() if k not in dropped}
    for key, value in changes.items():
        if key == "backend.name":
            raw["backend"] = {"name": value}
        else:
            raw[key] = value
    with tempfile.TemporaryDirectory() as tmp:
        paths = session_paths("s1", Path(tmp))
        paths.dir.mkdir(parents=True)
        paths.session_json.write_bytes(encode(raw, style))
        assert_peek_agrees(paths)


@pytest.mark.slow
@pytest.mark.parametrize("damage", [b"{not json", b"[]", b'{"id": "s1"}', None])
def test_a_damaged_or_missing_session_json_is_the_same_one_line_through_status_and_logs(sandbox, damage):
    assert sandbox.start("s1", [task("T-1")]).returncode == 0
    paths = session_paths("s1", sandbox.home)
    if damage is None:
        paths.session_json.unlink()
        expected = f"tilth: no session 's1' under {sandbox.home}; see `tilth status`\n"
    else:
        paths.session_json.write_bytes(damage)
        with pytest.raises(BadInput) as caught:
            load_session(paths)
        expected = f"tilth: {caught.value}\n"
        assert expected.startswith(f"tilth: {paths.session_json} is damaged: ")
    for args in (["status", "s1"], ["status", "s1", "--json"], ["logs", "s1", "-n", "5"]):
        shown = sandbox.tilth(*args)
        assert (shown.returncode, shown.stdout, shown.stderr) == (2, "", expected), args
    if damage is not None:
        everything = sandbox.tilth("status")
        assert (everything.returncode, everything.stderr) == (2, expected)


PLANS = {
    "not json": b"[{", "not a list": b'{"id": "T-1"}', "empty": b"[]", "not a task": b"[1]",
    "bad id": json.dumps([task("T 1")]).encode(), "id with a newline": json.dumps([task("T-1\n")]).encode(),
    "blank title": json.dumps([task("T-1", title=" \x1c ")]).encode(),
    "no criteria": json.dumps([{**task("T-1"), "acceptance_criteria": []}]).encode(),
    "blank criterion": json.dumps([{**task("T-1"), "acceptance_criteria": ["\t"]}]).encode(),
    "bad status": json.dumps([task("T-1", status="finished")]).encode(),
    "duplicate ids": json.dumps([task("T-1"), task("T-1")]).encode(),
    "allow_empty as text": json.dumps([task("T-1", allow_empty="yes")]).encode(),
    "no description": json.dumps([{k: v for k, v in task("T-1").items() if k != "description"}]).encode(),
    "valid, padded titles and extra keys": json.dumps([task("T-1", title="  One \u2003"),
                                                       task("T-2", status="done", owner="me")]).encode(),
    "valid, lax values the model accepts": json.dumps([task("T-1", allow_empty="true")]).encode(),
    "valid, dependencies": json.dumps([task("T-1", depends_on=["T-2"]), task("T-2", depends_on=[])]).encode(),
    "depends on itself": json.dumps([task("T-1", depends_on=["T-1"])]).encode(),
    "depends on an unknown id": json.dumps([task("T-1", depends_on=["T-9"])]).encode(),
    "dependency cycle": json.dumps([task("T-1", depends_on=["T-2"]), task("T-2", depends_on=["T-1"])]).encode(),
    "depends_on not a list": json.dumps([task("T-1", depends_on="T-2"), task("T-2")]).encode(),
    "depends_on a bad id": json.dumps([task("T-1", depends_on=["T 2"])]).encode(),
    "depends_on an id with a newline": json.dumps([task("T-1", depends_on=["T-2\n"]), task("T-2")]).encode(),
}


def assert_plan_peek_agrees(path) -> None:
    """The plan peek reads what `load_plan` reads, or fails with its very line."""
    try:
        expected = load_plan(path)
    except BadInput as exc:
        with pytest.raises(BadInput) as caught:
            peek_plan(path)
        assert str(caught.value) == str(exc)
    else:
        assert peek_plan(path) == expected


@pytest.mark.parametrize("name", list(PLANS))
def test_the_plan_peek_reads_what_the_model_reads_or_fails_as_it_fails(tmp_path, name):
    path = tmp_path / "prd.json"
    path.write_bytes(PLANS[name])
    assert_plan_peek_agrees(path)


@pytest.mark.slow
@UNIT
@given(data=st.one_of(NEAR_VALID_BYTES, mangled_bytes()))
def test_the_plan_peek_agrees_with_the_model_on_fuzzed_plans(data):
    with tempfile.TemporaryDirectory() as tmp:  # a new file each time: load_plan keeps plans per path
        path = Path(tmp) / "prd.json"
        path.write_bytes(data)
        assert_plan_peek_agrees(path)


@pytest.mark.slow
def test_a_damaged_plan_shows_as_it_did_through_status(sandbox):
    assert sandbox.start("s1", [task("T-1"), task("T-2")]).returncode == 0
    (sandbox.session_dir("s1") / "prd.json").write_text('[{"id": "T-1"}]')
    shown = sandbox.tilth("status", "s1", "--json")
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(shown.stdout)
    assert (summary["tasks"], summary["progress"]) == ([], "0/0")


# --- auto-resume ------------------------------------------------------------------------------

def crashed_waiting(sandbox, sid: str = "s1", at: str = "2099-01-01T12:00:03.250Z") -> None:
    """A session as the supervisor leaves one whose runner died: crashed, due for auto-resume
    number 2 of 3 (the first one happened and that run died too)."""
    paths = session_paths(sid, sandbox.home)
    log = EventLog(paths.events)
    log.emit("session_crashed", reason="runner killed by SIGKILL", exit_code=-9, auto_resume="at",
             auto_resume_at="2099-01-01T11:59:33.250Z", auto_resumes=0, attempts=3)
    log.emit("session_auto_resumed", attempt=1, attempts=3, backoff_s=30.0, crash="runner gone")
    log.emit("session_crashed", reason="runner killed by SIGKILL", exit_code=-9, auto_resume="at",
             auto_resume_at=at, auto_resumes=1, attempts=3)
    record = load_session(paths)
    record.state, record.supervised, record.auto_resumes, record.auto_resume_at = SessionState.crashed, True, 1, at
    record.reason = f"runner gone: runner killed by SIGKILL; auto-resume 2 of 3 at {at}"
    save_session(paths, record)


@pytest.mark.slow
def test_a_crashed_session_waiting_for_its_auto_resume(sandbox):
    assert sandbox.start("s1", [task("T-1")]).returncode == 0
    crashed_waiting(sandbox)

    one = sandbox.tilth("status", "s1")
    assert one.returncode == 0 and one.stderr == "", one.stderr
    assert one.stdout.splitlines()[0] == "session s1: crashed (auto-resume 2/3 at 12:00:03) (1/1 done)"
    assert "reason   runner gone: runner killed by SIGKILL; auto-resume 2 of 3 at" in one.stdout
    table = sandbox.tilth("status").stdout.splitlines()
    assert table[1].split()[:5] == ["s1", "crashed", "(auto-resume", "2/3", "at"], table
    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert (summary["state"], summary["auto_resumes"], summary["auto_resume_at"], summary["auto_resume_attempts"]) \
        == ("crashed", 1, "2099-01-01T12:00:03.250Z", 3)

    logs = sandbox.tilth("logs", "s1", "-n", "3").stdout.splitlines()
    assert [line.split(" ", 1)[1] for line in logs] == [
        "session crashed: runner killed by SIGKILL (exit -9); auto-resume 1/3 at 11:59:33",
        "auto-resumed (1/3, after a 30s backoff): queued as `tilth resume` would",
        "session crashed: runner killed by SIGKILL (exit -9); auto-resume 2/3 at 12:00:03"]

    waited = sandbox.tilth("wait", "s1", "--timeout", "1")
    assert waited.returncode == 4, waited.stdout + waited.stderr
    assert "still waiting for: s1 crashed (auto-resume at 2099-01-01T12:00:03.250Z)" in waited.stdout

    # Auto-resume gave up: the wait ends as for any crash.
    paths = session_paths("s1", sandbox.home)
    EventLog(paths.events).emit("session_crashed", reason="runner killed by SIGKILL", exit_code=-9,
                                auto_resume="gave_up", auto_resume_at=None, auto_resumes=2, attempts=3)
    record = load_session(paths)
    record.auto_resume_at, record.auto_resumes = None, 2
    record.reason = "crashed 3 times in a row (auto-resumed 2); auto-resume gave up; `tilth resume s1` continues it"
    save_session(paths, record)
    waited = sandbox.tilth("wait", "s1", "--timeout", "5")
    assert (waited.returncode, waited.stdout) == (3, "session s1: crashed (crashed 3 times in a row (auto-resumed 2); "
                                                     "auto-resume gave up; `tilth resume s1` continues it)\n"), waited.stderr
    one = sandbox.tilth("status", "s1").stdout
    assert one.splitlines()[0] == "session s1: crashed (1/1 done)" and "auto-resume gave up" in one
    assert sandbox.tilth("logs", "s1", "-n", "1").stdout.split(" ", 1)[1] == \
        "session crashed: runner killed by SIGKILL (exit -9); auto-resume gave up after 2 attempts " \
        "(`tilth resume` continues it)\n"


@pytest.mark.slow
def test_a_session_the_supervisor_resumed_says_so(sandbox):
    from tilth.store.lock import SessionLock

    assert sandbox.start("s1", [task("T-1")]).returncode == 0
    paths = session_paths("s1", sandbox.home)
    record = load_session(paths)
    record.state, record.supervised, record.auto_resumes = SessionState.queued, True, 1
    save_session(paths, record)
    assert sandbox.tilth("status", "s1").stdout.splitlines()[0] == "session s1: queued (auto-resumed 1x) (1/1 done)"

    record.state = SessionState.running
    save_session(paths, record)
    lock = SessionLock(paths.lock, "s1", role="run")
    assert lock.try_acquire()
    try:
        shown = sandbox.tilth("status")
        assert shown.stdout.splitlines()[1].split()[:4] == ["s1", "running", "(auto-resumed", "1x)"], shown.stdout
        summary = json.loads(sandbox.tilth("status", "--json").stdout)[0]
        assert (summary["state"], summary["auto_resumes"], summary["auto_resume_at"]) == ("running", 1, None)
    finally:
        lock.release()
    assert sandbox.tilth("status", "s1").stdout.splitlines()[0] == "session s1: crashed (1/1 done)", \
        "running with nobody holding it is a crash, not an auto-resumed run"


# --- cleanse ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_status_after_cleanse_shows_what_was_removed_and_where_the_work_is(sandbox):
    bare = sandbox.root / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    git(sandbox.repo, "remote", "add", "origin", str(bare))
    assert sandbox.start("s1", [task("T-1"), task("T-2")]).returncode == 0
    tip = git(sandbox.repo, "rev-parse", "session/s1").strip()
    assert sandbox.tilth("push", "s1").returncode == 0
    cleansed = sandbox.tilth("cleanse", "s1")
    assert cleansed.returncode == 0, cleansed.stderr
    where = f"removed by cleanse; {tip[:7]} is on refs/remotes/origin/session/s1"

    one = sandbox.tilth("status", "s1")
    assert one.returncode == 0, one.stderr
    lines = one.stdout.splitlines()
    assert lines[0] == "session s1: archived (2/2 done)"
    assert f"branch   session/s1 ({where})" in lines
    assert "worktree (removed)" in lines and "current  -" in lines
    assert str(sandbox.worktree("s1")) not in one.stdout and not any(line.startswith("reason") for line in lines)

    table = sandbox.tilth("status").stdout.splitlines()
    row = table[1].split()
    assert row[:4] == ["s1", "archived", "2/2", "-"] and row[-2:] == ["session/s1", "(removed)"], table

    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert (summary["state"], summary["reason"], summary["current_task"], summary["iteration"]) == \
        ("archived", where, None, None)
