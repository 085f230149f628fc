"""prd.json read without pydantic, for the read-only views (`tilth status`): id, title, status
and dependencies of each task.

`store/prd.py` stays the definition of the plan (`Task`), its validation and its only writer;
this module holds what both share without pydantic (`TaskStatus`, the id pattern, the size
limits, the dependency rules: `dependency_problem`, `blocked_by`) and `peek_plan`, which
accepts a plan only when every task is plainly one `prd.parse_plan`
accepts, checked field by field as strictly. Anything else goes to `prd.load_plan`, so a
damaged plan raises exactly the BadInput it always raised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MAX_TASKS = 20_000
MAX_BYTES = 16 * 1024 * 1024


class TaskStatus(StrEnum):
    pending = "pending"
    in_progress = "in_progress"
    done = "done"
    failed = "failed"
    parked = "parked"
    """Waiting for a person's answer (`tilth answer`); its partial work is a PARKED placeholder."""


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
    return TaskLine(tid, title.strip(), status, tuple(depends)) if plain else None


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


def dependency_problem(tasks: list[Any]) -> tuple[int, str] | None:
    """The first task (its index) whose `depends_on` names itself or an unknown id, or that is on a
    dependency cycle (the cycle named: `T-1 -> T-2 -> T-1`); None when every dependency can be met.
    `tasks` have `id` and `depends_on`."""
    index = {t.id: i for i, t in enumerate(tasks)}
    for i, t in enumerate(tasks):
        for dep in t.depends_on:
            if dep == t.id:
                return i, "the task depends on itself"
            if dep not in index:
                return i, f"depends on {dep!r}, which is not a task of this plan"
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for start in (t.id for t in tasks):
        if start in state:
            continue
        path, stack = [start], [iter(tasks[index[start]].depends_on)]
        state[start] = 1
        while stack:
            dep = next(stack[-1], None)
            if dep is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(dep) == 1:
                cycle = path[path.index(dep):] + [dep]
                return index[cycle[0]], "dependency cycle " + " -> ".join(cycle)
            elif dep not in state:
                state[dep] = 1
                path.append(dep)
                stack.append(iter(tasks[index[dep]].depends_on))
    return None


def blocked_by(tasks: list[Any]) -> dict[str, tuple[str, ...]]:
    """Each pending task that cannot run now: the failed or parked tasks it waits on, directly or
    through other tasks (`T-3` after `T-2` after failed `T-1` is blocked by `T-1`).
    `tasks` have `id`, `status` (a `TaskStatus` value) and `depends_on`; unknown ids are ignored."""
    by_id = {t.id: t for t in tasks}
    memo: dict[str, tuple[str, ...]] = {}

    def roots(task_id: str, seen: frozenset[str]) -> tuple[str, ...]:
        if task_id in memo:
            return memo[task_id]
        found: dict[str, None] = {}
        for dep in by_id[task_id].depends_on:
            other = by_id.get(dep)
            if other is None or dep in seen:
                continue
            if other.status in (TaskStatus.failed, TaskStatus.parked):
                found[dep] = None
            elif other.status != TaskStatus.done:
                found.update(dict.fromkeys(roots(dep, seen | {dep})))
        memo[task_id] = tuple(found)
        return memo[task_id]

    return {t.id: r for t in tasks if t.status == TaskStatus.pending and (r := roots(t.id, frozenset({t.id})))}


def blocked_label(roots: tuple[str, ...] | list[str], statuses: dict[str, str]) -> str:
    """`blocked (T-1 failed)`, `blocked (T-2 parked)`: what a blocked task waits on."""
    return "blocked (" + ", ".join(
        f"{r} {'parked' if statuses.get(r) == TaskStatus.parked else 'failed'}" for r in roots) + ")"
