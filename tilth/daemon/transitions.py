"""Session state changes made by the supervisor and by `tilth start/stop/resume`, never by
a runner. Each is a read-modify-write of session.json under the session lock, so it can
never interleave with a runner's own writes (a runner holds the lock for its whole life),
and each leaves an event in the session's journal.
"""

from __future__ import annotations

from typing import Any, Callable

from tilth.core.errors import BadInput
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths
from tilth.store.lock import SessionLock, read_holder
from tilth.store.session import SessionRecord, SessionState, load_session, save_session

document(
    {
        "session_queued": "the session was handed to the supervisor; data: reason (start|resume|plan_grew), "
                          "start_at, resume",
        "session_launched": "the supervisor is starting a runner for the queued session; data: resume",
        "session_crashed": "the session said running but its runner was gone; data: reason, exit_code",
        "session_stopped": "`tilth stop` stopped a queued session, or killed its runner with --now; data: now, pid",
    }
)

Decide = Callable[[SessionRecord], dict[str, Any] | None]


def change(paths: SessionPaths, role: str, decide: Decide, event: str, **data: Any) -> SessionRecord | None:
    """Apply `decide(record)`'s field updates and emit `event` with `data` (which `decide`
    may fill in), or do nothing when another process holds the lock or `decide` returns
    None. Returns the saved record."""
    lock = SessionLock(paths.lock, paths.id, role=role)
    if not lock.try_acquire():
        return None
    try:
        record = load_session(paths)
        updates = decide(record)
        if updates is None:
            return None
        for field, value in updates.items():
            setattr(record, field, value)
        save_session(paths, record)
        EventLog(paths.events).emit(event, **{k: v(record) if callable(v) else v for k, v in data.items()})
        return record
    finally:
        lock.release()


def hand_over(paths: SessionPaths, reason: str, resume: bool, start_at: str | None) -> SessionRecord:
    """Queue the session for the supervisor (`tilth start`, `tilth resume`). Refused while
    any process runs it."""
    def decide(record: SessionRecord) -> dict[str, Any] | None:
        if reason == "start" and record.state != SessionState.queued:
            raise BadInput(f"session {paths.id!r} is {record.state.value}, not new")
        return {"state": SessionState.queued, "supervised": True, "start_at": start_at, "pid": None,
                "resume_requested": resume or record.resume_requested}

    record = change(paths, "cli", decide, "session_queued", reason=reason, start_at=start_at, resume=resume)
    if record is None:
        holder = read_holder(paths.lock) or {}
        raise SessionLock(paths.lock, paths.id).busy(holder.get("pid", "?"))
    return record


def claim_for_launch(paths: SessionPaths) -> tuple[bool, bool]:
    """(claimed, resume): the session is still queued for the supervisor; its resume flag is
    cleared here, before the runner exists, so no write can race the runner's own."""
    seen: dict[str, bool] = {}

    def decide(record: SessionRecord) -> dict[str, Any] | None:
        if record.state != SessionState.queued or not record.supervised:
            return None
        seen["resume"] = record.resume_requested
        return {"resume_requested": False}

    claimed = change(paths, "supervisor", decide, "session_launched", resume=lambda _: seen["resume"]) is not None
    return claimed, seen.get("resume", False)


def mark_crashed(paths: SessionPaths, reason: str, exit_code: int | None, also_queued: bool = False) -> bool:
    """running (or, for a runner that died before starting, queued) -> crashed, resumable."""
    states = {SessionState.running, SessionState.queued} if also_queued else {SessionState.running}

    def decide(record: SessionRecord) -> dict[str, Any] | None:
        changed = {"state": SessionState.crashed, "pid": None, "reason": f"runner gone: {reason}"}
        return changed if record.state in states else None

    return change(paths, "supervisor", decide, "session_crashed", reason=reason, exit_code=exit_code) is not None


def requeue_grown(paths: SessionPaths) -> bool:
    """A done supervised session whose plan gained pending tasks goes back to the queue."""
    def decide(record: SessionRecord) -> dict[str, Any] | None:
        if record.state != SessionState.done or not record.supervised:
            return None
        return {"state": SessionState.queued, "start_at": None}

    return change(paths, "supervisor", decide, "session_queued", reason="plan_grew", start_at=None,
                  resume=False) is not None


def mark_stopped(paths: SessionPaths, states: set[SessionState], now: bool, pid: int | None,
                 role: str = "cli") -> SessionRecord | None:
    """A queued session, or one whose runner was killed (`--now`), becomes stopped (resumable)."""
    def decide(record: SessionRecord) -> dict[str, Any] | None:
        why = "runner killed by `tilth stop --now`" if now else "stopped by `tilth stop` before it ran"
        return {"state": SessionState.stopped, "pid": None, "reason": why} if record.state in states else None

    return change(paths, role, decide, "session_stopped", now=now, pid=pid)
