"""prd.json's task, defined once: `Task` and `Criterion`, stdlib dataclasses whose annotations
carry every field's type and constraint (`store/prd_rules.py`'s rules). `store/prd.py` validates
a plan with pydantic (a `TypeAdapter` of these very classes; each rule tells pydantic what it
means) and is its only writer; the read-only views read it here without pydantic (`read_task`,
built from the same annotations by `store/strict.py`), since a process that only looks must not
pay pydantic's start-up to show a plan.

`read_task` is strict (an id is a str, never a number; a bool is a bool, never `"true"`); what it
is not sure of is None, and the caller asks the model, which then reads it exactly as it always
did or names what is wrong. A field added or a constraint changed here applies to both at once.
"""

# No `from __future__ import annotations`: the annotations are built once, with the classes, rather
# than parsed again from strings when the strict reader is built at import.
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from tilth.store.prd_rules import AtLeastOne, NotBlank, TaskIdText, TaskStatus, TextOrObject, Title
from tilth.store.strict import plainly, strict_record

TaskId = Annotated[str, TaskIdText()]
Text = Annotated[str, NotBlank()]


@dataclass(kw_only=True)
class Criterion:
    """An acceptance criterion that carries a command: tilth runs `verify` itself (confined, in the
    worktree, with a timeout) after each attempt; a non-zero exit rejects the attempt without
    asking the evaluator."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    text: Text
    verify: Text | None = None
    """A shell command that exits 0 when the criterion holds."""


@dataclass(kw_only=True)
class Task:
    """One unit of work; ends as one commit (done) or one FAILED placeholder (failed). Keys of the
    file that are no field are ignored here and kept in the file (`prd.set_statuses`)."""

    id: TaskId
    """Unique in the plan; used in branch trailers and ledger file names."""
    title: Annotated[str, Title()]
    """One line people read in lists: at most `prd_rules.MAX_TITLE_CHARS` characters."""
    description: str
    acceptance_criteria: Annotated[list[Annotated[Text | Criterion, TextOrObject()]], AtLeastOne()]
    """Each a string (judged by the evaluator) or a `Criterion` with a `verify` command."""
    status: TaskStatus = TaskStatus.pending
    allow_empty: bool = False
    """The task may be accepted with no change to the files (e.g. a check that needs no edit);
    otherwise an accepted empty diff is rejected as `no_change`."""
    depends_on: list[TaskId] = field(default_factory=list)
    """Ids of tasks of the same plan that must be done first; a failed one blocks this task. No task
    may depend on itself, on an unknown id, or on a cycle."""
    may_change: list[Text] = field(default_factory=list)
    """Globs of paths this task may delete, empty, mark skipped or change although the harness would
    otherwise reject it (`tests_weakened`, `protected_path`): e.g. `tests/old_*.py`."""
    files: list[Text] = field(default_factory=list)
    """Globs of the paths this task expects to touch; with `--parallel`, two tasks whose globs overlap never run at
    the same time (docs/parallel.md). Empty: it may run beside any task."""

    @property
    def criteria(self) -> list[Criterion]:
        """Every criterion as a `Criterion` (a plain string has no verify command)."""
        return [c if isinstance(c, Criterion) else Criterion(text=c) for c in self.acceptance_criteria]

    @property
    def criterion_texts(self) -> list[str]:
        return [c.text for c in self.criteria]


_read = strict_record(Task)


def read_task(raw: Any) -> Task | None:
    """The task when `raw` (parsed JSON) is plainly one; None when pydantic should judge it."""
    task: Task | None = plainly(_read, raw)
    return task
