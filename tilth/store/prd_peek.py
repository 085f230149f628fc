"""prd.json read without pydantic, for the read-only views (`tilth status`, `tilth digest`, the
dispatch mirror): `peek_plan`, which reads the one definition of a task
(`store/prd_record.Task`) strictly, plus the plan's own rules (`store/prd_rules.py`: the limits,
unique ids, dependencies). Anything it is not sure of (bad JSON, a missing or odd field, a value
pydantic might coerce) goes to `prd.load_plan`, so a damaged plan raises exactly the BadInput it
always raised, and a plan the model accepts shows exactly what the model reads.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from tilth.store.prd_record import Task, read_task
from tilth.store.prd_rules import MAX_BYTES, MAX_TASKS, dependency_problem


def _strict(path: Path) -> list[Task] | None:
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
        task = read_task(item)
        if task is None:
            return None
        tasks.append(task)
    if len({t.id for t in tasks}) != len(tasks) or dependency_problem(tasks) is not None:
        return None
    return tasks


def peek_plan(path: Path) -> list[Task]:
    """What `prd.load_plan` would read, without pydantic when the plan is plainly well-formed; its
    BadInput for a plan that is missing, too big or invalid otherwise."""
    tasks = _strict(path)
    if tasks is not None:
        return tasks
    from tilth.store.prd import load_plan  # the model says what is wrong, as it always did

    return load_plan(path)
