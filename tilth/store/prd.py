"""prd.json: the plan. A JSON array of tasks; the harness only ever flips `status`.

Status changes are read-modify-write of the raw JSON under a short flock, touching one
key of one task, so a user who edits or appends tasks while a session runs loses nothing.

A session reads its plan several times per task, so the parsed plan is kept per process and
reused while the file's identity (inode, size, mtime, ctime) is unchanged; a status change
tilth writes itself updates the kept copy instead of forcing a re-parse. A plan above
`MAX_TASKS` tasks or `MAX_BYTES` bytes is refused: past that, every status write rewrites a
file too big to keep per-task overhead flat.

A task is defined once, `store/prd_record.py`'s `Task`: this module validates it with pydantic (a
`TypeAdapter` of that dataclass, so a damaged plan is named in one line) and makes every write;
the read-only views read the same class without pydantic (`store/prd_peek.py`). `TaskStatus`, the
limits, the field rules and the dependency rules are `store/prd_rules.py`'s.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import orjson
from pydantic import TypeAdapter, ValidationError

from tilth.core.errors import BadInput, PlanChanged
from tilth.store.jsonio import load_json, write_atomic
from tilth.store.prd_record import Criterion, Task
from tilth.store.prd_rules import (CRITERION_TAGS, MAX_BYTES, MAX_TASKS, TASK_ID_PATTERN, TaskStatus, blocked_by,
                                   dependency_problem)

__all__ = ["MAX_BYTES", "MAX_TASKS", "TASK_ID_PATTERN", "Criterion", "Task", "TaskStatus", "add_tasks", "blocked_by",
           "load_current_plan", "load_plan", "next_pending", "parse_plan", "plan_lock", "set_status", "set_statuses"]


_tasks_adapter = TypeAdapter(list[Task])
_WORDS = {"dataclass_type": "Input should be a valid dictionary or instance of {class_name}",
          "unexpected_keyword_argument": "Extra inputs are not permitted"}
"""What pydantic says of a task or criterion that is no object, or of an unknown key of a criterion,
in the words it used when they were pydantic models (and the plan's errors always used)."""


def _describe(error: Mapping[str, Any], raw: object) -> str:
    loc = list(error["loc"])
    where = "the plan"
    if loc and isinstance(loc[0], int):
        index = loc.pop(0)
        item = raw[index] if isinstance(raw, list) and index < len(raw) else None
        task_id = item.get("id") if isinstance(item, dict) else None
        where = f"task {task_id!r} (#{index + 1})" if task_id else f"task #{index + 1}"
    field = ".".join(str(part) for part in loc if part not in CRITERION_TAGS) or "(the task itself)"
    words = _WORDS.get(error["type"])
    return f"{where}, field {field}: {words.format(**(error.get('ctx') or {})) if words else error['msg']}"


def parse_plan(data: bytes, source: str) -> list[Task]:
    """Validate a plan; raise BadInput naming the task and field of the first problem."""
    raw = load_json(data, source, list, "a JSON array of tasks", "fix the file and retry")
    if not raw:
        raise BadInput(f"{source}: the plan has no tasks; add at least one")
    if len(raw) > MAX_TASKS:
        raise BadInput(f"{source}: {len(raw):,} tasks is more than the limit of {MAX_TASKS:,}; "
                       "split the plan into several sessions")
    try:
        tasks = _tasks_adapter.validate_python(raw)
    except ValidationError as exc:
        raise BadInput(f"{source}: {_describe(exc.errors()[0], raw)}; fix the plan and retry") from None
    seen: set[str] = set()
    for index, task in enumerate(tasks):
        if task.id in seen:
            raise BadInput(f"{source}: task {task.id!r} (#{index + 1}), field id: duplicate id; ids must be unique")
        seen.add(task.id)
    problem = dependency_problem(tasks)
    if problem is not None:
        index, what = problem
        raise BadInput(f"{source}: task {tasks[index].id!r} (#{index + 1}), field depends_on: {what}; "
                       "fix the plan and retry")
    return tasks


@dataclass
class _Kept:
    identity: tuple[int, ...]
    tasks: list[Task]
    raw: list[Any] | None = None
    """The file as `json` parsed it (for a status write), once a write needed it."""
    positions: dict[str, int] | None = None
    """Each task's index in `tasks` (and `raw`), once a write needed it: a status write finds its tasks
    without walking a long plan."""

    def position(self) -> dict[str, int]:
        if self.positions is None:
            self.positions = {task.id: at for at, task in enumerate(self.tasks)}
        return self.positions


_kept: dict[Path, _Kept] = {}
_MISSING = object()


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _read(path: Path) -> tuple[bytes, tuple[int, ...]]:
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size > MAX_BYTES:
                raise BadInput(f"plan {path} is {st.st_size / 2**20:.1f} MiB, more than the limit of "
                               f"{MAX_BYTES // 2**20} MiB; split the plan into several sessions")
            return f.read(), _identity(st)
    except OSError as exc:
        raise BadInput(f"cannot read plan {path}: {exc.strerror}") from None


def _current(path: Path) -> _Kept:
    try:
        kept = _kept.get(path)
        if kept is not None and kept.identity == _identity(path.stat()):
            return kept
    except OSError:
        pass
    data, identity = _read(path)
    kept = _kept[path] = _Kept(identity, parse_plan(data, str(path)))
    return kept


def load_plan(path: Path) -> list[Task]:
    return list(_current(path).tasks)


def load_current_plan(path: Path) -> list[Task]:
    """The plan of a session that is running: a broken file stops the session, resumably."""
    try:
        return load_plan(path)
    except BadInput as exc:
        raise _changed(exc) from None


def _changed(exc: BadInput) -> PlanChanged:
    return PlanChanged(f"the plan changed under a running session and is now invalid: {exc}")


def next_pending(tasks: list[Task]) -> Task | None:
    """The first pending task whose dependencies are all done (the done tasks gathered only when a
    pending task has any: a long plan is walked once at most)."""
    done: set[str] | None = None
    for task in tasks:
        if task.status != TaskStatus.pending:
            continue
        if task.depends_on and done is None:
            done = {t.id for t in tasks if t.status == TaskStatus.done}
        if done is None or all(d in done for d in task.depends_on):
            return task
    return None


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
        try:
            kept = _current(path)
            if kept.raw is None:
                data, identity = _read(path)
                if identity != kept.identity:
                    kept = _Kept(identity, parse_plan(data, str(path)))
                kept.raw = json.loads(data)  # not orjson: it turns integers beyond 64 bits into floats
                _kept[path] = kept
        except BadInput as exc:
            raise _changed(exc) from None
        undo, positions = [], kept.position()
        for task_id, new in changes.items():
            at = positions.get(task_id)
            item = kept.raw[at] if at is not None else None
            if item is not None and item.get("status") != new.value:
                undo.append((item, item.get("status", _MISSING)))
                item["status"] = new.value
        if not undo:
            return
        try:
            write_atomic(path, _dump(kept.raw))
        except BaseException:
            for item, old in undo:  # the kept copy stays what the file still says
                if old is _MISSING:
                    del item["status"]
                else:
                    item["status"] = old
            raise
        tasks = list(kept.tasks)
        for task_id, new in changes.items():
            if (at := positions.get(task_id)) is not None:
                tasks[at] = dataclasses.replace(tasks[at], status=new)
        _kept[path] = _Kept(_identity(path.stat()), tasks, kept.raw, positions)


def _dump(raw: list[Any]) -> bytes:
    try:
        return orjson.dumps(raw, option=orjson.OPT_INDENT_2) + b"\n"
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, which orjson cannot write
        return json.dumps(raw, indent=2, ensure_ascii=False).encode() + b"\n"


def add_tasks(path: Path, tasks: list[dict[str, Any]], prefix: str) -> list[str]:
    """Append pending tasks (id, title, description, acceptance_criteria) to the plan, each given the
    next free id `<prefix><n>`; the ids given. The whole plan is validated before it is written."""
    with plan_lock(path):
        data, _ = _read(path)
        raw = json.loads(data)
        taken = {item.get("id") for item in raw if isinstance(item, dict)}
        ids, n = [], 1
        for task in tasks:
            while f"{prefix}{n}" in taken:
                n += 1
            ids.append(f"{prefix}{n}")
            taken.add(ids[-1])
            raw.append({"id": ids[-1], **task, "status": TaskStatus.pending.value})
        out = _dump(raw)
        parse_plan(out, str(path))
        write_atomic(path, out)
        _kept.pop(path, None)
    return ids


def set_status(path: Path, task_id: str, status: TaskStatus) -> None:
    set_statuses(path, {task_id: status})
