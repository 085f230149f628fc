"""session.json's format, defined once: `SessionRecord`, a stdlib dataclass that the writer and
every reader use. `store/session.py` validates and writes it with pydantic (a `TypeAdapter` of
this very class); the read-only views read it here without pydantic (`read_record`), since a
process that only looks must not pay pydantic's start-up (~150 ms) to read twenty fields.

`read_record` is strict (`store/strict.py`: an int is an int, never `"3"`, `3.0` or `True`); what
it is not sure of is None, and the caller asks the pydantic model, which then reads it exactly as
it always did or names what is wrong. A field added here is read by both at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilth.store.session_state import SessionState
from tilth.store.strict import Odd, dict_of, plainly, strict_record


@dataclass
class BackendChoice:
    """Which agent backend the session runs with."""

    name: str
    """Short backend name: `scripted` (tests and offline demo only) or a real model backend."""
    scenario: str | None = None
    """For `scripted`: the scenario file copied into the session dir."""


@dataclass(kw_only=True)
class SessionRecord:
    id: str
    repo: str
    """Absolute path of the user's repository."""
    base_commit: str
    """Full sha the session branch started from."""
    branch: str
    """`session/<id>`, never the user's current branch."""
    worktree: str
    """Absolute path of the git worktree (outside the session dir)."""
    state: SessionState = SessionState.queued
    reason: str | None = None
    """Why the last run ended `stopped`, `crashed` or `failed`, or why it is `paused` (`usage limit:
    <the agent's words>`); one line, cleared when a run starts."""
    backend: BackendChoice
    created: str
    updated: str
    sandbox: str | None = None
    """The confinement in force for the last run: `bwrap` or `off` (unconfined)."""
    checks: list[str] = field(default_factory=list)
    """Commands run in the worktree before each evaluation (`tilth start --check`)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The non-secret settings resolved by `tilth start` (or the last `tilth resume`) in the user's
    shell: every run uses these, whatever the environment of the process running it."""
    keys: list[str] = field(default_factory=list)
    """Which key settings (`api_key`, `evaluator_api_key`) the session was started with, by name
    only: a runner without one of them stops with a line saying where to set it."""
    pid: int | None = None
    """The process that last ran the session; liveness is judged by the session lock, not this."""
    supervised: bool = False
    """Handed to the supervisor (`tilth start` without --foreground, `tilth resume`): only such
    sessions are taken from the queue, so a foreground session is never run twice."""
    start_at: str | None = None
    """`tilth start --at`: the supervisor starts the queued session no earlier than this (UTC)."""
    resume_requested: bool = False
    """`tilth resume` queued it: the supervisor runs it as a resume (the failed tasks retried
    from their placeholders) and clears this just before it spawns the runner."""
    auto_resumes: int = 0
    """Times in a row the supervisor resumed this session by itself after its runner crashed;
    back to 0 when a run ends a task or a person resumes or starts it (`auto_resume_attempts`)."""
    auto_resume_at: str | None = None
    """The crashed session will be resumed by the supervisor at this time (UTC, ms); None when it
    will not be (not supervised, auto-resume off or given up, or not crashed)."""
    paused_until: str | None = None
    """The paused session may run again from this time (UTC, ISO-8601), when the agent's usage
    limit lifts; None in every other state (every state write clears it)."""


def _strs(v: Any) -> list[str]:
    if type(v) is not list or any(type(x) is not str for x in v):
        raise Odd
    return v


def _state(v: Any) -> SessionState:
    if type(v) is not str:
        raise Odd
    try:
        return SessionState(v)
    except ValueError:
        raise Odd from None


_read = strict_record(SessionRecord, {"backend": strict_record(BackendChoice), "state": _state, "checks": _strs,
                                      "keys": _strs, "settings": dict_of(lambda v: v)})


def read_record(raw: Any) -> SessionRecord | None:
    """The record when `raw` (parsed JSON) is plainly one; None when pydantic should judge it."""
    record: SessionRecord | None = plainly(_read, raw)
    return record
