"""What one lane of parallel tasks does, from its start to its end: its worktree and branch made from
the session head (`git/lane_worktrees.py`) with the task's kept partial work restored, the run it
attempts in (confined like the session's worktree, hooks and journal its own), the loop's attempts and
the lane's one commit on its branch (in the lane's thread), its own private home (`SessionPaths.lane_home`:
two lanes never share one), and its endings: parked with a question
when its change could not land, requeued with its work kept for the task's next lane
(`run/lane_partials.py`), its worktree removed. `run/lanes.py` schedules the lanes."""

from __future__ import annotations

import dataclasses
import os
import shutil
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
from tilth.run.merge_queue import LaneLog, LaneResult, Landing
from tilth.run.outcomes import Workspace, end_task, guard_branch, stage
from tilth.store.events import document
from tilth.store.inbox import take_unread
from tilth.store.ledger import LedgerEntry, Verdict, append_entry, read_entries
from tilth.store.prd import Task, TaskStatus, set_status

document(
    {
        "lane_started": ("a task began in a lane of its own; data: lane, start (the session head its worktree was made "
                        "from: it holds every commit the task depends on), redo (0, 1: again on a newer head, 2: alone)", "start redo"),
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
    redo: int
    began: float
    future: Future = field(default_factory=Future)
    since: str = field(default_factory=iso)
    log: LaneLog | None = None
    slot: IO[str] | None = None


def begin(run: Any, task: Task, number: int, start: str, redo: int) -> tuple[Any, LaneLog]:
    """The lane's worktree from `start`, its task in progress, and the run its attempts use
    (`run` with the lane's workspace, sources, confinement and hooks); its journal too."""
    ws = run.ws
    path, repo = make_lane(ws.record.repo, ws.paths.home, ws.record.id, task.id, start)
    log = LaneLog(ws.events, number)
    set_status(ws.paths.prd, task.id, TaskStatus.in_progress)
    log.emit("task_started", task.id, start=start)
    log.emit("lane_started", task.id, start=start, redo=redo)
    lane_partials.restore(ws, repo, task, start, log)
    if notes := take_unread(ws.paths.dir):
        log.emit("notes_taken", task.id, count=len(notes), ids=[n.id for n in notes], by=[n.by for n in notes])
    record = dataclasses.replace(ws.record, worktree=str(path), branch=lane_branch(ws.record.id, task.id))
    git_dir = lane_git_dir(ws.record.repo, ws.record.id, task.id)
    confinement = replace(session_confinement(record.sandbox or "off", ws.paths, record, run.settings,
                                              agent_home=ws.paths.lane_home(task.id)), git_dir=git_dir)
    lane_run = replace(run, ws=Workspace(ws.paths, record, repo, log, tip=start, protected=ws.protected),
                       sources=Sources(ws.paths, repo, run.settings, log), sandbox=confinement,
                       checks=run.checks.at(path, confinement),
                       hooks=Hooks(hook_dirs(ws.paths.home), path, log, ws.record.id, git_dir))
    return lane_run, log


def work(attempt: Callable, lane_run: Any, task: Task, start: str) -> LaneResult:
    """In the lane's thread: the attempts, then the lane's one commit on its own branch."""
    outcome, entry = attempt(lane_run, task)
    ws = lane_run.ws
    if outcome == "done":
        guard_branch(ws, task.id, entry.iter)  # the accepted diff is staged
    else:
        stage(ws, task, entry.iter)  # a placeholder keeps the partial work
    summary = entry.case.summary if entry.case else ""
    commit = commit_staged(ws.repo, ws.record.branch, done_message(ws.record.id, task, summary, entry.iter), ws.tip)
    checkpoint("lane_committed", task.id)
    return LaneResult(outcome, entry, commit, start)


def park(ws: Workspace, lane: Lane, landing: Landing, refusals: int) -> tuple[int, str]:
    """The task's change was refused `refusals` times: its PARKED placeholder on the session branch, with
    a question for a person. The attempt's number and the placeholder's sha."""
    task = lane.task
    iteration = len(read_entries(ws.paths.ledger_dir, task.id)) + 1
    question = (f"{task.id}'s change was accepted {refusals} times but could not land on the session "
                f"branch ({landing.refused}: {', '.join(landing.what[:10])}). How should it fit with the "
                "other tasks' work?")
    entry = LedgerEntry(iter=iteration, diff_summary="(did not land)", case=None,
                        verdict=Verdict(verdict="needs_human", category=landing.refused, question=question,
                                        concern=question))
    append_entry(ws.paths.ledger_dir, task.id, entry)
    sha = end_task(replace(ws, events=LaneLog(ws.events, lane.number)), task, "parked", entry)
    ws.tip = sha
    return iteration, sha


def requeue(ws: Workspace, lane: Lane, why: str, wait_for: bool = False) -> None:
    """The lane stopped before its task ended: its work kept for the task's next lane, the task pending again."""
    if wait_for:
        try:
            lane.future.result()
        except BaseException:  # noqa: B036 - the first failure is already the run's
            pass
    log = LaneLog(ws.events, lane.number)
    if (repo := open_lane(ws.record.repo, ws.paths.home, ws.record.id, lane.task.id)) is not None:
        lane_partials.keep(ws, repo, lane.task.id, lane.start, why, log)
    set_status(ws.paths.prd, lane.task.id, TaskStatus.pending)
    log.emit("lane_requeued", lane.task.id, why=why)


def close(ws: Workspace, lane: Lane) -> None:
    """The lane's worktree, branch and private home removed, its slot given back."""
    drop_lane(ws.record.repo, ws.paths.home, ws.record.id, lane.task.id)
    remove_home(ws.paths.lane_home(lane.task.id))
    if lane.slot is not None:
        lane.slot.close()


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


def ended(ws: Workspace, lane: Lane, outcome: str, seconds: float) -> None:
    LaneLog(ws.events, lane.number).emit("lane_ended", lane.task.id, outcome=outcome, seconds=round(seconds, 3))
