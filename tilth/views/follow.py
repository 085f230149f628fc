"""`tilth wait` and `tilth logs`: follow a session from its files.

`tilth logs` shows the readable view of `views/readable.Readable` (`everything` for every
event), each event's first line stamped with its time; `last` keeps only the final lines,
read back from the end of events.jsonl so a long session costs no more than a short one.

Both wake on watchfiles changes in the session dir; a short timeout of the watch re-checks
anyway, because one change has no file event: a runner killed with -9 releases its
session lock without writing anything (the supervisor, when it runs, then marks the
session crashed, which is an event).

A crashed session the supervisor will resume by itself (`auto_resume_at` in session.json) has
not ended: `tilth wait` goes on waiting for it, and ends only once it settles otherwise or
auto-resume gives up. Nor has a supervised session paused by a usage limit (the supervisor
resumes it when the limit lifts), nor a foreground run waiting out its pause (it holds the
session); a paused session nobody will resume ends the wait as stopped does. session.json is
read with `store/session_peek.py` (no pydantic), so `tilth logs -n` costs what reading the end
of the journal costs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from tilth.store.events import is_event
from tilth.store.home import SessionPaths
from tilth.store.jsonio import parse_object
from tilth.store.lock import is_locked
from tilth.store.session_peek import peek_session
from tilth.store.session_state import SessionState, effective_state
from tilth.core.clock import utc_now
from tilth.views.readable import Readable
from tilth.views.waiting import HEARTBEAT_S, waiting_text

if TYPE_CHECKING:
    from watchfiles import Change

EXIT_CODES = {SessionState.done: 0, SessionState.failed: 1, SessionState.stopped: 3, SessionState.crashed: 3,
              SessionState.paused: 3, SessionState.waiting: 5}
"""Any other state past queued/running (an archived session) ends the wait with 0."""
EXIT_TIMEOUT = 4
RECHECK_MS = 500
PROGRESS_S = 30.0
"""`tilth wait` says it is still waiting (and for what) this often."""


def settled(paths: SessionPaths) -> SessionState | None:
    """The session's end state, once it has one and no process holds the session any more; a
    crashed session due for auto-resume has not ended, nor has a supervised paused one."""
    record = peek_session(paths)
    state = SessionState(effective_state(paths, record))
    if state in (SessionState.queued, SessionState.running) or is_locked(paths.lock):
        return None
    if state == SessionState.paused and record.supervised:
        return None
    if state == SessionState.crashed and record.state == SessionState.crashed and record.auto_resume_at:
        return None
    if state == SessionState.crashed and record.state == SessionState.running and record.supervised \
            and is_locked(paths.home / "daemon.lock"):
        return None  # a runner just died: the live supervisor records how it ended (and any auto-resume) first
    return state


def _changes(dirs: Iterable[Path], names: tuple[str, ...]) -> Iterator[set[tuple[Change, str]]]:
    """Yield on every relevant change, and at least every RECHECK_MS."""
    from watchfiles import watch  # only a follower pays for it, not `tilth logs -n`

    def relevant(change: Change, path: str) -> bool:
        return Path(path).name in names

    return watch(*dirs, watch_filter=relevant, debounce=100, step=20, rust_timeout=RECHECK_MS,
                 yield_on_timeout=True)


def wait_for(sessions: list[SessionPaths], timeout: float | None, report: Callable[[str], None],
             progress: Callable[[str], None] | None = None, every: float = PROGRESS_S) -> int:
    """Block until every session has settled: the worst exit code (5 > 3 > 1 > 0), or 4 on timeout.
    `progress` is told every `every` seconds which sessions are still awaited, in what state."""
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    next_progress = started + every
    waiting = {paths.id: paths for paths in sessions}
    codes = [0]

    def check() -> bool:
        for sid, paths in list(waiting.items()):
            state = settled(paths)
            if state is not None:
                del waiting[sid]
                codes.append(EXIT_CODES.get(state, 0))
                report(f"session {sid}: {state.value}{_why(paths, state)}")
        return not waiting

    if check():
        return max(codes)
    for _ in _changes([p.dir for p in sessions], ("session.json", "session.lock")):
        if check():
            return max(codes)
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            states = ", ".join(f"{sid} {_waiting_state(p)}" for sid, p in waiting.items())
            report(f"timed out after {timeout:g}s; still waiting for: {states}")
            return EXIT_TIMEOUT
        if progress is not None and now >= next_progress:
            next_progress = now + every
            states = ", ".join(f"{sid} {_waiting_state(p)}" for sid, p in waiting.items())
            progress(f"still waiting after {now - started:.0f}s: {states}")
    return max(codes)


def _why(paths: SessionPaths, state: SessionState) -> str:
    """` (why it ended, in words)` for an end that has a reason: a failure, a stop, a cap."""
    from tilth.views.reasons import session_end

    from tilth.store.rollup import load_rollup

    reason = peek_session(paths).reason
    if not reason or state == SessionState.done:
        return ""
    return f" ({session_end(state.value, reason, load_rollup(paths.events).stopped_by)})"


def _waiting_state(paths: SessionPaths) -> str:
    record = peek_session(paths)
    if record.state == SessionState.crashed and record.auto_resume_at:
        return f"crashed (auto-resume at {record.auto_resume_at})"
    if record.state == SessionState.paused:
        return f"paused (until {record.paused_until or 'now'})"
    return record.state.value


class Tail:
    """Complete lines appended to events.jsonl since the last read (a line being written,
    or a torn one, is left for later or skipped)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        return events_in(data[:end])


def events_in(data: bytes) -> list[dict[str, Any]]:
    rows = (parse_object(raw) for raw in data.splitlines())
    return [row for row in rows if row is not None and is_event(row)]


BACK_BYTES = 64 << 10
CONTEXT_EVENTS = 64
"""Events read before the first one shown: a readable line can depend on the few events just
before it (the channels a prompt was assembled from, a pre_tool refusal)."""


def last_lines(path: Path, count: int, everything: bool) -> tuple[list[str], int, Readable]:
    """The final `count` readable lines, read back from the end in growing blocks, never the
    whole file unless it takes that; the offset after the last complete line; and the view,
    to go on with when following."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return [], 0, Readable(everything)
    with f:
        size = os.fstat(f.fileno()).st_size
        back, before = BACK_BYTES, -1
        while True:
            start = max(0, size - back)
            data = os.pread(f.fileno(), size - start, start)
            end = data.rfind(b"\n") + 1
            first = 0 if start == 0 else data.find(b"\n") + 1
            if start == 0 or 0 < first < end:
                events = events_in(data[first:end])
                view = Readable(everything)
                shown = [stamped(e, view.lines(e)) for e in events]
                total, at = 0, len(shown)
                while at > 0 and total < count:
                    at -= 1
                    total += len(shown[at])
                # Reading further back for context is pointless once it brings no more events.
                if start == 0 or (total >= count and (at >= CONTEXT_EVENTS or len(events) == before)):
                    lines = [line for chunk in shown for line in chunk]
                    return lines[max(0, len(lines) - count):], start + end, view
                before = len(events)
            back *= 4


def stamped(event: dict[str, Any], lines: list[str]) -> list[str]:
    """`HH:MM:SS text`; the continuation lines of a multi-line event are indented under it."""
    ts = event["ts"][11:19]
    return [f"{ts if i == 0 else ' ' * len(ts)} {line}" for i, line in enumerate(lines)]


def logs(paths: SessionPaths, follow: bool, out: Callable[[str], None], last: int | None = None,
         everything: bool = False) -> int:
    """Print the session's readable lines (the final `last` of them, if given); with
    `follow`, keep printing until it has settled."""
    peek_session(paths)
    tail = Tail(paths.events)
    view = Readable(everything)

    def pending() -> list[str]:
        return [line for event in tail.read() for line in stamped(event, view.lines(event))]

    def flush() -> float | None:
        """When it printed (None: nothing new)."""
        lines = pending()
        for line in lines:
            out(line)
        return time.monotonic() if lines else None

    if last is None:
        backlog = pending()
    else:
        backlog, tail.offset, view = last_lines(paths.events, last, everything)
    for line in backlog:
        out(line)
    if not follow:
        return 0
    said = time.monotonic()
    if settled(paths) is None:
        for _ in _changes([paths.dir], ("events.jsonl", "session.json", "session.lock")):
            said = flush() or said
            if settled(paths) is not None:
                break
            if time.monotonic() - said >= HEARTBEAT_S:  # a sign of life through a long call or agent run
                out(heartbeat(view))
                said = time.monotonic()
    flush()
    return 0


def heartbeat(view: Readable) -> str:
    """`HH:MM:SS … waiting on the worker's model gpt-4o-mini, 40 s so far`, or that nothing new happened."""
    now = utc_now()
    waits = [f"{task + ' ' if task else ''}waiting on {waiting_text(w, now)}" for task, w in view.waiting.items()]
    said = "; ".join(waits) if waits else "still running, nothing new in the journal"
    return f"{now.strftime('%H:%M:%S')} … {said}"
