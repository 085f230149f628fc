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
                      "merge_checks_failed|stopped), seconds (from the lane's start to its landing), work_s (its "
                      "start to its thread's end), core_wait_s (of that, waiting for a core for its checks), checks_s "
                      "(of that, its checks and verify commands holding a core), contended_s (of that, its checks' "
                      "time beyond the same checks alone on the base commit: lost to the checks beside them)",
                       "outcome seconds work_s core_wait_s checks_s contended_s"),
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
    held_before: float = 0.0
    """The task's time holding a core before this lane (`Cores.held_s`)."""
    core_wait_s: float = 0.0
    """The lane's waits for a core in its work (its checks and verify commands waiting for one)."""
    checks_s: float = 0.0
    """The lane's time holding a core in its work (its checks and verify commands running)."""
    contended_before: float = 0.0
    """The task's checks' time lost to other checks before this lane (`Cores.contended_s`)."""
    contended_s: float = 0.0
    """Of `checks_s`, the time beyond the same checks alone on the base commit (other checks beside them)."""

    def work(self) -> LaneResult:
        """In the lane's thread: the task's attempts, then the lane's one commit on its own branch."""
        task, ws = self.task, self.run.ws
        self.run.checked_trees.pop(task.id, None)
        try:
            return self.attempts(task, ws)
        finally:
            self.worked = self.clock()
            cores = self.run.cores  # the merge queue's checks for the task come after: never counted here
            self.core_wait_s = cores.waited.get(task.id, 0.0) - self.waited_before
            self.checks_s = cores.held_s.get(task.id, 0.0) - self.held_before
            self.contended_s = cores.contended_s.get(task.id, 0.0) - self.contended_before

    def attempts(self, task: Task, ws: Workspace) -> LaneResult:
        outcome, entry = attempt(self.run, task)
        if outcome == "done":
            guard_branch(ws, task.id, entry.iter)  # the accepted diff is staged
        else:
            stage(ws, task, entry.iter)  # a placeholder keeps the partial work
        summary = entry.case.summary if entry.case else ""
        message = done_message(ws.record.id, task, summary, entry.iter, entry if outcome == "done" else None)
        commit = commit_staged(ws.repo, ws.record.branch, message, ws.tip)
        checkpoint("lane_committed", task.id)
        return LaneResult(outcome, entry, commit, self.start, self.run.checked_trees.get(task.id))

    def work_s(self) -> float:
        """The lane's work, its start to its thread's end."""
        return max((self.worked if self.worked is not None else self.began) - self.began, 0.0)

    def own_seconds(self, landing_s: float) -> float:
        """What the task would have taken one task at a time: the lane's work without its waits for a
        core and without what its checks lost to the checks beside them (their time beyond the same
        checks alone on the base commit), and its landing (`landing_s`: without the merge queue's checks)."""
        return max(self.work_s() - self.core_wait_s - self.contended_s, 0.0) + landing_s

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
        self.log.emit("lane_ended", task_id, outcome=outcome, seconds=round(seconds, 3), work_s=round(self.work_s(), 3),
                      core_wait_s=round(self.core_wait_s, 3), checks_s=round(self.checks_s, 3),
                      contended_s=round(self.contended_s, 3))


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
                waited_before=run.cores.waited.get(task.id, 0.0), held_before=run.cores.held_s.get(task.id, 0.0),
                contended_before=run.cores.contended_s.get(task.id, 0.0))


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
