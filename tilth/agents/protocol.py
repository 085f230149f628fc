"""The agent protocol: a worker turns a task into edits plus a case, an evaluator turns
the case and the diff into a verdict. Each call is a fresh context built from `prompt`.

Backends are plain classes chosen by short name in `make_backend`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from tilth.agents.accounting import Meter
from tilth.agents.bounds import DEFAULT_MAX_PROCESSES
from tilth.agents.checks import CheckResult
from tilth.agents.hooks import Hooks
from tilth.core.config import Settings
from tilth.core.errors import BadInput
from tilth.store.events import EventLog
from tilth.store.kb import KnowledgeBase
from tilth.store.ledger import Case, LedgerEntry, Question, Verdict
from tilth.store.prd import Task
from tilth.store.session import BackendChoice


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
    sandbox: tuple[str, ...] = ()
    """The argv prefix that confines the agent's commands (empty when unconfined)."""
    hooks: Hooks | None = None
    """pre_tool hooks every tool call passes through first."""
    max_processes: int = DEFAULT_MAX_PROCESSES
    """`agent_max_processes`: processes each of the agent's commands may have at once."""


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
    sandbox: tuple[str, ...] = ()
    """The argv prefix that confines a CLI evaluator (empty when unconfined)."""
    max_processes: int = DEFAULT_MAX_PROCESSES


@dataclass(frozen=True)
class LearningJob:
    session_id: str
    task: Task
    outcome: str
    iterations: int
    """The iteration the task ended at."""
    prompt: str
    events: EventLog
    worktree: Path | None = None
    sandbox: tuple[str, ...] = ()
    max_processes: int = DEFAULT_MAX_PROCESSES


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


def make_backend(choice: BackendChoice, settings: Settings, meter: Meter) -> Backend:
    """The scripted backend, or each role's agent as the settings choose (`openai`: tilth's own
    loop; `claude`, `codex`, `aider`, `command`: a CLI agent); several evaluators make a panel."""
    if choice.name == "scripted":
        from tilth.agents.backends.scripted import scripted_backend

        return scripted_backend(choice)
    if choice.name not in ("openai", "agents"):
        raise BadInput(f"unknown backend {choice.name!r}; use `openai` (set TILTH_BASE_URL), a CLI agent "
                       "(TILTH_WORKER_BACKEND=claude|codex|aider|command) or `scripted` (tests/demo)")
    from tilth.agents.backends.command import LABELS, CliEvaluator, CliLearner, CliWorker
    from tilth.agents.backends.openai_agents import OpenAIEvaluator, OpenAILearner, OpenAIWorker
    from tilth.agents.backends.panel import Panel

    settings.require_model()
    online = sorted({settings.worker_backend, *settings.evaluator_backends()} & {"claude", "codex", "aider"})
    if online and settings.agent_network == "off":
        raise BadInput(f"agent_network = off would cut {' and '.join(online)} off its own model endpoint (it runs "
                       "inside the sandbox): set TILTH_AGENT_NETWORK=on")

    def evaluator(name: str) -> Evaluator:
        return OpenAIEvaluator(settings, meter) if name == "openai" else CliEvaluator(name, settings, meter)

    def describe(name: str, role: str) -> str:
        if name != "openai":
            return LABELS[name] + (f" `{settings.worker_command}`" if name == "command" and role == "worker" else
                                   f" `{settings.evaluator_command}`" if name == "command" else "")
        url, _, model = settings.endpoint(role)
        return f"openai-compatible at {url} ({model})"

    chosen = settings.worker_backend
    worker = OpenAIWorker(settings, meter) if chosen == "openai" else CliWorker(chosen, settings, meter)
    names = settings.evaluator_backends()
    members = [(name, evaluator(name)) for name in names]
    judge = members[0][1] if len(members) == 1 else Panel(members, settings.evaluator_policy)
    if chosen == "openai" or (chosen == "command" and settings.base_url):
        learner: Learner = OpenAILearner(settings, meter)
    else:
        learner = CliLearner(chosen, settings, meter)
    judges = " + ".join(describe(name, "evaluator") for name in names)
    policy = f" (panel, {settings.evaluator_policy} must accept)" if len(names) > 1 else ""
    label = f"worker: {describe(chosen, 'worker')}; evaluator: {judges}{policy}"
    if chosen == "openai" and names == ["openai"]:
        (url, _, worker_model), evaluator_model = settings.endpoint("worker"), settings.endpoint("evaluator")[2]
        label = f"openai-compatible at {url} (worker {worker_model}, evaluator {evaluator_model})"
    return Backend(choice.name, label, worker, judge, learner)
