"""prd.json read without pydantic, for the read-only views (`tilth status`): id, title, status
and dependencies of each task.

`store/prd.py` stays the definition of the plan (`Task`), its validation and its only writer;
what both share without pydantic is `store/prd_rules.py`'s. `peek_plan` accepts a plan only
when every task is plainly one `prd.parse_plan` accepts, checked field by field as strictly.
Anything else goes to `prd.load_plan`, so a damaged plan raises exactly the BadInput it always
raised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tilth.store.prd_rules import MAX_BYTES, MAX_TASKS, TASK_ID_PATTERN, TaskStatus, dependency_problem

@dataclass
class TaskLine:
    """What `tilth status` shows of a task."""

    id: str
    title: str
    status: str
    """A `TaskStatus` value."""
    depends_on: tuple[str, ...] = ()
    """Ids of the tasks that must be done before this one runs."""


_ID = re.compile(TASK_ID_PATTERN)
_STATUSES = frozenset(s.value for s in TaskStatus)


def _task(raw: Any) -> TaskLine | None:
    """The task if it is plainly one `prd.Task` accepts (its `NonEmpty` texts not blank: the model
    keeps them stripped); None when the model should judge it."""
    if type(raw) is not dict:
        return None
    tid, title, status = raw.get("id"), raw.get("title"), raw.get("status", "pending")
    criteria = raw.get("acceptance_criteria")
    depends = raw.get("depends_on", [])
    plain = (_plain_id(tid)
             and type(title) is str and title.strip() != ""
             and type(raw.get("description")) is str
             and type(criteria) is list and len(criteria) > 0
             and all(_plain_criterion(c) for c in criteria)
             and _plain_texts(raw.get("may_change", []))
             and type(status) is str and status in _STATUSES
             and type(raw.get("allow_empty", False)) is bool
             and type(depends) is list and all(_plain_id(d) for d in depends))
    return TaskLine(str(tid), str(title).strip(), status, tuple(depends)) if plain else None


def _plain_criterion(value: Any) -> bool:
    """A non-blank string, or `{"text": ..., "verify": ...}` with nothing else (`prd.Criterion`)."""
    if type(value) is str:
        return value.strip() != ""
    return (type(value) is dict and set(value) <= {"text", "verify"} and type(value.get("text")) is str
            and value["text"].strip() != "" and _plain_texts([value["verify"]] if "verify" in value else []))


def _plain_texts(value: Any) -> bool:
    return type(value) is list and all(type(v) is str and v.strip() != "" for v in value)


def _plain_id(value: Any) -> bool:
    return type(value) is str and _ID.match(value) is not None and not value.endswith("\n")


def _strict(path: Path) -> list[TaskLine] | None:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
        raw = orjson.loads(data)
    except (OSError, orjson.JSONDecodeError):
        return None
    if len(data) > MAX_BYTES or type(raw) is not list or not raw or len(raw) > MAX_TASKS:
        return None
    tasks = []
    for item in raw:
        task = _task(item)
        if task is None:
            return None
        tasks.append(task)
    if len({t.id for t in tasks}) != len(tasks) or dependency_problem(tasks) is not None:
        return None
    return tasks


def peek_plan(path: Path) -> list[TaskLine]:
    """Each task's id, title and status as `prd.load_plan` reads them; its BadInput for a plan
    that is missing, too big or invalid."""
    tasks = _strict(path)
    if tasks is not None:
        return tasks
    from tilth.store.prd import load_plan  # the model says what is wrong, as it always did

    return [TaskLine(t.id, t.title, t.status.value, tuple(t.depends_on)) for t in load_plan(path)]
