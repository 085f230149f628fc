"""`tilth start --dispatch` and `tilth resume` of a dispatched session: the session is made in
this machine's clone of the remote, its branch and files are pushed there, and a job is queued
for whichever `tilth worker` takes it first. Nothing of it is left on this machine."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from tilth.core.config import Settings
from tilth.core.errors import BadInput
from tilth.dispatch.broker import Broker, BrokerDown, enqueue, reply_text
from tilth.dispatch.carried import carried_files, seal
from tilth.dispatch.mirror import state_of
from tilth.dispatch.signing import load_secret
from tilth.git.carry import clone_lock, default_head, ensure_clone, push_session, remote_refs, remove_checkout
from tilth.run.create import create_session
from tilth.store.home import SessionPaths, tilth_home
from tilth.store.session import BackendChoice

STAGING = "dispatch-staging"


def start_dispatched(remote: str, plan: Path, session_id: str | None, base: str | None, backend: BackendChoice,
                     settings: Settings, checks: list[str], seed: Path | None,
                     say: Callable[[str], None] = print) -> SessionPaths:
    dispatch = settings.dispatch
    if dispatch is None:
        raise BadInput("dispatching needs a [dispatch] section in config.toml (broker_url, remote); see "
                       "docs/dispatch.md")
    broker = Broker(dispatch)
    try:
        broker.redis.ping()
    except BrokerDown as exc:
        raise BadInput(f"the broker {dispatch.broker_shown} is unreachable ({exc}); start it or fix "
                       "[dispatch] broker_url, then start again (nothing was created)") from None
    secret = load_secret(dispatch)
    home = tilth_home()
    with clone_lock(home / "clones"):
        clone = ensure_clone(home / "clones", remote)
        base_sha = base or default_head(clone, remote)
        if session_id and remote_refs(clone, remote, session_id):
            raise BadInput(f"session {session_id!r} already exists on the remote {remote}; choose another --id "
                           f"(`tilth resume {session_id}` queues it again if the broker forgot it)")
        paths = create_session(clone, plan, session_id, base_sha, backend, settings, checks, notify=say,
                               seed_dir=seed, home=home / STAGING)
        try:
            seal(clone, paths.id, carried_files(paths), "created", secret)
            push_session(clone, remote, paths.id)
            state = state_of(paths)
        finally:
            remove_checkout(clone, paths.id, paths.worktree)
            shutil.rmtree(paths.dir, ignore_errors=True)
    try:
        broker.register(paths.id, {**state, "state": "queued", "remote": remote, "branch": f"session/{paths.id}"})
        enqueue(broker, paths.id, remote)
    except BrokerDown as exc:
        raise BadInput(f"the broker {dispatch.broker_shown} went away ({exc}) after session {paths.id} "
                       f"was pushed to {remote}; once it is back, `tilth resume {paths.id}` queues it") from None
    return paths


def resume_dispatched(broker: Broker, session_id: str, state: dict[str, Any]) -> str | None:
    """Queue the session again (resumed); None when its job is still waiting in the queue. A
    session the broker forgot (found on the remote) is registered again first."""
    if broker.lease_holder(session_id):
        raise BadInput(f"session {session_id} is running on a worker ({broker.lease_holder(session_id)}); "
                       "nothing to resume")
    remote = state.get("remote") or broker.dispatch.remote
    if state.get("state") == "forgotten":
        broker.register(session_id, {"id": session_id, "state": "queued", "remote": remote,
                                     "branch": f"session/{session_id}"})
    elif state.get("state") == "queued" and still_queued(broker, state.get("job")):
        return None
    broker.clear_stop(session_id)
    return enqueue(broker, session_id, remote, resume=True)


def still_queued(broker: Broker, job_id: str | None) -> bool:
    """The job waits in the queue, or for its retry's turn."""
    if not job_id:
        return False
    status = broker.redis.hget(f"rq:job:{job_id}", "status")
    return status is not None and reply_text(status) in ("queued", "scheduled", "deferred")
