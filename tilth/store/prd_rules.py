"""prd.json's rules that `prd.py` (the model) and `prd_peek.py` (the pydantic-free reader) share:
`TaskStatus`, the task id pattern, the size limits, and the dependency rules (`dependency_problem`,
`blocked_by`, `blocked_label`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

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
