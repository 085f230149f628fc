"""Which session a command means: the one named, or the most recent, said on stderr."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (~5 ms of a cold start)
if TYPE_CHECKING:
    from tilth.store.home import SessionPaths
    from tilth.store.session import SessionRecord

ID_HELP = "session id (default: the most recent)"


def pick_session(session_id: str | None) -> tuple[SessionPaths, SessionRecord]:
    """The named session; without a name the most recent one, and one stderr line saying which."""
    from tilth.store.session import find_session  # pydantic: only once a command needs a session

    paths, record = find_session(session_id)
    if not session_id:
        print(f"tilth: using the most recent session {paths.id}", file=sys.stderr, flush=True)
    return paths, record
