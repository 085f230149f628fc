"""A session paused by a usage limit: the supervisor resumes a supervised one by itself once
`paused_until` has come (waking for it), never a foreground one; `tilth status` says until when;
`tilth stop` cancels the pause, `tilth resume` ends it now; `tilth wait` goes on waiting.

Each paused session is a real one: run to done in the foreground with the scripted backend,
given a further pending task, then recorded paused with `store.session.pause`, as the runner
records it."""

from __future__ import annotations

import json
import os
import signal
from datetime import date, datetime, timedelta, timezone

import pytest

from conftest import task
from supervised import start_supervisor, wait_until
from tilth.core.clock import iso_ms, utc_now
from tilth.store.home import session_paths
from tilth.store.lock import wait_released
from tilth.store.session import SessionRecord, SessionState, load_session, pause, save_session, set_state

LIMIT = "usage limit: You've hit your usage limit · resets 3pm"
PAST = "2026-01-01T00:00:00.000Z"


def paused_session(sandbox, sid: str, until: str, supervised: bool = True) -> SessionRecord:
    """A session that ran T-1 to done in the foreground, then gained T-2 and was paused."""
    assert sandbox.start(sid, [task("T-1")]).returncode == 0
    prd = sandbox.session_dir(sid) / "prd.json"
    grown = prd.with_name("prd.json.new")
    grown.write_text(json.dumps(sandbox.plan(sid) + [task("T-2")]))
    grown.rename(prd)
    paths = session_paths(sid, sandbox.home)
    pause(paths, until, LIMIT)
    record = load_session(paths)
    record.supervised = supervised  # set after the pause: a done supervised session with a grown plan is requeued
    save_session(paths, record)
    return record


def tasks_committed(sandbox, sid: str) -> list[str]:
    return [c["task"] for c in sandbox.commits(sid)]


def local_clock(ts: str) -> str:
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone()
    today = datetime.now(timezone.utc).astimezone().date()
    return moment.strftime("%H:%M" if moment.date() == today else "%Y-%m-%d %H:%M")


def test_pause_records_the_pause_and_any_other_state_write_clears_it(sandbox):
    record = paused_session(sandbox, "s1", PAST)
    assert (record.state, record.pid, record.reason, record.paused_until) == (SessionState.paused, None, LIMIT, PAST)
    paths = session_paths("s1", sandbox.home)
    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert summary["state"] == "paused", "an unlocked paused session is paused, not crashed"
    record = set_state(paths, SessionState.stopped, reason="why")
    assert record.paused_until is None and json.loads(paths.session_json.read_text())["paused_until"] is None


@pytest.mark.slow
def test_a_paused_session_whose_pause_is_over_is_resumed_by_the_supervisor(sandbox, daemon):
    paused_session(sandbox, "s1", PAST)
    paused_session(sandbox, "fg", PAST, supervised=False)
    start_supervisor(sandbox)

    daemon.done("s1")
    assert tasks_committed(sandbox, "s1") == ["T-1", "T-2"]
    [unpaused] = daemon.events("s1", "session_unpaused")
    assert unpaused["data"] == {"paused_until": PAST, "reason": LIMIT}
    assert daemon.events("s1", "session_started")[-1]["data"]["resume"] is True, "run as `tilth resume` runs it"
    record = daemon.record("s1")
    assert record["auto_resumes"] == 0 and record["paused_until"] is None, "a pause is not a crash"
    assert daemon.events("s1", "session_crashed") == []

    # The foreground session's own run waits out its pause; the supervisor never touches it.
    assert daemon.record("fg")["state"] == "paused" and daemon.events("fg", "session_unpaused") == []
    assert tasks_committed(sandbox, "fg") == ["T-1"]


@pytest.mark.slow
def test_the_supervisor_wakes_when_the_pause_ends_and_not_before(sandbox, daemon):
    until = iso_ms(utc_now() + timedelta(seconds=3))
    paused_session(sandbox, "s1", until)
    # Its first tick sees the pause; nothing changes under sessions/ after it, and the rescan
    # never comes: only the wake it schedules for `until` can resume the session.
    start_supervisor(sandbox, "--rescan", "3600")

    wait_until(sandbox.session_dir("s1"), lambda: daemon.events("s1", "session_unpaused") != [],
               "the supervisor to end the pause")
    [unpaused] = daemon.events("s1", "session_unpaused")
    assert unpaused["ts"] >= until, "not resumed before its pause was over"
    daemon.done("s1")
    assert tasks_committed(sandbox, "s1") == ["T-1", "T-2"]


@pytest.mark.slow
def test_status_says_until_when_and_why(sandbox):
    soon = iso_ms(utc_now() + timedelta(minutes=30))
    paused_session(sandbox, "s1", soon)
    paused_session(sandbox, "later", "2099-06-01T12:00:00Z")

    table = sandbox.tilth("status")
    assert table.returncode == 0, table.stderr
    assert f"paused until {local_clock(soon)} (usage limit)" in table.stdout
    assert f"paused until {local_clock('2099-06-01T12:00:00Z')} (usage limit)" in table.stdout
    assert "2099-" in local_clock("2099-06-01T12:00:00Z"), "another day shows its date"
    assert "supervisor: not running; 0 queued, 2 paused session(s) wait for it" in table.stdout

    one = sandbox.tilth("status", "s1").stdout
    assert one.startswith(f"session s1: paused until {local_clock(soon)} (usage limit) (1/2 done)")
    assert f"reason   {LIMIT}" in one
    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert (summary["state"], summary["paused_until"], summary["reason"]) == ("paused", soon, LIMIT)


@pytest.mark.slow
def test_stop_while_paused_stops_it_for_good(sandbox, daemon):
    paused_session(sandbox, "s1", PAST)  # due already: only the stop keeps the supervisor from resuming it
    stopped = sandbox.tilth("stop", "s1")
    assert stopped.returncode == 0 and "was paused by a usage limit; it is stopped now" in stopped.stdout, \
        stopped.stdout + stopped.stderr
    record = daemon.record("s1")
    assert (record["state"], record["reason"], record["paused_until"]) == ("stopped", "stopped while paused", None)

    # A supervisor that ran another session start to end has looked at s1 since, and left it.
    start_supervisor(sandbox)
    daemon.start("other", [task("T-1")])
    daemon.done("other")
    assert daemon.state("s1") == "stopped" and daemon.events("s1", "session_unpaused") == []
    assert tasks_committed(sandbox, "s1") == ["T-1"]


@pytest.mark.slow
def test_resume_while_paused_runs_it_now(sandbox, daemon):
    paused_session(sandbox, "s1", "2099-01-01T00:00:00Z")
    start_supervisor(sandbox)
    resumed = sandbox.tilth("resume", "s1")
    assert resumed.returncode == 0, resumed.stderr
    daemon.done("s1")
    assert tasks_committed(sandbox, "s1") == ["T-1", "T-2"]
    assert daemon.events("s1", "session_unpaused") == [], "a person resumed it, not the end of the pause"
    assert daemon.events("s1", "session_queued")[-1]["data"]["reason"] == "resume"
    assert daemon.record("s1")["paused_until"] is None

    paused_session(sandbox, "fg", "2099-01-01T00:00:00Z", supervised=False)
    foreground = sandbox.tilth("resume", "fg", "--foreground")
    assert foreground.returncode == 0, foreground.stderr
    assert daemon.record("fg")["state"] == "done" and tasks_committed(sandbox, "fg") == ["T-1", "T-2"]


@pytest.mark.slow
def test_wait_goes_on_waiting_for_a_supervised_paused_session(sandbox):
    paused_session(sandbox, "s1", "2099-01-01T00:00:00Z")
    waited = sandbox.tilth("wait", "s1", "--timeout", "1")
    assert waited.returncode == 4, waited.stdout + waited.stderr
    assert "still waiting for: s1 paused (until 2099-01-01T00:00:00Z)" in waited.stdout
    assert "no supervisor is running, so paused s1 will not start" in waited.stderr

    paused_session(sandbox, "fg", "2099-01-01T00:00:00Z", supervised=False)
    waited = sandbox.tilth("wait", "fg")
    assert waited.returncode == 3 and "session fg: paused" in waited.stdout, "nobody holds it: nobody resumes it"


@pytest.mark.slow
def test_status_restarts_a_dead_supervisor_while_a_paused_session_waits(sandbox, daemon):
    dead = start_supervisor(sandbox)
    os.kill(dead, signal.SIGKILL)
    assert wait_released(sandbox.home / "daemon.lock", 10)
    paused_session(sandbox, "s1", "2099-01-01T00:00:00Z")

    status = sandbox.tilth("status")
    assert status.returncode == 0, status.stderr
    assert status.stderr.startswith("tilth: no supervisor was running while paused s1 (usage limit) waited; "
                                    "started one"), status.stderr
    assert daemon.state("s1") == "paused", "it waits for its time"


def test_the_pause_decisions():
    """queue.py's pure decisions for paused sessions: due once `paused_until` has come (or is
    missing or unreadable), never a foreground or a held one; wakes at the end of a pause; a
    paused supervised session needs a supervisor."""
    from tilth.daemon import queue

    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    policy = queue.AutoResume(attempts=3, backoff_s=30, backoff_max_s=100)
    base = dict(repo="/r", base_commit="0" * 40, worktree="/w", backend={"name": "scripted"}, created="x",
                updated="x", state=SessionState.paused, supervised=True)

    def record(sid: str, **fields) -> SessionRecord:
        return SessionRecord(**{**base, "id": sid, "branch": f"session/{sid}", **fields})

    later = record("later", paused_until="2026-01-01T00:00:30.000Z")
    seen = [queue.Seen(later, locked=False, ours=False)]
    assert queue.to_unpause(now, seen) == []
    assert queue.wakes(now, seen) == {now + timedelta(seconds=30)}
    assert queue.to_unpause(now + timedelta(seconds=30), seen) == [later]
    assert queue.needs_supervisor(seen, policy) == ["paused later (usage limit)"]
    assert queue.stale(seen) == [] and queue.busy(seen) == 0, "paused is neither stale nor a slot in use"

    naive = record("naive", paused_until="2026-01-01T00:00:30")
    assert queue.pause_end(naive) == now + timedelta(seconds=30), "a time without a zone is UTC"
    unknown, garbled = record("unknown"), record("garbled", paused_until="after lunch")
    held = record("held", paused_until="2025-01-01T00:00:00Z")
    foreground = record("fg", paused_until="2025-01-01T00:00:00Z", supervised=False)
    seen = [queue.Seen(r, locked=r is held, ours=False) for r in (unknown, garbled, held, foreground)]
    assert queue.to_unpause(now, seen) == [garbled, unknown], "due now, oldest first (created, then id)"
    assert queue.wakes(now, seen) == set()
    assert queue.needs_supervisor(seen, policy) == ["paused unknown, garbled, held (usage limit)"]
    assert queue.to_unpause(now, [queue.Seen(later, locked=False, ours=True)]) == []


def test_status_clock_in_local_time():
    from tilth.views.status import _local_clock

    ts = "2026-03-01T12:34:00Z"
    local = datetime(2026, 3, 1, 12, 34, tzinfo=timezone.utc).astimezone()
    assert _local_clock(ts, today=local.date()) == local.strftime("%H:%M")
    assert _local_clock(ts, today=date(2020, 1, 1)) == local.strftime("%Y-%m-%d %H:%M")
    assert _local_clock("soon", today=local.date()) == "soon"
