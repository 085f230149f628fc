"""The lane scheduler of parallel tasks (`parallel_tasks` > 1, `--parallel N`): the ready tasks of
the plan run at once, each in a lane of its own (what one lane does, its worktree from the session
head, its attempts in a thread, its endings: `run/lane_work.py`), and each lane's outcome lands
through the merge queue (`run/merge_queue.py`) in this, the runner's main thread, one at a time.

A task is ready when it is pending and every task in its `depends_on` is done (its commit on the
session branch); two tasks whose `files` globs overlap never run at once. A task whose change
could not land (a conflict, or checks that fail only on the merged tree) runs again on the new
head with what went wrong in its context; if that fails too it runs alone; then it parks with a
question. Caps, the stop flag and the meter are the session's, shared by every lane; so are the
journal (each event carries its lane) and prd.json (written only from the main thread). Lanes across all sessions
of a `$TILTH_HOME` hold one of `max_agent_lanes` slots (a flock each); free disk is checked before
a worktree is made. No lane outlives the run: a stop, a cap or a crash waits for the lanes to end
their attempt, keeps each one's work for its task's next lane (`run/lane_partials.py`), removes their
worktrees and puts their tasks back to pending (`lane_cleanup.clear_lanes` does the same at the next
run after a kill). Answers to parked tasks are taken at every scheduling step, every `POLL_S` while
all lanes run, so an answered task gets a lane while the others go on."""

from __future__ import annotations

import shutil
from contextlib import suppress
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Callable

from tilth.core.errors import DiskFull, StopRequested
from tilth.git.gitops import open_worktree
from tilth.git.worktree_git import session_git_dir
from tilth.git.lane_worktrees import remove_lanes_root, reset_to
from tilth.run.context import Sources
from tilth.run.lane_limits import Slots, overlaps
from tilth.run import lane_partials, stacking, lane_work
from tilth.run.lane_work import Lane
from tilth.run.merge_queue import Landing, land, note_refusal
from tilth.run.parking import take_answers
from tilth.run.pausing import Paused
from tilth.store.events import document
from tilth.store.lane_board import read_board, write_board
from tilth.store.prd import Task, TaskStatus, load_current_plan, set_status

document(
    {
        "lane_waiting": ("a ready task could not start a lane; data: why (disk: less than lane_min_free_mb free; "
                        "ceiling: max_agent_lanes lanes run in this TILTH_HOME)", "why free_mb"),
        "parallel_summary": ("the lanes of a run ended; data: lanes, wall_s (first lane start to last landing), "
                            "task_s (the sum of each task's time in its lane), conflicts, redos, redo_s (lane time of "
                            "the attempts that did not land), redo_usd (what their model calls cost)",
                             "lanes wall_s task_s conflicts redos redo_s redo_usd"),
    }
)

POLL_S = 0.5
"""How often the scheduler looks again while every lane runs (answers, stop, caps), besides each lane's end."""

REDO_LIMIT = 2
"""Refused landings a task may have: again on the new head, then alone; the next one parks it."""


@dataclass
class Tally:
    began: float | None = None
    ended: float = 0.0
    task_s: float = 0.0
    conflicts: int = 0
    redos: int = 0
    redo_s: float = 0.0
    redo_usd: float = 0.0


def run_lanes(run: Any, lock: Any, attempt: Callable, after_task: Callable, learn: Callable) -> bool:
    """The plan's tasks in up to `parallel_tasks` lanes; False when a failure ends the session
    (`stop_on_failure`). `run`: the session's `loop.Run`; `attempt`/`after_task`/`learn`: the loop's."""
    return Scheduler(run, lock, attempt, after_task, learn).drive()


class Scheduler:
    def __init__(self, run: Any, lock: Any, attempt: Callable, after_task: Callable, learn: Callable):
        self.run, self.lock, self.attempt, self.after_task, self.learn = run, lock, attempt, after_task, learn
        self.width = run.settings.parallel_tasks
        self.lanes: dict[str, Lane] = {}
        self.redos: dict[str, int] = {}
        self.halt: BaseException | None = None
        self.failed_stop = False
        self.told: set[str] = set()
        """Waits for a lane slot (task ids) or for disk (`disk <task>`) that are in the journal already."""
        self.slots = Slots(run.ws.paths.home, run.settings.max_agent_lanes)
        self.tally = Tally()
        self.pool = ThreadPoolExecutor(self.width, thread_name_prefix="tilth-lane")
        self.later = ThreadPoolExecutor(1, thread_name_prefix="tilth-after-task")
        """`after_task` (memory line, summary, post_task hooks) in order, beside the queue."""
        self.learning = ThreadPoolExecutor(self.width, thread_name_prefix="tilth-learn")
        """The self-improvement step of landed tasks (a model call each), at once, off the queue's path."""
        self.later_done: list[Future] = []
        ws = run.ws  # its own repository object: pygit2 objects are not shared between threads
        repo = open_worktree(Path(ws.record.worktree), session_git_dir(ws.record.repo, ws.record.id), repair=False)
        self.after_run = replace(run, sources=Sources(ws.paths, repo, run.settings, ws.events))
        lane_partials.sweep(ws)

    def drive(self) -> bool:
        try:
            while True:
                waiting = self.fill() if self.halt is None and not self.failed_stop else False
                if not self.lanes:
                    if not waiting:
                        break
                    self.run.stop.sleep(0.5)  # another session's lanes hold every slot
                    continue
                wait([lane.future for lane in self.lanes.values()], timeout=POLL_S, return_when=FIRST_COMPLETED)
                for lane in [lane for lane in self.lanes.values() if lane.future.done()]:
                    self.lock.beat()
                    self.finish(lane)
        except BaseException as exc:
            self.halt = self.halt or exc
            self.run.stop.set(f"stopped: {type(exc).__name__}")
            with suppress(Exception):  # a landing cut short leaves no merged tree for a later run to take as edits
                ws = self.run.ws  # the branch's own tip: a commit may have landed just before the failure
                reset_to(ws.repo, str(ws.repo.references[f"refs/heads/{ws.record.branch}"].target))
            for lane in list(self.lanes.values()):
                self.requeue(lane, "the run stopped", wait_for=True)
        finally:
            self.pool.shutdown(wait=True)
            self.learning.shutdown(wait=True)
            self.later.shutdown(wait=True)
            self.summarize()
        if self.halt is not None:
            raise self.halt
        for later in self.later_done:
            later.result()
        return not self.failed_stop

    def fill(self) -> bool:
        """Start lanes for ready tasks; True when one is ready but no slot is free anywhere."""
        run = self.run
        try:
            run.stop.check()
            run.caps.check()
            # at every step, lanes running or not: an answered task's lane starts from its placeholder's work
            take_answers(run.ws)
        except (StopRequested, Paused) as exc:
            self.halt = exc
            return False
        for task in self.ready():
            if len(self.lanes) >= self.width or any(lane.redo >= REDO_LIMIT for lane in self.lanes.values()):
                break
            if self.redos.get(task.id, 0) >= REDO_LIMIT and self.lanes:
                continue  # it runs alone
            if any(overlaps(task.files, lane.task.files) for lane in self.lanes.values()):
                continue
            free = shutil.disk_usage(run.ws.paths.home).free
            if free < run.settings.lane_min_free_mb * 1024 * 1024:
                if f"disk {task.id}" not in self.told:  # the scheduler looks again every POLL_S
                    self.told.add(f"disk {task.id}")
                    run.ws.events.emit("lane_waiting", task.id, why="disk", free_mb=free // (1024 * 1024))
                if not self.lanes:
                    raise DiskFull(f"{free // (1024 * 1024)} MiB free under {run.ws.paths.home}, less than "
                                   f"lane_min_free_mb ({run.settings.lane_min_free_mb}); free some space, then resume")
                break
            slot = self.slots.take()
            if slot is None:
                if task.id not in self.told:
                    self.told.add(task.id)
                    run.ws.events.emit("lane_waiting", task.id, why="ceiling")
                return not self.lanes
            try:
                self.start(task, slot)
            except BaseException:
                slot.close()
                raise
        return False

    def ready(self) -> list[Task]:
        plan = load_current_plan(self.run.ws.paths.prd)
        done = {t.id for t in plan if t.status == TaskStatus.done}
        return [t for t in plan if t.status == TaskStatus.pending and t.id not in self.lanes
                and all(d in done for d in t.depends_on)]

    def start(self, task: Task, slot: IO[str]) -> None:
        run = self.run
        ws = run.ws
        number = min(set(range(1, self.width + 1)) - {lane.number for lane in self.lanes.values()})
        with ws.events.serial:  # a retry's placeholder leaves the branch; nothing pushes a half-moved branch
            stacking.take_off(ws, task.id)
        start, redo = stacking.floor_of(ws), self.redos.get(task.id, 0)  # never another task's partial work
        lane_run, log = lane_work.begin(run, task, number, start, redo)
        now = time.monotonic()
        self.tally.began = self.tally.began if self.tally.began is not None else now
        lane = Lane(number, task, start, redo, now, slot=slot, log=log)
        lane.future = self.pool.submit(lane_work.work, self.attempt, lane_run, task, start)
        self.lanes[task.id] = lane
        self.show()

    def finish(self, lane: Lane) -> None:
        """A lane's thread ended: land its outcome, or requeue its task, then remove the lane."""
        run, task = self.run, lane.task
        try:
            result = lane.future.result()
        except (StopRequested, Paused) as exc:
            self.halt = self.halt or exc
            self.requeue(lane, str(exc) or type(exc).__name__)
            return
        except BaseException as exc:
            self.halt = self.halt or exc
            run.stop.set(f"a lane failed: {type(exc).__name__}")
            self.requeue(lane, f"crashed: {type(exc).__name__}")
            return
        with run.ws.events.serial:  # nothing (a dispatched session's push at an event) sees a landing half done
            landing = land(run, lane.number, task, result)
        lane_partials.forget(run.ws, task.id)  # landed, or refused: its redo starts clean on the new head
        seconds = time.monotonic() - lane.began
        self.tally.ended = time.monotonic()
        if landing.sha is None:
            self.refused(lane, landing, seconds)
            return
        self.tally.task_s += seconds
        self.remove(lane, result.outcome, seconds)
        if result.outcome != "parked" and run.settings.self_improvement:
            self.later_done.append(self.learning.submit(self.learn_from, task, result.outcome, result.entry.iter))
        self.later_done.append(self.later.submit(self.after_task, self.after_run, task, result.outcome,
                                                 result.entry.iter, landing.sha, True))
        if result.outcome == "failed" and run.settings.stop_on_failure:
            self.failed_stop = True

    def learn_from(self, task: Task, outcome: str, iteration: int) -> None:
        """The loop's `learn` on the session worktree, with a repository object of this thread's own."""
        ws = self.run.ws
        repo = open_worktree(Path(ws.record.worktree), session_git_dir(ws.record.repo, ws.record.id), repair=False)
        self.learn(replace(self.run, sources=Sources(ws.paths, repo, self.run.settings, ws.events)), task, outcome,
                   iteration)

    def refused(self, lane: Lane, landing: Landing, seconds: float) -> None:
        """Run the task again on the new head (then alone); past that, park it with a question."""
        ws, task = self.run.ws, lane.task
        self.tally.conflicts += landing.refused == "merge_conflict"
        self.tally.redo_s += seconds
        self.tally.redo_usd += lane.log.spent_usd if lane.log else 0.0
        redo = self.redos[task.id] = self.redos.get(task.id, 0) + 1
        if redo <= REDO_LIMIT:
            self.tally.redos += 1
            note_refusal(ws, task, landing, lane.number, redo)
            set_status(ws.paths.prd, task.id, TaskStatus.pending)
            self.remove(lane, landing.refused, seconds)
            return
        self.park(lane, landing, seconds)

    def park(self, lane: Lane, landing: Landing, seconds: float) -> None:
        iteration, sha = lane_work.park(self.run.ws, lane, landing, REDO_LIMIT + 1)
        self.remove(lane, "parked", seconds)
        self.later_done.append(self.later.submit(self.after_task, self.after_run, lane.task, "parked", iteration, sha))

    def requeue(self, lane: Lane, why: str, wait_for: bool = False) -> None:
        lane_work.requeue(self.run.ws, lane, why, wait_for)
        self.remove(lane, "stopped", time.monotonic() - lane.began)

    def remove(self, lane: Lane, outcome: str, seconds: float) -> None:
        ws = self.run.ws
        lane_work.close(ws, lane)
        del self.lanes[lane.task.id]
        self.show()
        lane_work.ended(ws, lane, outcome, seconds)

    def show(self) -> None:
        """lanes.json: the lanes running now, for `tilth status`."""
        write_board(self.run.ws.paths.dir, [{"lane": lane.number, "task": lane.task.id, "start": lane.start,
                                              "since": lane.since} for lane in self.lanes.values()])

    def summarize(self) -> None:
        ws, t = self.run.ws, self.tally
        remove_lanes_root(ws.paths.home, ws.record.id)
        for home in ws.paths.lane_homes():
            lane_work.remove_home(home)
        if t.began is None:
            return
        figures = {"lanes": self.width, "wall_s": round(max(t.ended - t.began, 0.0), 3), "task_s": round(t.task_s, 3),
                   "conflicts": t.conflicts, "redos": t.redos, "redo_s": round(t.redo_s, 3),
                   "redo_usd": round(t.redo_usd, 6)}
        ws.events.emit("parallel_summary", **figures)
        write_board(ws.paths.dir, [], [*read_board(ws.paths.dir)["runs"], figures])
