"""What the actions share: what one returns (`Acted`), who may act (`ACTORS`), the local session acted
on, and the `acted` event every action on a local session writes, so a report can say who answered,
noted, stopped, resumed or started it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilth.core.errors import BadInput
from tilth.store.actors import ACTORS
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths, check_session_id, session_paths

document(
    {
        "acted": ("a person acted on the session (tilth/actions); data: action (answer|note|stop|resume|start|"
                  "cleanse|plan), by (cli|dashboard), and what the action adds: note (answer, note: the record's "
                  "id), now and pid (stop: the runner told, written before it is signalled)", "action by note now pid"),
    }
)


@dataclass(frozen=True)
class Acted:
    """What an action did: `what` is one sentence for a person; `more` the lines a terminal shows
    after it (how to follow the session); `warnings` what the person should know (the CLI says them
    on stderr); `events` the event types the action wrote, in order (none for a dispatched session,
    whose journal is on the worker)."""

    session_id: str
    what: str
    events: tuple[str, ...] = ()
    more: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    dispatched: bool = False

    @property
    def lines(self) -> tuple[str, ...]:
        return (self.what, *self.more)


def check_by(by: str) -> str:
    if by not in ACTORS:
        raise BadInput(f"unknown actor {by!r}: an action is taken by one of {', '.join(ACTORS)}")
    return by


def changeable(home: Path, session_id: str, archived_ok: bool = False) -> tuple[SessionPaths, Any]:
    """A local session a person may change: (paths, record); an archived one is refused unless
    `archived_ok` (stopping one says there is nothing to stop)."""
    from tilth.store.session import load_session, refuse_archived

    paths = session_paths(check_session_id(session_id), home)
    record = load_session(paths)  # no such session, or a damaged one: its one line
    if not archived_ok:
        refuse_archived(record)
    return paths, record


def record_act(paths: SessionPaths, action: str, by: str, task: str | None = None, *, note: str | None = None,
               now: bool | None = None, pid: int | None = None) -> str:
    """The `acted` event (appended in one write, so it is safe beside a runner's own appends)."""
    told: dict[str, Any] = {**({"note": note} if note is not None else {}), **({"now": now} if now is not None else {}),
                            **({"pid": pid} if pid is not None else {})}
    EventLog(paths.events).emit("acted", task, action=action, by=by, **told)
    return "acted"


def only_parked(session_id: str, parked: list[str]) -> str:
    """The task an answer that names none is for: the one parked task."""
    if len(parked) == 1:
        return parked[0]
    if not parked:
        raise BadInput(f"no task of session {session_id} is waiting for an answer")
    raise BadInput(f"session {session_id} has {len(parked)} parked tasks ({', '.join(parked)}); name the one "
                   "you answer")
