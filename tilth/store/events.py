"""events.jsonl: the session's machine-readable journal, `{ts, type, task, iter, data}`, and the
one registry of its event types and their data fields.

Each module that emits events registers its types with `document({type: (meaning, fields)})` next
to the code that writes them (`fields`: the names of its `data` fields, separated by spaces);
`EventLog.emit` refuses an unregistered type, and `tests/test_event_registry.py` fails for a type
emitted anywhere in the source but not registered, or a data field emitted but not declared.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from tilth.core.clock import iso_ms
from tilth.store.jsonio import append_jsonl, read_jsonl



@dataclass(frozen=True)
class EventType:
    """One registered event type: what it means and the fields its `data` may hold."""

    meaning: str
    fields: tuple[str, ...]
    """In the order declared."""


DOCUMENTED: dict[str, EventType] = {}
"""Every registered event type, by name: the registry (`document` fills it, module by module)."""
COMMON_FIELDS: frozenset[str] = frozenset({"lane"})  # a parallel task's lane stamps every event it writes
"""Data fields any event type may carry besides its own (none yet)."""
UNSYNCED = {"memory_load", "prompt_assembled", "model_attempt", "model_waiting", "agent_started", "tool_call", "hook_run",
            "agent_step"}
"""Per-call bookkeeping, a dozen lines or more per iteration: written and flushed but not
fsynced on their own (`jsonio.append_line`); the next event of any other type takes them to
disk. Outcomes, verdicts and every `model_call` (spend) are fsynced as they are written."""


Declared = str | tuple[str, str]
"""`(meaning, "field other_field ...")`; a bare meaning declares a type whose `data` is empty."""


def document(types: Mapping[str, Declared]) -> None:
    """Register event types: `{"task_done": ("a task's commit is on the branch; data: sha", "sha")}`.
    Plain data, so a module below store/ (`core/notify_send.EVENTS`) can declare its own."""
    for name, declared in types.items():
        meaning, fields = (declared, "") if isinstance(declared, str) else declared
        if not isinstance(meaning, str) or not isinstance(fields, str):
            raise TypeError(f"event type {name!r}: declare it as (meaning, \"field field ...\"), two strings")
        DOCUMENTED[name] = EventType(meaning, tuple(fields.split()))


def fields_of(kind: str) -> frozenset[str]:
    """The data fields a registered type may carry (its own and `COMMON_FIELDS`)."""
    return frozenset(DOCUMENTED[kind].fields) | COMMON_FIELDS


class AppendHook(Protocol):
    """Told of each append before the listeners (the runner's summary.json: `rollup.keep_rollup`)."""

    def appended(self, kind: str) -> None: ...


class RunLock:
    """The one lock a session's run shares between its main thread and its lanes' threads
    (`run/lanes.py`); its journal holds it (`EventLog.run_lock`), so every part of the run reaches it.
    Held:

    1. by `EventLog.emit`: one event at a time, from its journal line to its last listener (the
       roll-up, the transcript, notifications, and a dispatched session's push at the event);
    2. by `agents/accounting.Meter.record`: while a model call is added to the session's totals;
    3. by the merge queue (`run/lanes.py`): from a landing's first write to the session branch or
       worktree to its last, and while a retried task's placeholder leaves the branch, so no event a
       lane's thread emits meanwhile, nor the push a dispatched session makes at it, sees the branch
       or the worktree half moved.

    Reentrant: a landing's own events take it again in the same thread."""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def __enter__(self) -> RunLock:
        self._lock.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self._lock.release()


class EventLog:
    def __init__(self, path: Path, echo: Callable[[dict[str, Any]], None] | None = None):
        self.path = path
        self.echo = echo
        self.keeper: AppendHook | None = None
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        """Called with each event once it is in the journal (the transcript, notifications)."""
        self.run_lock = RunLock()
        """Held from each event's journal line to its last listener; what else it guards: `RunLock`."""

    def emit(self, type: str, task: str | None = None, iter: int | None = None, **data: Any) -> None:
        if type not in DOCUMENTED:
            raise ValueError(f"event type {type!r} is not documented; call events.document() in its module")
        with self.run_lock:
            event = {"ts": iso_ms(), "type": type, "task": task, "iter": iter, "data": data}
            append_jsonl(self.path, event, sync=type not in UNSYNCED)
            if self.keeper is not None:
                self.keeper.appended(type)
            for listener in self.listeners:
                listener(event)
            if self.echo is not None:
                self.echo(event)

    def read(self) -> list[dict[str, Any]]:
        return read_events(self.path)


def is_event(row: dict[str, Any]) -> bool:
    """The shape `emit` writes; any other line in events.jsonl is damage and is skipped."""
    return (isinstance(row.get("ts"), str) and isinstance(row.get("type"), str) and isinstance(row.get("data"), dict)
            and "task" in row and "iter" in row)


def read_events(path: Path) -> list[dict[str, Any]]:
    return [row for row in read_jsonl(path) if is_event(row)]
