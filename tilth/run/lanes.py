"""The lane scheduler of parallel tasks (`parallel_tasks` > 1, `--parallel N`): the ready tasks of
the plan run at once, each in a lane of its own (`run/lane_work.py`: its worktree from the session
head, its step in a thread), and each lane's outcome lands through the merge queue
(`run/merge_queue.py`) in this, the runner's main thread, one at a time.

The decisions are `Scheduler.step(now)`, one pass over the lanes and the plan at a time, as the
supervisor's `tick(now)`: each lane whose thread ended lands, runs again or is requeued (`finish`),
then the ready tasks that may start do (`to_start`, pure). `drive` calls it at each lane's end and
every `POLL_S` while all lanes run (so answers to parked tasks are taken then: an answered task gets
a lane while the others go on); a test calls it inline with an executor of its own. Threads only run
agents: a lane's attempts (`Lane.work`) and the self-improvement step of a landed task; the rest of
what follows a task's end (`loop.after_task`) runs here, after its landing.

Checks are costly where test suites are CPU-bound, so lanes never run more of them at once than the
run's `Cores` allow (`check_slots`, else the machine's cores), and the merge queue runs them only on a
tree they have not passed on: a lane that lands onto the head it started from keeps its own checks'
result; when several lanes' changes need the checks again, they are checked once merged together
(`merge_queue.check_together`), and a lane ready while other lanes are in their checks waits for them
(`held_back`: until each has landed its thread or gone back to work) to be checked with them.

A task is ready when it is pending and every task in its `depends_on` is done (its commit on the
session branch); two tasks whose `files` globs overlap never run at once. A task whose change
could not land (a conflict, or checks that fail only on the merged tree) runs again on the new
head with what went wrong in its context; if that fails too it runs alone; then it parks with a
question. Caps, the stop flag and the meter are the session's, shared by every lane; so are the
journal (each event carries its lane) and prd.json (written only from the main thread); the one lock
they share is the run's `RunLock` (`store/events.py`). Lanes across all sessions of a `$TILTH_HOME`
hold one of `max_agent_lanes` slots (a flock each); free disk is checked before a worktree is made.
No lane outlives the run: a stop, a cap or a crash waits for the lanes to end their attempt, keeps
each one's work for its task's next lane (`run/lane_partials.py`), removes their worktrees and puts
their tasks back to pending (`lane_cleanup.clear_lanes` does the same at the next run after a kill)."""

from __future__ import annotations

import shutil
import time
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor, wait
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import IO, Callable

from tilth.core.errors import DiskFull, StopRequested
from tilth.git.lane_worktrees import remove_lanes_root, reset_to
from tilth.run import lane_partials, stacking
from tilth.run.lane_limits import Cores, Slots, check_ceiling, overlaps
from tilth.run.lane_work import Lane, remove_home, start_lane
from tilth.run.loop import after_task, learn
from tilth.run.merge_queue import Landing, LaneResult, check_together, land, note_refusal, park
from tilth.run.parking import take_answers
from tilth.run.pausing import Paused
from tilth.run.step import Run, on_this_thread
from tilth.store.events import document
from tilth.store.lane_board import read_board, write_board
from tilth.store.lock import HeldLock
from tilth.store.prd import Task, TaskStatus, load_current_plan, set_status

document(
    {
        "lane_waiting": ("a ready task could not start a lane; data: why (disk: less than lane_min_free_mb free; "
                        "ceiling: max_agent_lanes lanes run in this TILTH_HOME)", "why free_mb"),
        "parallel_summary": ("the lanes of a run ended; data: lanes, wall_s (first lane start to last landing), "
                            "task_s (the sum of each task's time in its lane), alone_s (the landed tasks' own time: "
                            "their lanes' work and landings without waits for a core, for the merge queue and its "
                            "checks, an estimate of their time one at a time), conflicts, redos, redo_s (lane time of "
                            "the attempts that did not land), redo_usd (what their model calls cost)",
                             "lanes wall_s task_s alone_s conflicts redos redo_s redo_usd"),
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
    alone_s: float = 0.0
    conflicts: int = 0
    redos: int = 0
    redo_s: float = 0.0
    redo_usd: float = 0.0


def run_lanes(run: Run, lock: HeldLock) -> bool:
    """The plan's tasks in up to `parallel_tasks` lanes; False when a failure ends the session
    (`stop_on_failure`)."""
    width = run.settings.parallel_tasks
    agents = ThreadPoolExecutor(width, thread_name_prefix="tilth-lane")
    learning = ThreadPoolExecutor(width, thread_name_prefix="tilth-learn")
    return Scheduler(run, lock, agents, learning).drive()


def to_start(ready: list[Task], running: list[tuple[Task, int]], redos: dict[str, int], width: int) -> list[Task]:
    """Which ready tasks may start a lane beside the `running` ones (each with its redo), in plan order:
    up to `width` lanes, none beside a lane that runs alone (its redo limit reached), a task at its
    redo limit only when no lane runs, never two whose `files` overlap."""
    chosen: list[Task] = []
    lanes = list(running)
    for task in ready:
        if len(lanes) >= width or any(redo >= REDO_LIMIT for _, redo in lanes):
            break
        redo = redos.get(task.id, 0)
        if redo >= REDO_LIMIT and lanes:
            continue  # it runs alone
        if any(overlaps(task.files, other.files) for other, _ in lanes):
            continue
        chosen.append(task)
        lanes.append((task, redo))
    return chosen


class Scheduler:
    """One run's lanes and the decisions over them, a `step(now)` at a time; `agents` runs each
    lane's work, `learning` the self-improvement step of each landed task."""

    def __init__(self, run: Run, lock: HeldLock, agents: Executor, learning: Executor,
                 clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        """The steps' time, read again after each landing: a landing's checks count in its lane's time."""
        self.run = replace(run, cores=Cores(check_ceiling(run.settings.check_slots), clock))
        self.lock, self.agents, self.learning = lock, agents, learning
        self.width = run.settings.parallel_tasks
        self.lanes: dict[str, Lane] = {}
        self.redos: dict[str, int] = {}
        """Refused landings per task in this run."""
        self.halt: BaseException | None = None
        self.failed_stop = False
        self.told: set[str] = set()
        """Waits for a lane slot (task ids) or for disk (`disk <task>`) that are in the journal already."""
        self.slots = Slots(run.ws.paths.home, run.settings.max_agent_lanes)
        self.tally = Tally()
        self.learned: list[Future[None]] = []
        self.waits: dict[str, dict[str, int]] = {}
        """A lane held back (task) -> the lanes in their checks it waits for, each with its rejections then."""
        lane_partials.sweep(run.ws)

    def drive(self) -> bool:
        try:
            while self.step(self.clock()):
                if self.lanes:  # a lane held back has ended its thread already: wait for the others
                    wait([lane.future for task_id, lane in self.lanes.items() if task_id not in self.waits],
                         timeout=POLL_S, return_when=FIRST_COMPLETED)
                else:
                    self.run.stop.sleep(0.5)  # another session's lanes hold every slot
        except BaseException as exc:
            self.stop_lanes(exc, self.clock())
        finally:
            self.agents.shutdown(wait=True)
            self.learning.shutdown(wait=True)
            self.summarize()
        if self.halt is not None:
            raise self.halt
        for learned in self.learned:
            learned.result()
        return not self.failed_stop

    def step(self, now: float) -> bool:
        """One pass at `now` (`time.monotonic()`): each lane whose thread ended lands, runs again or is
        requeued, then lanes start for the ready tasks (none once the run halts). True while a lane
        runs or a ready task waits for a slot another session holds."""
        ended = [lane for lane in self.lanes.values() if lane.future.done()]
        while clean := next((lane for lane in ended if not self.needs_checks(lane)), None):
            self.lock.beat()
            ended.remove(clean)
            self.finish(clean, now)
        ended = [lane for lane in ended if not self.held_back(lane)]
        together = check_together(self.run, [(lane.number, lane.task, lane.future.result()) for lane in ended]) \
            if len(ended) > 1 else ()
        for lane in ended:
            self.lock.beat()
            self.finish(lane, now, together if lane.task.id in together else ())
        waiting = self.fill(now) if self.halt is None and not self.failed_stop else False
        return bool(self.lanes) or waiting

    def accepted(self, lane: Lane) -> LaneResult | None:
        """The lane's result when its task was accepted (its thread ended)."""
        if lane.future.exception() is not None:
            return None
        result = lane.future.result()
        return result if result.outcome == "done" else None

    def needs_checks(self, lane: Lane) -> bool:
        """The lane's accepted change lands on another tree than its checks ran on: the head moved since its start."""
        result = self.accepted(lane)
        return result is not None and bool(self.run.checks.commands) and \
            stacking.floor_of(self.run.ws) != result.started_from

    def held_back(self, lane: Lane) -> bool:
        """A lane whose landing needs the checks again waits for the lanes that were in their checks when it
        ended (each until its thread ends or a verdict sends it back to work), to be checked together."""
        if self.halt is not None or not self.needs_checks(lane):
            self.waits.pop(lane.task.id, None)
            return False
        if lane.task.id not in self.waits:
            checking = self.run.cores.in_checks() - {lane.task.id}
            self.waits[lane.task.id] = {t: other.log.rejected for t, other in self.lanes.items() if t in checking}
        waits = self.waits[lane.task.id]
        for task_id, rejected in list(waits.items()):
            other = self.lanes.get(task_id)
            if other is None or other.future.done() or other.log.rejected > rejected:
                del waits[task_id]
        if waits:
            return True
        del self.waits[lane.task.id]
        return False

    def stop_lanes(self, exc: BaseException, now: float) -> None:
        """The run stops (`exc`): every lane requeued once its thread ends, its work kept."""
        self.halt = self.halt or exc
        self.run.stop.set(f"stopped: {type(exc).__name__}")
        with suppress(Exception):  # a landing cut short leaves no merged tree for a later run to take as edits
            ws = self.run.ws  # the branch's own tip: a commit may have landed just before the failure
            reset_to(ws.repo, str(ws.repo.references[f"refs/heads/{ws.record.branch}"].target))
        for lane in list(self.lanes.values()):
            self.end(lane, "stopped", now - lane.began, why="the run stopped", wait_for=True)

    def fill(self, now: float) -> bool:
        """Start lanes for the ready tasks `to_start` picks; True when one is ready but no slot is free anywhere."""
        run = self.run
        try:
            run.stop.check()
            run.caps.check()
            # at every step, lanes running or not: an answered task's lane starts from its placeholder's work
            take_answers(run.ws)
        except (StopRequested, Paused) as exc:
            self.halt = exc
            return False
        running = [(lane.task, lane.redo) for lane in self.lanes.values()]
        for task in to_start(self.ready(), running, self.redos, self.width):
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
                self.start(task, slot, now)
            except BaseException:
                slot.close()
                raise
        return False

    def ready(self) -> list[Task]:
        plan = load_current_plan(self.run.ws.paths.prd)
        done = {t.id for t in plan if t.status == TaskStatus.done}
        return [t for t in plan if t.status == TaskStatus.pending and t.id not in self.lanes
                and all(d in done for d in t.depends_on)]

    def start(self, task: Task, slot: IO[str], now: float) -> None:
        ws = self.run.ws
        number = min(set(range(1, self.width + 1)) - {lane.number for lane in self.lanes.values()})
        with ws.events.run_lock:  # `RunLock` 3: a retry's placeholder leaves the branch; nothing pushes it half moved
            stacking.take_off(ws, task.id)
        start, redo = stacking.floor_of(ws), self.redos.get(task.id, 0)  # never another task's partial work
        lane = start_lane(self.run, task, number, start, redo, now, slot, self.clock)
        self.tally.began = self.tally.began if self.tally.began is not None else now
        lane.future = self.agents.submit(lane.work)
        self.lanes[task.id] = lane
        self.show()

    def finish(self, lane: Lane, now: float, together: tuple[str, ...] = ()) -> None:
        """A lane's thread ended: land its outcome (then what follows a task's end), or send its task
        back (`refused`), or requeue it; then remove the lane. `together`: the tasks whose changes, this
        one's among them, passed the checks merged together."""
        run, task = self.run, lane.task
        try:
            result = lane.future.result()
        except (StopRequested, Paused) as exc:
            self.halt = self.halt or exc
            self.end(lane, "stopped", now - lane.began, why=str(exc) or type(exc).__name__)
            return
        except BaseException as exc:
            self.halt = self.halt or exc
            run.stop.set(f"a lane failed: {type(exc).__name__}")
            self.end(lane, "stopped", now - lane.began, why=f"crashed: {type(exc).__name__}")
            return
        landing_began = self.clock()
        with run.ws.events.run_lock:  # `RunLock` 3: nothing (a dispatched session's push at an event) sees a landing half done
            landing = land(run, lane.number, task, result, together)
        lane_partials.forget(run.ws, task.id)  # landed, or refused: its redo starts clean on the new head
        landed = self.clock()
        seconds = landed - lane.began
        self.tally.ended = landed
        if landing.sha is None:
            self.refused(lane, landing, seconds)
            return
        self.tally.task_s += seconds
        self.tally.alone_s += lane.own_seconds(max(landed - landing_began - landing.checks_s, 0.0))
        self.end(lane, result.outcome, seconds)
        if result.outcome != "parked" and run.settings.self_improvement:
            self.learned.append(self.learning.submit(learn_apart, run, task, result.outcome, result.entry.iter))
        after_task(run, task, result.outcome, result.entry.iter, landing.sha, learned=True)
        if result.outcome == "failed" and run.settings.stop_on_failure:
            self.failed_stop = True

    def refused(self, lane: Lane, landing: Landing, seconds: float) -> None:
        """Run the task again on the new head (then alone); past that, park it with a question."""
        ws, task = self.run.ws, lane.task
        self.tally.conflicts += landing.refused == "merge_conflict"
        self.tally.redo_s += seconds
        self.tally.redo_usd += lane.log.spent_usd
        redo = self.redos[task.id] = self.redos.get(task.id, 0) + 1
        if redo <= REDO_LIMIT:
            self.tally.redos += 1
            note_refusal(ws, task, landing, lane.number, redo)
            set_status(ws.paths.prd, task.id, TaskStatus.pending)
            self.end(lane, landing.refused, seconds)
            return
        iteration, sha = park(ws, lane.number, task, landing, REDO_LIMIT + 1)
        self.end(lane, "parked", seconds)
        after_task(self.run, task, "parked", iteration, sha)

    def end(self, lane: Lane, outcome: str, seconds: float, why: str | None = None, wait_for: bool = False) -> None:
        lane.end(self.run.ws, outcome, seconds, why, wait_for)
        del self.lanes[lane.task.id]
        self.show()

    def show(self) -> None:
        """lanes.json: the lanes running now, for `tilth status`."""
        write_board(self.run.ws.paths.dir, [{"lane": lane.number, "task": lane.task.id, "start": lane.start,
                                              "since": lane.since} for lane in self.lanes.values()])

    def summarize(self) -> None:
        ws, t = self.run.ws, self.tally
        remove_lanes_root(ws.paths.home, ws.record.id)
        for home in ws.paths.lane_homes():
            remove_home(home)
        if t.began is None:
            return
        figures = {"lanes": self.width, "wall_s": round(max(t.ended - t.began, 0.0), 3), "task_s": round(t.task_s, 3),
                   "alone_s": round(t.alone_s, 3),
                   "conflicts": t.conflicts, "redos": t.redos, "redo_s": round(t.redo_s, 3),
                   "redo_usd": round(t.redo_usd, 6)}
        ws.events.emit("parallel_summary", None, None, **figures)
        write_board(ws.paths.dir, [], [*read_board(ws.paths.dir)["runs"], figures])


def learn_apart(run: Run, task: Task, outcome: str, iteration: int) -> None:
    """The loop's `learn` for a landed task, in a learning thread, with a workspace of that thread's own."""
    learn(on_this_thread(run), task, outcome, iteration)
