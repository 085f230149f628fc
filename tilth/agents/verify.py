"""Acceptance criteria with a `verify` command: tilth runs each itself after the worker's attempt,
confined exactly like the worker's commands, in the worktree, with a timeout. A failing one rejects
the attempt (`verify_failed`) before the evaluator is asked, naming its failing tests, unless every
test it names failing failed on the base commit too (held against the baseline by the check bundle:
pre-existing, shown, not blocking); every result goes to the evaluator and to the ledger."""

from __future__ import annotations

from pathlib import Path

from tilth.agents.confinement import Confinement
from tilth.agents.failing_tests import PARSED_CHARS, excerpt, failing_ids, how_it_failed, listed
from tilth.agents.tools.shell import run_command
from tilth.store.events import EventLog, document
from tilth.store.ledger import Verdict, VerifyResult
from tilth.store.prd import Task
from tilth.store.script_runs import DEFAULT_KEEP, runs_dir

document({"verifies_run": ("the task's acceptance criteria with a `verify` command were run by tilth before the "
                           "evaluator; data.results: criterion, command, exit_code (null: timed out), run_id, "
                           "failing_ids (the failing tests its output names, when it names some), sandbox_hidden "
                           "(when it failed on paths the sandbox hides: set sandbox_expose)",
                           "results")})

TAIL_CHARS = 2000
EVIDENCE_CHARS = 500
VERIFY_FAILED = "verify_failed"


def run_verifies(task: Task, worktree: Path, timeout: float, events: EventLog, iteration: int | None,
                 sandbox: Confinement, keep_runs: int = DEFAULT_KEEP,
                 emit: bool = True) -> list[VerifyResult]:
    """Each verify command's result, in the order of the criteria; none when no criterion has one."""
    results, hidden = [], []
    for criterion in task.criteria:
        if not criterion.verify:
            continue
        outcome = run_command(criterion.verify, worktree, timeout=timeout, max_output=PARSED_CHARS,
                              env=sandbox.env, wrapper=list(sandbox.wrapper), runs=runs_dir(events.path.parent),
                              keep_runs=keep_runs)
        exit_code = None if outcome.timed_out else outcome.exit_code
        ids = failing_ids(outcome.output, exit_code)
        results.append(VerifyResult(criterion=criterion.text, command=criterion.verify, exit_code=exit_code,
                                    output_tail=excerpt(outcome.output, ids or [], TAIL_CHARS), run_id=outcome.run_id,
                                    failing_ids=ids))
        hidden.append(list(outcome.hidden))
    if results and emit:
        events.emit("verifies_run", task.id, iteration, results=[
            {"criterion": r.criterion, "command": r.command, "exit_code": r.exit_code, "run_id": r.run_id,
             **({"failing_ids": r.failing_ids} if r.failing_ids else {}),
             **({"sandbox_hidden": hidden[i]} if hidden[i] else {})} for i, r in enumerate(results)])
    return results


def blocks(result: VerifyResult) -> bool:
    """It failed, and not only on tests that failed on the base commit too."""
    return not result.passed and not result.only_failing_before


def verify_rejection(results: list[VerifyResult]) -> Verdict | None:
    """The rejection a failing verify earns (criterion, command, exit status, the failing tests it
    names, the output around them), or None."""
    failing = [r for r in results if blocks(r)]
    if not failing:
        return None
    named = "; ".join(f"criterion {r.criterion!r}: `{r.command}` {how_it_failed(r)}" for r in failing)
    tests = sorted({test for r in failing for test in r.newly_failing})
    return Verdict(verdict="reject", category=VERIFY_FAILED,
                   concern=f"tilth ran the criteria's verify commands and {len(failing)} failed "
                           f"(the evaluator was not asked): {named}.",
                   evidence=[f"$ {r.command}  ({r.status})\n{excerpt(r.output_tail, r.newly_failing, EVIDENCE_CHARS)}"
                             for r in failing],
                   next_step="Make each failing criterion's verify command exit 0"
                             + (f" (failing tests: {listed(tests)})." if tests else "."),
                   failing_tests=tests)


def verifies_block(results: list[VerifyResult]) -> str:
    """What the evaluator reads of the verify results."""
    if not results:
        return ""
    rows = [f"{'✓' if r.passed else '✗'} {r.criterion}\n$ {r.command}  -> {how_it_failed(r)}"
            + ("\n(every test it names failing failed on the base commit too, so tilth does not block on it; "
               "judge whether this criterion needs any of them to pass)" if r.only_failing_before else "")
            + f"\n{r.output_tail.rstrip()}" for r in results]
    return ("Acceptance criteria that tilth verified by running their command (each exited as shown; judge the "
            "criteria without a command yourself):\n" + "\n\n".join(rows))
