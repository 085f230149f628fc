"""Deterministic checks: commands (e.g. `pytest -q`) run in the worktree before each
evaluation. Their results go to the evaluator, and a failing check can never be accepted, unless
it already failed on the base commit (`store/baseline.py`) for the same tests (the failing test ids
of pytest's summary lines, `FAILED <id>` / `ERROR <id>`, compared when both runs have them); nor can
an empty diff, unless the task allows it."""

from __future__ import annotations

import re
from pathlib import Path


from tilth.agents.confinement import Confinement
from tilth.agents.tools.shell import run_command
from tilth.store.baseline import Baseline
from tilth.store.events import EventLog, document
from tilth.store.ledger import CommandRun, Verdict
from tilth.store.script_runs import DEFAULT_KEEP, runs_dir

document({"checks_run": ("deterministic checks ran before the evaluator; data.results: command, exit_code, run_id "
                         "(the check's script artifact, `runs/run-<run_id>/`; null when script_runs_keep is 0), sandbox_hidden "
                         "(when it failed on paths this machine has that the sandbox hides: set sandbox_expose)",
                         "results")})

TAIL_CHARS = 2000
PARSED_CHARS = 400_000
"""How much of a check's output is read for failing test ids (pytest's summary comes last)."""
_SUMMARY = re.compile(r"^=+ short test summary info =+$", re.M)
_FAILING = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def failing_ids(output: str, exit_code: int | None) -> list[str] | None:
    """The failing test ids of pytest's short summary (`-rA`, `-rfE`, the default), sorted; [] for a
    pass; None when the output has no summary to read them from."""
    if exit_code == 0:
        return []
    summary = list(_SUMMARY.finditer(output))
    if not summary:
        return None
    ids = sorted({m.group(1) for m in _FAILING.finditer(output, summary[-1].end())})
    return ids or None


class CheckResult(CommandRun):
    """A `--check` command's run; `failing_ids` when its output names failing tests."""

    failing_ids: list[str] | None = None
    """The failing test ids its output names (`failing_ids`); None when not parseable."""


def run_checks(commands: list[str], worktree: Path, timeout: float, events: EventLog, task_id: str | None,
               iteration: int, sandbox: Confinement, keep_runs: int = DEFAULT_KEEP) -> list[CheckResult]:
    """Each command's result; each leaves its script artifact in the session dir (the journal's)."""
    results, hidden = [], []
    for command in commands:
        outcome = run_command(command, worktree, timeout=timeout, max_output=PARSED_CHARS, env=sandbox.env,
                              wrapper=sandbox.wrapper, runs=runs_dir(events.path.parent), keep_runs=keep_runs,
                              max_processes=sandbox.max_processes)
        exit_code = None if outcome.timed_out else outcome.exit_code
        results.append(CheckResult(command=command, exit_code=exit_code, output_tail=outcome.output[-TAIL_CHARS:],
                                   run_id=outcome.run_id, failing_ids=failing_ids(outcome.output, exit_code)))
        hidden.append(list(outcome.hidden))
    if results and task_id is not None:
        events.emit("checks_run", task_id, iteration,
                    results=[{"command": r.command, "exit_code": r.exit_code, "run_id": r.run_id,
                              **({"sandbox_hidden": hidden[i]} if hidden[i] else {})} for i, r in enumerate(results)])
    return results


def new_failures(check: CheckResult, baseline: Baseline | None) -> list[str] | None:
    """What of a failing check is this session's doing: None when it failed the same way on the base
    commit (not blamed), else the failing ids not failing before ([] when they cannot be compared)."""
    before = baseline.check(check.command) if baseline is not None else None
    if before is None or before.passed:
        return check.failing_ids or []
    if check.failing_ids is None or before.failing_ids is None:
        return None  # failing before and after; nothing finer to compare
    new = sorted(set(check.failing_ids) - set(before.failing_ids))
    return new or None


def excused(checks: list[CheckResult], baseline: Baseline | None) -> list[CheckResult]:
    """The failing checks that already failed on the base commit, for the same tests."""
    return [c for c in checks if not c.passed and new_failures(c, baseline) is None]


def enforce_checks(verdict: Verdict, checks: list[CheckResult], baseline: Baseline | None = None) -> Verdict:
    failing = [(c, new) for c in checks if not c.passed and (new := new_failures(c, baseline)) is not None]
    if not verdict.accepted or not failing:
        return verdict
    def named(check: CheckResult, new: list[str]) -> str:
        before = baseline.check(check.command) if baseline is not None else None
        regressed = f"; newly failing: {', '.join(new[:10])}" if new and before is not None and not before.passed else ""
        return f"`{check.command}` ({'timeout' if check.exit_code is None else f'exit {check.exit_code}'}{regressed})"

    names = ", ".join(named(c, new) for c, new in failing)
    return Verdict(verdict="reject", category="check_failed",
                   concern=f"The evaluator accepted, but required checks failed: {names}.",
                   evidence=[c.output_tail[-500:] for c, _ in failing],
                   next_step="Make the failing checks pass.")


def enforce_change(verdict: Verdict, empty_diff: bool, allow_empty: bool) -> Verdict:
    """An accepted empty diff would commit nothing, so the task would be "done" with no work."""
    if not verdict.accepted or not empty_diff or allow_empty:
        return verdict
    return Verdict(verdict="reject", category="no_change",
                   concern="The evaluator accepted, but the diff is empty: nothing would be committed.",
                   next_step="Make the changes the task asks for in the worktree (or mark the task "
                             "`allow_empty` in the plan if it needs no change).")
