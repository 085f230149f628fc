"""Acceptance criteria with a `verify` command: tilth runs each itself after the worker's attempt,
confined exactly like the worker's commands, in the worktree, with a timeout. A failing one rejects
the attempt (`verify_failed`) before the evaluator is asked; every result goes to the evaluator
and to the ledger."""

from __future__ import annotations

from pathlib import Path

from tilth.agents.confinement import Confinement
from tilth.agents.tools.shell import run_command
from tilth.store.events import EventLog, document
from tilth.store.ledger import Verdict, VerifyResult
from tilth.store.prd import Task
from tilth.store.script_runs import DEFAULT_KEEP, runs_dir

document({"verifies_run": ("the task's acceptance criteria with a `verify` command were run by tilth before the "
                           "evaluator; data.results: criterion, command, exit_code (null: timed out), run_id, "
                           "sandbox_hidden (when it failed on paths the sandbox hides: set sandbox_expose)",
                           "results")})

TAIL_CHARS = 2000
VERIFY_FAILED = "verify_failed"


def run_verifies(task: Task, worktree: Path, timeout: float, events: EventLog, iteration: int | None,
                 sandbox: Confinement, keep_runs: int = DEFAULT_KEEP,
                 emit: bool = True) -> list[VerifyResult]:
    """Each verify command's result, in the order of the criteria; none when no criterion has one."""
    results, hidden = [], []
    for criterion in task.criteria:
        if not criterion.verify:
            continue
        outcome = run_command(criterion.verify, worktree, timeout=timeout, max_output=TAIL_CHARS * 4,
                              env=sandbox.env, wrapper=sandbox.wrapper, runs=runs_dir(events.path.parent),
                              keep_runs=keep_runs)
        results.append(VerifyResult(criterion=criterion.text, command=criterion.verify,
                                    exit_code=None if outcome.timed_out else outcome.exit_code,
                                    output_tail=outcome.output[-TAIL_CHARS:], run_id=outcome.run_id))
        hidden.append(list(outcome.hidden))
    if results and emit:
        events.emit("verifies_run", task.id, iteration, results=[
            {"criterion": r.criterion, "command": r.command, "exit_code": r.exit_code, "run_id": r.run_id,
             **({"sandbox_hidden": hidden[i]} if hidden[i] else {})} for i, r in enumerate(results)])
    return results


def verify_rejection(results: list[VerifyResult]) -> Verdict | None:
    """The rejection a failing verify earns (criterion, command, exit status, output tail), or None."""
    failing = [r for r in results if not r.passed]
    if not failing:
        return None
    named = "; ".join(f"criterion {r.criterion!r}: `{r.command}` {r.status}" for r in failing)
    return Verdict(verdict="reject", category=VERIFY_FAILED,
                   concern=f"tilth ran the criteria's verify commands and {len(failing)} failed "
                           f"(the evaluator was not asked): {named}.",
                   evidence=[f"$ {r.command}  ({r.status})\n{r.output_tail[-500:]}" for r in failing],
                   next_step="Make each failing criterion's verify command exit 0.")


def verifies_block(results: list[VerifyResult]) -> str:
    """What the evaluator reads of the verify results."""
    if not results:
        return ""
    rows = [f"{'✓' if r.passed else '✗'} {r.criterion}\n$ {r.command}  -> {r.status}\n{r.output_tail.rstrip()}"
            for r in results]
    return ("Acceptance criteria that tilth verified by running their command (each exited as shown; judge the "
            "criteria without a command yourself):\n" + "\n\n".join(rows))
