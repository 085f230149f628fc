"""Where a session lives, decided once: `locate(home, id)` returns a `Place` with the same operations for
a session this machine has (`Here`) and for one a worker runs through the broker (`remote.Dispatched`):
answer, note, stop, resume, its status, its logs and `tilth wait`. The actions a person takes on one
session (`answer_question`, `leave_note`, `stop_session`, `resume_session`) are a `locate` and one of
them, and `tilth status/logs/wait <id>` and the dashboard read through them, so no caller asks which
kind of session it has. Nothing heavy is imported here: `tilth status <id>` and `tilth logs` locate too."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from tilth.actions.acted import check_by

if TYPE_CHECKING:
    from tilth.actions.acted import Acted
    from tilth.actions.remote import Dispatched
    from tilth.store.home import SessionPaths

Say = Callable[[str], None]


class Place(Protocol):
    """What a session offers wherever it lives; both kinds are held to it (`KINDS`)."""

    id: str
    dispatched: bool
    """A worker runs it (the dashboard draws its page from what the broker holds)."""

    @property
    def known(self) -> bool:
        """The session is there (a `Here` of an unknown id is not: its operations say "no session")."""

    def answer(self, text: str, *, by: str, task: str | None = None) -> Acted: ...
    def note(self, text: str, *, by: str, task: str | None = None) -> Acted: ...
    def stop(self, *, by: str, now: bool = False) -> Acted: ...
    def resume(self, *, by: str, reload_settings: bool = False, foreground: bool = False) -> Acted: ...
    def status(self, as_json: bool) -> str: ...
    def logs(self, say: Say, *, follow: bool = False, everything: bool = False, last: int | None = None) -> int: ...
    def wait(self, timeout: float | None, say: Say, tell: Say) -> int: ...


def locate(home: Path, session_id: str) -> Here | Dispatched:
    """The session this machine has, else the one the broker knows, else this machine's (unknown: what
    is done to it says there is no such session). A bad id, or a broker that does not answer, is a
    BadInput."""
    from tilth.store.home import check_session_id, session_paths

    paths = session_paths(check_session_id(session_id), home)
    if not paths.session_json.is_file():
        from tilth.actions.remote import look_up

        if found := look_up(home, session_id):
            return found
    return Here(paths)


class Here:
    """A session with its directory on this machine."""

    dispatched = False

    def __init__(self, paths: SessionPaths):
        self.paths, self.id = paths, paths.id

    @property
    def known(self) -> bool:
        return self.paths.session_json.is_file()

    def answer(self, text: str, *, by: str, task: str | None = None) -> Acted:
        from tilth.actions.answering import answer_here

        return answer_here(self.paths.home, self.id, text, by=by, task=task)

    def note(self, text: str, *, by: str, task: str | None = None) -> Acted:
        from tilth.actions.noting import note_here

        return note_here(self.paths.home, self.id, text, by=by, task=task)

    def stop(self, *, by: str, now: bool = False) -> Acted:
        from tilth.actions.stopping import stop_here

        return stop_here(self.paths.home, self.id, by=by, now=now)

    def resume(self, *, by: str, reload_settings: bool = False, foreground: bool = False) -> Acted:
        from tilth.actions.resuming import resume_here

        return resume_here(self.paths.home, self.id, by=by, reload_settings=reload_settings, foreground=foreground)

    def status(self, as_json: bool) -> str:
        """`tilth status <id>` (`--json`), read without pydantic."""
        from tilth.views.status_data import session_summary

        summary = session_summary(self.paths, with_commits=True)
        if as_json:
            import orjson

            return orjson.dumps(summary).decode()
        from tilth.views.status import render_one

        return render_one(summary)

    def logs(self, say: Say, *, follow: bool = False, everything: bool = False, last: int | None = None) -> int:
        from tilth.views.follow import logs

        return logs(self.paths, follow, say, last=last, everything=everything)

    def wait(self, timeout: float | None, say: Say, tell: Say) -> int:
        return wait_here([self.paths], timeout, say, tell)


if TYPE_CHECKING:
    KINDS: tuple[type[Place], ...] = (Here, Dispatched)


def wait_here(sessions: list[SessionPaths], timeout: float | None, say: Say, tell: Say) -> int:
    """`tilth wait` on sessions of this machine: until every one has settled (`views/follow.wait_for`),
    said first when one waits on a supervisor that is not running."""
    from tilth.daemon import control
    from tilth.store.session import SessionState, load_session
    from tilth.views.follow import wait_for

    records = [load_session(p) for p in sessions]
    queued = [r.id for r in records if r.state == SessionState.queued]
    paused = [r.id for r in records if r.state == SessionState.paused and r.supervised]
    waiting = [f"{what} {', '.join(ids)}" for what, ids in (("queued", queued), ("paused", paused)) if ids]
    if waiting and sessions and control.running_pid(sessions[0].home) is None:
        tell(f"tilth: no supervisor is running, so {' and '.join(waiting)} will not start; `tilth daemon` starts one")
    return wait_for(sessions, timeout, say, progress=lambda line: tell(f"tilth: {line}"))


def answer_question(home: Path, session_id: str, text: str, *, by: str = "cli", task: str | None = None) -> Acted:
    """`tilth answer`: answer the question task `task` is parked on (None: the session's one parked task)."""
    check_by(by)
    return locate(home, session_id).answer(text, by=by, task=task)


def leave_note(home: Path, session_id: str, text: str, *, by: str = "cli", task: str | None = None) -> Acted:
    """`tilth note`: leave `text` for every later task of the session (or only for `task`)."""
    from tilth.actions.noting import checked_note

    check_by(by)
    checked_note(text)  # an empty note is said before the session is looked up
    return locate(home, session_id).note(text, by=by, task=task)


def stop_session(home: Path, session_id: str, *, by: str = "cli", now: bool = False) -> Acted:
    """`tilth stop`: after the current iteration, or with `now` at once (a local runner killed)."""
    check_by(by)
    return locate(home, session_id).stop(by=by, now=now)


def resume_session(home: Path, session_id: str, *, by: str = "cli", reload_settings: bool = False,
                   foreground: bool = False) -> Acted:
    """`tilth resume`: handed to the supervisor (or a worker); with `foreground` a local session's settings
    are recorded but it is left for the caller to run in its own process."""
    check_by(by)
    return locate(home, session_id).resume(by=by, reload_settings=reload_settings, foreground=foreground)

