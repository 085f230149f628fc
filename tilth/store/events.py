"""events.jsonl: the session's machine-readable journal, `{ts, type, task, iter, data}`.

Each module that emits events documents its types with `document({...})` next to the code
that writes them; `EventLog.emit` refuses an undocumented type so the list stays true.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Protocol

from tilth.core.clock import iso_ms
from tilth.store.jsonio import append_jsonl, read_jsonl

DOCUMENTED: dict[str, str] = {}
UNSYNCED = {"memory_load", "prompt_assembled", "model_attempt", "tool_call", "hook_run", "agent_step"}
"""Per-call bookkeeping, a dozen lines or more per iteration: written and flushed but not
fsynced on their own (`jsonio.append_line`); the next event of any other type takes them to
disk. Outcomes, verdicts and every `model_call` (spend) are fsynced as they are written."""


def document(types: dict[str, str]) -> None:
    DOCUMENTED.update(types)


class AppendHook(Protocol):
    """Told of each append before the listeners (the runner's summary.json: `rollup.keep_rollup`)."""

    def appended(self, kind: str) -> None: ...


class EventLog:
    def __init__(self, path: Path, echo: Callable[[dict[str, Any]], None] | None = None):
        self.path = path
        self.echo = echo
        self.keeper: AppendHook | None = None
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        """Called with each event once it is in the journal (the transcript, notifications)."""
        self.serial = threading.RLock()
        """One event at a time, journal line to last listener (parallel tasks emit from their lanes' threads)."""

    def emit(self, type: str, task: str | None = None, iter: int | None = None, **data: Any) -> None:
        if type not in DOCUMENTED:
            raise ValueError(f"event type {type!r} is not documented; call events.document() in its module")
        with self.serial:
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
