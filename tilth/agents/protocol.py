"""The agent protocol: a worker turns a task into edits plus a case, an evaluator turns
the case and the diff into a verdict. Each call is a fresh context built from `prompt`.

Backends are plain classes chosen by short name in `make_backend`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tilth.agents.accounting import Meter
from tilth.agents.checks import CheckResult
from tilth.agents.hooks import Hooks
from tilth.core.config import Settings
from tilth.core.errors import BadInput
from tilth.store.events import EventLog
from tilth.store.kb import KnowledgeBase
from tilth.store.ledger import Case, LedgerEntry, Verdict
from tilth.store.prd import Task
from tilth.store.session import BackendChoice


class AgentFailed(Exception):
    """The worker's agent process failed (exit code, timeout, could not start): the iteration is
    rejected with this reason, and the session goes on."""


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
    sandbox: tuple[str, ...] = ()
    """The argv prefix that confines the agent's commands (empty when unconfined)."""
    hooks: Hooks | None = None
    """pre_tool hooks every tool call passes through first."""


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


@dataclass(frozen=True)
class LearningJob:
    session_id: str
    task: Task
    outcome: str
    iterations: int
    """The iteration the task ended at."""
    prompt: str
    events: EventLog


class Worker(Protocol):
    def work(self, job: WorkerJob) -> Case | None:
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


def make_backend(choice: BackendChoice, settings: Settings, meter: Meter) -> Backend:
    if choice.name == "scripted":
        from tilth.agents.backends.scripted import scripted_backend

        return scripted_backend(choice)
    if choice.name == "openai":
        from tilth.agents.backends.openai_agents import openai_backend

        backend = openai_backend(settings, meter)
        if settings.worker_backend != "command":
            return backend
        from tilth.agents.backends.command import CommandWorker

        if not settings.worker_command:
            raise BadInput("worker_backend = command needs the agent's command line: set TILTH_WORKER_COMMAND "
                           "(for example 'my-agent --prompt-file {prompt_file}')")
        label = f"{backend.label}; worker: the command `{settings.worker_command}`"
        return Backend("openai", label, CommandWorker(settings), backend.evaluator, backend.learner)
    raise BadInput(f"unknown backend {choice.name!r}; use `openai` (set TILTH_BASE_URL) or `scripted` (tests/demo)")
