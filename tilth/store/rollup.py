"""summary.json: events.jsonl folded into the facts `tilth status` shows, so it answers without
re-reading the journal.

`fold(rollup, event)` is pure; `rebuild(log)` folds the whole log. `log_offset` is how many
bytes of events.jsonl are folded, always at a line end, and `log_fingerprint` hashes the
bytes around it, so a log that was replaced or truncated is noticed and folded again from
byte 0. Only newline-terminated lines are folded: a torn last line waits (the next append
ends it, and it is then skipped as garbage like every reader skips it). So `load_rollup`
equals `rebuild` of the same log, whatever summary.json held.

The runner keeps it (`Keeper`, through `keep_rollup(log)`) and writes it only at coarse
points; a reader folds the few lines written since, and never writes.

No pydantic here: `tilth status` reads this file and must not pay pydantic's start-up. The types
are stdlib dataclasses and `read_saved` checks every field against its annotation, strictly (an
int is an int, not `"3"` or `3.0`); anything unexpected makes the file unusable and the reader
folds from byte 0, as for a missing file. A field missing from the file takes its default (so a
field added later reads from an older file as its default; one whose default could be wrong for
an older file needs VERSION raised).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson

try:  # CPython's own SHA-1, the same digest: hashlib would load OpenSSL, ~5 ms of every `tilth status`
    from _sha1 import sha1
except ImportError:  # another interpreter
    from hashlib import sha1

from tilth.store.calls import Counted, Totals, is_dollars
from tilth.store.events import EventLog, is_event
from tilth.store.jsonio import parse_object, write_atomic
from tilth.store.strict import dict_of, number_or_none, strict_record

VERSION = 3
FILE_NAME = "summary.json"
EDGE_BYTES = 256
READ_BYTES = 8 << 20
CONCERN_CHARS = 500
OUTSIDE_RUN = {"session_created", "session_queued", "session_launched", "session_crashed", "session_stopped", "acted",
               "session_unpaused", "doctor_repaired", "doctor_crashed"}
"""Written by `tilth start`, `tilth stop`, a person's action (`acted`), `tilth doctor --fix` or the supervisor, never by
a runner: they do not extend a run (a crash noticed an hour later did not run for that hour, nor did a run paused by a
usage limit run while it waited). `views/tally.running_seconds` too."""
SAVE_ALWAYS = {"session_started", "session_end", "session_report"}
SAVE_AT_TASK_END = {"task_done", "task_failed", "task_parked"}
TAIL_BYTES = 64 << 10
"""summary.json holds every task seen, so it grows with the session. At a task's end it is saved
only once the log has grown past the last save by its own size (and at least TAIL_BYTES): the
cost of saving stays flat per task however long the session, and the tail a reader folds stays
short. Never per event: that is the cost it saves."""
STATES = {"session_created": "created", "session_queued": "queued", "session_started": "running",
          "session_crashed": "crashed", "session_stopped": "stopped", "session_unpaused": "queued",
          "doctor_crashed": "crashed"}


@dataclass
class TaskRoll(Totals):
    """A task's facts; its tokens and cost are `Totals` of its model calls."""

    status: str = "pending"
    """As events tell it: in_progress, done, failed, requeued, or a status set by reconciliation."""
    iteration: int | None = None
    attempts: int | None = None
    """The iteration of the last verdict."""
    verdict: str | None = None
    category: str | None = None
    concern: str | None = None
    """Whitespace-flattened, at most CONCERN_CHARS."""
    sha: str | None = None
    evaluator_calls: int = 0
    wall_s: float = 0.0
    """Running time while it was the current task, spans closed so far."""


@dataclass
class Clock:
    """What `views/tally.running_seconds` needs, so elapsed time is known without the log."""

    closed_s: float = 0.0
    open_since: str | None = None
    last_ts: str | None = None
    ran: bool = False

    def seconds(self, now: datetime | None = None) -> float | None:
        total = self.closed_s
        if self.open_since is not None:
            try:
                total += ((now or _ts(self.last_ts)) - _ts(self.open_since)).total_seconds()
            except ValueError:
                pass
        return max(0.0, total) if self.ran else None


@dataclass
class Rollup:
    version: int = VERSION
    log_offset: int = 0
    log_fingerprint: str = ""
    events: int = 0
    state: str | None = None
    current_task: str | None = None
    iteration: int | None = None
    task_since: str | None = None
    """When the current task's running span began; None once it ended."""
    tasks: dict[str, TaskRoll] = field(default_factory=dict)
    totals: Totals = field(default_factory=Totals)
    clock: Clock = field(default_factory=Clock)
    caps: dict[str, float | None] = field(default_factory=dict)
    """The limits in force, as the last run recorded them (`session_started` data.caps)."""
    caps_reached: dict[str, dict[str, Any]] = field(default_factory=dict)
    auto_resume_attempts: int | None = None
    """The most auto-resumes in a row the supervisor allows, as the latest `session_crashed` or
    `session_auto_resumed` said (`tilth status`: `auto-resume 2/3`); None before any said it."""


_task_roll = strict_record(TaskRoll)
_read_rollup = strict_record(Rollup, {
    "tasks": dict_of(_task_roll), "totals": strict_record(Totals), "clock": strict_record(Clock),
    "caps": dict_of(number_or_none), "caps_reached": dict_of(dict_of(lambda v: v)),
})


def _ts(ts: str | None) -> datetime:
    return datetime.fromisoformat(str(ts).replace("Z", "+00:00"))


def _span(since: str | None, until: str | None) -> float:
    try:
        return (_ts(until) - _ts(since)).total_seconds() if since and until else 0.0
    except ValueError:  # a damaged timestamp adds nothing rather than hiding the session
        return 0.0


def _close_task(r: Rollup, until: str | None) -> None:
    if r.task_since is not None and r.current_task in r.tasks:
        r.tasks[r.current_task].wall_s += _span(r.task_since, until)
    r.task_since = None


def _run_clock(r: Rollup, kind: str, ts: str) -> None:
    """The same steps as `running_seconds`, one event at a time."""
    c = r.clock
    if kind == "session_started":
        _close_task(r, c.last_ts)
        if c.open_since is not None:
            c.closed_s += _span(c.open_since, c.last_ts)
        c.open_since, c.ran = ts, True
    elif kind == "session_end" and c.open_since is not None:
        _close_task(r, ts)
        c.closed_s += _span(c.open_since, ts)
        c.open_since = None
    c.last_ts = ts


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else str(value)


def fold(r: Rollup, event: dict[str, Any]) -> Rollup:
    """Add one event (already checked with `events.is_event`) to the roll-up; no I/O."""
    kind, ts, data = event["type"], event["ts"], event["data"]
    task = event["task"] if isinstance(event["task"], str) and event["task"] else None
    it = event["iter"] if type(event["iter"]) is int else None
    r.events += 1
    if kind not in OUTSIDE_RUN:
        _run_clock(r, kind, ts)
    if kind in STATES:
        r.state = STATES[kind]
    t = None
    if task is not None:
        t = r.tasks.get(task)
        if t is None:
            t = r.tasks[task] = TaskRoll()
        if it and (t.iteration is None or it > t.iteration):
            t.iteration = it
    if kind == "task_started":
        _close_task(r, ts)
        r.current_task, r.iteration, r.task_since = task, None, ts
        if t is not None:
            t.status = "in_progress"
    if task is not None and task == r.current_task and it:
        r.iteration = it
    if kind == "model_call":
        counted = Counted.from_event(data)
        r.totals.count(counted)
        if t is not None:
            t.count(counted)
            t.evaluator_calls += str(data.get("role") or "") == "evaluator"
    elif t is not None and kind == "verdict":
        concern = data.get("concern")
        t.attempts, t.verdict, t.category = it, _text(data.get("verdict", "")), _text(data.get("category"))
        t.concern = " ".join(concern.split())[:CONCERN_CHARS] if isinstance(concern, str) else None
    elif t is not None and kind in ("task_done", "task_failed", "accepted_committed"):
        t.status, t.sha = ("failed" if kind == "task_failed" else "done"), _text(data.get("sha"))
        if task == r.current_task:
            _close_task(r, ts)
    elif t is not None and kind in ("task_parked", "question_parked"):
        t.status, t.sha = "parked", _text(data.get("sha"))
        if task == r.current_task:
            _close_task(r, ts)
    elif t is not None and kind == "task_answered":
        t.status = "pending"
    elif t is not None and kind in ("commit", "failed_commit", "parked_commit", "progress_restored"):
        t.sha = _text(data.get("sha"))
    elif t is not None and kind in ("task_requeued", "placeholder_unwound"):
        t.status = "requeued"
    elif kind == "status_reconciled" and isinstance(data.get("changes"), dict):
        for tid, status in data["changes"].items():
            r.tasks.setdefault(tid, TaskRoll()).status = str(status)
    elif kind == "session_started":
        r.caps_reached = {}
        if isinstance(data.get("caps"), dict):
            r.caps = {k: v for k, v in data["caps"].items() if v is None or is_dollars(v)}
    elif kind == "cap_reached" and isinstance(data.get("cap"), str):
        r.caps_reached[data["cap"]] = {"limit": data.get("limit"), "value": data.get("value")}
    elif kind == "session_end" and isinstance(data.get("state"), str):
        r.state = data["state"]
    if kind in ("session_crashed", "session_auto_resumed") and type(data.get("attempts")) is int:
        r.auto_resume_attempts = data["attempts"]
    return r


def fingerprint(f: BinaryIO, offset: int) -> str:
    """A hash of the first and the last EDGE_BYTES before `offset`: a replaced log differs."""
    head = os.pread(f.fileno(), min(EDGE_BYTES, offset), 0)
    tail = os.pread(f.fileno(), min(EDGE_BYTES, offset), max(0, offset - EDGE_BYTES))
    digest: str = sha1(b"%d:%s:%s" % (offset, head, tail)).hexdigest()
    return digest


def fold_from(r: Rollup, f: BinaryIO, stamp: bool = True) -> Rollup:
    """Fold the complete lines from `r.log_offset` on, in blocks (a torn last line waits).
    `stamp=False` leaves the fingerprint stale: only a saved roll-up needs it."""
    f.seek(r.log_offset)
    rest = b""
    while block := f.read(READ_BYTES):
        data = rest + block
        end = data.rfind(b"\n") + 1
        for raw in data[:end].splitlines():
            row = parse_object(raw)
            if row is not None and is_event(row):
                fold(r, row)
        r.log_offset += end
        rest = data[end:]
    if stamp:
        r.log_fingerprint = fingerprint(f, r.log_offset)
    return r


def rebuild(log: Path) -> Rollup:
    try:
        with open(log, "rb") as f:
            return fold_from(Rollup(), f)
    except FileNotFoundError:
        return Rollup()


def read_saved(path: Path) -> Rollup | None:
    """summary.json as saved, or None when it is missing, of another version, or not exactly
    what `save_rollup` writes."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    saved = None
    for parse in (orjson.loads, json.loads):  # json: a count past 64 bits, which orjson reads as a float
        try:
            saved = _read_rollup(parse(data))
            break
        except (ValueError, TypeError, RecursionError):  # Odd and both decoders' errors are ValueErrors
            continue
    return saved if saved is not None and saved.version == VERSION else None


def load_rollup(log: Path, saved_at: Path | None = None) -> Rollup:
    """summary.json caught up with the log; read-only. Equal to `rebuild(log)`."""
    saved = read_saved(saved_at or log.with_name(FILE_NAME))
    try:
        with open(log, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if saved is None or saved.log_offset > size or fingerprint(f, saved.log_offset) != saved.log_fingerprint:
                saved = Rollup()
            return fold_from(saved, f)
    except FileNotFoundError:
        return Rollup()


def save_rollup(path: Path, rollup: Rollup) -> int:
    """Write summary.json; the bytes written."""
    try:
        data = orjson.dumps(rollup)
    except orjson.JSONEncodeError:  # a count past 64 bits, which orjson cannot write
        data = json.dumps(dataclasses.asdict(rollup), ensure_ascii=False).encode()
    write_atomic(path, data + b"\n")
    return len(data) + 1


def keep_rollup(log: EventLog) -> Rollup:
    """Make this log the writer of summary.json (the runner, under the session lock): caught
    up with the log now, then kept as events are emitted. Readers never call this."""
    keeper = Keeper(log.path)
    log.keeper = keeper
    return keeper.rollup


class Keeper:
    """The runner's roll-up: caught up once, then folded line by line as it appends, and
    written at the points SAVE_ALWAYS / SAVE_AT_TASK_END say."""

    def __init__(self, log: Path):
        self.log = log
        self.path = log.with_name(FILE_NAME)
        self.saved_at, self.saved_bytes = 0, 0
        saved = read_saved(self.path)
        self.rollup = load_rollup(log)
        if saved != self.rollup:
            self.save()
        else:
            self.saved_at, self.saved_bytes = self.rollup.log_offset, self.path.stat().st_size

    def appended(self, kind: str) -> None:
        save = kind in SAVE_ALWAYS
        try:
            with open(self.log, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < self.rollup.log_offset:
                    self.rollup = Rollup()
                save = save or (kind in SAVE_AT_TASK_END
                                and size - self.saved_at >= max(TAIL_BYTES, self.saved_bytes))
                fold_from(self.rollup, f, stamp=save)
        except FileNotFoundError:
            self.rollup = Rollup()
        if save:
            self.save()

    def save(self) -> None:
        try:
            self.saved_bytes = save_rollup(self.path, self.rollup)
            self.saved_at = self.rollup.log_offset
        except OSError:
            pass  # a cache: a reader folds what it lacks from the log; a full disk must not end the run here

