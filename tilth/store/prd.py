"""prd.json: the plan. A JSON array of tasks; the harness only ever flips `status`.

Status changes are read-modify-write of the raw JSON under a short flock, touching one
key of one task, so a user who edits or appends tasks while a session runs loses nothing.
"""

from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Iterator

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from tilth.core.errors import BadInput, PlanChanged
from tilth.store.jsonio import write_atomic

TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"

def _not_blank(value: str) -> str:
    # Python's idea of whitespace (str.strip) is wider than pydantic's: \x1c-\x1f count too.
    if not value.strip():
        raise ValueError("must not be blank")
    return value.strip()


NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), AfterValidator(_not_blank)]


class TaskStatus(StrEnum):
    pending = "pending"
    in_progress = "in_progress"
    done = "done"
    failed = "failed"


class Task(BaseModel):
    """One unit of work; ends as one commit (done) or one FAILED placeholder (failed)."""

    model_config = ConfigDict(extra="allow")

    id: Annotated[str, StringConstraints(pattern=TASK_ID_PATTERN)]
    """Unique in the plan; used in branch trailers and ledger file names."""
    title: NonEmpty
    description: str
    acceptance_criteria: Annotated[list[NonEmpty], Field(min_length=1)]
    status: TaskStatus = TaskStatus.pending
    allow_empty: bool = False
    """The task may be accepted with no change to the files (e.g. a check that needs no edit);
    otherwise an accepted empty diff is rejected as `no_change`."""


_tasks_adapter = TypeAdapter(list[Task])


def _describe(error: dict, raw: object) -> str:
    loc = list(error["loc"])
    where = "the plan"
    if loc and isinstance(loc[0], int):
        index = loc.pop(0)
        item = raw[index] if isinstance(raw, list) and index < len(raw) else None
        task_id = item.get("id") if isinstance(item, dict) else None
        where = f"task {task_id!r} (#{index + 1})" if task_id else f"task #{index + 1}"
    field = ".".join(str(part) for part in loc) or "(the task itself)"
    return f"{where}, field {field}: {error['msg']}"


def parse_plan(data: bytes, source: str) -> list[Task]:
    """Validate a plan; raise BadInput naming the task and field of the first problem."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{source}: not valid JSON ({exc}); fix the file and retry") from None
    if not isinstance(raw, list):
        raise BadInput(f"{source}: must be a JSON array of tasks, got {type(raw).__name__}")
    if not raw:
        raise BadInput(f"{source}: the plan has no tasks; add at least one")
    try:
        tasks = _tasks_adapter.validate_python(raw)
    except ValidationError as exc:
        raise BadInput(f"{source}: {_describe(exc.errors()[0], raw)}; fix the plan and retry") from None
    seen: set[str] = set()
    for index, task in enumerate(tasks):
        if task.id in seen:
            raise BadInput(f"{source}: task {task.id!r} (#{index + 1}), field id: duplicate id; ids must be unique")
        seen.add(task.id)
    return tasks


def load_plan(path: Path) -> list[Task]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"cannot read plan {path}: {exc.strerror}") from None
    return parse_plan(data, str(path))


def load_current_plan(path: Path) -> list[Task]:
    """The plan of a session that is running: a broken file stops the session, resumably."""
    try:
        return load_plan(path)
    except BadInput as exc:
        raise _changed(exc) from None


def _changed(exc: BadInput) -> PlanChanged:
    return PlanChanged(f"the plan changed under a running session and is now invalid: {exc}")


def next_pending(tasks: list[Task]) -> Task | None:
    return next((t for t in tasks if t.status == TaskStatus.pending), None)


@contextmanager
def plan_lock(path: Path) -> Iterator[None]:
    with open(path.with_name(".prd.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def set_statuses(path: Path, changes: dict[str, TaskStatus]) -> None:
    """Flip the status of the named tasks, leaving every other byte of meaning alone."""
    if not changes:
        return
    with plan_lock(path):
        data = path.read_bytes()
        try:
            parse_plan(data, str(path))
        except BadInput as exc:
            raise _changed(exc) from None
        raw = json.loads(data)  # not orjson: it turns integers beyond 64 bits into floats
        changed = False
        for item in raw:
            new = changes.get(item.get("id"))
            if new is not None and item.get("status") != new.value:
                item["status"] = new.value
                changed = True
        if changed:
            write_atomic(path, json.dumps(raw, indent=2, ensure_ascii=False).encode() + b"\n")


def set_status(path: Path, task_id: str, status: TaskStatus) -> None:
    set_statuses(path, {task_id: status})
