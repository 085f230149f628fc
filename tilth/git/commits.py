"""The shape of tilth's commits: subjects, bodies and trailers, written and read back.

Git is the source of truth for what is done: a task whose commit is on the branch is done
whatever prd.json says. These trailers are how recovery finds them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

from tilth.git.gitops import first_parent_chain
from tilth.store.ledger import LedgerEntry
from tilth.store.prd import Task

SESSION = "Tilth-Session"
TASK = "Tilth-Task"
ITERATIONS = "Tilth-Iterations"
OUTCOME = "Tilth-Outcome"
REASON = "Tilth-Reason"
LEFT_OUT = "Tilth-Left-Out"
KEPT_OFF = "Tilth-Kept-Off"
ORIGIN = "Tilth-Origin"
SHOWN_LEFT_OUT = 50


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _trailers(pairs: list[tuple[str, str]]) -> str:
    return "\n".join(f"{key}: {_one_line(value)}" for key, value in pairs)


def verified_lines(entry: LedgerEntry) -> list[str]:
    """What tilth itself established on the accepted attempt, one line each: the guard, every check
    and verify command with its result, the evaluator."""
    counted = (f", {entry.tests_counted} test ids listed on the task's starting point still collected"
               if entry.tests_counted else "")
    lines = [f"- guard: passed (no test deleted, emptied or newly skipped{counted}; no protected path or "
             "symlink leaving the worktree beyond what the task's may_change allows)"]
    for check in entry.checks:
        status = "timed out" if check.exit_code is None else f"exit {check.exit_code}"
        said = ("passed (exit 0)" if check.exit_code == 0 else
                f"{status}, failing the same way on the base commit (not blamed)" if check.excused else status)
        lines.append(f"- check `{_one_line(check.command)}`: {said}")
    for verify in entry.verifies:
        said = "passed (exit 0)" if verify.passed else verify.status
        lines.append(f"- verify `{_one_line(verify.command)}` (criterion: {_one_line(verify.criterion, 120)}): {said}")
    lines.append(f"- evaluator: accepted attempt {entry.iter}")
    return lines


def done_message(session_id: str, task: Task, summary: str, iterations: int, entry: LedgerEntry | None = None) -> str:
    """The task commit's message: what tilth verified (with `entry`, the accepted attempt), then the
    worker's own summary as the worker's, then the trailers."""
    said = summary.strip() or "(no summary)"
    body = f"Worker's summary: {said}"
    if entry is not None:
        body = ("Verified by tilth on the accepted attempt, before this commit:\n" + "\n".join(verified_lines(entry))
                + "\n\n" + body)
    trailers = _trailers([(SESSION, session_id), (TASK, task.id), (ITERATIONS, str(iterations))])
    return f"{task.id}: {_one_line(task.title, 120)}\n\n{body}\n\n{trailers}\n"


def _left_out(refused: list[str]) -> str:
    """The body's paragraph naming what the placeholder does not hold, or nothing."""
    if not refused:
        return ""
    more = f"\n- and {len(refused) - SHOWN_LEFT_OUT} more (the ledger lists them)" if len(refused) > SHOWN_LEFT_OUT else ""
    return ("\n\nLeft out (changes tilth refuses, restored as the task's starting point has them):\n"
            + "\n".join(f"- {_one_line(r)}" for r in refused[:SHOWN_LEFT_OUT]) + more)


def failed_message(session_id: str, task: Task, reason: str, iterations: int, last_concern: str,
                   left_out: list[str] | None = None) -> str:
    body = (
        "Placeholder for a task that ran out of attempts. It holds the partial work, above the task commits;\n"
        f"`tilth resume {session_id}` retries the task from these edits and replaces this with its one commit."
    )
    if last_concern.strip():
        body += f"\n\nLast concern: {last_concern.strip()}"
    body += _left_out(left_out or [])
    trailers = _trailers(
        [(SESSION, session_id), (TASK, task.id), (ITERATIONS, str(iterations)), (OUTCOME, "failed"), (REASON, reason)]
        + ([(LEFT_OUT, "; ".join(left_out))] if left_out else [])
    )
    return f"FAILED ({task.id}): {_one_line(task.title, 120)}\n\n{body}\n\n{trailers}\n"


def parked_message(session_id: str, task: Task, asked_by: str, iterations: int, question: str, context: str,
                   left_out: list[str] | None = None) -> str:
    body = (
        f"Placeholder for a task waiting for a person's answer (the {asked_by} asked). It holds the partial work;\n"
        f"`tilth answer {session_id} {task.id} \"...\"` puts the task back, and its retry continues from these edits."
        f"\n\nQuestion: {question.strip()}"
    )
    if context.strip():
        body += f"\n\nContext: {context.strip()}"
    body += _left_out(left_out or [])
    trailers = _trailers([(SESSION, session_id), (TASK, task.id), (ITERATIONS, str(iterations)), (OUTCOME, "parked"),
                          (REASON, f"needs_human ({asked_by})")]
                         + ([(LEFT_OUT, "; ".join(left_out))] if left_out else []))
    return f"PARKED ({task.id}): {_one_line(task.title, 120)}\n\n{body}\n\n{trailers}\n"


@dataclass(frozen=True)
class TaskCommit:
    sha: str
    task_id: str
    failed: bool
    iterations: int
    reason: str
    title: str
    parked: bool = False
    """A PARKED placeholder: the task waits for an answer (never also `failed`)."""
    left_out: str = ""
    """A placeholder's `Tilth-Left-Out`: the refused changes it does not hold (cut to one line)."""
    origin: str = ""
    """A placeholder re-applied above a later task commit (`git/shelf.py`): the placeholder as first made,
    whose outcome the progress line and the daily memory already hold."""

    @property
    def first(self) -> str:
        return self.origin or self.sha

    @property
    def placeholder(self) -> bool:
        return self.failed or self.parked

    @property
    def outcome(self) -> str:
        """What progress.txt says of it: `done`, `failed:<reason>` or `parked`."""
        return "parked" if self.parked else "failed:iterations_exhausted" if self.failed else "done"


def read_task_commit(commit: pygit2.Commit) -> TaskCommit | None:
    trailers = commit.message_trailers
    task_id = trailers.get(TASK)
    if not task_id:
        return None
    try:
        iterations = int(trailers.get(ITERATIONS, "0"))
    except ValueError:
        iterations = 0
    subject = commit.message.split("\n", 1)[0]
    title = subject.split(": ", 1)[1] if ": " in subject else subject
    return TaskCommit(
        sha=str(commit.id),
        task_id=task_id,
        failed=trailers.get(OUTCOME) == "failed",
        parked=trailers.get(OUTCOME) == "parked",
        iterations=iterations,
        reason=trailers.get(REASON, ""),
        title=title,
        left_out=trailers.get(LEFT_OUT, ""),
        origin=trailers.get(ORIGIN, ""),
    )


def worker_commits(repo: pygit2.Repository, base_commit: str) -> list[str]:
    """Commits an agent made itself on top of tilth's last commit (or the base), newest first."""
    found = []
    for commit in first_parent_chain(repo, base_commit):
        if read_task_commit(commit) is not None:
            break
        found.append(str(commit.id))
    return found


def branch_task_commits(repo: pygit2.Repository, base_commit: str) -> list[TaskCommit]:
    """tilth's commits on the session branch since its base, oldest first."""
    found = (read_task_commit(c) for c in first_parent_chain(repo, base_commit))
    return [c for c in reversed(list(found)) if c is not None]
