"""Session state changes made by the supervisor and by `tilth start/stop/resume`, never by
a runner. Each is a read-modify-write of session.json under the session lock, so it can
never interleave with a runner's own writes (a runner holds the lock for its whole life),
and each leaves an event in the session's journal.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, Callable

from tilth.core.clock import iso_ms
from tilth.core.errors import BadInput
from tilth.daemon import queue
from tilth.store.events import EventLog, document, read_events
from tilth.store.home import SessionPaths
from tilth.store.lock import SessionLock, read_holder
from tilth.store.session import SessionRecord, SessionState, load_session, save_session
from tilth.store.unparking import answered_parked, unpark_answered

document(
    {
        "session_queued": ("the session was handed to the supervisor; data: reason (start|resume|plan_grew|answer: "
                           "`tilth answer` on an ended session|answered: the supervisor, for a session that ended "
                           "waiting while its answer came), "
                           "start_at, resume, by (cli|dashboard: who handed it over; absent when the supervisor "
                           "queued it)", "reason start_at resume by"),
        "session_launched": ("the supervisor is starting a runner for the queued session; data: resume", "resume"),
        "session_crashed": ("the session said running but its runner was gone; data: reason, exit_code, "
                            "auto_resume (at|gave_up|off), auto_resume_at, auto_resumes (in a row so far), "
                            "attempts (the most in a row; null without an auto-resume policy)",
                            "reason exit_code auto_resume auto_resume_at auto_resumes attempts"),
        "session_auto_resumed": ("the supervisor queued a crashed session to resume by itself after the backoff; "
                                 "data: attempt, attempts (the most in a row), backoff_s, crash (the crash's reason)",
                                 "attempt attempts backoff_s crash"),
        "session_unpaused": ("the supervisor queued a session paused by a usage limit to resume, its pause "
                             "over; data: paused_until (as recorded; null or unreadable counts as over), reason "
                             "(the pause's)", "paused_until reason"),
        "session_stopped": ("`tilth stop` stopped a queued session (or a crashed one due for auto-resume, or a "
                            "paused one), or killed its runner with --now; data: now, pid, by (cli|dashboard: who "
                            "stopped it; absent when the supervisor did)", "now pid by"),
    }
)

Decide = Callable[[SessionRecord], dict[str, Any] | None]


def change(paths: SessionPaths, role: str, decide: Decide, event: str, *, then: Callable[[], object] | None = None,
           **data: Any) -> SessionRecord | None:
    """Apply `decide(record)`'s field updates and emit `event` with `data` (which `decide`
    may fill in), then `then()` still under the lock, or do nothing when another process holds
    the lock or `decide` returns None. Returns the saved record."""
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
        if then is not None:
            then()
        return record
    finally:
        lock.release()


def queued_for(record: SessionRecord, resume: bool, start_at: str | None) -> dict[str, Any]:
    """The fields that hand a session to the supervisor; `tilth resume` and an auto-resume
    set the same ones, so the runner it gets is the same `tilth run <id> --resume`."""
    return {"state": SessionState.queued, "supervised": True, "start_at": start_at, "pid": None,
            "resume_requested": resume or record.resume_requested, "auto_resume_at": None}


def hand_over(paths: SessionPaths, reason: str, resume: bool, start_at: str | None, by: str = "cli") -> SessionRecord:
    """Queue the session for the supervisor (`tilth start`, `tilth resume`). Refused while
    any process runs it. A person's start or resume begins the auto-resume count again."""
    def decide(record: SessionRecord) -> dict[str, Any] | None:
        if reason == "start" and record.state != SessionState.queued:
            raise BadInput(f"session {paths.id!r} is {record.state.value}, not new")
        return {**queued_for(record, resume, start_at), "auto_resumes": 0}

    record = change(paths, "cli", decide, "session_queued", reason=reason, start_at=start_at, resume=resume, by=by)
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


def mark_crashed(paths: SessionPaths, reason: str, exit_code: int | None, also_queued: bool = False,
                 policy: queue.AutoResume | None = None, now: datetime | None = None) -> bool:
    """running (or, for a runner that died before starting, queued) -> crashed, resumable.
    With a policy, a supervised session also gets its auto-resume time (queue.after_crash),
    or, its auto-resumes used up, a reason that says so."""
    states = {SessionState.running, SessionState.queued} if also_queued else {SessionState.running}
    plan: dict[str, queue.AfterCrash] = {}

    def decide(record: SessionRecord) -> dict[str, Any] | None:
        if record.state not in states:
            return None
        changed: dict[str, Any] = {"state": SessionState.crashed, "pid": None, "reason": f"runner gone: {reason}",
                                   "auto_resume_at": None}
        if policy is None or now is None:
            return changed
        after = plan["after"] = queue.after_crash(record, queue.last_run(read_events(paths.events)), now, policy)
        changed["auto_resumes"] = after.auto_resumes
        if after.resume_at is not None:
            changed["auto_resume_at"] = iso_ms(after.resume_at)
            changed["reason"] += (f"; auto-resume {after.auto_resumes + 1} of {policy.attempts} at "
                                  f"{changed['auto_resume_at']}")
        elif after.gave_up:
            changed["reason"] = (f"crashed {after.auto_resumes + 1} times in a row (auto-resumed "
                                 f"{after.auto_resumes}); auto-resume gave up; `tilth resume {record.id}` "
                                 f"continues it; last: runner gone: {reason}")
        return changed

    def outcome(record: SessionRecord) -> str:
        after = plan.get("after")
        return "off" if after is None or not (after.resume_at or after.gave_up) else \
            "gave_up" if after.gave_up else "at"

    return change(paths, "supervisor", decide, "session_crashed", reason=reason, exit_code=exit_code,
                  auto_resume=outcome, auto_resume_at=lambda r: r.auto_resume_at,
                  auto_resumes=lambda r: r.auto_resumes,
                  attempts=policy.attempts if policy is not None and now is not None else None) is not None


def auto_resume(paths: SessionPaths, now: datetime, policy: queue.AutoResume) -> SessionRecord | None:
    """A crashed session whose auto-resume time has come is queued as `tilth resume` queues
    it, one more auto-resume counted."""
    seen: dict[str, Any] = {}

    def decide(record: SessionRecord) -> dict[str, Any] | None:
        when = queue.resume_time(record, policy)
        if when is None or when > now:
            return None
        attempt = record.auto_resumes + 1
        seen.update(attempt=attempt, crash=record.reason)
        return {**queued_for(record, resume=True, start_at=None), "auto_resumes": attempt}

    return change(paths, "supervisor", decide, "session_auto_resumed", attempt=lambda _: seen["attempt"],
                  attempts=policy.attempts, backoff_s=lambda _: queue.backoff(policy, seen["attempt"]),
                  crash=lambda _: seen["crash"])


def unpause(paths: SessionPaths, now: datetime) -> SessionRecord | None:
    """A paused supervised session whose pause has ended (queue.pause_end) is queued as `tilth
    resume` queues it. A pause is not a crash: the auto-resume count stays as it was."""
    seen: dict[str, Any] = {}

    def decide(record: SessionRecord) -> dict[str, Any] | None:
        when = queue.pause_end(record)
        if when is None or when > now:
            return None
        seen.update(paused_until=record.paused_until, reason=record.reason)
        return queued_for(record, resume=True, start_at=None)

    return change(paths, "supervisor", decide, "session_unpaused", paused_until=lambda _: seen["paused_until"],
                  reason=lambda _: seen["reason"])


def requeue_grown(paths: SessionPaths) -> bool:
    """A done supervised session whose plan gained pending tasks goes back to the queue."""
    def decide(record: SessionRecord) -> dict[str, Any] | None:
        if record.state != SessionState.done or not record.supervised:
            return None
        return {"state": SessionState.queued, "start_at": None, "auto_resumes": 0, "auto_resume_at": None}

    return change(paths, "supervisor", decide, "session_queued", reason="plan_grew", start_at=None,
                  resume=False) is not None


def requeue_answered(paths: SessionPaths) -> bool:
    """A session that ended `waiting` while a person answered one of its parked tasks (the runner
    still held it, so `tilth answer` could not queue it) goes back to the queue, and the answered tasks
    to pending (queued first: a kill between the two leaves them for the runner's first task boundary)."""
    def decide(record: SessionRecord) -> dict[str, Any] | None:
        if record.state != SessionState.waiting or not answered_parked(paths.dir, paths.prd):
            return None
        return {**queued_for(record, resume=False, start_at=None), "auto_resumes": 0}

    return change(paths, "supervisor", decide, "session_queued", reason="answered", start_at=None, resume=False,
                  then=lambda: unpark_answered(paths, EventLog(paths.events))) is not None


def stopper(by: str | None, now: bool = False) -> str:
    """Who stopped a session, as its reason says: `tilth stop` (the CLI, and the supervisor's own
    stop of a runner it killed) or the dashboard."""
    return "on the dashboard" if by == "dashboard" else "by `tilth stop --now`" if now else "by `tilth stop`"


def cancel_auto_resume(paths: SessionPaths, by: str = "cli") -> SessionRecord | None:
    """`tilth stop` on a crashed session waiting for its auto-resume: stopped, not resumed."""
    def decide(record: SessionRecord) -> dict[str, Any] | None:
        if record.state != SessionState.crashed or not record.auto_resume_at:
            return None
        return {"state": SessionState.stopped, "pid": None, "auto_resume_at": None,
                "reason": f"auto-resume cancelled {stopper(by)} ({record.reason})"}

    return change(paths, "cli", decide, "session_stopped", now=False, pid=None, by=by)


def cancel_pause(paths: SessionPaths, by: str = "cli") -> SessionRecord | None:
    """`tilth stop` on a paused session nobody holds: stopped, not resumed when the limit lifts."""
    def decide(record: SessionRecord) -> dict[str, Any] | None:
        if record.state != SessionState.paused:
            return None
        return {"state": SessionState.stopped, "pid": None,
                "reason": "stopped while paused" + ("" if by == "cli" else f" ({stopper(by)})")}

    return change(paths, "cli", decide, "session_stopped", now=False, pid=None, by=by)


def mark_stopped(paths: SessionPaths, states: set[SessionState], now: bool, pid: int | None,
                 role: str = "cli", by: str | None = None) -> SessionRecord | None:
    """A queued session, or one whose runner was killed (`--now`), becomes stopped (resumable)."""
    def decide(record: SessionRecord) -> dict[str, Any] | None:
        why = f"runner killed {stopper(by, now)}" if now else f"stopped {stopper(by)} before it ran"
        if record.state not in states:
            return None
        return {"state": SessionState.stopped, "pid": None, "reason": why, "auto_resume_at": None}

    who: dict[str, Any] = {} if by is None else {"by": by}
    return change(paths, role, decide, "session_stopped", now=now, pid=pid, **who)


document({"settings_recorded": ("`tilth resume` put the settings set in its shell over the session's recorded "
                                "ones; data: changed (setting names), by (cli|dashboard)", "changed by")})


def record_settings(paths: SessionPaths, overrides: dict[str, Any], keys: list[str],
                    backend: str | None, by: str = "cli") -> list[str]:
    """`tilth resume`: what the resuming shell sets (env or config.toml) replaces the session's
    recorded settings, and `backend` its backend; the names that changed. Nothing changes while
    a runner holds the session (the resume is then refused as already running)."""
    changed: list[str] = []

    def decide(record: SessionRecord) -> dict[str, Any] | None:
        merged = {**record.settings, **overrides}
        changed.extend(sorted(name for name in merged if record.settings.get(name) != merged[name]))
        updates: dict[str, Any] = {"settings": merged, "keys": sorted({*record.keys, *keys})}
        if backend and backend != record.backend.name:
            updates["backend"] = dataclasses.replace(record.backend, name=backend)
            changed.append("backend")
        return updates if changed or updates["keys"] != record.keys else None

    change(paths, "cli", decide, "settings_recorded", changed=lambda _: changed, by=by)
    return changed
