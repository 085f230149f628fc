"""ledger/<task_id>.jsonl: one entry per evaluator call, the evaluator's memory of a task; a
`left_out` line (`LeftOut`) where a placeholder or a lane's kept work left out changes the task may
not keep; and a `landing_refused` line where a parallel task's accepted change could not land (a
conflict, or checks failing on the merged tree: a `LedgerEntry` whose `iter` is the accepted attempt's,
marked with `kind`). Each reader takes its own kind of line: `read_entries` never counts a `left_out`
or a `landing_refused` one as an attempt (a tilth older than it skips the first, which is no valid
`LedgerEntry`, and counts the second); `refused_landing` reads the refusal the next attempt follows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationError, model_serializer, model_validator

from tilth.core.clock import iso_ms
from tilth.store.jsonio import append_jsonl, read_jsonl


def _without_defaults(data: dict[str, Any], **defaults: object) -> dict[str, Any]:
    """Ledger lines carry the panel and CLI fields only when they say something."""
    return {k: v for k, v in data.items() if k not in defaults or v != defaults[k]}


class CriterionEvidence(BaseModel):
    criterion: str
    evidence: str


class Case(BaseModel):
    """The worker's argument that the task is done, criterion by criterion."""

    summary: str
    criteria: list[CriterionEvidence] = Field(default_factory=list)
    uncertainties: list[str] = Field(default_factory=list)
    built_from_output: bool = False
    """A CLI agent printed no case: this one was made by tilth from the end of its output."""

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_defaults(handler(self), built_from_output=False)


class Question(BaseModel):
    """What an agent needs a person to decide before the task can go on (`needs_human`)."""

    question: str = Field(min_length=1, max_length=4000)
    context: str = Field(default="", max_length=8000)


class Verdict(BaseModel):
    """The evaluator's decision; only `accept` lets a task become a commit. `needs_human` parks
    the task until a person answers `question` (the worker's question is recorded the same way,
    category `worker_question`)."""

    verdict: Literal["accept", "reject", "needs_human"]
    category: str = ""
    """Why, in one word: acceptance_gap, weak_test, half_finished, scope_creep, spec_violation, no_case, ..."""
    concern: str = ""
    evidence: list[str] = Field(default_factory=list)
    next_step: str = ""
    evaluator: str | None = None
    """Which evaluator of a panel said this (`claude`, `openai`, ...); None for a lone evaluator."""
    panel: list[Verdict] = Field(default_factory=list)
    """The decision of an evaluator panel carries every member's own verdict."""
    question: str = ""
    """With `needs_human`: what a person must answer before the task goes on."""
    failing_tests: list[str] = Field(default_factory=list)
    """The failing tests that made tilth reject it (`check_failed`, `verify_failed`): newly failing ones."""

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_defaults(handler(self), evaluator=None, panel=[], question="", failing_tests=[])

    @model_validator(mode="after")
    def _asks(self) -> "Verdict":
        if self.verdict == "needs_human" and not self.question.strip():
            raise ValueError("a needs_human verdict needs the question a person must answer")
        return self

    @property
    def accepted(self) -> bool:
        return self.verdict == "accept"

    @property
    def parks(self) -> bool:
        """The task waits for a person's answer instead of another attempt."""
        return self.verdict == "needs_human" and bool(self.question.strip())

    @property
    def asked_by(self) -> str:
        """`worker`, `stall breaker` (tilth itself, after the same rejection again and again) or `evaluator`."""
        return {WORKER_QUESTION: "worker", STALL_QUESTION: "stall breaker"}.get(self.category, "evaluator")


WORKER_QUESTION = "worker_question"
STALL_QUESTION = "stalled"
"""The category of the question the stall breaker (`run/stalling.py`) parks a task with."""


def worker_question(asked: Question) -> Verdict:
    """The ledger's record of a worker that ended its turn with a question instead of a case."""
    return Verdict(verdict="needs_human", category=WORKER_QUESTION, question=asked.question, concern=asked.context)


class CommandRun(BaseModel):
    """A command tilth ran itself in the worktree (a check, a verify): its exit and output tail."""

    command: str
    exit_code: int | None
    """None when the command timed out."""
    output_tail: str = ""
    run_id: str | None = None
    """The script artifact under the session's `runs/`, when one was written."""
    failing_ids: list[str] | None = None
    """The failing tests its output names (`agents/failing_tests.py`); None when it names none."""
    failed_at_base: bool = False
    """It failed on the base commit too (`baseline.json`)."""
    failing_before: list[str] | None = None
    """Of `failing_ids`, those that failed on the base commit too (pre-existing: they never block);
    None unless it failed there too and both runs name their failing tests."""

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_defaults(handler(self), failing_ids=None, failed_at_base=False, failing_before=None)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def newly_failing(self) -> list[str]:
        """The failing tests that passed (or did not fail) on the base commit."""
        return [i for i in self.failing_ids or [] if i not in (self.failing_before or [])]

    @property
    def compared(self) -> bool:
        """It failed on the base commit too, and both runs named their failing tests."""
        return self.failed_at_base and self.failing_before is not None

    @property
    def only_failing_before(self) -> bool:
        """It failed, naming only tests that failed on the base commit too: nothing of this session's doing."""
        return not self.passed and self.compared and bool(self.failing_ids) and not self.newly_failing

    @property
    def status(self) -> str:
        """`exit 0`, `exit 1`, `timed out`."""
        return "timed out" if self.exit_code is None else f"exit {self.exit_code}"


class VerifyResult(CommandRun):
    """One acceptance criterion's `verify` command, run by tilth on an attempt (or on the base commit)."""

    criterion: str


class CheckRun(BaseModel):
    """A check on an attempt as its commit message says it: the command, its exit status, and whether
    it failed the same way on the base commit (not blamed)."""

    command: str
    exit_code: int | None
    excused: bool = False

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_defaults(handler(self), excused=False)


class LedgerEntry(BaseModel):
    ts: str = Field(default_factory=iso_ms)
    iter: int
    diff_summary: str
    case: Case | None
    """None when the worker ended its turn without making a case."""
    verdict: Verdict
    verifies: list[VerifyResult] = Field(default_factory=list)
    """Each criterion's `verify` command run on this attempt (none when no criterion has one, or when
    the attempt was rejected before they ran)."""
    checks: list[CheckRun] = Field(default_factory=list)
    """The session's checks on this attempt (none when there are none, or the attempt was rejected first)."""
    tests_counted: int = 0
    """The test ids the guard's census listed on the task's starting point (0: none listed)."""
    fallback: dict[str, str] = Field(default_factory=dict)
    """The roles a fallback backend played in this attempt, by role (`{"worker": "codex"}`): its primary
    had hit a usage limit (`worker_fallback`, `evaluator_fallback`)."""

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_defaults(handler(self), verifies=[], checks=[], tests_counted=0, fallback={})


LEFT_OUT: Literal["left_out"] = "left_out"


class LeftOut(BaseModel):
    """Changes tilth refused that a FAILED or PARKED placeholder (or a lane's kept partial work) does
    not hold: put back as the task's starting point has them (`run/keeping.py`)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["left_out"] = LEFT_OUT
    ts: str = Field(default_factory=iso_ms)
    iter: int
    """The attempt whose work was kept without them."""
    placeholder: Literal["failed", "parked", "partial"]
    refused: list[str] = Field(min_length=1)
    """Each as the guard names it: `tests/test_a.py (deleted)`, `tests (symlink to /x)`."""


def ledger_path(ledger_dir: Path, task_id: str) -> Path:
    return ledger_dir / f"{task_id}.jsonl"


def append_entry(ledger_dir: Path, task_id: str, entry: LedgerEntry) -> None:
    append_jsonl(ledger_path(ledger_dir, task_id), entry.model_dump(mode="json"))


REFUSED: Literal["landing_refused"] = "landing_refused"


def append_refusal(ledger_dir: Path, task_id: str, entry: LedgerEntry) -> None:
    """A lane's accepted change that did not land: the next attempt's context, never an attempt."""
    append_jsonl(ledger_path(ledger_dir, task_id), {"kind": REFUSED, **entry.model_dump(mode="json")})


def refused_landing(ledger_dir: Path, task_id: str) -> LedgerEntry | None:
    """The task's refused landing when nothing but `left_out` lines came after it (its next attempt
    starts from a clean worktree on the new head), else None."""
    last = None
    for row in read_jsonl(ledger_path(ledger_dir, task_id)):
        if row.get("kind") != LEFT_OUT:
            last = row
    if last is None or last.get("kind") != REFUSED:
        return None
    try:
        return LedgerEntry.model_validate(last)
    except ValidationError:
        return None


def read_entries(ledger_dir: Path, task_id: str) -> list[LedgerEntry]:
    entries = []
    for row in read_jsonl(ledger_path(ledger_dir, task_id)):
        if row.get("kind") in (LEFT_OUT, REFUSED):
            continue
        try:
            entries.append(LedgerEntry.model_validate(row))
        except ValidationError:
            continue
    return entries


def append_left_out(ledger_dir: Path, task_id: str, left: LeftOut) -> None:
    append_jsonl(ledger_path(ledger_dir, task_id), left.model_dump(mode="json"))


def read_left_out(ledger_dir: Path, task_id: str) -> list[LeftOut]:
    found = []
    for row in read_jsonl(ledger_path(ledger_dir, task_id)):
        if row.get("kind") != LEFT_OUT:
            continue
        try:
            found.append(LeftOut.model_validate(row))
        except ValidationError:
            continue
    return found
