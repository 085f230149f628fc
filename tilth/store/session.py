"""session.json: one session's identity and lifecycle state.

`SessionRecord` defines the format, and every write goes through it. The read-only views read it
with `store/session_peek.py` (no pydantic); `SessionState` and `effective_state`, shared by both,
are `store/session_state.py`'s.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from tilth.core.clock import iso
from tilth.core.errors import BadInput
from tilth.store.home import SessionPaths
from tilth.store.jsonio import write_json
from tilth.store.session_state import SessionState, effective_state

__all__ = ["BackendChoice", "SessionRecord", "SessionState", "effective_state", "load_session", "pause",
           "refuse_archived", "save_session", "set_state"]


class BackendChoice(BaseModel):
    """Which agent backend the session runs with."""

    name: str
    """Short backend name: `scripted` (tests and offline demo only) or a real model backend."""
    scenario: str | None = None
    """For `scripted`: the scenario file copied into the session dir."""


class SessionRecord(BaseModel):
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
    checks: list[str] = []
    """Commands run in the worktree before each evaluation (`tilth start --check`)."""
    settings: dict[str, Any] = {}
    """The non-secret settings resolved by `tilth start` (or the last `tilth resume`) in the user's
    shell: every run uses these, whatever the environment of the process running it."""
    keys: list[str] = []
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
    """`tilth resume` queued it: the supervisor runs it as a resume (soft-unwinds a FAILED
    placeholder at HEAD) and clears this just before it spawns the runner."""
    auto_resumes: int = 0
    """Times in a row the supervisor resumed this session by itself after its runner crashed;
    back to 0 when a run ends a task or a person resumes or starts it (`auto_resume_attempts`)."""
    auto_resume_at: str | None = None
    """The crashed session will be resumed by the supervisor at this time (UTC, ms); None when it
    will not be (not supervised, auto-resume off or given up, or not crashed)."""
    paused_until: str | None = None
    """The paused session may run again from this time (UTC, ISO-8601), when the agent's usage
    limit lifts; None in every other state (every state write clears it)."""


def load_session(paths: SessionPaths) -> SessionRecord:
    try:
        return SessionRecord.model_validate(orjson.loads(paths.session_json.read_bytes()))
    except FileNotFoundError:
        raise BadInput(f"no session {paths.id!r} under {paths.home}; see `tilth status`") from None
    except (orjson.JSONDecodeError, ValidationError) as exc:
        raise BadInput(f"{paths.session_json} is damaged: {str(exc).splitlines()[0]}") from None


def save_session(paths: SessionPaths, record: SessionRecord) -> None:
    record.updated = iso()
    if record.state != SessionState.paused:
        record.paused_until = None  # a pause's end never outlives the pause
    write_json(paths.session_json, record.model_dump(mode="json"))


def set_state(paths: SessionPaths, state: SessionState, pid: int | None = None,
              reason: str | None = None) -> SessionRecord:
    """Every state change carries its own reason (none unless given), so an old one never lingers;
    nor does a pause's `paused_until` (`save_session` clears it in any state but paused)."""
    record = load_session(paths)
    record.state = state
    record.pid = pid
    record.reason = reason
    save_session(paths, record)
    return record


def pause(paths: SessionPaths, until: str, reason: str) -> SessionRecord:
    """The runner's agent hit a usage limit: `paused` until `until` (UTC, ISO-8601), `reason`
    saying why (`usage limit: <the agent's words>`). A supervised session is queued again by the
    supervisor once that time has come; a paused supervised session never counts as a crash."""
    record = load_session(paths)
    record.state = SessionState.paused
    record.pid = None
    record.reason = reason
    record.paused_until = until
    save_session(paths, record)
    return record


def refuse_archived(record: SessionRecord) -> None:
    if record.state == SessionState.archived:
        raise BadInput(f"session {record.id} is archived (its branch was retired); start a new session instead")

