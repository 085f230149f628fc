"""The check bundle: what a run's checks and verify commands are run with (the configured and the
session's checks, where, confined how, their time limits, how many script artifacts are kept, and
the baseline their failures are held against), built once per run (`run/session_run.prepare`);
a lane's is the same moved to its own worktree and confinement (`at`). What `run` and `verify` return
is held against the baseline (`store/baseline.held_against`): which of the failing tests they name
failed on the base commit too."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tilth.agents.checks import CheckResult, enforce_checks, excused, held, run_checks
from tilth.agents.confinement import Confinement
from tilth.agents.verify import run_verifies
from tilth.core.config import Settings
from tilth.store.baseline import Baseline, held_against
from tilth.store.events import EventLog
from tilth.store.ledger import Verdict, VerifyResult
from tilth.store.prd import Task
from tilth.store.session import SessionRecord


@dataclass(frozen=True)
class CheckBundle:
    commands: tuple[str, ...]
    """The checks of `checks` in the settings, then the session's own (`tilth start --check`)."""
    worktree: Path
    sandbox: Confinement
    timeout: float
    verify_timeout: float
    keep_runs: int
    baseline: Baseline | None = None
    """The checks and verify commands on the base commit (`run/base_checks.py`); None until recorded."""

    @classmethod
    def of_run(cls, settings: Settings, record: SessionRecord, sandbox: Confinement) -> CheckBundle:
        return cls(tuple(settings.checks + record.checks), Path(record.worktree), sandbox, settings.tool_timeout,
                   settings.verify_timeout_s, settings.script_runs_keep)

    def at(self, worktree: Path, sandbox: Confinement) -> CheckBundle:
        """The same checks in another worktree, confined as that one is (a lane's)."""
        return replace(self, worktree=worktree, sandbox=sandbox)

    def run(self, events: EventLog, task_id: str | None, iteration: int) -> list[CheckResult]:
        return held(run_checks(list(self.commands), self.worktree, self.timeout, events, task_id, iteration,
                               self.sandbox, self.keep_runs), self.baseline)

    def verify(self, task: Task, events: EventLog, iteration: int | None, emit: bool = True) -> list[VerifyResult]:
        ran = run_verifies(task, self.worktree, self.verify_timeout, events, iteration, self.sandbox, self.keep_runs,
                           emit=emit)
        if self.baseline is None:
            return ran
        return [held_against(v, self.baseline.verify(task.id, v.criterion, v.command)) for v in ran]

    def judged(self, verdict: Verdict, checks: list[CheckResult]) -> Verdict:
        """The verdict, unless a check fails in a way the base commit did not (then a rejection)."""
        return enforce_checks(verdict, checks, self.baseline)

    def excused(self, checks: list[CheckResult]) -> list[str]:
        """The failing checks that failed the same way on the base commit, by command."""
        return [c.command for c in excused(checks, self.baseline)]
