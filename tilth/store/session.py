"""session.json: one session's identity and lifecycle state."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from tilth.core.clock import iso
from tilth.core.errors import BadInput
from tilth.store.home import SessionPaths, all_session_ids, session_paths
from tilth.store.jsonio import write_json
from tilth.store.lock import is_locked


class SessionState(StrEnum):
    """queued -> running -> done | failed | stopped | crashed; every end but `done` is resumable."""

    queued = "queued"
    running = "running"
    done = "done"
    failed = "failed"
    stopped = "stopped"
    crashed = "crashed"
    archived = "archived"


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
    """Why the last run ended `stopped`, `crashed` or `failed` (one line); cleared when a run starts."""
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


def load_session(paths: SessionPaths) -> SessionRecord:
    try:
        return SessionRecord.model_validate(orjson.loads(paths.session_json.read_bytes()))
    except FileNotFoundError:
        raise BadInput(f"no session {paths.id!r} under {paths.home}; see `tilth status`") from None
    except (orjson.JSONDecodeError, ValidationError) as exc:
        raise BadInput(f"{paths.session_json} is damaged: {str(exc).splitlines()[0]}") from None


def save_session(paths: SessionPaths, record: SessionRecord) -> None:
    record.updated = iso()
    write_json(paths.session_json, record.model_dump(mode="json"))


def set_state(paths: SessionPaths, state: SessionState, pid: int | None = None,
              reason: str | None = None) -> SessionRecord:
    """Every state change carries its own reason (none unless given), so an old one never lingers."""
    record = load_session(paths)
    record.state = state
    record.pid = pid
    record.reason = reason
    save_session(paths, record)
    return record


def find_session(session_id: str | None) -> tuple[SessionPaths, SessionRecord]:
    """The named session, or the most recent one, with its record."""
    paths = session_paths(session_id) if session_id else most_recent_session()
    return paths, load_session(paths)


def refuse_archived(record: SessionRecord) -> None:
    if record.state == SessionState.archived:
        raise BadInput(f"session {record.id} is archived (its branch was retired); start a new session instead")


def most_recent_session(home: Path | None = None) -> SessionPaths:
    ids = all_session_ids(home)
    if not ids:
        raise BadInput("there are no sessions yet; create one with `tilth start`")
    records = [load_session(session_paths(i, home)) for i in ids]
    newest = max(records, key=lambda r: (r.created, r.id))
    return session_paths(newest.id, home)


def effective_state(paths: SessionPaths, record: SessionRecord) -> str:
    """A session marked running whose lock nobody holds was killed: report it as crashed."""
    if record.state == SessionState.running and not is_locked(paths.lock):
        return SessionState.crashed.value
    return record.state.value
