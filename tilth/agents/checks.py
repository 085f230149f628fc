"""Deterministic checks: commands (e.g. `pytest -q`) run in the worktree before each
evaluation. Their results go to the evaluator, and a failing check can never be accepted;
nor can an empty diff, unless the task allows it."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from tilth.agents.confinement import Confinement
from tilth.agents.tools.shell import run_command
from tilth.store.events import EventLog, document
from tilth.store.ledger import Verdict
from tilth.store.script_runs import DEFAULT_KEEP, runs_dir

document({"checks_run": "deterministic checks ran before the evaluator; data.results: command, exit_code, run_id "
                        "(the check's script artifact, `runs/run-<run_id>/`; null when script_runs_keep is 0)"})

TAIL_CHARS = 2000


class CheckResult(BaseModel):
    command: str
    exit_code: int | None
    """None when the command timed out."""
    output_tail: str
    run_id: str | None = None
    """The script artifact under the session's `runs/`, when one was written."""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


def run_checks(commands: list[str], worktree: Path, timeout: float, events: EventLog, task_id: str,
               iteration: int, sandbox: Confinement | None = None, keep_runs: int = DEFAULT_KEEP) -> list[CheckResult]:
    """Each command's result; each leaves its script artifact in the session dir (the journal's)."""
    results, sandbox = [], sandbox or Confinement()
    for command in commands:
        outcome = run_command(command, worktree, timeout=timeout, max_output=TAIL_CHARS * 4, env=sandbox.env,
                              wrapper=sandbox.wrapper, runs=runs_dir(events.path.parent), keep_runs=keep_runs,
                              max_processes=sandbox.max_processes)
        exit_code = None if outcome.timed_out else outcome.exit_code
        results.append(CheckResult(command=command, exit_code=exit_code, output_tail=outcome.output[-TAIL_CHARS:],
                                   run_id=outcome.run_id))
    if results:
        events.emit("checks_run", task_id, iteration,
                    results=[{"command": r.command, "exit_code": r.exit_code, "run_id": r.run_id} for r in results])
    return results


def enforce_checks(verdict: Verdict, checks: list[CheckResult]) -> Verdict:
    failing = [c for c in checks if not c.passed]
    if not verdict.accepted or not failing:
        return verdict
    names = ", ".join(f"`{c.command}` (exit {c.exit_code if c.exit_code is not None else 'timeout'})" for c in failing)
    return Verdict(verdict="reject", category="check_failed",
                   concern=f"The evaluator accepted, but required checks failed: {names}.",
                   evidence=[c.output_tail[-500:] for c in failing],
                   next_step="Make the failing checks pass.")


def enforce_change(verdict: Verdict, empty_diff: bool, allow_empty: bool) -> Verdict:
    """An accepted empty diff would commit nothing, so the task would be "done" with no work."""
    if not verdict.accepted or not empty_diff or allow_empty:
        return verdict
    return Verdict(verdict="reject", category="no_change",
                   concern="The evaluator accepted, but the diff is empty: nothing would be committed.",
                   next_step="Make the changes the task asks for in the worktree (or mark the task "
                             "`allow_empty` in the plan if it needs no change).")
