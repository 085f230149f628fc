"""The RQ job: run one dispatched session on this machine until it ends or stops.

    take the lease -> fetch branch + files from the remote -> fresh worktree -> run
    (`run_session`, which reconciles with the branch first) -> after every task outcome
    push branch + files -> at the end push, record the state, release the lease

A worker that dies or freezes loses its lease after `lease_s`; the next sweep of any worker
(`holding.sweep`) queues the session again, and the worker that takes it carries on from the
last push, made after every attempt (ledger entry, staged edits as `worktree.patch`) and every
task outcome: the iteration in flight is lost at most, never done twice. A worker told to shut
down stops the session at a safe point and queues it again; only a person's `tilth stop` leaves
it stopped. Everything the job is given is checked first: its arguments (`jobdata`), its
signature and the snapshot's (`signing`, `carried`).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from tilth.core.config import Settings
from tilth.core.settings_load import load_settings
from tilth.core.errors import TilthError
from tilth.core.faults import checkpoint
from tilth.core.travel import machine_view
from tilth.dispatch.broker import ENDED, Broker, BrokerDown, enqueue, worker_token
from tilth.dispatch.carried import PATCH, carried_files, restore, seal, unseal
from tilth.dispatch.holding import Holding, hand_on, wait_for_lease
from tilth.dispatch.jobdata import RefusedJob, parse_job
from tilth.dispatch.mirror import Mirror
from tilth.dispatch.signing import job_signature, load_secret, matches
from tilth.git.gitcli import GitFailed
from tilth.git.shelf import any_shelved
from tilth.git.carry import (PushRefused, SnapshotRefused, apply_patch, check_out, clone_lock, ensure_clone,
                             fetch_session, push_session, remove_checkout, staged_patch)
from tilth.run.session_run import run_session
from tilth.store.actors import known_actor
from tilth.store.answers import last_question, record_answer
from tilth.store.home import SessionPaths, ensure_home, session_paths, tilth_home
from tilth.store.inbox import add_note
from tilth.store.prd_peek import peek_plan
from tilth.store.session import SessionState, load_session, save_session

log = logging.getLogger("tilth.dispatch")

OUTCOMES = {"task_done", "task_failed", "task_parked"}
PUSHED_AT = {"verdict", "placeholders_raised", *OUTCOMES}
"""After every attempt (its ledger entry and staged edits), every task outcome (its commit) and once the
placeholders are back on top of a task commit; never while they wait on the shelf (`push`)."""
SAFE_POINT_NEAR = {"verdict", "worker_done", *OUTCOMES}
"""The events just before the loop checks its stop flag."""


def run_job(*args: object, **kwargs: object) -> str:
    """Arguments (session_id, remote, resume[, signature]) parsed strictly before any use. `resume`:
    run as `tilth resume` does (a FAILED placeholder at the tip unwound, failed tasks retried); a
    takeover after a worker died runs as it was queued."""
    settings = load_settings(tilth_home())
    if settings.dispatch is None:
        raise TilthError("this worker's config.toml has no [dispatch] section")
    try:
        job = parse_job(args, kwargs, settings.dispatch)
    except RefusedJob as exc:
        log.error("%s", exc)
        raise
    session_id, remote, resume = job.session_id, job.remote, job.resume
    broker = Broker(settings.dispatch)
    secret = load_secret(settings.dispatch)
    if secret is not None and not matches(job_signature(secret, session_id, remote, resume), job.signature):
        return refuse(broker, session_id, "the job is not signed with the team's secret" if job.signature is None
                      else "the job's signature does not match (altered in the broker)")
    token = worker_token()
    if not wait_for_lease(broker, session_id, token):
        return f"session {session_id}: another worker holds it ({broker.lease_holder(session_id)}); not run"
    holding = Holding(broker, session_id, token, remote)
    holding.secret = secret
    try:
        if broker.stop_requested(session_id):
            return stop_before_start(broker, session_id)
        ended = (broker.state(session_id) or {}).get("state")
        if ended in ENDED and not resume:  # a stale retry of a job another worker's run superseded
            return f"session {session_id}: already {ended}; not run"
        try:
            paths = take_over(session_id, remote, settings, secret)
        except SnapshotRefused as exc:
            return refuse(broker, session_id, str(exc))
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
        if holding.lost:
            hand_on(broker, session_id, remote)


def refuse(broker: Broker, session_id: str, why: str) -> str:
    """A session this worker will not run: its state says why (`tilth status`, `tilth wait`)."""
    log.error("session %s refused: %s", session_id, why)
    try:
        broker.set_state(session_id, {"state": "refused", "reason": f"refused by a worker: {why}", "worker": ""})
    except BrokerDown:
        pass
    return f"session {session_id}: refused: {why}"


def take_over(session_id: str, remote: str, settings: Settings, secret: bytes | None) -> SessionPaths:
    """The session's files and branch as last pushed (checked, SnapshotRefused), a fresh worktree,
    paths made local, and this machine's own say on what runs (`machine_view`)."""
    home = tilth_home()
    ensure_home(home)
    paths = session_paths(session_id, home)
    with clone_lock(home / "clones"):
        clone = ensure_clone(home / "clones", remote)
        remove_checkout(clone, session_id, paths.worktree)
        found = fetch_session(clone, remote, session_id)
        if not found:
            raise TilthError(f"session {session_id} is not on the remote {remote}")
        files = unseal(clone, session_id, secret).files
        check_out(clone, session_id, paths.worktree)
        apply_patch(clone, session_id, paths.worktree, files.pop(PATCH, b""))
    shutil.rmtree(paths.dir, ignore_errors=True)
    restore(paths, files)
    record = load_session(paths)
    record.repo, record.worktree = str(clone), str(paths.worktree)
    record.settings = {**record.settings, **machine_view(settings)}
    if record.backend.scenario:
        record.backend.scenario = str(paths.scenario)
    record.state, record.pid, record.supervised = SessionState.queued, None, False
    save_session(paths, record)
    return paths


def relay_inbox(broker: Broker, paths: SessionPaths) -> int:
    """Answers and notes left in the broker from other machines, written into the session's files
    (each once, by its id, with who left it: cli, dashboard, or unknown for any other `by`); how many
    items of the broker's list they were. Trimmed from the
    broker only after a push carried them, so a worker that dies first loses none."""
    items = broker.inbox(paths.id)
    try:
        planned = {t.id for t in peek_plan(paths.prd)}
    except Exception:  # an unreadable plan: the run that follows says what is wrong with it
        planned = set()
    for item in items:
        text, task = item.get("text"), item.get("task")
        if not isinstance(text, str) or not text.strip():
            continue
        if task is not None and task not in planned:  # a task id is never made a path unless the plan has it
            log.warning("session %s: dropped a broker %s for unknown task %r", paths.id, item.get("kind"), task)
            continue
        by = known_actor(item.get("by"))  # who, as a label: any other value is recorded as unknown
        if item.get("kind") == "note":
            add_note(paths.dir, text, task if isinstance(task, str) else None, str(item.get("id")), by=by)
        elif item.get("kind") == "answer" and isinstance(task, str):
            asked = last_question(paths.dir, task)
            if asked is not None:
                record_answer(paths.dir, task, asked.iter, text, str(item.get("id")), by=by)
    return len(items)


def push(paths: SessionPaths, settings: Settings, holding: Holding, why: str, task: str = "") -> bool:
    """Both refs with the session's files now; False when this worker no longer holds the session."""
    if holding.lost:
        return False
    try:
        if not holding.still_held():  # checked right before the push, not only every third of lease_s
            return False
    except BrokerDown:
        pass  # unverifiable now; the remote still refuses a push that is not a fast-forward
    record = load_session(paths)
    clone = Path(record.repo)
    if any_shelved(str(clone), paths.id):
        return False  # the branch stands below its placeholders for a task: `placeholders_raised` pushes it whole
    files = {**carried_files(paths), PATCH: staged_patch(clone, paths.id, Path(record.worktree))}
    relayed = holding.relayed
    with clone_lock(tilth_home() / "clones"):
        seal(clone, paths.id, files, why, holding.secret)
        checkpoint("before_push", task)
        push_session(clone, holding.remote, paths.id)
    try:
        holding.broker.taken(paths.id, relayed)
        holding.relayed -= relayed
    except BrokerDown:
        pass  # relayed again by the next push's turn or the next worker: written once by id
    return True


def last_push(paths: SessionPaths, settings: Settings, holding: Holding, why: str) -> bool:
    """The run's last push, tried again with growing waits while it fails for any reason but a
    fast-forward refusal; after `push_patience_s` the job fails (GitFailed), so a retry or another
    worker carries on from what the remote has."""
    d = holding.broker.dispatch
    deadline, wait = time.monotonic() + d.push_patience_s, min(d.retry_s, 5.0)
    while not holding.lost:
        try:
            return push(paths, settings, holding, why)
        except PushRefused as exc:
            holding.give_up(str(exc), "another worker moved the session on")
        except GitFailed as exc:
            if time.monotonic() + wait > deadline:
                raise
            log.warning("session %s: last push failed; trying again in %.0fs: %s", paths.id, wait, exc)
            time.sleep(wait)
            wait = min(wait * 2, 60.0)
    return False


def run_here(paths: SessionPaths, settings: Settings, broker: Broker, holding: Holding, resume: bool) -> int:
    mirror = Mirror(broker, paths)

    def echo(event: dict[str, Any]) -> None:
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
                if push(paths, settings, holding, f"{event['type']} {event.get('task')}", str(event.get("task") or "")):
                    mirror.pushed()
                    if event.get("type") in OUTCOMES:
                        mirror.publish_state()
            except PushRefused as exc:
                holding.give_up(str(exc), "another worker moved the session on")
            except GitFailed as exc:  # the next boundary's push carries this one too
                log.warning("session %s: push failed (the next one carries it): %s", paths.id, exc)

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
        if last_push(paths, settings, holding, f"ended {record.state.value}"):
            mirror.pushed()
        if not holding.lost:  # only now may `tilth wait` see the end: the remote has all of it
            mirror.final = True
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
    where = broker.stop_requested_on(session_id) or "`tilth stop`"
    broker.set_state(session_id, {"state": "stopped", "reason": f"stopped on {where} before it ran" if
                                  where == "the dashboard" else f"stopped by {where} before it ran", "worker": ""})
    broker.clear_stop(session_id)
    return f"session {session_id}: stopped before it ran"
