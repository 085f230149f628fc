"""How a task ends (`end_task`: a commit, a FAILED or a PARKED placeholder, one table of what differs),
written in one crash-safe order (and its daily memory line):

    commit (git is the truth)  ->  prd.json status  ->  progress line  ->  event

A FAILED or PARKED placeholder holds the task's partial work without what the task may not keep
(`run/keeping.py`: left out, put back in the worktree too, and named in the message and the ledger).

A kill -9 between any two steps is repaired by recovery.reconcile, which re-derives the
later steps from the commit's trailers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pygit2

from tilth.core.config import Settings
from tilth.core.faults import checkpoint
from tilth.git.commits import done_message, failed_message, parked_message
from tilth.git.gitops import (branch_tip, commit_staged, descends_from, ensure_head, first_parent_chain, move_branch,
                              soft_reset, stage_all)
from tilth.run.keeping import Placeholder, leave_out
from tilth.run.secret_gate import Added, screened
from tilth.store.answers import record_question
from tilth.store.daily_memory import agent_label, note_outcome
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths
from tilth.store.ledger import LedgerEntry
from tilth.store.prd import Task, TaskStatus, set_status
from tilth.store.progress import append_progress, outcome_line
from tilth.store.session import SessionRecord

document(
    {
        "head_repaired": ("the worktree's HEAD no longer named the session branch and was pointed back "
                          "before staging; data: was (what HEAD said), branch", "was branch"),
        "branch_repaired": ("the session branch had been moved off tilth's last commit (not onto a descendant) "
                            "and was set back before staging; the worktree's files are kept; data: was "
                            "(the tip found, null if the branch was deleted), restored", "was restored"),
        "nested_repo_skipped": ("data.paths: nested git repositories left out of the commit", "paths"),
        "worker_commits_folded": ("commits the agent made itself were soft-reset into the task's changes; "
                                  "data: shas, onto", "shas onto"),
        "commit": ("a task commit was made; data: sha, iterations", "sha iterations"),
        "task_done": ("the task is done: commit made, status flipped, progress line written", "sha"),
        "failed_commit": ("a FAILED placeholder was made; data: sha, reason", "sha reason"),
        "task_failed": ("the task failed: placeholder made, status flipped, progress line written", "sha reason"),
        "parked_commit": ("a PARKED placeholder was made; data: sha, asked_by (worker|evaluator|stall breaker), question",
                          "sha asked_by question"),
        "task_parked": ("the task waits for a person's answer (`tilth answer`): placeholder made, status flipped, "
                        "progress line written; the session goes on with tasks that do not depend on it; data: sha, "
                        "asked_by, question", "sha asked_by question"),
    }
)

EXHAUSTED = "iterations_exhausted"


@dataclass
class Workspace:
    """What every step of a running session needs."""

    paths: SessionPaths
    record: SessionRecord
    repo: pygit2.Repository
    events: EventLog
    tip: str = field(default="")
    """The branch commit tilth last wrote or adopted; set by recovery.reconcile at the start of a run."""
    protected: tuple[str, ...] | None = None
    """The `protected_paths` in force (`session_run.prepare` sets the run's); None: the session's recorded ones."""

    def protected_paths(self) -> list[str]:
        if self.protected is not None:
            return list(self.protected)
        recorded = self.record.settings.get("protected_paths")
        return [str(p) for p in recorded] if isinstance(recorded, list) else []

    def leave_out(self, task: Task, iteration: int, placeholder: Placeholder) -> list[str]:
        """The staged changes the task may not keep, put back before a placeholder (`run/keeping.py`)."""
        return leave_out(self.repo, self.paths, self.events, self.protected_paths(), task.may_change, task.id,
                         iteration, placeholder)


def repair_head(ws: Workspace, task_id: str | None = None, iteration: int | None = None) -> None:
    moved = ensure_head(ws.repo, ws.record.branch)
    if moved is not None:
        ws.events.emit("head_repaired", task_id, iteration, was=moved, branch=ws.record.branch)


def guard_branch(ws: Workspace, task_id: str | None, iteration: int | None) -> None:
    """Before any stage or commit: HEAD names the session branch, and the branch is at tilth's
    last commit. Agent commits on top are folded; any other move is undone, keeping the files."""
    repair_head(ws, task_id, iteration)
    tip = branch_tip(ws.repo, ws.record.branch)
    if tip == ws.tip:
        return
    if tip is not None and descends_from(ws.repo, tip, ws.tip):
        made = [str(c.id) for c in first_parent_chain(ws.repo, ws.tip)]
        soft_reset(ws.repo, ws.tip)
        ws.events.emit("worker_commits_folded", task_id, iteration, shas=made, onto=ws.tip)
        return
    move_branch(ws.repo, ws.record.branch, ws.tip)
    ws.events.emit("branch_repaired", task_id, iteration, was=tip, restored=ws.tip)


def stage(ws: Workspace, task: Task, iteration: int) -> tuple[list[Added], pygit2.Diff]:
    """Stage the worktree; the secrets the change added (already replaced, `run/secret_gate.py`), and
    the staged diff (HEAD -> index) as it then is."""
    guard_branch(ws, task.id, iteration)
    nested = stage_all(ws.repo)
    if nested:
        ws.events.emit("nested_repo_skipped", task.id, iteration, paths=nested)
    return screened(ws.repo, Path(ws.record.worktree), ws.events, task.id, iteration)


Outcome = Literal["done", "failed", "parked"]


@dataclass(frozen=True)
class Ending:
    """How one kind of task end differs; the order of the steps is `end_task`'s alone."""

    points: str
    """The fault points' stem (`before_<stem>`, `after_<stem>`); then `after_status` (done) or `after_<status>_status`."""
    status: TaskStatus
    placeholder: Placeholder | None
    """What a placeholder is called (`run/keeping.py` leaves out what the task may not keep); None for a task commit."""


ENDINGS: dict[str, Ending] = {
    "done": Ending("commit", TaskStatus.done, None),
    "failed": Ending("failed_commit", TaskStatus.failed, "failed"),
    "parked": Ending("parked_commit", TaskStatus.parked, "parked"),
}


def end_task(ws: Workspace, task: Task, outcome: Outcome, entry: LedgerEntry, restage: bool = True) -> str:
    """End a task as a commit (`done`: `entry` is the accepted attempt), a FAILED placeholder (`failed`:
    the last attempt) or a PARKED one (`parked`: the attempt that asks), in the crash-safe order; its sha.
    `restage=False` commits the index exactly as the evaluator's diff saw it (an accepted attempt in this
    process); recovery restages, since the process that staged it is gone. A question goes to
    `answers/<task>.jsonl` first (once per iteration), so a PARKED placeholder always has the question
    `tilth answer` answers."""
    ending, verdict, iteration = ENDINGS[outcome], entry.verdict, entry.iter
    if outcome == "parked":
        record_question(ws.paths.dir, task.id, iteration, verdict.asked_by, verdict.question, verdict.concern)
    checkpoint(f"before_{ending.points}", task.id)
    if restage or ending.placeholder is not None:
        stage(ws, task, iteration)
    else:
        guard_branch(ws, task.id, iteration)
    left_out = ws.leave_out(task, iteration, ending.placeholder) if ending.placeholder is not None else []
    sha = commit_staged(ws.repo, ws.record.branch, message_of(ws, task, outcome, entry, left_out), ws.tip)
    ws.tip = sha
    journal(ws, task.id, outcome, entry, sha, ended=False)
    checkpoint(f"after_{ending.points}", task.id)
    set_status(ws.paths.prd, task.id, ending.status)
    checkpoint("after_status" if outcome == "done" else f"after_{outcome}_status", task.id)
    label = f"failed:{EXHAUSTED}" if outcome == "failed" else outcome
    append_progress(ws.paths.progress, outcome_line(task.id, label, iteration, sha, task.title))
    journal(ws, task.id, outcome, entry, sha, ended=True)
    return sha


def message_of(ws: Workspace, task: Task, outcome: Outcome, entry: LedgerEntry, left_out: list[str]) -> str:
    verdict = entry.verdict
    if outcome == "done":
        return done_message(ws.record.id, task, entry.case.summary if entry.case else "", entry.iter, entry)
    if outcome == "failed":
        return failed_message(ws.record.id, task, failure_reason(entry), entry.iter, verdict.concern, left_out)
    return parked_message(ws.record.id, task, verdict.asked_by, entry.iter, verdict.question, verdict.concern,
                          left_out)


def journal(ws: Workspace, task_id: str, outcome: Outcome, entry: LedgerEntry, sha: str, ended: bool) -> None:
    """The commit's event (`ended` False), then the task's end's: spelled out, as the event registry reads them."""
    verdict, iteration = entry.verdict, entry.iter
    if outcome == "done":
        if ended:
            ws.events.emit("task_done", task_id, iteration, sha=sha)
        else:
            ws.events.emit("commit", task_id, iteration, sha=sha, iterations=iteration)
    elif outcome == "failed":
        ws.events.emit("task_failed" if ended else "failed_commit", task_id, iteration, sha=sha,
                       reason=failure_reason(entry))
    else:
        ws.events.emit("task_parked" if ended else "parked_commit", task_id, iteration, sha=sha,
                       asked_by=verdict.asked_by, question=verdict.question)


def failure_reason(last: LedgerEntry) -> str:
    return f"{EXHAUSTED} after {last.iter} attempts; last verdict {last.verdict.category or last.verdict.verdict}"


def note_daily_memory(ws: Workspace, task_id: str, title: str, done: bool, sha: str, settings: Settings) -> None:
    """The task outcome's line in the daily memory (`store/daily_memory.py`), once per commit."""
    note_outcome(ws.paths.dir, ws.paths.home, ws.record.id, task_id, title, done, sha,
                 agent_label(ws.record.backend.name, settings.worker_backend, settings.worker_model))
