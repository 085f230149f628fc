"""session.json: one session's identity and lifecycle state, validated and written.

`SessionRecord` (`store/session_record.py`) defines the format once; this module validates it
with pydantic (a `TypeAdapter` of that dataclass, so a damaged file is named in one line) and
makes every write. The read-only views read the same class without pydantic
(`store/session_peek.py`); `SessionState` and `effective_state` are `store/session_state.py`'s.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError

from tilth.core.clock import iso
from tilth.core.errors import BadInput
from tilth.store.home import SessionPaths
from tilth.store.jsonio import write_json
from tilth.store.session_record import BackendChoice, SessionRecord
from tilth.store.session_state import SessionState, effective_state

__all__ = ["BackendChoice", "SessionRecord", "SessionState", "effective_state", "load_session", "pause",
           "record_json", "refuse_archived", "save_session", "set_state"]

_ADAPTER: TypeAdapter[SessionRecord] = TypeAdapter(SessionRecord)


def record_json(record: SessionRecord) -> dict[str, Any]:
    """The record as session.json holds it."""
    data: dict[str, Any] = _ADAPTER.dump_python(record, mode="json")
    return data


def load_session(paths: SessionPaths) -> SessionRecord:
    try:
        return _ADAPTER.validate_python(orjson.loads(paths.session_json.read_bytes()))
    except FileNotFoundError:
        raise BadInput(f"no session {paths.id!r} under {paths.home}; see `tilth status`") from None
    except (orjson.JSONDecodeError, ValidationError) as exc:
        raise BadInput(f"{paths.session_json} is damaged: {str(exc).splitlines()[0]}") from None


def save_session(paths: SessionPaths, record: SessionRecord) -> None:
    record.updated = iso()
    if record.state != SessionState.paused:
        record.paused_until = None  # a pause's end never outlives the pause
    write_json(paths.session_json, record_json(record))


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

