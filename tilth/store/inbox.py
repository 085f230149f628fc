"""sessions/<id>/inbox.jsonl: notes a person leaves for a session (`tilth note`), and
`inbox.read.json`: which of them the runner has taken.

A note is one flushed JSONL line `{"id", "at", "text", "task", "by"}` (`task`: null for the whole
session, else one task id; `by`: who left it, `store/actors`, absent in lines written before it).
The runner takes every unread note at a task boundary only, so a note never reaches the
iteration already under way: it records the ids it took in `inbox.read.json` (written
atomically), then says so with a `notes_taken` event. Every later prompt shows the taken notes
that apply to its task, newest kept under the channel's budget.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

import orjson

from tilth.core.clock import iso
from tilth.store.actors import known_actor
from tilth.store.jsonio import append_jsonl, read_jsonl, write_json

MAX_NOTE_CHARS = 4000


@dataclass(frozen=True)
class Note:
    id: str
    at: str
    text: str
    task: str | None
    by: str | None = None
    """Who left it (cli, dashboard or unknown), None when its line does not say."""


def inbox_path(session_dir: Path) -> Path:
    return session_dir / "inbox.jsonl"


def read_path(session_dir: Path) -> Path:
    return session_dir / "inbox.read.json"


def add_note(session_dir: Path, text: str, task: str | None, note_id: str | None = None,
             by: str | None = None) -> Note:
    """`note_id` given (a note relayed through the broker): written once, however often relayed.
    `by`: who left it (kept as `known_actor` reads it)."""
    if note_id is not None and (known := next((n for n in all_notes(session_dir) if n.id == note_id), None)):
        return known
    note = Note(id=note_id or secrets.token_hex(4), at=iso(), text=text[:MAX_NOTE_CHARS], task=task,
                by=None if by is None else known_actor(by))
    append_jsonl(inbox_path(session_dir), {"id": note.id, "at": note.at, "text": note.text, "task": note.task,
                                           **({} if note.by is None else {"by": note.by})})
    return note


def all_notes(session_dir: Path) -> list[Note]:
    return [Note(str(row["id"]), str(row.get("at") or ""), row["text"], row.get("task"),
                 known_actor(row["by"]) if "by" in row else None)
            for row in read_jsonl(inbox_path(session_dir))
            if isinstance(row.get("id"), str) and isinstance(row.get("text"), str)
            and (row.get("task") is None or isinstance(row.get("task"), str))]


def taken_ids(session_dir: Path) -> set[str]:
    try:
        data = orjson.loads(read_path(session_dir).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return set()
    return {i for i in data.get("taken", []) if isinstance(i, str)} if isinstance(data, dict) else set()


def take_unread(session_dir: Path) -> list[Note]:
    """Mark every note not yet taken as taken; the ones just taken."""
    notes, taken = all_notes(session_dir), taken_ids(session_dir)
    fresh = [n for n in notes if n.id not in taken]
    if fresh:
        write_json(read_path(session_dir), {"taken": sorted(taken | {n.id for n in fresh})})
    return fresh


def taken_for(session_dir: Path, task_id: str) -> list[Note]:
    """The taken notes that apply to this task (the session's and its own), oldest first."""
    taken = taken_ids(session_dir)
    return [n for n in all_notes(session_dir) if n.id in taken and n.task in (None, task_id)]
