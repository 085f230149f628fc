"""ledger/<task_id>.jsonl: one entry per evaluator call, the evaluator's memory of a task; and a
`left_out` line (`LeftOut`) where a placeholder or a lane's kept work left out changes the task may
not keep. Each reader takes its own kind of line: `read_entries` never counts a `left_out` one as an
attempt, and a tilth older than it skips it (it is no valid `LedgerEntry`)."""

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

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_defaults(handler(self), evaluator=None, panel=[], question="")

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

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def status(self) -> str:
        """`exit 0`, `exit 1`, `timed out`."""
        return "timed out" if self.exit_code is None else f"exit {self.exit_code}"


class VerifyResult(CommandRun):
    """One acceptance criterion's `verify` command, run by tilth on an attempt (or on the base commit)."""

    criterion: str


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
    fallback: dict[str, str] = Field(default_factory=dict)
    """The roles a fallback backend played in this attempt, by role (`{"worker": "codex"}`): its primary
    had hit a usage limit (`worker_fallback`, `evaluator_fallback`)."""

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_defaults(handler(self), verifies=[], fallback={})


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


def read_entries(ledger_dir: Path, task_id: str) -> list[LedgerEntry]:
    entries = []
    for row in read_jsonl(ledger_path(ledger_dir, task_id)):
        if row.get("kind") == LEFT_OUT:
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
