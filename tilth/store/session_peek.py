"""session.json read without pydantic, for the read-only views (`tilth status`, `tilth logs`,
`tilth wait`): the most recent session and `peek_session`, which reads the one definition of the
format (`store/session_record.SessionRecord`) strictly. Anything it is not sure of (bad JSON, a
missing or odd field, a value pydantic might coerce) goes to `session.load_session`, so a damaged
file gives exactly the one-line error it always gave, and a file the model accepts shows exactly
what the model reads.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from tilth.core.errors import BadInput
from tilth.store.home import SessionPaths, all_session_ids, session_paths
from tilth.store.session_record import SessionRecord, read_record


def peek_session(paths: SessionPaths) -> SessionRecord:
    """What `session.load_session` would read, without pydantic when the file is plainly
    well-formed; its BadInput (no such session, damaged file) otherwise."""
    try:
        record = read_record(orjson.loads(paths.session_json.read_bytes()))
    except (OSError, orjson.JSONDecodeError):
        record = None
    if record is None:
        from tilth.store.session import load_session  # the model says what is wrong, as it always did

        record = load_session(paths)
    return record


def most_recent_session(home: Path | None = None) -> SessionPaths:
    ids = all_session_ids(home)
    if not ids:
        raise BadInput("there are no sessions yet; create one with `tilth start`")
    views = [peek_session(session_paths(i, home)) for i in ids]
    newest = max(views, key=lambda r: (r.created, r.id))
    return session_paths(newest.id, home)
