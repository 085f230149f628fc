"""A parked task whose question has an answer goes back to pending: `unpark_answered`, the one flip
that `tilth answer` (no runner holding the session), the runner (at a task boundary) and the
supervisor (a session that ended `waiting` while its answer came) all make; and `answered_parked`,
the supervisor's look at whether a session has such a task.

Whether a parked task may go on is read from `answers/<task>.jsonl` alone (`store/answers.py`); the
flip is `prd.json`'s status then a `task_answered` event, one task at a time, by a caller that holds
the session lock, so it never interleaves with a runner's own writes.
"""

from __future__ import annotations

from pathlib import Path

from tilth.store.answers import is_answered, last_question
from tilth.store.events import EventLog
from tilth.store.home import SessionPaths


def unpark_answered(paths: SessionPaths, events: EventLog, only: str | None = None) -> list[str]:
    """Each parked task whose last question has an answer (with `only`: that task alone) goes back to
    pending, with `task_answered` saying the question and who answered it; the ids flipped. The caller
    holds the session lock."""
    from tilth.store.prd import TaskStatus, load_current_plan, set_statuses

    flipped = []
    for task in load_current_plan(paths.prd):
        if task.status != TaskStatus.parked or (only is not None and task.id != only):
            continue
        asked = last_question(paths.dir, task.id)
        if asked is None or asked.answer is None:
            continue
        set_statuses(paths.prd, {task.id: TaskStatus.pending})
        events.emit("task_answered", task.id, asked.iter, question=asked.question, by=asked.answered_by or "runner")
        flipped.append(task.id)
    return flipped


def answered_parked(session_dir: Path, prd: Path) -> list[str]:
    """The parked tasks whose question has an answer: the session has work again (read without pydantic)."""
    from tilth.store.prd_peek import peek_plan
    from tilth.store.prd_rules import TaskStatus

    return [t.id for t in peek_plan(prd) if t.status == TaskStatus.parked and is_answered(session_dir, t.id)]
