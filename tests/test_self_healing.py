"""Self-healing: a real supervisor resumes a session whose runner was killed (bounded
attempts with a doubling backoff, counted in session.json and in events), `tilth status`
restarts a dead supervisor that has work waiting, and `tilth daemon install` writes and
enables the systemd user unit (a stub `systemctl` first on PATH stands in for systemd).

Sessions are held inside a worker step by a scenario command that waits for a gate file,
so the test decides when a runner is killed and when an iteration may finish."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from conftest import task
from supervised import start_supervisor
from tilth.store.lock import read_holder, wait_released

FAST = {"TILTH_AUTO_RESUME_BACKOFF_S": "0.5"}
"""The supervisor's backoff before the first auto-resume (doubling from there)."""


def tasks_committed(sandbox, sid: str) -> list[str]:
    return [c["task"] for c in sandbox.commits(sid)]


@pytest.mark.slow
def test_a_killed_runner_is_resumed_by_the_supervisor_after_the_backoff(sandbox, daemon):
    start_supervisor(sandbox, env=FAST)
    daemon.start("s1", [task("T-1"), task("T-2"), task("T-3")], daemon.held("s1", "T-2"))
    daemon.reached("s1", "T-2")
    first = daemon.kill_runner("s1", "T-2")

    daemon.reached("s1", "T-2")  # a new runner got there by itself: nobody ran `tilth resume`
    runner = read_holder(sandbox.session_dir("s1") / "session.lock")["pid"]
    assert runner != first
    [crashed] = daemon.events("s1", "session_crashed")
    assert "SIGKILL" in crashed["data"]["reason"] and crashed["data"]["auto_resume"] == "at"
    assert crashed["data"]["auto_resumes"] == 0
    [resumed] = daemon.events("s1", "session_auto_resumed")
    assert resumed["data"]["attempt"] == 1 and resumed["data"]["attempts"] == 3
    assert resumed["data"]["backoff_s"] == 0.5 and "SIGKILL" in resumed["data"]["crash"]
    assert resumed["ts"] >= crashed["data"]["auto_resume_at"] > crashed["ts"], "it waited for the backoff"
    assert daemon.events("s1", "session_started")[-1]["data"]["resume"] is True, "run as `tilth resume` runs it"
    record = daemon.record("s1")
    assert record["state"] == "running" and record["auto_resumes"] == 1 and record["auto_resume_at"] is None

    daemon.release("s1", "T-2")
    daemon.done("s1")
    assert tasks_committed(sandbox, "s1") == ["T-1", "T-2", "T-3"], "each Tilth-Task exactly once"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done"}
    assert daemon.record("s1")["auto_resumes"] == 1
    assert "auto-resume 1 of 3" in (sandbox.home / "daemon.log").read_text()


@pytest.mark.slow
def test_a_runner_that_keeps_dying_is_given_up_on_after_the_attempts(sandbox, daemon):
    start_supervisor(sandbox, env={"TILTH_AUTO_RESUME_BACKOFF_S": "0.2", "TILTH_AUTO_RESUME_ATTEMPTS": "2"})
    daemon.start("s1", [task("T-1"), task("T-2")], daemon.held("s1", "T-1"))
    for _ in range(3):  # the first run and two auto-resumes each die at T-1
        daemon.reached("s1", "T-1")
        daemon.kill_runner("s1", "T-1")
    record = daemon.wait_for("s1", lambda r: r["state"] == "crashed" and "gave up" in (r["reason"] or ""),
                             "s1 to be given up on")
    assert record["reason"].startswith("crashed 3 times in a row (auto-resumed 2); auto-resume gave up; "
                                       "`tilth resume s1` continues it; last: runner gone: runner killed by SIGKILL")
    assert record["auto_resumes"] == 2 and record["auto_resume_at"] is None
    assert [e["data"]["auto_resume"] for e in daemon.events("s1", "session_crashed")] == ["at", "at", "gave_up"]
    resumed = daemon.events("s1", "session_auto_resumed")
    assert [(e["data"]["attempt"], e["data"]["backoff_s"]) for e in resumed] == [(1, 0.2), (2, 0.4)], "doubling"

    # Nothing resumes it any more: another session runs start to end meanwhile.
    daemon.start("other", [task("T-1")])
    daemon.done("other")
    assert daemon.state("s1") == "crashed" and len(daemon.events("s1", "session_auto_resumed")) == 2
    assert not (daemon.gates / "reached-s1-T-1").exists()

    # A person's resume starts the count again and runs it to the end.
    daemon.release("s1", "T-1")
    assert sandbox.tilth("resume", "s1").returncode == 0
    daemon.done("s1")
    assert daemon.record("s1")["auto_resumes"] == 0
    assert tasks_committed(sandbox, "s1") == ["T-1", "T-2"]


@pytest.mark.slow
def test_stop_cancels_a_pending_auto_resume(sandbox, daemon):
    start_supervisor(sandbox, env={"TILTH_AUTO_RESUME_BACKOFF_S": "3600"})
    daemon.start("s1", [task("T-1")], daemon.held("s1", "T-1"))
    daemon.reached("s1", "T-1")
    daemon.kill_runner("s1", "T-1")
    record = daemon.wait_for("s1", lambda r: r["state"] == "crashed", "s1 to be marked crashed")
    assert record["auto_resume_at"] and "auto-resume 1 of 3 at" in record["reason"]

    stopped = sandbox.tilth("stop", "s1")
    assert stopped.returncode == 0 and "due for auto-resume; it is stopped now" in stopped.stdout, stopped.stderr
    record = daemon.record("s1")
    assert record["state"] == "stopped" and record["auto_resume_at"] is None
    assert daemon.events("s1", "session_auto_resumed") == []


@pytest.mark.slow
def test_status_restarts_a_dead_supervisor_that_has_work_waiting(sandbox, daemon):
    one_slot = {"TILTH_MAX_PARALLEL_SESSIONS": "1", **FAST}
    start_supervisor(sandbox, env=one_slot)
    daemon.start("a", [task("T-1")], daemon.held("a", "T-1"))
    daemon.start("q", [task("T-1"), task("T-2")])
    daemon.reached("a", "T-1")
    assert daemon.state("q") == "queued"

    # The supervisor dies (kill -9), and so does the runner it had started.
    dead = daemon.pid()
    os.kill(dead, signal.SIGKILL)
    assert wait_released(sandbox.home / "daemon.lock", 10)
    daemon.kill_runner("a", "T-1")
    assert daemon.state("a") == "running", "nobody recorded the runner's death yet"

    status = sandbox.tilth("status", env=one_slot)
    assert status.returncode == 0, status.stderr
    lines = status.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tilth: no supervisor was running while queued q; "), lines
    assert "a (runner gone)" in lines[0]
    revived = read_holder(sandbox.home / "daemon.lock")["pid"]
    assert revived != dead and lines[0].endswith(f"started one (pid {revived})")
    assert sandbox.tilth("status").stderr == "", "a running supervisor is left alone"

    # The new supervisor marks `a` crashed and resumes it; `q` gets its slot in between or after.
    daemon.reached("a", "T-1")
    assert daemon.events("a", "session_auto_resumed")[0]["data"]["attempt"] == 1
    daemon.release("a", "T-1")
    daemon.done("a")
    daemon.done("q")
    assert tasks_committed(sandbox, "a") == ["T-1"]
    assert tasks_committed(sandbox, "q") == ["T-1", "T-2"]


@pytest.mark.slow
def test_status_leaves_a_supervisor_stopped_on_purpose_stopped(sandbox, daemon):
    start_supervisor(sandbox)
    daemon.start("later", [task("T-1")], None, "--at", "2099-01-01T00:00:00Z")
    assert sandbox.tilth("daemon", "stop", "--timeout", "20").returncode == 0
    status = sandbox.tilth("status")
    assert status.returncode == 0 and status.stderr == ""
    assert sandbox.tilth("daemon", "status").returncode == 3, "`tilth daemon stop` is respected"

    dead = start_supervisor(sandbox)
    os.kill(dead, signal.SIGKILL)
    assert wait_released(sandbox.home / "daemon.lock", 10)
    status = sandbox.tilth("status")
    assert status.stderr.startswith("tilth: no supervisor was running while queued later waited; started one")
    assert sandbox.tilth("daemon", "status").returncode == 0


def stub_systemctl(directory: Path, calls: Path, fail: str | None = None) -> Path:
    """A `systemctl` that records its arguments (and with `fail`, says it and exits 1)."""
    directory.mkdir()
    script = directory / "systemctl"
    failing = f'echo "{fail}" >&2; exit 1\n' if fail else "exit 0\n"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\n{failing}')
    script.chmod(0o755)
    return directory


def test_daemon_install_writes_and_enables_the_user_unit(sandbox, tmp_path):
    calls = tmp_path / "systemctl-calls"
    bin_dir = stub_systemctl(tmp_path / "bin", calls)
    config = tmp_path / "xdg"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "XDG_CONFIG_HOME": str(config)}
    unit = config / "systemd" / "user" / "tilth.service"

    installed = sandbox.tilth("daemon", "install", env=env)
    assert installed.returncode == 0, installed.stderr
    assert unit.read_text() == sandbox.tilth("daemon", "unit", env=env).stdout
    assert f"ExecStart={Path(sys.executable).absolute()} -m tilth daemon --foreground" in unit.read_text()
    assert f"Environment=TILTH_HOME={sandbox.home}" in unit.read_text()
    assert calls.read_text().splitlines() == ["--user daemon-reload", "--user enable --now tilth.service"]
    assert f"wrote {unit}" in installed.stdout and "enabled and started tilth.service" in installed.stdout

    calls.unlink()
    removed = sandbox.tilth("daemon", "uninstall", env=env)
    assert removed.returncode == 0, removed.stderr
    assert not unit.exists()
    assert calls.read_text().splitlines() == ["--user disable --now --no-block tilth.service", "--user daemon-reload"]


def test_daemon_install_without_a_working_systemctl_says_what_to_run(sandbox, tmp_path):
    empty = tmp_path / "nobin"
    empty.mkdir()
    config = tmp_path / "xdg"
    unit = config / "systemd" / "user" / "tilth.service"
    by_hand = "systemctl --user daemon-reload && systemctl --user enable --now tilth.service"

    missing = sandbox.tilth("daemon", "install", env={"PATH": str(empty), "XDG_CONFIG_HOME": str(config)})
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr == (f"tilth: wrote {unit} (left in place), but systemctl is not on PATH; "
                              f"to enable it run by hand: {by_hand}\n")
    assert f"Environment=TILTH_HOME={sandbox.home}" in unit.read_text()

    calls = tmp_path / "systemctl-calls"
    bus = stub_systemctl(tmp_path / "bin", calls, fail="Failed to connect to bus: No medium found")
    no_bus = sandbox.tilth("daemon", "install", env={"PATH": f"{bus}:{os.environ['PATH']}",
                                                     "XDG_CONFIG_HOME": str(config)})
    assert no_bus.returncode == 1
    assert no_bus.stderr == (f"tilth: wrote {unit} (left in place), but `systemctl --user daemon-reload` failed "
                             f"(exit 1: Failed to connect to bus: No medium found); to enable it run by hand: "
                             f"{by_hand}\n")
    assert calls.read_text().splitlines() == ["--user daemon-reload"], "it stopped at the first failure"
    assert unit.exists()


def test_old_session_files_still_load():
    """session.json written before the auto-resume fields existed loads with their defaults."""
    from pydantic import TypeAdapter

    from tilth.store.session import SessionRecord

    old = {"id": "s1", "repo": "/r", "base_commit": "0" * 40, "branch": "session/s1", "worktree": "/w",
           "state": "crashed", "backend": {"name": "scripted"}, "created": "2026-01-01T00:00:00Z",
           "updated": "2026-01-01T00:00:00Z", "supervised": True}
    record = TypeAdapter(SessionRecord).validate_python(old)
    assert record.auto_resumes == 0 and record.auto_resume_at is None


def test_the_auto_resume_decisions():
    """queue.py's pure decisions: backoff doubles up to the cap, progress starts the count
    again, a foreground session and a used-up count are never resumed."""
    from datetime import datetime, timedelta, timezone

    from tilth.daemon import queue
    from tilth.store.session import SessionRecord, SessionState

    policy = queue.AutoResume(attempts=3, backoff_s=30, backoff_max_s=100)
    assert [queue.backoff(policy, n) for n in (1, 2, 3, 4)] == [30, 60, 100, 100]
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    base = dict(id="s1", repo="/r", base_commit="0" * 40, branch="session/s1", worktree="/w",
                backend={"name": "scripted"}, created="x", updated="x", state=SessionState.running)
    supervised = SessionRecord(**base, supervised=True, auto_resumes=1)
    stuck, progressed = queue.LastRun(progressed=False, launched=True), queue.LastRun(progressed=True, launched=True)
    after = queue.after_crash(supervised, stuck, now, policy)
    assert (after.auto_resumes, after.resume_at, after.gave_up) == (1, now + timedelta(seconds=60), False)
    assert queue.after_crash(supervised, progressed, now, policy).resume_at == now + timedelta(seconds=30)
    used_up = SessionRecord(**base, supervised=True, auto_resumes=3)
    assert queue.after_crash(used_up, stuck, now, policy).gave_up
    foreground = SessionRecord(**base, supervised=False)
    assert queue.after_crash(foreground, stuck, now, policy).resume_at is None
    by_hand = queue.LastRun(progressed=False, launched=False)  # `tilth resume --foreground` of a supervised one
    assert queue.after_crash(supervised, by_hand, now, policy) == queue.AfterCrash(1, None, False)
    off = queue.AutoResume(attempts=0, backoff_s=30, backoff_max_s=100)
    assert queue.after_crash(supervised, progressed, now, off) == queue.AfterCrash(0, None, False)

    due = SessionRecord(**{**base, "state": SessionState.crashed}, supervised=True, auto_resumes=1,
                        auto_resume_at="2026-01-01T00:00:30.000Z")
    seen = [queue.Seen(due, locked=False, ours=False)]
    assert queue.to_auto_resume(now, seen, policy) == []
    assert queue.wakes(now, seen, policy) == {now + timedelta(seconds=30)}
    assert queue.to_auto_resume(now + timedelta(seconds=30), seen, policy) == [due]
    assert queue.to_auto_resume(now + timedelta(seconds=30), seen, off) == [], "turned off since: not resumed"
    assert queue.needs_supervisor(seen, policy) == ["crashed s1 (due for auto-resume)"]
    assert queue.needs_supervisor(seen, off) == []
    for ended in (SessionState.stopped, SessionState.failed, SessionState.done):  # a time left from its crash
        left = SessionRecord(**{**base, "state": ended}, supervised=True, auto_resumes=1,
                             auto_resume_at="2026-01-01T00:00:30.000Z")
        ended_seen = [queue.Seen(left, locked=False, ours=False)]
        assert queue.to_auto_resume(now + timedelta(days=1), ended_seen, policy) == [], ended
        assert queue.needs_supervisor(ended_seen, policy) == [], ended


@pytest.mark.parametrize("kinds, expected", [
    (["session_queued", "session_launched", "session_started", "task_started"], (False, True)),
    (["session_queued", "session_launched"], (False, True)),  # died before it began
    (["session_launched", "session_started", "task_done", "session_end", "session_started"], (True, False)),
    (["session_launched", "session_crashed", "session_started", "task_started"], (False, False)),
    (["task_done", "session_auto_resumed", "session_launched", "session_started", "task_started"], (False, True)),
    (["session_auto_resumed", "session_launched", "session_started", "task_failed", "task_started"], (True, True)),
], ids=["supervised", "never began", "foreground after", "foreground after a crash", "no progress since",
        "a task ended since"])
def test_what_the_journal_says_about_the_run_that_died(kinds, expected):
    from tilth.daemon.queue import last_run

    run = last_run([{"type": kind} for kind in kinds])
    assert (run.progressed, run.launched) == expected
