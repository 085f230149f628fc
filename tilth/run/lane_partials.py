"""A parallel task's partial work across the end of its lane, as the serial path keeps a stopped task's
edits in the session worktree: a lane that ends without landing (a stop, a cap, a crash, or a kill
the next run's `lane_cleanup.clear_lanes` finds) has its uncommitted work kept under
`refs/tilth/partial/<session>/<task>` (`git/partial_refs.py`), the task's next lane starts from the
new head with that work applied (three-way; one task at a time, the session worktree instead), and
the ref goes once the task lands, its landing is refused (the redo starts clean on the new head by
design), or it is no longer pending.

The work is staged with the secret gate (`run/secret_gate.withhold`) like any attempt, so a secret
it added is replaced before it is written into the user's repository, and without what the task may
not keep (`run/keeping.leave_out`: weakened tests, protected paths, symlinks leading outside), like a
placeholder.
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from tilth.git.lane_worktrees import common_repo, lanes_root, open_lane
from tilth.git.partial_refs import (apply_partial, drop_partial, keep_partial, lane_start, partial_of, partial_ref,
                                    partial_tasks, stage_lane)
from tilth.run.keeping import leave_out
from tilth.run.outcomes import Workspace
from tilth.run.secret_gate import withhold
from tilth.store.events import EventLog, document
from tilth.store.ledger import LedgerEntry, Verdict, append_entry, read_entries
from tilth.store.prd import Task, TaskStatus, load_current_plan

document(
    {
        "partial_kept": ("a lane ended without landing (why: a stop, a cap, a crash, or a kill found at run start) "
                         "with work in its worktree: that work was kept under ref (a commit on start, the head the "
                         "lane began from) for the task's next lane; data: lane, ref, sha, start, why",
                         "ref sha start why"),
        "partial_lost": ("a lane ended without landing and its work could not be kept; the task starts again from "
                         "the session head; data: lane, why, error", "why error"),
        "partial_restored": ("a task's lane starts with the work its interrupted lane left, applied to the new head "
                             "(three-way); data: lane, sha, onto", "sha onto"),
        "partial_dropped": ("the work a task's interrupted lane left conflicts with the new head: the lane starts "
                            "clean, the ledger says so to the retry, and that work is given up; data: lane, sha, "
                            "onto, paths", "sha onto paths"),
    }
)


def keep(ws: Workspace, lane: pygit2.Repository, task_id: str, start: str, why: str, events: EventLog) -> bool:
    """The lane's uncommitted work (and any commit it made) kept for the task's next lane; False when
    it could not be kept (`partial_lost`)."""
    try:
        stage_lane(lane, start)
        iteration = len(read_entries(ws.paths.ledger_dir, task_id))
        withhold(lane, Path(str(lane.workdir)), events, task_id, iteration)
        task = next((t for t in load_current_plan(ws.paths.prd) if t.id == task_id), None)
        leave_out(lane, ws.paths, events, ws.protected_paths(), task.may_change if task else [], task_id, iteration,
                  "partial")
        sha = keep_partial(common_repo(ws.record.repo), lane, ws.record.id, task_id, start)
    except (OSError, pygit2.GitError, ValueError, KeyError) as exc:
        events.emit("partial_lost", task_id, why=why, error=f"{type(exc).__name__}: {exc}")
        return False
    if sha is not None:
        events.emit("partial_kept", task_id, ref=partial_ref(ws.record.id, task_id), sha=sha, start=start, why=why)
    return True


def keep_left(ws: Workspace, task_id: str, tip: str) -> None:
    """After a kill: the work in the lane the killed run left for `task_id`, kept (its start is where
    the lane's branch leaves the session branch at `tip`)."""
    record = ws.record
    if not (lanes_root(ws.paths.home, record.id) / task_id).is_dir():
        return
    lane = open_lane(record.repo, ws.paths.home, record.id, task_id)
    if lane is None:
        return
    if partial_of(common_repo(record.repo), record.id, task_id) is not None and restoring(ws, task_id):
        return  # the kill came while the lane was given the kept work: the ref still holds all of it
    try:
        start = lane_start(common_repo(record.repo), str(lane.head.target), tip)
    except (pygit2.GitError, KeyError, ValueError):
        return
    keep(ws, lane, task_id, start, "killed", ws.events)


def restoring(ws: Workspace, task_id: str) -> bool:
    """The task's last lane began and had not yet been given its kept work (its worker had not run)."""
    last = None
    for event in ws.events.read():
        if event.get("task") == task_id and event.get("type") in ("lane_started", "partial_restored",
                                                                    "partial_dropped"):
            last = event["type"]
    return last == "lane_started"


def restore(ws: Workspace, lane: pygit2.Repository, task: Task, start: str, events: EventLog,
            drop: bool = True) -> None:
    """A new lane of `task` at `start` gets the work its interrupted lane (or its placeholder) left; when
    that conflicts with `start`, the lane stays clean and the task's ledger tells its next attempt;
    `drop=False` keeps the work off the branch under its ref until the task ends."""
    common = common_repo(ws.record.repo)
    partial = partial_of(common, ws.record.id, task.id)
    if partial is None:
        return
    conflicts = apply_partial(common, lane, partial, start)
    if not conflicts:
        events.emit("partial_restored", task.id, sha=partial, onto=start)
        return
    iteration = len(read_entries(ws.paths.ledger_dir, task.id)) + 1
    listed = ", ".join(conflicts[:20])
    concern = (f"The partial work your earlier attempts left (their placeholder, or an interrupted run) could not be "
               f"applied to the current session head (other tasks' work landed since and conflicts with it in {listed}); "
               + ("it was given up." if drop else f"it is kept off the branch (commit {partial[:12]}), not in your worktree."))
    verdict = Verdict(verdict="reject", category="partial_conflict", concern=concern,
                      next_step="Do the task from the current session head, which your worktree holds; none of the "
                                "interrupted attempt's edits are in it.")
    append_entry(ws.paths.ledger_dir, task.id,
                 LedgerEntry(iter=iteration, diff_summary="(interrupted work not applied)", case=None, verdict=verdict))
    events.emit("partial_dropped", task.id, iteration, sha=partial, onto=start, paths=conflicts)
    if drop:
        drop_partial(common, ws.record.id, task.id)


def restore_in_turn(ws: Workspace, task: Task) -> None:
    """One task at a time: the task's kept work (an interrupted run's, or its placeholder's taken off the
    branch for its retry) applied to the session worktree, unless that holds edits already (a retry
    interrupted after the work was applied); where it conflicts it stays kept until the task ends."""
    if partial_of(common_repo(ws.record.repo), ws.record.id, task.id) is None or ws.repo.status():
        return
    restore(ws, ws.repo, task, ws.tip, ws.events, drop=False)


def forget(ws: Workspace, task_id: str) -> None:
    drop_partial(common_repo(ws.record.repo), ws.record.id, task_id)


def sweep(ws: Workspace) -> None:
    """The kept work of tasks that landed meanwhile or left the plan (a kill after a landing's
    commit, an edited plan) is removed; tasks not done keep theirs (a failed or parked task's is the
    work its placeholder could not carry above a later task commit)."""
    common = common_repo(ws.record.repo)
    waiting = {t.id for t in load_current_plan(ws.paths.prd) if t.status != TaskStatus.done}
    for task_id in partial_tasks(common, ws.record.id):
        if task_id not in waiting:
            drop_partial(common, ws.record.id, task_id)
