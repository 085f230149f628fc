"""The dashboard's live streams (server-sent events). Each stream polls files it reads anyway
and sends only what changed, so a session that ends, a supervisor that restarts or a session
dir that comes or goes is just another change; a stream ends only when its browser goes.

  state  the page's fragments by element id (`web/pages.py`), the ones that changed since the
         last send; a browser that reconnects gets them all again
  lines  the readable event lines (`views/readable.Readable`): the last N, read back from the end
         of events.jsonl (`views/follow.last_lines`), then the complete lines appended since;
         the SSE id is the byte offset, so a reconnecting browser resumes where it was
  reset  events.jsonl was replaced or truncated: the lines shown are gone; a fresh tail follows

A dispatched session (`web/dispatched.py`) has the same two streams from the broker: its state hash
read again every second, and the events its worker relayed (`relayed_stream`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, AsyncGenerator, Callable

from tilth.store.home import SessionPaths
from tilth.views.follow import events_in, last_lines, stamped
from tilth.views.readable import Readable
from tilth.web import data, forms, overview, pages

if TYPE_CHECKING:
    from tilth.actions.remote import Dispatched

STATE_EVERY_S = 1.0
LOG_EVERY_S = 0.4
KEEPALIVE_S = 15.0
BACKLOG_LINES = 300
READ_BYTES = 1 << 20
"""At most this much of the journal is read per poll: a burst is sent over a few polls."""
OFFSET = re.compile(r"^[0-9]{1,18}$")
"""A `Last-Event-ID` this stream sent (a byte offset); anything else starts from the end again."""
STREAM_ID = re.compile(r"^[0-9]{1,20}-[0-9]{1,20}$")
"""A broker stream entry id: the only `Last-Event-ID` a dispatched session's stream resumes after."""


def message(event: str, payload: object, event_id: str | None = None) -> bytes:
    text = json.dumps(payload, separators=(",", ":"))  # one line: JSON escapes every newline
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"retry: 2000\n{head}event: {event}\ndata: {text}\n\n".encode()


KEEPALIVE = b": keepalive\n\n"


Stopping = Callable[[], bool]
"""True once the server is stopping: every stream then ends at its next poll."""


async def state_stream(render: Callable[[], dict[str, str]], stopping: Stopping) -> AsyncGenerator[bytes, None]:
    """Every STATE_EVERY_S: the fragments that changed (all of them first)."""
    sent: dict[str, str] = {}
    quiet_since = time.monotonic()
    while not stopping():
        try:
            parts = await asyncio.to_thread(render)
        except Exception as exc:  # a file changing under a read: the page keeps what it has, the stream goes on
            print(f"tilth serve: {data.one_line(exc)}", file=sys.stderr, flush=True)
            parts = sent
        changed = {k: v for k, v in parts.items() if sent.get(k) != v}
        if changed:
            sent.update(changed)
            quiet_since = time.monotonic()
            yield message("state", changed)
        elif time.monotonic() - quiet_since >= KEEPALIVE_S:
            quiet_since = time.monotonic()
            yield KEEPALIVE
        await asyncio.sleep(STATE_EVERY_S)


def overview_parts(home: Path) -> dict[str, str]:
    """The first page's fragments: "needs you", the sessions here, the dispatched ones (`web/dispatched.py`)."""
    from tilth.web import dispatched

    summaries, remote = data.overview(home), dispatched.listing(home)
    shown = dispatched.rows(home, remote)
    return {"sessions": overview.sessions_rows(summaries) if summaries or not shown else "",
            "needs": overview.needs_you(data.needs_you(home, summaries), dispatched.needs(remote)),
            "dispatched": shown}


class SessionParts:
    """The session page's fragments, the costly ones (ledger, commits, files) rebuilt only when
    the files they come from changed."""

    def __init__(self, paths: SessionPaths, csrf: str):
        self.paths, self.csrf = paths, csrf
        self.cache: dict[str, tuple[object, str]] = {}

    def _cached(self, name: str, stamp: object, build: Callable[[], str]) -> str:
        hit = self.cache.get(name)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        html = build()
        self.cache[name] = (stamp, html)
        return html

    def _text(self, name: str) -> Callable[[], str]:
        """report.md or transcript.md, as the page shows it."""
        return lambda: pages.text(data.text_file(self.paths, name), f"no {name} yet", name == "transcript.md")

    def __call__(self) -> dict[str, str]:
        paths = self.paths
        s = data.summary(paths)
        task_list = s.get("tasks") or []
        titles = {t["id"]: t["title"] for t in task_list}
        events = data.file_stamp(paths, "events.jsonl")
        return {
            "head": pages.head(s), "meters": pages.meters(s), "tasks": pages.tasks(s),
            "questions": forms.answer_forms(paths.id, s.get("questions") or [], self.csrf),
            "act": forms.controls(paths.id, s, self.csrf),
            "details": self._cached("details", data.file_stamp(paths, "prd.json"),
                                    lambda: pages.task_details(data.task_details(paths))),
            "ledger": self._cached("ledger", (data.ledger_stamp(paths), tuple(titles)),
                                   lambda: pages.ledger(data.ledger(paths, list(titles)), titles)),
            "commits": self._cached("commits", (events, data.file_stamp(paths, "session.json")),
                                    lambda: pages.commits(paths.id, data.commits(paths))),
            **{name.split(".")[0]: self._cached(name, data.file_stamp(paths, name), self._text(name))
               for name in data.TEXT_FILES},
        }


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
        return st.st_ino, st.st_size
    except OSError:
        return None


async def log_stream(paths: SessionPaths, resume_at: str | None, stopping: Stopping) -> AsyncGenerator[bytes, None]:
    """The session's readable lines from the end of events.jsonl, then as they are appended."""
    path = paths.events
    found = _identity(path)
    asked = int(resume_at) if resume_at and OFFSET.match(resume_at) else None
    view = Readable()
    if asked is None or found is None or asked > found[1]:
        lines, offset, view = await asyncio.to_thread(last_lines, path, BACKLOG_LINES, False)
        yield message("lines", lines, str(offset))
    else:
        offset = asked
    inode = found[0] if found else None
    quiet_since = time.monotonic()
    while not stopping():
        await asyncio.sleep(LOG_EVERY_S)
        now = _identity(path)
        if now is not None and (now[1] < offset or (inode is not None and now[0] != inode)):
            yield message("reset", None)  # replaced or truncated (the session was reset and made again)
            lines, offset, view = await asyncio.to_thread(last_lines, path, BACKLOG_LINES, False)
            inode = now[0]
            yield message("lines", lines, str(offset))
            continue
        if now is None or now[1] == offset:
            if time.monotonic() - quiet_since >= KEEPALIVE_S:
                quiet_since = time.monotonic()
                yield KEEPALIVE
            continue
        inode = now[0]
        chunk = await asyncio.to_thread(_read, path, offset)
        end = chunk.rfind(b"\n") + 1
        if not end:
            if len(chunk) == READ_BYTES:
                offset += len(chunk)  # no line is this long: skip the garbage, as every reader does
            continue  # a line being written: next poll
        offset += end
        lines = [line for event in events_in(chunk[:end]) for line in stamped(event, view.lines(event))]
        quiet_since = time.monotonic()
        yield message("lines", lines, str(offset))


def _read(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return os.pread(f.fileno(), READ_BYTES, offset)
    except OSError:
        return b""


async def relayed_stream(place: Dispatched, resume_at: str | None, stopping: Stopping) -> AsyncGenerator[bytes, None]:
    """A dispatched session's `lines`: the readable lines of the events its worker relayed to the broker,
    the last `BACKLOG_LINES`, then the new ones; the SSE id is the broker's stream entry id (checked), so
    a reconnecting browser resumes after it."""
    from tilth.actions.remote_read import Relayed

    relayed = Relayed(place.broker, place.id, stamp=True)
    backlog = True
    if resume_at and STREAM_ID.match(resume_at):
        relayed.after, backlog = resume_at, False
    quiet_since = time.monotonic()
    while not stopping():
        lines = await asyncio.to_thread(relayed.read, quiet=True)
        mark = relayed.after if STREAM_ID.match(relayed.after) else None
        if backlog:
            backlog = False
            yield message("lines", lines[-BACKLOG_LINES:], mark)
        elif lines:
            quiet_since = time.monotonic()
            yield message("lines", lines, mark)
        elif time.monotonic() - quiet_since >= KEEPALIVE_S:
            quiet_since = time.monotonic()
            yield KEEPALIVE
        await asyncio.sleep(LOG_EVERY_S)
