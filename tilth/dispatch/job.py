"""The RQ job: run one dispatched session on this machine until it ends or stops.

    take the lease -> fetch branch + files from the remote -> fresh worktree -> run
    (`run_session`, which reconciles with the branch first) -> after every task outcome
    push branch + files -> at the end push, record the state, release the lease

A worker that dies loses its lease after `lease_s`; RQ hands the job (still `started`, its
heartbeats stopped) to another worker as an abandoned job with retries left, and that worker
carries on from the last push, made after every attempt (ledger entry, staged edits as
`worktree.patch`) and every task outcome: the iteration in flight is lost at most, never done
twice. A
worker told to shut down stops the session at a safe point and queues it again; only a
person's `tilth stop` leaves it stopped.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path

from tilth.core.config import Settings, load_settings
from tilth.core.errors import TilthError
from tilth.dispatch.broker import Broker, BrokerDown, enqueue, worker_token
from tilth.dispatch.mirror import Mirror
from tilth.git.gitcli import GitFailed
from tilth.git.carry import (PushRefused, apply_patch, check_out, clone_lock, ensure_clone, fetch_session,
                             push_session, remove_checkout, snapshot, snapshot_files, staged_patch)
from tilth.run.loop import run_session
from tilth.run.stopflag import StopFlag
from tilth.store.answers import last_question, record_answer
from tilth.store.home import SessionPaths, ensure_home, session_paths, tilth_home
from tilth.store.inbox import add_note
from tilth.store.session import SessionState, load_session, save_session

log = logging.getLogger("tilth.dispatch")

LEFT_BEHIND = {"session.lock", ".reserve", "runs", "agents", ".prd.lock"}
"""What stays on the machine that made it: locks, ballast, and the bulky per-run artifacts."""
OUTCOMES = {"task_done", "task_failed", "task_parked"}
PUSHED_AT = {"verdict", *OUTCOMES}
"""After every attempt (its ledger entry and staged edits) and every task outcome (its commit)."""
PATCH = "worktree.patch"
"""In the files snapshot: the worktree's uncommitted edits against the pushed branch tip."""
SAFE_POINT_NEAR = {"verdict", "worker_done", *OUTCOMES}
"""The events just before the loop checks its stop flag."""


def run_job(session_id: str, remote: str, resume: bool = False) -> str:
    """`resume`: run as `tilth resume` does (a FAILED placeholder at the tip unwound, failed tasks
    retried); a takeover after a worker died runs as it was queued."""
    settings = load_settings(tilth_home())
    if settings.dispatch is None:
        raise TilthError("this worker's config.toml has no [dispatch] section")
    broker = Broker(settings.dispatch)
    token = worker_token()
    if not wait_for_lease(broker, session_id, token, settings):
        return f"session {session_id}: another worker holds it ({broker.lease_holder(session_id)}); not run"
    holding = Holding(broker, session_id, token, settings, remote)
    try:
        if broker.stop_requested(session_id):
            return stop_before_start(broker, session_id)
        paths = take_over(session_id, remote)
        holding.relayed = relay_inbox(broker, paths)
        holding.start()
        code = run_here(paths, settings, broker, holding, resume)
        return f"session {session_id}: runner exit {code}"
    finally:
        holding.stop()
        try:
            broker.release_lease(session_id, token)
        except BrokerDown:
            pass  # it expires by itself


def wait_for_lease(broker: Broker, session_id: str, token: str, settings: Settings) -> bool:
    """A worker that just died may still hold the lease for up to `lease_s`; after twice that the
    holder is alive and renewing it, and this job has nothing to do."""
    deadline = time.monotonic() + 2 * settings.dispatch.lease_s
    while not broker.take_lease(session_id, token):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


class Holding(threading.Thread):
    """Renews the lease every third of `lease_s` and passes a person's `tilth stop` to the run."""

    def __init__(self, broker: Broker, session_id: str, token: str, settings: Settings, remote: str):
        super().__init__(daemon=True, name=f"lease-{session_id}")
        self.broker, self.session_id, self.token, self.remote = broker, session_id, token, remote
        self.every = settings.dispatch.lease_s / 3
        self.flag = StopFlag()
        self.lost = False
        self.user_stop = False
        self.relayed = 0
        """Inbox items written into the files since the last push."""
        self._done = threading.Event()

    def run(self) -> None:
        renewed = time.monotonic()
        while not self._done.wait(min(1.0, self.every)):
            try:
                if time.monotonic() - renewed >= self.every:
                    if not self.still_held():
                        return
                    renewed = time.monotonic()
                self.poll_stop()
            except BrokerDown:
                continue  # the lease outlives a short outage; a long one ends in `lost` once it is back

    def still_held(self) -> bool:
        """Renew the lease; a lost one stops the run, and nothing is pushed from here again."""
        if self.broker.renew_lease(self.session_id, self.token):
            return True
        self.lost = True
        log.error("session %s: lease lost; stopping without pushing", self.session_id)
        self.flag.set("the worker lost the session's lease")
        return False

    def poll_stop(self) -> None:
        if not self.user_stop and self.broker.stop_requested(self.session_id):
            self.user_stop = True
            self.flag.set("stop requested with `tilth stop`")

    def stop(self) -> None:
        self._done.set()


def take_over(session_id: str, remote: str) -> SessionPaths:
    """The session's files and branch as last pushed, a fresh worktree, paths made local."""
    home = tilth_home()
    ensure_home(home)
    with clone_lock(home / "clones"):
        clone = ensure_clone(home / "clones", remote)
        worktree = home / "worktrees" / session_id
        remove_checkout(clone, session_id, worktree)
        found = fetch_session(clone, remote, session_id)
        if not found:
            raise TilthError(f"session {session_id} is not on the remote {remote}")
        files = snapshot_files(clone, session_id)
        check_out(clone, session_id, worktree)
        apply_patch(worktree, files.pop(PATCH, b""))
    paths = session_paths(session_id, home)
    shutil.rmtree(paths.dir, ignore_errors=True)
    for relative, data in files.items():
        target = paths.dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    record = load_session(paths)
    record.repo, record.worktree = str(clone), str(worktree)
    if record.backend.scenario:
        record.backend.scenario = str(paths.scenario)
    record.state, record.pid, record.supervised = SessionState.queued, None, False
    save_session(paths, record)
    return paths


def relay_inbox(broker: Broker, paths: SessionPaths) -> int:
    """Answers and notes left in the broker from other machines, written into the session's files
    (each once, by its id); how many items of the broker's list they were. Trimmed from the
    broker only after a push carried them, so a worker that dies first loses none."""
    items = broker.inbox(paths.id)
    for item in items:
        text, task = item.get("text"), item.get("task")
        if not isinstance(text, str) or not text.strip():
            continue
        if item.get("kind") == "note":
            add_note(paths.dir, text, task if isinstance(task, str) else None, str(item.get("id")))
        elif item.get("kind") == "answer" and isinstance(task, str):
            asked = last_question(paths.dir, task)
            if asked is not None:
                record_answer(paths.dir, task, asked.iter, text, str(item.get("id")))
    return len(items)


def carried_files(paths: SessionPaths) -> dict[str, bytes]:
    files = {}
    for path in sorted(paths.dir.rglob("*")):
        relative = path.relative_to(paths.dir)
        if path.is_file() and relative.parts[0] not in LEFT_BEHIND and not path.name.endswith(".tmp"):
            files[relative.as_posix()] = path.read_bytes()
    return files


def push(paths: SessionPaths, settings: Settings, holding: Holding, why: str) -> None:
    if holding.lost:
        return
    try:
        if not holding.still_held():  # checked right before the push, not only every third of lease_s
            return
    except BrokerDown:
        pass  # unverifiable now; the remote still refuses a push that is not a fast-forward
    clone = Path(load_session(paths).repo)
    files = {**carried_files(paths), PATCH: staged_patch(Path(load_session(paths).worktree))}
    relayed = holding.relayed
    with clone_lock(tilth_home() / "clones"):
        snapshot(clone, paths.id, files, f"tilth session {paths.id}: {why}")
        push_session(clone, holding.remote, paths.id)
    try:
        holding.broker.taken(paths.id, relayed)
        holding.relayed -= relayed
    except BrokerDown:
        pass  # relayed again by the next push's turn or the next worker: written once by id


def run_here(paths: SessionPaths, settings: Settings, broker: Broker, holding: Holding, resume: bool) -> int:
    mirror = Mirror(broker, paths)

    def echo(event: dict) -> None:
        if holding.lost:
            return  # the session is another worker's now: nothing more goes out from here
        mirror.catch_up()
        try:
            if event.get("type") in SAFE_POINT_NEAR:
                holding.poll_stop()  # so a stop asked during the iteration is seen at the very next safe point
        except BrokerDown:
            pass
        if event.get("type") in OUTCOMES:  # the loop takes answers and notes at the next task boundary
            try:
                holding.relayed = relay_inbox(broker, paths)
            except BrokerDown:
                pass
        if event.get("type") in PUSHED_AT:
            try:
                push(paths, settings, holding, f"{event['type']} {event.get('task')}")
            except PushRefused:
                holding.lost = True
                holding.flag.set("another worker moved the session on")
            except GitFailed as exc:  # the next boundary's push carries this one too
                log.warning("session %s: push failed: %s", paths.id, exc)

    broker.set_state(paths.id, {"state": "running", "worker": holding.token, "pid": os.getpid()})
    code = 3
    try:
        code = run_session(paths, settings, holding.flag.install(), resume=resume, echo=echo)
    except TilthError as exc:
        log.warning("session %s: %s", paths.id, exc)
    finally:
        record = load_session(paths)
        handed_back = not holding.user_stop and not holding.lost and record.state == SessionState.stopped \
            and holding.flag.by_signal
        if handed_back:
            record.state = SessionState.queued
            save_session(paths, record)
        if not holding.lost:
            try:
                push(paths, settings, holding, f"ended {record.state.value}")
            except PushRefused:
                holding.lost = True
        if not holding.lost:
            mirror.catch_up()
            mirror.publish_state(worker="")
        if holding.user_stop:
            broker.clear_stop(paths.id)
        answered_meanwhile = record.state == SessionState.waiting and not holding.lost \
            and any(item.get("kind") == "answer" for item in broker.inbox(paths.id))
        if handed_back or answered_meanwhile:
            enqueue(broker, paths.id, holding.remote)
    return code


def stop_before_start(broker: Broker, session_id: str) -> str:
    """A `tilth stop` that came while the session waited in the queue: it ends stopped unrun."""
    broker.set_state(session_id, {"state": "stopped", "reason": "stopped by `tilth stop` before it ran",
                                  "worker": ""})
    broker.clear_stop(session_id)
    return f"session {session_id}: stopped before it ran"
