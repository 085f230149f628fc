"""Deterministic checks: commands (e.g. `pytest -q`) run in the worktree before each
evaluation. Their results go to the evaluator, and a failing check can never be accepted, unless
it already failed on the base commit (`store/baseline.py`) for the same tests: the failing tests its
output names (`agents/failing_tests.py`: pytest, unittest, cargo test) are compared when both runs
name them; failing before and after is pre-existing, a newly failing test blocks and is named; a
check that names none and failed at base is excused as failing at base. Nor can an empty diff be
accepted, unless the task allows it."""

from __future__ import annotations

from pathlib import Path


from tilth.agents.confinement import Confinement
from tilth.agents.failing_tests import PARSED_CHARS, excerpt, failing_ids, how_it_failed, listed
from tilth.agents.tools.shell import run_command
from tilth.store.baseline import Baseline, held_against
from tilth.store.events import EventLog, document
from tilth.store.ledger import CommandRun, Verdict
from tilth.store.script_runs import DEFAULT_KEEP, runs_dir

document({"checks_run": ("deterministic checks ran before the evaluator; data.results: command, exit_code, run_id "
                         "(the check's script artifact, `runs/run-<run_id>/`; null when script_runs_keep is 0), "
                         "failing_ids (the failing tests its output names, when it names some), sandbox_hidden "
                         "(when it failed on paths this machine has that the sandbox hides: set sandbox_expose)",
                         "results")})

TAIL_CHARS = 2000
"""The output kept per check: whole lines, those naming its failing tests kept (`failing_tests.excerpt`)."""
EVIDENCE_CHARS = 500
"""The output a rejection quotes per failing check, cut the same way around the tests it names."""

class CheckResult(CommandRun):
    """A `--check` command's run; `failing_ids` when its output names failing tests."""


def run_checks(commands: list[str], worktree: Path, timeout: float, events: EventLog, task_id: str | None,
               iteration: int, sandbox: Confinement, keep_runs: int = DEFAULT_KEEP) -> list[CheckResult]:
    """Each command's result; each leaves its script artifact in the session dir (the journal's)."""
    results, hidden = [], []
    for command in commands:
        outcome = run_command(command, worktree, timeout=timeout, max_output=PARSED_CHARS, env=sandbox.env,
                              wrapper=list(sandbox.wrapper), runs=runs_dir(events.path.parent), keep_runs=keep_runs,
                              max_processes=sandbox.max_processes)
        exit_code = None if outcome.timed_out else outcome.exit_code
        ids = failing_ids(outcome.output, exit_code)
        results.append(CheckResult(command=command, exit_code=exit_code, run_id=outcome.run_id, failing_ids=ids,
                                   output_tail=excerpt(outcome.output, ids or [], TAIL_CHARS)))
        hidden.append(list(outcome.hidden))
    if results and task_id is not None:
        events.emit("checks_run", task_id, iteration,
                    results=[{"command": r.command, "exit_code": r.exit_code, "run_id": r.run_id,
                              **({"failing_ids": r.failing_ids} if r.failing_ids else {}),
                              **({"sandbox_hidden": hidden[i]} if hidden[i] else {})} for i, r in enumerate(results)])
    return results


def held(checks: list[CheckResult], baseline: Baseline | None) -> list[CheckResult]:
    """Each check marked with how it failed on the base commit (`baseline.held_against`)."""
    return [held_against(c, baseline.check(c.command) if baseline is not None else None) for c in checks]


def new_failures(check: CheckResult, baseline: Baseline | None) -> list[str] | None:
    """What of a failing check is this session's doing: None when it failed the same way on the base
    commit (not blamed), else the failing ids not failing before ([] when it names none)."""
    marked = held_against(check, baseline.check(check.command) if baseline is not None else None)
    if not marked.failed_at_base:
        return marked.failing_ids or []
    if not marked.compared:
        return None  # failing before and after; nothing finer to compare
    return marked.newly_failing or None


def excused(checks: list[CheckResult], baseline: Baseline | None) -> list[CheckResult]:
    """The failing checks that already failed on the base commit, for the same tests."""
    return [c for c in checks if not c.passed and new_failures(c, baseline) is None]


def check_words(check: CommandRun) -> str:
    """`exit 1; newly failing: tests/t.py::test_a`, `timeout`: a held check as a verdict says it."""
    return how_it_failed(check, status="timeout" if check.exit_code is None else None)


def enforce_checks(verdict: Verdict, checks: list[CheckResult], baseline: Baseline | None = None) -> Verdict:
    """The verdict, unless a check fails in a way the base commit did not: then a rejection naming
    each such check with its newly failing tests, and the failing checks that do not block."""
    marked = held(checks, baseline)
    failing = [(c, new) for c in marked if not c.passed and (new := new_failures(c, baseline)) is not None]
    if not verdict.accepted or not failing:
        return verdict
    names = ", ".join(f"`{c.command}` ({check_words(c)})" for c, _ in failing)
    excused_too = [c for c in marked if not c.passed and all(c is not f for f, _ in failing)]
    aside = " Not blocking: " + ", ".join(
        f"`{c.command}` ({check_words(c)})" for c in excused_too) + "." if excused_too else ""
    tests = sorted({test for _, new in failing for test in new})
    return Verdict(verdict="reject", category="check_failed",
                   concern=f"The evaluator accepted, but required checks failed: {names}.{aside}",
                   evidence=[f"$ {c.command}  ({c.status})\n{excerpt(c.output_tail, new, EVIDENCE_CHARS)}"
                             for c, new in failing],
                   next_step="Make the failing checks pass" + (f" (newly failing: {listed(tests)})." if tests else "."),
                   failing_tests=tests)


def enforce_change(verdict: Verdict, empty_diff: bool, allow_empty: bool) -> Verdict:
    """An accepted empty diff would commit nothing, so the task would be "done" with no work."""
    if not verdict.accepted or not empty_diff or allow_empty:
        return verdict
    return Verdict(verdict="reject", category="no_change",
                   concern="The evaluator accepted, but the diff is empty: nothing would be committed.",
                   next_step="Make the changes the task asks for in the worktree (or mark the task "
                             "`allow_empty` in the plan if it needs no change).")
