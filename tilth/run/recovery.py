"""Reconcile a session with its branch before running it: git is the source of truth.

Run on every start of `tilth run` / `tilth resume`, under the session lock:
1. remove git lock files a killed writer left behind; point HEAD back at the session branch
   and refuse a branch that no longer holds the base; fold commits an agent made on top;
2. every task with a commit on the branch gets that outcome in prd.json, and a progress
   line if the kill came before it was written;
3. (resume only) a FAILED placeholder at HEAD is soft-unwound: its edits become
   uncommitted changes and its task goes back to pending;
4. a task left in_progress is either committed (its last verdict was accept; the kill came
   before the commit) or put back to pending with its worktree edits kept for the retry.

Between runs nothing but the user can move the branch, so its tip, after the steps above, is
what the run's `guard_branch` holds the branch to.
"""

from __future__ import annotations

from tilth.core.errors import BadInput
from tilth.git.commits import TaskCommit, branch_task_commits, worker_commits
from tilth.git.gitops import branch_tip, clear_stale_locks, descends_from, soft_reset
from tilth.run.outcomes import EXHAUSTED, Workspace, commit_done, repair_head
from tilth.store.events import document
from tilth.store.ledger import read_entries
from tilth.store.prd import TaskStatus, load_plan, set_statuses
from tilth.store.progress import append_progress, outcome_line, recorded_commits

document(
    {
        "stale_git_locks_removed": "data.paths: git lock files left by a killed process, removed",
        "progress_restored": "a progress line missing after a crash was written from the commit's trailers",
        "status_reconciled": "data.changes: task statuses corrected from the branch",
        "placeholder_unwound": "a FAILED placeholder at HEAD was soft-reset; its edits are uncommitted",
        "accepted_committed": "an accepted task whose commit was interrupted was committed on recovery",
        "task_requeued": "an interrupted in_progress task went back to pending, worktree edits kept",
    }
)


def fold_worker_commits(ws: Workspace, task_id: str | None, iteration: int | None) -> None:
    """Soft-reset commits an agent made itself, so their changes become part of the task's
    one commit (and of the diff the evaluator sees)."""
    made = worker_commits(ws.repo, ws.record.base_commit)
    if made:
        parent = ws.repo[made[-1]].parents
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
        if c.sha[:7] in known:
            continue
        outcome = f"failed:{EXHAUSTED}" if c.failed else "done"
        append_progress(ws.paths.progress, outcome_line(c.task_id, outcome, c.iterations, c.sha, c.title))
        ws.events.emit("progress_restored", c.task_id, c.iterations, sha=c.sha)


def reconcile(ws: Workspace, unwind_failed: bool) -> None:
    removed = clear_stale_locks(ws.repo, ws.record.branch)
    if removed:
        ws.events.emit("stale_git_locks_removed", paths=removed)
    check_branch(ws)

    fold_worker_commits(ws, None, None)
    commits = branch_task_commits(ws.repo, ws.record.base_commit)
    _restore_progress(ws, commits)
    latest = {c.task_id: c for c in commits}
    changes = {tid: TaskStatus.failed if c.failed else TaskStatus.done for tid, c in latest.items()}

    head = commits[-1] if commits else None
    if unwind_failed and head and head.failed and head.sha == str(ws.repo.head.target):
        soft_reset(ws.repo, str(ws.repo[head.sha].parents[0].id))
        changes[head.task_id] = TaskStatus.pending
        del latest[head.task_id]
        ws.events.emit("placeholder_unwound", head.task_id, head.iterations, sha=head.sha)
    ws.tip = str(ws.repo.head.target)

    plan = load_plan(ws.paths.prd)
    before = {t.id: t.status for t in plan}
    set_statuses(ws.paths.prd, {tid: s for tid, s in changes.items() if before.get(tid) != s})
    if any(before.get(tid) != s for tid, s in changes.items()):
        ws.events.emit("status_reconciled", changes={k: v.value for k, v in changes.items() if before.get(k) != v})

    for task in plan:
        if task.status != TaskStatus.in_progress or task.id in latest or task.id in changes:
            continue
        entries = read_entries(ws.paths.ledger_dir, task.id)
        if entries and entries[-1].verdict.accepted:
            sha = commit_done(ws, task, entries[-1])
            ws.events.emit("accepted_committed", task.id, entries[-1].iter, sha=sha)
        else:
            set_statuses(ws.paths.prd, {task.id: TaskStatus.pending})
            ws.events.emit("task_requeued", task.id)
