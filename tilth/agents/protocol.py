"""The agent protocol: a worker turns a task into edits plus a case, an evaluator turns
the case and the diff into a verdict. Each call is a fresh context built from `prompt`.

Backends are plain classes; `agents/backends/registry.make_backend` picks them by short name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from tilth.agents.checks import CheckResult
from tilth.agents.confinement import Confinement
from tilth.agents.hooks import Hooks
from tilth.store.events import EventLog
from tilth.store.kb import KnowledgeBase
from tilth.store.ledger import Case, LedgerEntry, Question, Verdict
from tilth.store.prd import Task


class AgentFailed(Exception):
    """The worker's agent process failed (exit code, timeout, could not start): the iteration is
    rejected with this reason, and the session goes on."""


class UsageLimited(Exception):
    """An agent's account hit a usage or rate limit: not a failure of the task. The iteration does
    not count; the session pauses until `resets_at` (None: a backoff)."""

    def __init__(self, message: str, resets_at: datetime | None = None):
        super().__init__(message)
        self.resets_at = resets_at


@dataclass(frozen=True)
class WorkerJob:
    session_id: str
    task: Task
    iteration: int
    worktree: Path
    prompt: str
    """The whole fresh context, assembled from files by tilth.run.context."""
    history: list[LedgerEntry]
    """The evaluator's previous verdicts on this task (empty on a first attempt)."""
    events: EventLog
    notes: KnowledgeBase
    """The session's scratch notes, outside the worktree (note_write / note_read)."""
    sandbox: Confinement
    """How the agent's commands run: sandbox argv (empty when unconfined), environment, private home."""
    hooks: Hooks | None = None
    """pre_tool hooks every tool call passes through first."""


FINAL_REVIEW_ID = "final-review"
"""The task id of the evaluation job that reviews a whole session (`run/final_review.py`)."""


@dataclass(frozen=True)
class EvaluationJob:
    session_id: str
    task: Task
    iteration: int
    worktree: Path
    prompt: str
    case: Case | None
    diff: str
    """The patch of the worktree against the session branch HEAD."""
    diff_summary: str
    history: list[LedgerEntry]
    events: EventLog
    checks: list[CheckResult]
    """Deterministic checks already run on the worktree; a failing one blocks acceptance."""
    sandbox: Confinement
    """How a CLI evaluator runs (an empty wrapper when unconfined)."""


@dataclass(frozen=True)
class LearningJob:
    session_id: str
    task: Task
    outcome: str
    iterations: int
    """The iteration the task ended at."""
    prompt: str
    events: EventLog
    worktree: Path | None
    sandbox: Confinement


class Worker(Protocol):
    def work(self, job: WorkerJob) -> Case | Question | None:
        """Edit the worktree; return the case for acceptance, or None if it made none."""


class Evaluator(Protocol):
    def evaluate(self, job: EvaluationJob) -> Verdict: ...


class Learner(Protocol):
    def propose(self, job: LearningJob) -> list[str]:
        """Durable learnings the task surfaced (possibly none); asked once after each task."""


@dataclass(frozen=True)
class Backend:
    name: str
    label: str
    """What people are told is doing the work; says plainly when it is not a model."""
    worker: Worker
    evaluator: Evaluator
    learner: Learner
