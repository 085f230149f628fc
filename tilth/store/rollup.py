"""summary.json kept and read back: events.jsonl folded (`store/rollup_fold.fold`) from where
the saved roll-up stopped, so `tilth status` answers without re-reading the journal.

`rebuild(log)` folds the whole log. `log_offset` is how many bytes of events.jsonl are folded,
always at a line end, and `log_fingerprint` hashes the bytes around it, so a log that was replaced
or truncated is noticed and folded again from byte 0. Only newline-terminated lines are folded: a torn last line waits (the next append
ends it, and it is then skipped as garbage like every reader skips it). So `load_rollup`
equals `rebuild` of the same log, whatever summary.json held.

The runner keeps it (`Keeper`, through `keep_rollup(log)`) and writes it only at coarse
points; a reader folds the few lines written since, and never writes.

No pydantic here: `tilth status` reads this file and must not pay pydantic's start-up. `read_saved`
checks every field against its annotation, strictly (an int is an int, not `"3"` or `3.0`);
anything unexpected makes the file unusable and the reader folds from byte 0, as for a missing file.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import BinaryIO

import orjson

try:  # CPython's own SHA-1, the same digest: hashlib would load OpenSSL, ~5 ms of every `tilth status`
    from _sha1 import sha1
except ImportError:  # another interpreter
    from hashlib import sha1

from tilth.store.calls import Totals
from tilth.store.events import EventLog, is_event
from tilth.store.jsonio import parse_object, write_atomic
from tilth.store.rollup_fold import VERSION, Clock, Lanes, Rollup, TaskRoll, Waiting, fold
from tilth.store.strict import dict_of, number_or_none, strict_record

FILE_NAME = "summary.json"
EDGE_BYTES = 256
READ_BYTES = 8 << 20
SAVE_ALWAYS = {"session_started", "session_end", "session_report"}
SAVE_AT_TASK_END = {"task_done", "task_failed", "task_parked"}
TAIL_BYTES = 64 << 10
"""summary.json holds every task seen, so it grows with the session. At a task's end it is saved
only once the log has grown past the last save by its own size (and at least TAIL_BYTES): the
cost of saving stays flat per task however long the session, and the tail a reader folds stays
short. Never per event: that is the cost it saves."""

_task_roll = strict_record(TaskRoll)
_read_rollup = strict_record(Rollup, {
    "tasks": dict_of(_task_roll), "totals": strict_record(Totals), "clock": strict_record(Clock),
    "caps": dict_of(number_or_none), "caps_reached": dict_of(dict_of(lambda v: v)),
    "waiting": dict_of(strict_record(Waiting)), "lanes": strict_record(Lanes),
    "backend_costs": dict_of(number_or_none), "fallbacks": dict_of(dict_of(lambda v: v)),
})


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

