"""What `tilth start`, `tilth resume` and `tilth stop` do when the supervisor runs the
session: hand it over (queue it and make sure a supervisor runs), or stop it."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Callable

from tilth.core.errors import TilthError
from tilth.daemon import transitions
from tilth.core.processes import kill_group
from tilth.daemon.children import signal_pid
from tilth.daemon.control import ensure_running
from tilth.store.home import SessionPaths
from tilth.store.lock import live_holder, wait_released
from tilth.store.session import SessionState, effective_state, load_session

ROUNDS = 20
"""How many times `tilth stop` looks again when it meets a momentary state change."""
KILL_TIMEOUT = 30.0


@dataclass
class Handed:
    session_id: str
    start_at: str | None
    supervisor_pid: int
    started_supervisor: bool


def submit(paths: SessionPaths, reason: str, resume: bool, start_at: str | None, wait: bool,
           by: str = "cli") -> Handed:
    """Queue the session for the supervisor, then make sure one runs (started detached when
    not; with `wait`, only once it is up). Refused while any process runs the session."""
    transitions.hand_over(paths, reason, resume, start_at, by)
    pid, started = ensure_running(paths.home, wait=wait)
    return Handed(paths.id, start_at, pid, started)


def still_queued(paths: SessionPaths) -> bool:
    """For a runner the supervisor started: the session was not stopped meanwhile."""
    return load_session(paths).state == SessionState.queued


@dataclass(frozen=True)
class Stop:
    line: str
    """One sentence for a person."""
    outcome: str
    """stopped (a `session_stopped` event was written), asked (the runner got SIGTERM), killed, or nothing."""


def stop_session(paths: SessionPaths, now: bool, by: str = "cli",
                 before_signal: Callable[[int], None] | None = None) -> Stop:
    """Ask the runner to stop after its iteration (SIGTERM), or with `now` kill its process
    group and mark the session stopped. A queued session just becomes stopped, and so does a
    crashed one waiting for its auto-resume (which is then cancelled) and a paused one that no
    process holds (which is then not resumed when its usage limit lifts; a foreground run
    waiting out its pause holds the session and is asked to stop as a running one is).
    `before_signal(pid)` is called before the runner is signalled (so its journal can say who
    stopped it before the runner writes its end); `by` is recorded in `session_stopped`."""
    load_session(paths)
    for _ in range(ROUNDS):
        holder = live_holder(paths.lock)
        if holder is None:
            if transitions.mark_stopped(paths, {SessionState.queued}, now=now, pid=None, by=by):
                return Stop(f"session {paths.id} was queued; it is stopped now (`tilth resume {paths.id}` queues "
                            "it again)", "stopped")
            if transitions.cancel_auto_resume(paths, by):
                return Stop(f"session {paths.id} had crashed and was due for auto-resume; it is stopped now "
                            f"(`tilth resume {paths.id}` continues it)", "stopped")
            if transitions.cancel_pause(paths, by):
                return Stop(f"session {paths.id} was paused by a usage limit; it is stopped now and will not be "
                            f"resumed by itself (`tilth resume {paths.id}` continues it)", "stopped")
            record = load_session(paths)
            if record.state != SessionState.queued:
                return Stop(f"session {paths.id} is not running ({effective_state(paths, record)}); nothing to "
                            "stop", "nothing")
            continue  # someone took the lock between our look and our change: look again
        if holder.get("role", "run") != "run" or not isinstance(holder.get("pid"), int):
            wait_released(paths.lock, 1.0)  # a state change in progress; it takes milliseconds
            continue
        pid = holder["pid"]
        if before_signal is not None:
            before_signal(pid)
        if not now:
            signal_pid(pid, signal.SIGTERM)
            return Stop(f"session {paths.id}: asked its runner (pid {pid}) to stop after the current iteration; "
                        f"`tilth wait {paths.id}` waits for it", "asked")
        return Stop(_kill(paths, pid, by), "killed")
    raise TilthError(f"session {paths.id} kept changing hands; try `tilth stop {paths.id}` again")


def _kill(paths: SessionPaths, pid: int, by: str) -> str:
    kill_group(pid)
    if not wait_released(paths.lock, KILL_TIMEOUT):
        raise TilthError(f"session {paths.id}: runner pid {pid} still holds the session {KILL_TIMEOUT:g}s after SIGKILL")
    # The supervisor may have marked the death `crashed` first (with an auto-resume time, which
    # lies a backoff ahead); `stopped` replaces that and clears the auto-resume.
    ended = {SessionState.running, SessionState.crashed, SessionState.queued, SessionState.paused}
    for _ in range(ROUNDS):
        if transitions.mark_stopped(paths, ended, now=True, pid=pid, by=by):
            break
        if load_session(paths).state not in ended:
            break
        wait_released(paths.lock, 1.0)  # the supervisor is recording the runner's death
    return f"session {paths.id}: killed its runner (pid {pid}); stopped (`tilth resume {paths.id}` continues it)"
