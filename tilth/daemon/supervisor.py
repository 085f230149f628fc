"""The supervisor's decisions. `Supervisor.tick(now)` makes every one: settle children
that exited, mark sessions whose runner vanished as crashed (with, for a supervised one, an
auto-resume time after a backoff, or a reason saying its auto-resumes are used up),
re-queue done sessions whose plan grew, queue crashed sessions whose auto-resume time has
come and paused sessions whose usage limit has lifted (both as `tilth resume` would), start
queued sessions that are due while slots are free, and ask to be woken at the next scheduled
start, auto-resume or end of a pause, (with `[dispatch]`) look now and then for sessions a broker
that came back empty forgot, and (with `follow_pr`) poll the open pull requests tilth opened.
Everything else only calls it, one tick at a time (a lock): the apscheduler jobs (the periodic rescan, and date jobs for `--at` start times,
auto-resume backoffs and ends of pauses), the sessions/ watcher, and a thread per child that
reports the child's exit. The process around it (lock, signals, shutdown) is in process.py.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

from apscheduler.schedulers.background import BackgroundScheduler

from tilth.core.clock import utc_now
from tilth.core.config import Settings
from tilth.core.settings_load import load_settings
from tilth.core.errors import BadInput
from tilth.daemon import queue, transitions
from tilth.daemon.children import Child, Recovery, describe_exit
from tilth.daemon.control import DaemonLock
from tilth.daemon.crash_notice import Notices
from tilth.daemon.following import Follows
from tilth.daemon.revive import look
from tilth.daemon.watcher import Watcher
from tilth.store.events import read_events
from tilth.store.home import SessionPaths, session_paths
from tilth.store.lock import is_locked
from tilth.store.prd import TaskStatus, load_plan
from tilth.store.session import SessionState, load_session
from tilth.store.session_record import SessionRecord

log = logging.getLogger("tilth.daemon")

RESCAN_S = 2.0
"""The safety-net rescan: queue pickup and stale-lock recovery even when no event came."""
HEARTBEAT_S = 10.0


class Supervisor:
    def __init__(self, home: Path, lock: DaemonLock, rescan_s: float = RESCAN_S,
                 nudge: Callable[[], None] = lambda: None):
        self.home = home
        self.lock = lock
        self.rescan_s = rescan_s
        self.nudge = nudge
        """Wakes the main thread (it waits for children to exit while stopping)."""
        self.children: dict[str, Child] = {}
        self.exited: list[Child] = []
        self.stopping = False
        self._tick_lock = threading.Lock()
        self._settings = Settings()
        self.notices = Notices()
        self._plans_seen: dict[str, int] = {}
        self._wakes: set[datetime] = set()
        self.recovery: Recovery | None = None
        self._recovery_due: datetime | None = None
        self.follows = Follows(home)
        self.scheduler = BackgroundScheduler(timezone=timezone.utc, job_defaults={
            "coalesce": True, "max_instances": 1, "misfire_grace_time": None})
        self.watcher = Watcher(home / "sessions", self.wake)

    # -- triggers: each only calls tick --------------------------------------------------

    def wake(self) -> None:
        self.tick(utc_now())

    def _child_exited(self, child: Child) -> None:
        self.nudge()
        self.tick(utc_now())

    # -- the decisions -------------------------------------------------------------------

    def tick(self, now: datetime) -> None:
        with self._tick_lock:
            try:
                settings = self.settings()
                policy = queue.AutoResume.from_settings(settings)
                self._settle_exits(policy, now)
                seen = self._look()
                if self._recover(queue.stale(seen), policy, now) | self._requeue_grown(seen) \
                        | self._requeue_answered(seen):
                    seen = self._look()
                if not self.stopping:
                    if self._auto_resume(queue.to_auto_resume(now, seen, policy), policy, now) \
                            | self._unpause(queue.to_unpause(now, seen), now):
                        seen = self._look()
                    self._launch(queue.to_start(now, seen, settings.max_parallel_sessions))
                    self._look_for_forgotten(settings, now)
                    self.follows.tick(settings, seen, now)
                    self._schedule(now, queue.wakes(now, seen, policy))
            except Exception:
                log.exception("tick failed; the next one retries")

    def _settle_exits(self, policy: queue.AutoResume, now: datetime) -> None:
        for sid, child in list(self.children.items()):
            if child.returncode is not None:
                del self.children[sid]
                self.exited.append(child)
                log.info("session %s: runner pid %d ended (%s)", sid, child.pid, describe_exit(child.returncode))
        self.exited = [child for child in self.exited if not self._settled(child, policy, now)]

    def _settled(self, child: Child, policy: queue.AutoResume, now: datetime) -> bool:
        """True once the child's end shows in session.json. A runner that ends normally
        wrote its own end state; one that died left `running` (or never left `queued`)."""
        paths = child.paths
        try:
            record = load_session(paths)
        except BadInput:
            return True
        if record.state not in (SessionState.running, SessionState.queued):
            return True
        if is_locked(paths.lock):
            return record.state == SessionState.running  # someone else runs it now
        if record.state == SessionState.queued and (_began(paths) or (child.terminated and not child.killed)):
            return True  # it ran and was queued again since, or it was stopped before it began
        code = child.returncode
        if child.killed:
            done = transitions.mark_stopped(paths, {SessionState.running, SessionState.queued}, now=True,
                                            pid=child.pid, role="supervisor") is not None
        else:
            done = transitions.mark_crashed(paths, f"runner {describe_exit(code)}; see {paths.dir}/run.log",
                                            code, also_queued=True, policy=policy, now=now)
        if done and not child.killed:
            self.notices.crashed(paths)
        if done:
            log.warning("session %s: marked %s (runner %s)", paths.id, "stopped" if child.killed else "crashed",
                        describe_exit(code))
        return done

    def _look(self) -> list[queue.Seen]:
        return look(self.home, set(self.children))

    def _recover(self, stale: list[SessionRecord], policy: queue.AutoResume, now: datetime) -> bool:
        changed = False
        for record in stale:
            paths = session_paths(record.id, self.home)
            if transitions.mark_crashed(paths, "its runner is gone (session lock free)", None, policy=policy, now=now):
                changed = True
                self.notices.crashed(paths)
                log.warning("session %s: said running but nobody held its lock; marked crashed", record.id)
        return changed

    def _auto_resume(self, records: list[SessionRecord], policy: queue.AutoResume, now: datetime) -> bool:
        """Crashed sessions due for auto-resume are queued as `tilth resume` queues them; the
        launch that follows in the same tick runs them with `--resume`."""
        changed = False
        for record in records:
            resumed = transitions.auto_resume(session_paths(record.id, self.home), now, policy)
            if resumed is not None:
                changed = True
                log.warning("session %s: crashed; auto-resume %d of %d", record.id, resumed.auto_resumes,
                            policy.attempts)
        return changed

    def _unpause(self, records: list[SessionRecord], now: datetime) -> bool:
        """Paused sessions whose usage limit has lifted are queued as `tilth resume` queues them;
        the launch that follows in the same tick runs them with `--resume`."""
        changed = False
        for record in records:
            if transitions.unpause(session_paths(record.id, self.home), now) is not None:
                changed = True
                log.info("session %s: its pause (%s) is over; resuming it", record.id, record.reason or "usage limit")
        return changed

    def _requeue_grown(self, seen: list[queue.Seen]) -> bool:
        """A done session whose prd.json gained pending tasks is queued again (plans are
        re-read only when prd.json's mtime changed)."""
        changed = False
        for s in seen:
            if s.record.state != SessionState.done or not s.record.supervised:
                continue
            paths = session_paths(s.record.id, self.home)
            try:
                mtime = paths.prd.stat().st_mtime_ns
                if self._plans_seen.get(s.record.id) == mtime:
                    continue
                pending = any(t.status == TaskStatus.pending for t in load_plan(paths.prd))
            except (OSError, BadInput):
                continue
            self._plans_seen[s.record.id] = mtime
            if pending:
                if transitions.requeue_grown(paths):
                    changed = True
                    log.info("session %s: prd.json gained pending tasks; queued again", s.record.id)
                else:
                    self._plans_seen.pop(s.record.id, None)
        return changed

    def _requeue_answered(self, seen: list[queue.Seen]) -> bool:
        """A session that ended `waiting` while its answer came (`tilth answer` met the runner
        still holding it) is queued again."""
        changed = False
        for s in seen:
            if s.record.state != SessionState.waiting:
                continue
            paths = session_paths(s.record.id, self.home)
            try:
                if transitions.requeue_answered(paths):
                    changed = True
                    log.info("session %s: a parked task was answered; queued again", s.record.id)
            except (OSError, BadInput):
                continue
        return changed

    def _launch(self, records: list[SessionRecord]) -> None:
        for record in records:
            paths = session_paths(record.id, self.home)
            claimed, resume = transitions.claim_for_launch(paths)
            if not claimed:
                continue
            child = Child(paths, resume, self._child_exited)
            self.children[record.id] = child
            log.info("session %s: started runner pid %d%s", record.id, child.pid, " (resume)" if resume else "")

    def _look_for_forgotten(self, settings: Settings, now: datetime) -> None:
        """With `[dispatch]` and `requeue_forgotten`: every `maintenance_s`, a child looks whether the
        broker came back empty and, if so, recovers what it forgot (`tilth resume --forgotten`); one
        look at a time."""
        if settings.dispatch is None or not settings.requeue_forgotten:
            return
        if self.recovery is not None and self.recovery.returncode is None:
            return
        if self._recovery_due is not None and now < self._recovery_due:
            return
        self._recovery_due = now + timedelta(seconds=settings.dispatch.maintenance_s)
        self.recovery = Recovery(self.home)

    def _schedule(self, now: datetime, wakes: set[datetime]) -> None:
        for moment in wakes - self._wakes:
            self.scheduler.add_job(self.wake, "date", run_date=moment, id=f"start-at-{moment.isoformat()}",
                                   replace_existing=True)
            log.info("a scheduled start, auto-resume or end of a pause wakes the supervisor at %s",
                     moment.isoformat())
        self._wakes = {moment for moment in self._wakes | wakes if moment > now}

    def settings(self) -> Settings:
        """The home's settings as they are now; the previous ones when they have become unreadable."""
        try:
            self._settings = load_settings(self.home)
            self.notices.use(self._settings.notify)
        except BadInput as exc:
            log.warning("settings unreadable (%s); keeping the previous ones", exc)
        return self._settings

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        (self.home / "sessions").mkdir(parents=True, exist_ok=True)
        self.scheduler.add_job(self.wake, "interval", seconds=self.rescan_s, id="rescan")
        self.scheduler.add_job(self.lock.beat, "interval", seconds=HEARTBEAT_S, id="heartbeat")
        self.scheduler.start()
        self.watcher.start()
        self.wake()

    def stop_accepting(self) -> list[Child]:
        """No new runners from now on; ask the running ones to stop after their iteration."""
        with self._tick_lock:
            self.stopping = True
        self.scheduler.shutdown(wait=True)
        self.watcher.stop()
        with self._tick_lock:
            running = list(self.children.values())
            self.follows.stop()
        for child in running:
            log.info("session %s: asking runner pid %d to stop after its iteration", child.paths.id, child.pid)
            child.terminate()
        return running

    def finish(self, children: list[Child]) -> None:
        for child in children:
            child.waiter.join()
        self.tick(utc_now())
        self.notices.drain()


def _began(paths: SessionPaths) -> bool:
    """The runner got as far as `session_started` after the supervisor launched it."""
    for event in reversed(read_events(paths.events)):
        if event.get("type") in ("session_started", "session_launched"):
            return bool(event["type"] == "session_started")
    return False
