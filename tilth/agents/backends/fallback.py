"""A fallback agent for a role (`worker_fallback`, `evaluator_fallback`): when the role's backend
reports a usage limit that lifts more than `fallback_after_s` from now, the fallback does the
turn instead of the session pausing, and every turn after it until that time; the first turn
after it goes to the primary again. A nearer limit, or one the fallback hits too, is raised as
before (the session pauses). The limit's time is the reset the agent gave, else
`usage_limit_backoff_s` from now.

The switch and the return are journal events (`agent_fallback`, `agent_primary_again`); each model
call says which backend made it (`model_call` data.backend), so the report and status show the
cost per backend; the ledger entry of an attempt a fallback played in names it (`fallback`).
The time the primary is out is this run's: a new run tries the primary first.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Callable, TypeVar

from tilth.agents.protocol import EvaluationJob, Evaluator, UsageLimited, Worker, WorkerJob
from tilth.core.clock import iso, utc_now
from tilth.core.config import Settings
from tilth.store.events import EventLog, document
from tilth.store.ledger import Case, Question, Verdict

document({
    "agent_fallback": ("a role's backend hit a usage limit that lifts later than fallback_after_s: its fallback "
                       "takes the turns until then; data: role, primary, fallback, reason, until, reset_given",
                       "role primary fallback reason until reset_given"),
    "agent_primary_again": ("the time a role's primary backend was out has passed: it takes the turns again; data: "
                            "role, primary, fallback", "role primary fallback"),
})

Answer = TypeVar("Answer")


class Fallback:
    """One role's primary and fallback names, and until when the primary is out."""

    def __init__(self, role: str, primary: str, fallback: str, settings: Settings) -> None:
        self.role, self.primary, self.fallback, self.settings = role, primary, fallback, settings
        self.until: datetime | None = None
        self.acting: str | None = None
        """The fallback's name when it made the last turn, else None."""

    def turn(self, events: EventLog, task_id: str, iteration: int, primary: Callable[[], Answer],
             fallback: Callable[[], Answer]) -> Answer:
        if self.until is not None and utc_now() >= self.until:
            self.until = None
            events.emit("agent_primary_again", task_id, iteration, role=self.role, primary=self.primary,
                        fallback=self.fallback)
        if self.until is None:
            self.acting = None
            try:
                return primary()
            except UsageLimited as limit:
                lifts = limit.resets_at or utc_now() + timedelta(seconds=self.settings.usage_limit_backoff_s)
                if (lifts - utc_now()).total_seconds() <= self.settings.fallback_after_s:
                    raise
                self.until = lifts
                events.emit("agent_fallback", task_id, iteration, role=self.role, primary=self.primary,
                            fallback=self.fallback, reason=f"usage limit: {limit}", until=iso(lifts),
                            reset_given=limit.resets_at is not None)
        self.acting = self.fallback
        return fallback()


class FallbackWorker:
    def __init__(self, primary: Worker, fallback: Worker, state: Fallback) -> None:
        self.primary, self.fallback, self.state = primary, fallback, state

    @property
    def fallback_acting(self) -> str | None:
        return self.state.acting

    def work(self, job: WorkerJob) -> Case | Question | None:
        return self.state.turn(job.events, job.task.id, job.iteration, lambda: self.primary.work(job),
                               lambda: self.fallback.work(job))


class FallbackEvaluator:
    def __init__(self, primary: Evaluator, fallback: Evaluator, state: Fallback) -> None:
        self.primary, self.fallback, self.state = primary, fallback, state

    @property
    def fallback_acting(self) -> str | None:
        return self.state.acting

    def evaluate(self, job: EvaluationJob) -> Verdict:
        return self.state.turn(job.events, job.task.id, job.iteration, lambda: self.primary.evaluate(job),
                               lambda: self.fallback.evaluate(job))


def acting_fallbacks(*roles: tuple[str, object]) -> dict[str, str]:
    """The roles whose fallback made their last turn, by role: what an attempt's ledger entry records."""
    return {role: acting for role, agent in roles if isinstance(acting := getattr(agent, "fallback_acting", None), str)}
