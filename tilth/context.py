"""Fresh contexts: the text each worker and evaluator call starts from, built from files.

The worker never sees harness mechanics (status fields, file names of the session dir,
token counts); it sees the task, the plan as prose, recent outcomes and prior verdicts.
"""

from __future__ import annotations

from tilth.checks import CheckResult
from tilth.ledger import Case, LedgerEntry
from tilth.prd import Task
from tilth.progress import ProgressLine

DIFF_CHARS = 60_000


def _task_block(task: Task) -> str:
    criteria = "\n".join(f"- {c}" for c in task.acceptance_criteria)
    return f"Task {task.id}: {task.title}\n\n{task.description.strip()}\n\nAcceptance criteria:\n{criteria}"


def plan_prose(plan: list[Task], current: Task) -> str:
    lines = [f"{'->' if t.id == current.id else '  '} {t.id}: {t.title}" for t in plan]
    return (
        "The whole plan, for context only: work on the current task (marked ->) and nothing else.\n"
        + "\n".join(lines)
    )


def journal(lines: list[ProgressLine]) -> str:
    if not lines:
        return "Recent outcomes: none yet; this is the first task."
    rows = [f"- {line.task} {line.outcome} after {line.iterations} attempt(s): {line.title}" for line in lines]
    return "Recent outcomes:\n" + "\n".join(rows)


def prior_verdicts(history: list[LedgerEntry]) -> str:
    rows = []
    for entry in history:
        v = entry.verdict
        rows.append(f"- attempt {entry.iter}: {v.verdict} ({v.category or 'no category'}). "
                    f"Concern: {v.concern or '-'} Next step: {v.next_step or '-'}")
    return "The reviewer's previous verdicts on this task:\n" + "\n".join(rows)


def worker_prompt(task: Task, plan: list[Task], recent: list[ProgressLine], history: list[LedgerEntry]) -> str:
    parts = [_task_block(task), plan_prose(plan, task), journal(recent)]
    if history:
        parts.append(prior_verdicts(history))
        parts.append("Your earlier edits for this task are still in the working tree; continue from them.")
    return "\n\n".join(parts) + "\n"


def _case_block(case: Case | None) -> str:
    if case is None:
        return "The worker ended its turn without making a case."
    rows = [f"- {c.criterion}: {c.evidence}" for c in case.criteria]
    doubts = [f"- {u}" for u in case.uncertainties] or ["- none stated"]
    return "The worker's case:\n" + case.summary + "\n" + "\n".join(rows) + "\nUncertainties:\n" + "\n".join(doubts)


def capped(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {what} truncated: {len(text) - limit} more characters not shown ...]"


def checks_block(checks: list[CheckResult]) -> str:
    rows = []
    for c in checks:
        result = "timed out" if c.exit_code is None else f"exit code {c.exit_code}"
        rows.append(f"$ {c.command}  -> {result}\n{c.output_tail.rstrip()}")
    return "Checks run on the working tree (a failing check means the task cannot be accepted):\n" + "\n\n".join(rows)


def evaluator_prompt(task: Task, case: Case | None, diff: str, history: list[LedgerEntry],
                     checks: list[CheckResult] = ()) -> str:
    parts = [_task_block(task), _case_block(case),
             "The diff against the branch:\n" + (capped(diff, DIFF_CHARS, "diff") or "(no changes)")]
    if checks:
        parts.append(checks_block(list(checks)))
    if history:
        parts.append(prior_verdicts(history))
    return "\n\n".join(parts) + "\n"
