"""One lane of parallel tasks, from its start to its end (`run/lanes.py` schedules the lanes): its
worktree and branch made from the session head (`git/lane_worktrees.py`), the run its step works
with (`Lane.run`: the lane's own workspace and repository object, journal (`LaneLog`), confinement
with a private home of its own (`SessionPaths.lane_home`: two lanes never share one) and hooks; the
session's backend, settings, stop flag and caps), the task begun there (`step.begin_task`), then in
the lane's thread its attempts (`step.attempt`) and its one commit on the lane's branch
(`Lane.work`); and its end (`Lane.end`): requeued with its work kept for the task's next lane when it
stopped before its task ended (`run/lane_partials.py`), its worktree, branch and home removed, its
slot given back."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Callable

from tilth.agents.confinement import session_confinement
from tilth.agents.hooks import Hooks, hook_dirs
from tilth.core.clock import iso
from tilth.core.faults import checkpoint
from tilth.git.commits import done_message
from tilth.git.gitops import commit_staged
from tilth.git.lane_worktrees import drop_lane, lane_branch, lane_git_dir, make_lane, open_lane
from tilth.run import lane_partials
from tilth.run.context import Sources
from tilth.run.merge_queue import LaneLog, LaneResult
from tilth.run.outcomes import Workspace, guard_branch, stage
from tilth.run.step import Run, attempt, begin_task
from tilth.store.events import document
from tilth.store.prd import Task, TaskStatus, set_status

document(
    {
        "lane_ended": ("a lane's worktree and branch were removed; data: lane, outcome (done|failed|parked|merge_conflict|"
                      "merge_checks_failed|stopped), seconds (from the lane's start to its landing)", "outcome seconds"),
        "lane_requeued": ("a lane stopped before its task ended (a stop, a cap, a crash elsewhere): the task is pending "
                         "again and its lane removed; data: lane, why", "why"),
    }
)


@dataclass
class Lane:
    number: int
    task: Task
    start: str
    """The session head the lane's worktree was made from."""
    redo: int
    """The task's refused landings before this lane (`lanes.REDO_LIMIT`: it runs alone)."""
    began: float
    run: Run
    """The lane's own: only the lane's thread touches its repository object."""
    log: LaneLog
    slot: IO[str] | None = None
    future: Future[LaneResult] = field(default_factory=Future)
    since: str = field(default_factory=iso)
    clock: Callable[[], float] = time.monotonic
    """The scheduler's clock."""
    worked: float | None = None
    """When the lane's thread ended its work (the scheduler's clock)."""
    waited_before: float = 0.0
    """The task's waits for a core before this lane (`Cores.waited`)."""

    def work(self) -> LaneResult:
        """In the lane's thread: the task's attempts, then the lane's one commit on its own branch."""
        task, ws = self.task, self.run.ws
        self.run.checked_trees.pop(task.id, None)
        try:
            return self.attempts(task, ws)
        finally:
            self.worked = self.clock()

    def attempts(self, task: Task, ws: Workspace) -> LaneResult:
        outcome, entry = attempt(self.run, task)
        if outcome == "done":
            guard_branch(ws, task.id, entry.iter)  # the accepted diff is staged
        else:
            stage(ws, task, entry.iter)  # a placeholder keeps the partial work
        summary = entry.case.summary if entry.case else ""
        commit = commit_staged(ws.repo, ws.record.branch, done_message(ws.record.id, task, summary, entry.iter), ws.tip)
        checkpoint("lane_committed", task.id)
        return LaneResult(outcome, entry, commit, self.start, self.run.checked_trees.get(task.id))

    def own_seconds(self, landing_s: float) -> float:
        """What the task would have taken one task at a time: the lane's work without its waits for a
        core, and its landing (`landing_s`: without the merge queue's checks)."""
        waited = self.run.cores.waited.get(self.task.id, 0.0) - self.waited_before
        return max((self.worked if self.worked is not None else self.began) - self.began - waited, 0.0) + landing_s

    def end(self, ws: Workspace, outcome: str, seconds: float, why: str | None = None, wait_for: bool = False) -> None:
        """In the main thread, the lane's thread ended (`wait_for`: once it has): with `why`, the task stopped
        before it ended, its work kept for its next lane and the task pending again; then the lane's
        worktree, branch and private home removed, its slot given back (`ws`: the session's)."""
        task_id = self.task.id
        if why is not None:
            if wait_for:
                with suppress(BaseException):  # the first failure is already the run's
                    self.future.result()
            if (repo := open_lane(ws.record.repo, ws.paths.home, ws.record.id, task_id)) is not None:
                lane_partials.keep(ws, repo, task_id, self.start, why, self.log)
            set_status(ws.paths.prd, task_id, TaskStatus.pending)
            self.log.emit("lane_requeued", task_id, why=why)
        drop_lane(ws.record.repo, ws.paths.home, ws.record.id, task_id)
        remove_home(ws.paths.lane_home(task_id))
        if self.slot is not None:
            self.slot.close()
        self.log.emit("lane_ended", task_id, outcome=outcome, seconds=round(seconds, 3))


def start_lane(run: Run, task: Task, number: int, start: str, redo: int, began: float,
                  slot: IO[str] | None = None, clock: Callable[[], float] = time.monotonic) -> Lane:
    """In the main thread: the lane's worktree from the session head `start`, the run its step works with
    (`run` the session's), and the task begun in it."""
    ws = run.ws
    path, repo = make_lane(ws.record.repo, ws.paths.home, ws.record.id, task.id, start)
    log = LaneLog(ws.events, number)
    record = dataclasses.replace(ws.record, worktree=str(path), branch=lane_branch(ws.record.id, task.id))
    git_dir = lane_git_dir(ws.record.repo, ws.record.id, task.id)
    confinement = replace(session_confinement(record.sandbox or "off", ws.paths, record, run.settings,
                                              agent_home=ws.paths.lane_home(task.id)), git_dir=git_dir)
    lane_run = replace(run, ws=Workspace(ws.paths, record, repo, log, tip=start, protected=ws.protected),
                       sources=Sources(ws.paths, repo, run.settings, log), sandbox=confinement,
                       checks=run.checks.at(path, confinement),
                       hooks=Hooks(hook_dirs(ws.paths.home), path, log, ws.record.id, git_dir))
    begin_task(lane_run, task, start, redo)
    return Lane(number, task, start, redo, began, lane_run, log, slot, clock=clock,
                waited_before=run.cores.waited.get(task.id, 0.0))


def remove_home(path: Path) -> None:
    """A lane's private home gone, whatever the agent left in it: links are removed, never followed
    (`shutil.rmtree` works by descriptor), and a directory it made unreadable is opened up first."""
    if os.path.islink(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path, onerror=_opened_up)


def _opened_up(_function: Any, failed: str, _error: Any) -> None:
    with suppress(OSError):
        os.chmod(os.path.dirname(failed), 0o700)
        if os.path.isdir(failed) and not os.path.islink(failed):
            os.chmod(failed, 0o700)
            shutil.rmtree(failed, onerror=_opened_up)
        else:
            os.unlink(failed)
