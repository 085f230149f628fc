"""Which session a command means: the one named (`session_command` declares its `id`), or the most
recent, said on stderr."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (~5 ms of a cold start)
if TYPE_CHECKING:
    import argparse
    from typing import Callable

    from tilth.store.home import SessionPaths
    from tilth.store.session import SessionRecord

ID_HELP = "session id (default: the most recent)"


def session_command(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str,
                    handler: Callable[[argparse.Namespace], int],
                    id_help: str | None = None) -> argparse.ArgumentParser:
    """A command on one session: its `id` may be left out (the most recent), unless `id_help` says what it names."""
    parser = sub.add_parser(name, help=help)
    if id_help is None:
        parser.add_argument("id", nargs="?", help=ID_HELP)
    else:
        parser.add_argument("id", help=id_help)
    parser.set_defaults(handler=handler)
    return parser


def pick_paths(session_id: str | None) -> SessionPaths:
    """The named session (which must exist); without a name the most recent one, and one stderr
    line saying which. Reads session.json without pydantic (`store/session_peek.py`), for the
    commands that only look (`tilth logs`)."""
    from tilth.store.home import session_paths
    from tilth.store.session_peek import most_recent_session, peek_session

    if session_id:
        paths = session_paths(session_id)
        peek_session(paths)  # no such session, or a damaged one: its one line
        return paths
    paths = most_recent_session()
    print(f"tilth: using the most recent session {paths.id}", file=sys.stderr, flush=True)
    return paths


def pick_session(session_id: str | None) -> tuple[SessionPaths, SessionRecord]:
    """`pick_paths`, with the session's record (pydantic: for the commands that change it)."""
    from tilth.store.session import load_session

    paths = pick_paths(session_id)
    return paths, load_session(paths)
