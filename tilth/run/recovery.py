"""Reconcile a session with its branch before running it: git is the source of truth.

Run on every start of `tilth run` / `tilth resume`, under the session lock:
1. remove git lock files, and temp files of the files only a run writes, a killed writer left behind; point HEAD back at the session branch
   and refuse a branch that no longer holds the base; fold commits an agent made on top;
2. every task with a commit on the branch gets that outcome in prd.json, and a progress
   line if the kill came before it was written;
   A PARKED placeholder makes its task `parked` (an answered one goes back to pending at the
   run's first task boundary, `run/parking.take_answers`);
3. (resume only) every failed task goes back to pending: its FAILED placeholder stays above the task
   commits until the task runs again (`run/stacking.py` takes it off then, and the retry starts from
   its work); a task the plan says is pending or in progress while its placeholder is below the tip
   is such a retry, never failed again;
4. a task left in_progress is either committed (its last verdict was accept; the kill came
   before the commit), parked (its last entry asks a question nobody answered yet; the kill came
   before the PARKED placeholder) or put back to pending with its worktree edits kept for the retry
   (as its partial work, `refs/tilth/partial/<session>/<task>`, applied where the retry starts);
5. placeholders a killed run left on the shelf go back on top of the branch (`stacking.settle`), and
   the kept partial work of tasks done meanwhile is removed (`lane_partials.sweep`).

Between runs nothing but the user can move the branch, so its tip, after the steps above, is
what the run's `guard_branch` holds the branch to.
"""

from __future__ import annotations

from datetime import datetime

import pygit2

from tilth.core.errors import BadInput
from tilth.git.commits import TaskCommit, branch_task_commits, worker_commits
from tilth.git.gitops import branch_tip, clear_stale_locks, descends_from, soft_reset
from tilth.run.outcomes import Workspace, end_task, repair_head
from tilth.run import lane_partials
from tilth.run.parking import still_asking
from tilth.run.stacking import keep_edits, settle, shelved_commits
from tilth.store.answers import is_answered
from tilth.store.daily_memory import agent_label, has_line, note, note_outcome, noted
from tilth.store.events import document
from tilth.store.inbox import read_path
from tilth.store.jsonio import sweep_temps
from tilth.store.lane_board import board_path
from tilth.store.ledger import read_entries
from tilth.store.prd import TaskStatus, load_plan, set_statuses
from tilth.store.progress_summary import summary_path
from tilth.store.progress import append_progress, outcome_line, recorded_commits

document(
    {
        "stale_git_locks_removed": ("data.paths: git lock files left by a killed process, removed", "paths"),
        "stale_temp_files_removed": ("data.files: half-written temp files a killed run left, removed", "files"),
        "progress_restored": ("a progress line missing after a crash was written from the commit's trailers", "sha"),
        "status_reconciled": ("data.changes: task statuses corrected from the branch", "changes"),
        "accepted_committed": ("an accepted task whose commit was interrupted was committed on recovery", "sha"),
        "question_parked": ("a task whose question was in the ledger when a kill came before its PARKED placeholder "
                            "was parked on recovery; data: sha", "sha"),
        "task_requeued": "an interrupted in_progress task went back to pending, worktree edits kept",
        "failed_requeued": ("`tilth resume`: a failed task went back to pending; its FAILED placeholder stays above "
                            "the task commits until the task runs again, whose retry starts from the placeholder's "
                            "work and ends as one commit; data: sha", "sha"),
        "memory_restored": ("a task outcome on the branch had no daily memory line noted (a kill came between "
                            "the outcome and its line): data: sha, written (false: the day's file had the line)",
                            "sha written"),
    }
)


def fold_worker_commits(ws: Workspace, task_id: str | None, iteration: int | None) -> None:
    """Soft-reset commits an agent made itself, so their changes become part of the task's
    one commit (and of the diff the evaluator sees)."""
    made = worker_commits(ws.repo, ws.record.base_commit)
    if made:
        parent = ws.repo[made[-1]].peel(pygit2.Commit).parents
        target = str(parent[0].id) if parent else ws.record.base_commit
        soft_reset(ws.repo, target)
        ws.events.emit("worker_commits_folded", task_id, iteration, shas=made, onto=target)


def check_branch(ws: Workspace) -> None:
    """HEAD names the session branch, and the branch still holds the session's base."""
    repair_head(ws)
    tip = branch_tip(ws.repo, ws.record.branch)
    base = ws.record.base_commit
    if tip is None:
        raise BadInput(f"the session branch {ws.record.branch} is gone; recreate it with "
                       f"`git branch {ws.record.branch} {base}` in {ws.record.repo}, then resume")
    if not descends_from(ws.repo, tip, base):
        raise BadInput(f"the session branch {ws.record.branch} no longer contains its base {base[:12]}; "
                       f"point it back (`git branch -f {ws.record.branch} <commit>`) or start a new session")


def _restore_progress(ws: Workspace, commits: list[TaskCommit]) -> None:
    known = recorded_commits(ws.paths.progress)
    for c in commits:
        if c.first[:7] in known:
            continue
        known.add(c.first[:7])
        append_progress(ws.paths.progress, outcome_line(c.task_id, c.outcome, c.iterations, c.first, c.title))
        ws.events.emit("progress_restored", c.task_id, c.iterations, sha=c.first)


def reconcile(ws: Workspace, unwind_failed: bool) -> None:
    """`unwind_failed` (`tilth resume`): failed tasks go back to pending for a retry."""
    removed = clear_stale_locks(ws.repo, ws.record.branch)
    if removed:
        ws.events.emit("stale_git_locks_removed", paths=removed)
    run_only = (ws.paths.prd, board_path(ws.paths.dir), summary_path(ws.paths), read_path(ws.paths.dir), ws.paths.rollup)
    temps = [name for path in run_only for name in sweep_temps(path)]
    if temps:
        ws.events.emit("stale_temp_files_removed", files=temps)
    check_branch(ws)

    fold_worker_commits(ws, None, None)
    on_branch = branch_task_commits(ws.repo, ws.record.base_commit)
    commits = on_branch + [c for c in shelved_commits(ws) if c.sha not in {b.sha for b in on_branch}]
    _restore_progress(ws, commits)
    remember_lost(ws, commits)
    latest = {c.task_id: c for c in commits}
    changes = {tid: TaskStatus.parked if c.parked else TaskStatus.failed if c.failed else TaskStatus.done
               for tid, c in latest.items()}
    plan = load_plan(ws.paths.prd)
    before = {t.id: t.status for t in plan}
    retrying = _retrying(ws, latest, before)
    for tid in retrying:
        del changes[tid]
    if unwind_failed:
        for tid, c in latest.items():
            if c.failed and tid not in retrying and tid in before:
                changes[tid] = TaskStatus.pending
                ws.events.emit("failed_requeued", tid, c.iterations, sha=c.sha)
    ws.tip = str(ws.repo.head.target)

    set_statuses(ws.paths.prd, {tid: s for tid, s in changes.items() if before.get(tid) != s})
    if any(before.get(tid) != s for tid, s in changes.items()):
        ws.events.emit("status_reconciled", changes={k: v.value for k, v in changes.items() if before.get(k) != v})

    for task in plan:
        if task.status != TaskStatus.in_progress or (task.id in latest and task.id not in retrying) \
                or task.id in changes:
            continue
        entries = read_entries(ws.paths.ledger_dir, task.id)
        if entries and entries[-1].verdict.accepted:
            sha = end_task(ws, task, "done", entries[-1])
            ws.events.emit("accepted_committed", task.id, entries[-1].iter, sha=sha)
            note_outcome(ws.paths.dir, ws.paths.home, ws.record.id, task.id, task.title, True, sha, recorded_agent(ws))
        elif entries and still_asking(ws.paths.dir, task.id, entries[-1]):
            sha = end_task(ws, task, "parked", entries[-1])
            note(ws.paths.dir, [sha])
            ws.events.emit("question_parked", task.id, entries[-1].iter, sha=sha)
        else:
            keep_edits(ws, task.id, "killed")
            set_statuses(ws.paths.prd, {task.id: TaskStatus.pending})
            ws.events.emit("task_requeued", task.id)
    settle(ws, "killed")
    lane_partials.sweep(ws)  # the kept work of a task whose commit a kill left before it was forgotten


def _retrying(ws: Workspace, latest: dict[str, TaskCommit], before: dict[str, TaskStatus]) -> set[str]:
    """Tasks being retried after a FAILED placeholder that later commits keep in the history (a
    failure does not stop the others): the plan says pending or in_progress while their latest
    commit, below the tip, is the placeholder. A placeholder at the tip is a failure whose status
    write a kill may have cut off, so the branch decides there; except a PARKED one whose question
    `tilth answer` answered and put back to pending (it leaves the branch when the task runs again)."""
    tip = str(ws.repo.head.target)
    below = {tid for tid, c in latest.items() if c.placeholder and c.sha != tip
             and before.get(tid) in (TaskStatus.pending, TaskStatus.in_progress, TaskStatus.parked)}
    answered = {tid for tid, c in latest.items() if c.parked and c.sha == tip
                and before.get(tid) == TaskStatus.pending and is_answered(ws.paths.dir, tid)}
    return below | answered


def recorded_agent(ws: Workspace) -> str:
    recorded = ws.record.settings
    return agent_label(ws.record.backend.name, recorded.get("worker_backend"), recorded.get("worker_model"))


def remember_lost(ws: Workspace, commits: list[TaskCommit]) -> None:
    """Daily memory lines for the task commits on the branch whose line a kill -9 took, each
    exactly once (before a FAILED placeholder is unwound: it was an outcome); a session older
    than the noted record has its commits noted, no lines."""
    session_dir = ws.paths.dir
    seen = noted(session_dir)
    if seen is None:
        note(session_dir, [c.first for c in commits])
        return
    agent = recorded_agent(ws)
    for c in commits:
        if c.first in seen:
            continue
        if c.parked:  # not an outcome: the task goes on once answered
            note(session_dir, [c.first])
            continue
        made = datetime.fromtimestamp((ws.repo.get(c.first) or ws.repo[c.sha]).peel(pygit2.Commit).commit_time).astimezone()
        written = not has_line(ws.paths.home, ws.record.id, c.task_id, not c.failed, made)
        if written:
            note_outcome(session_dir, ws.paths.home, ws.record.id, c.task_id, c.title, not c.failed, c.first, agent)
        else:
            note(session_dir, [c.first])
        ws.events.emit("memory_restored", c.task_id, c.iterations, sha=c.sha, written=written)
