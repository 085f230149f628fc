"""prd.json's rules, each said once for the model (`prd.py`, pydantic) and the strict reader
(`prd_record.read_task`, no pydantic): `TaskStatus`, the size limits, the field constraints the
task's annotations carry (`TaskIdText`, `NotBlank`, `AtLeastOne`, `TextOrObject`: each a
`strict.Rule`, read strictly there and told to pydantic here), and the dependency rules
(`dependency_problem`, `blocked_by`, `blocked_label`)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Mapping, Union, get_args

from tilth.store.strict import Odd, Rule

TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MAX_TASKS = 20_000
MAX_BYTES = 16 * 1024 * 1024
CRITERION_TAGS = ("string-criterion", "object-criterion")
"""How pydantic names the two forms of a criterion in an error's location (`prd.py` leaves them out)."""

_ID = re.compile(TASK_ID_PATTERN)


class TaskIdText(Rule):
    """A task id: `TASK_ID_PATTERN` (matched as pydantic's regex engine does: no trailing newline)."""

    def read(self, value: str) -> str:
        if _ID.match(value) is None or value.endswith("\n"):
            raise Odd
        return value

    def pydantic_type(self, source: Any) -> Any:
        from pydantic import StringConstraints

        return Annotated[source, StringConstraints(pattern=TASK_ID_PATTERN)]


def _not_blank(value: str) -> str:
    # Python's idea of whitespace (str.strip) is wider than pydantic's: \x1c-\x1f count too.
    if not value.strip():
        raise ValueError("must not be blank")
    return value.strip()


class NotBlank(Rule):
    """Text that is not all whitespace, kept stripped (of Python's whitespace, which holds
    pydantic's, so both strip alike)."""

    def read(self, value: str) -> str:
        stripped = value.strip()
        if not stripped:
            raise Odd
        return stripped

    def pydantic_type(self, source: Any) -> Any:
        from pydantic import AfterValidator, StringConstraints

        return Annotated[source, StringConstraints(strip_whitespace=True, min_length=1), AfterValidator(_not_blank)]


MAX_TITLE_CHARS = 300
"""A task's title is a line people read in lists (a GitHub issue title is at most 256 characters); the
description holds the rest."""


class Title(NotBlank):
    """A title: `NotBlank`, and at most `MAX_TITLE_CHARS` once stripped."""

    def read(self, value: str) -> str:
        stripped = super().read(value)
        if len(stripped) > MAX_TITLE_CHARS:
            raise Odd
        return stripped

    def pydantic_type(self, source: Any) -> Any:
        from pydantic import AfterValidator

        return Annotated[super().pydantic_type(source), AfterValidator(_short_title)]


def _short_title(value: str) -> str:
    if len(value) > MAX_TITLE_CHARS:
        from pydantic_core import PydanticCustomError

        raise PydanticCustomError("title_too_long", f"{len(value):,} characters; a title holds at most "
                                  f"{MAX_TITLE_CHARS} (the rest belongs in the description)")
    return value


class AtLeastOne(Rule):
    """A list with one item or more."""

    def read(self, value: list[Any]) -> list[Any]:
        if not value:
            raise Odd
        return value

    def pydantic_type(self, source: Any) -> Any:
        from pydantic import Field

        return Annotated[source, Field(min_length=1)]


class TextOrObject(Rule):
    """`text | SomeDataclass`: a JSON object is read as the dataclass, anything else as the text,
    so an error names the chosen form's own field (`CRITERION_TAGS`), not both forms'. Only pydantic
    needs telling: the strict reader reads a union by the form the value has already."""

    def pydantic_type(self, source: Any) -> Any:
        from pydantic import Discriminator, Tag

        text, obj = get_args(source)
        string, object_ = CRITERION_TAGS
        return Annotated[Union[Annotated[text, Tag(string)], Annotated[obj, Tag(object_)]],
                         Discriminator(lambda v: object_ if isinstance(v, (dict, obj)) else string)]


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


def blocked_label(roots: tuple[str, ...] | list[str], statuses: Mapping[str, str]) -> str:
    """`blocked (T-1 failed)`, `blocked (T-2 parked)`: what a blocked task waits on."""
    return "blocked (" + ", ".join(
        f"{r} {'parked' if statuses.get(r) == TaskStatus.parked else 'failed'}" for r in roots) + ")"
