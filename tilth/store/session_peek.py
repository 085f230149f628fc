"""session.json read without pydantic, for the read-only views (`tilth status`, `tilth logs`,
`tilth wait`): a process that only looks must not pay pydantic's start-up (~150 ms) to read a
file of twenty fields.

`store/session.py` stays the definition of the format (`SessionRecord`) and the only writer;
this module holds the most recent session and `peek_session`, which checks every field as
strictly as the model would accept it. Anything it is not sure of (bad JSON, a missing or odd field, a value pydantic might
coerce) goes to `session.load_session`, so a damaged file gives exactly the one-line error it
always gave, and a file the model accepts shows exactly what the model reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import orjson

from tilth.core.errors import BadInput
from tilth.store.home import SessionPaths, all_session_ids, session_paths
from tilth.store.session_state import SessionState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tilth.store.session import SessionRecord


@dataclass(frozen=True)
class SessionView:
    """The fields of session.json the views show (`SessionRecord` has them all)."""

    id: str
    repo: str
    branch: str
    worktree: str
    backend: str
    """The backend's short name."""
    created: str
    state: SessionState = SessionState.queued
    reason: str | None = None
    sandbox: str | None = None
    pid: int | None = None
    supervised: bool = False
    start_at: str | None = None
    auto_resumes: int = 0
    auto_resume_at: str | None = None
    paused_until: str | None = None

    @classmethod
    def of(cls, record: SessionRecord) -> SessionView:
        return cls(id=record.id, repo=record.repo, branch=record.branch, worktree=record.worktree,
                   backend=record.backend.name, created=record.created, state=record.state, reason=record.reason,
                   sandbox=record.sandbox, pid=record.pid, supervised=record.supervised, start_at=record.start_at,
                   auto_resumes=record.auto_resumes, auto_resume_at=record.auto_resume_at,
                   paused_until=record.paused_until)


def _str(v: Any) -> bool:
    return type(v) is str


def _opt_str(v: Any) -> bool:
    return v is None or type(v) is str


def _strs(v: Any) -> bool:
    return type(v) is list and all(type(x) is str for x in v)


def _backend(v: Any) -> bool:
    return type(v) is dict and type(v.get("name")) is str and _opt_str(v.get("scenario"))


_STATES = frozenset(s.value for s in SessionState)
FIELDS: dict[str, tuple[Callable[[Any], bool], bool]] = {
    "id": (_str, True), "repo": (_str, True), "base_commit": (_str, True), "branch": (_str, True),
    "worktree": (_str, True), "state": (lambda v: type(v) is str and v in _STATES, False),
    "reason": (_opt_str, False), "backend": (_backend, True), "created": (_str, True), "updated": (_str, True),
    "sandbox": (_opt_str, False), "checks": (_strs, False), "settings": (lambda v: type(v) is dict, False),
    "keys": (_strs, False), "pid": (lambda v: v is None or type(v) is int, False),
    "supervised": (lambda v: type(v) is bool, False), "start_at": (_opt_str, False),
    "resume_requested": (lambda v: type(v) is bool, False),
    "auto_resumes": (lambda v: type(v) is int, False), "auto_resume_at": (_opt_str, False),
    "paused_until": (_opt_str, False),
}
"""Every field of `SessionRecord`, with a check no stricter than the model's and its presence;
`tests/test_status_view.py` keeps the two lists equal."""


def _strict(raw: Any) -> SessionView | None:
    if type(raw) is not dict:
        return None
    for name, (check, required) in FIELDS.items():
        if name in raw:
            if not check(raw[name]):
                return None
        elif required:
            return None
    return SessionView(id=raw["id"], repo=raw["repo"], branch=raw["branch"], worktree=raw["worktree"],
                       backend=raw["backend"]["name"], created=raw["created"],
                       state=SessionState(raw.get("state", "queued")), reason=raw.get("reason"),
                       sandbox=raw.get("sandbox"), pid=raw.get("pid"), supervised=raw.get("supervised", False),
                       start_at=raw.get("start_at"), auto_resumes=raw.get("auto_resumes", 0),
                       auto_resume_at=raw.get("auto_resume_at"), paused_until=raw.get("paused_until"))


def peek_session(paths: SessionPaths) -> SessionView:
    """What `session.load_session` would read, without pydantic when the file is plainly
    well-formed; its BadInput (no such session, damaged file) otherwise."""
    try:
        view = _strict(orjson.loads(paths.session_json.read_bytes()))
    except (OSError, orjson.JSONDecodeError):
        view = None
    if view is not None:
        return view
    from tilth.store.session import load_session  # the model says what is wrong, as it always did

    return SessionView.of(load_session(paths))


def most_recent_session(home: Path | None = None) -> SessionPaths:
    ids = all_session_ids(home)
    if not ids:
        raise BadInput("there are no sessions yet; create one with `tilth start`")
    views = [peek_session(session_paths(i, home)) for i in ids]
    newest = max(views, key=lambda r: (r.created, r.id))
    return session_paths(newest.id, home)
