"""A session's state: `SessionState` and `effective_state` (what a view reports), shared by
`session.py` (the model) and `session_peek.py` (the pydantic-free reader)."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from tilth.store.home import SessionPaths
from tilth.store.lock import is_locked


class SessionState(StrEnum):
    """queued -> running -> done | failed | stopped | crashed; every end but `done` is resumable;
    `archived` after `tilth cleanse` removed the branch and the worktree. running -> paused when
    the agent hit a usage limit (`paused_until`): a foreground run waits for it in-process, holding
    the session lock; a supervised runner exits and the supervisor queues the session again once
    that time has come (`tilth resume` sooner, `tilth stop` never). `waiting`: nothing is left to
    run but parked tasks (and tasks that depend on them): the session waits for `tilth answer`,
    which queues it again."""

    queued = "queued"
    running = "running"
    done = "done"
    failed = "failed"
    stopped = "stopped"
    crashed = "crashed"
    paused = "paused"
    waiting = "waiting"
    archived = "archived"


class HasState(Protocol):
    """`session_record.SessionRecord` (or any record with a state)."""

    state: SessionState


def effective_state(paths: SessionPaths, record: HasState) -> str:
    """A session marked running whose lock nobody holds was killed: report it as crashed. A
    paused one stays paused, locked (a foreground run waiting in-process) or not (a supervised
    runner exits while paused)."""
    if record.state == SessionState.running and not is_locked(paths.lock):
        return SessionState.crashed.value
    return record.state.value
