"""A person leaves a note for the agents of a session this machine has (`note_here`, the local half of
`leave_note`; a dispatched session's is `remote.Dispatched.note`), taken at the next task boundary and
shown in every later worker and evaluator prompt (or only task `task`'s); never interrupts an iteration."""

from __future__ import annotations

from pathlib import Path

from tilth.actions.acted import Acted, changeable, record_act
from tilth.core.errors import BadInput


def checked_note(text: str) -> str:
    from tilth.store.inbox import MAX_NOTE_CHARS

    text = " ".join(text.split()) if text else ""
    if not text:
        raise BadInput("the note is empty; say what the agents should know, e.g. tilth note s1 \"use the v2 API\"")
    if len(text) > MAX_NOTE_CHARS:
        raise BadInput(f"the note is {len(text):,} characters; keep it under {MAX_NOTE_CHARS:,}")
    return text


def note_here(home: Path, session_id: str, text: str, *, by: str, task: str | None = None) -> Acted:
    """Leave `text` for every later task of the session (or only for `task`)."""
    text = checked_note(text)
    from tilth.store.inbox import add_note
    from tilth.store.prd_peek import peek_plan

    paths, _ = changeable(home, session_id)
    if task and task not in {t.id for t in peek_plan(paths.prd)}:
        raise BadInput(f"session {paths.id} has no task {task!r}; see `tilth status {paths.id}`")
    note = add_note(paths.dir, text, task, by=by)
    event = record_act(paths, "note", by, task, note=note.id)
    scope = f"task {note.task}" if note.task else "every later task"
    return Acted(paths.id, f"note {note.id} for session {paths.id} ({scope}): the runner takes it at the next task "
                           "boundary", (event,))
