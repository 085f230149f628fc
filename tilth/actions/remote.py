"""Actions on a dispatched session (one this machine does not have but the broker knows): the lookup
(`remote_state`), and answer, note, stop and resume through the broker; the worker that runs the session
writes answers and notes into its files, and stops at a safe point when asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilth.actions.acted import Acted, only_parked
from tilth.core.errors import BadInput

WAIT_EXIT = {"done": 0, "failed": 1, "refused": 1, "stopped": 3, "crashed": 3, "waiting": 5}
"""The end states of a dispatched session, with `tilth wait`'s exit code for each."""

Found = tuple[Any, dict]
"""(broker, the session's state hash)."""


def dispatch_settings(home: Path):
    """`[dispatch]` from config.toml; a config without the word is answered without loading settings."""
    config = home / "config.toml"
    try:
        if b"dispatch" not in config.read_bytes():
            return None
    except IsADirectoryError:
        pass  # load_settings refuses it in one line: a config that is not a file is never ignored
    except OSError:
        return None
    from tilth.core.settings_load import load_settings

    return load_settings(home).dispatch


def broker_or_none(home: Path):
    """The broker when `[dispatch]` is configured, else None."""
    dispatch = dispatch_settings(home)
    if dispatch is None:
        return None
    from tilth.dispatch.broker import Broker

    return Broker(dispatch)


def ended(broker, session_id: str, state: dict) -> bool:
    """The session has an end state and no worker holds it (a handed-back one is queued again)."""
    return state.get("state") in WAIT_EXIT and not broker.lease_holder(session_id)


def remote_state(home: Path, session_id: str | None) -> Found | None:
    """(broker, state) for a session this machine does not have but the broker knows."""
    if not session_id:
        return None
    from tilth.store.home import session_paths

    if (session_paths(session_id, home).dir / "session.json").is_file():
        return None
    broker = broker_or_none(home)
    if broker is None:
        return None
    from tilth.dispatch.broker import BrokerDown

    try:
        state = broker.state(session_id)
    except BrokerDown as exc:
        raise BadInput(f"the broker {broker.dispatch.broker_shown} is unreachable ({exc}); start it or fix "
                       "[dispatch] broker_url") from None
    if state is None and session_id in forgotten(broker, [session_id]):
        state = {"id": session_id, "state": "forgotten", "remote": broker.dispatch.remote,
                 "reason": f"on the remote but not in the broker (restarted without persistence?); "
                           f"`tilth resume {session_id}` queues it again"}
    return (broker, state) if state is not None else None


def forgotten(broker, only: list[str] | None = None) -> list[str]:
    """Sessions on the remote (`refs/tilth/sessions/*`) the broker does not know (`only`: just
    these ids are asked about); none when the remote cannot be reached."""
    from tilth.git.carry import remote_sessions
    from tilth.git.gitcli import GitFailed
    from tilth.store.home import SESSION_ID_PATTERN

    try:
        on_remote = remote_sessions(Path.cwd(), broker.dispatch.remote)
    except GitFailed:
        return []
    asked = [i for i in on_remote if SESSION_ID_PATTERN.match(i) and (only is None or i in only)]
    registered = set(broker.session_ids()) if only is None else {i for i in asked if broker.state(i) is not None}
    return [i for i in asked if i not in registered]


def known(state: dict, session_id: str) -> None:
    """An action that needs the broker's record of the session."""
    if state.get("state") == "forgotten":
        raise BadInput(f"session {session_id} is {state['reason']}")


def stop_dispatched(found: Found, session_id: str, by: str) -> Acted:
    broker, state = found
    known(state, session_id)
    broker.request_stop(session_id, by)
    holder = broker.lease_holder(session_id)
    if holder:
        what = (f"session {session_id}: asked its worker ({holder}) to stop after the current iteration; "
                f"`tilth wait {session_id}` waits for it")
    else:
        what = (f"session {session_id} was {state.get('state')}; it is stopped when a worker takes it "
                f"(`tilth resume {session_id}` queues it again)")
    return Acted(session_id, what, dispatched=True)


def answer_dispatched(found: Found, session_id: str, task_id: str | None, text: str, by: str) -> Acted:
    """Left in the broker; the worker that runs the session next writes it into its files."""
    from tilth.dispatch.broker import enqueue

    broker, state = found
    known(state, session_id)
    tasks = {t["id"]: t for t in state.get("tasks", [])}
    if task_id is None:
        task_id = only_parked(session_id, [i for i, t in tasks.items() if t["status"] == "parked"])
    if task_id not in tasks:
        raise BadInput(f"session {session_id} has no task {task_id!r}; `tilth status {session_id}` lists its tasks")
    if tasks[task_id]["status"] != "parked":
        raise BadInput(f"task {task_id} of session {session_id} is not waiting for an answer (it is "
                       f"{tasks[task_id]['status']})")
    broker.leave(session_id, "answer", task_id, text, by)
    if ended(broker, session_id, state):
        enqueue(broker, session_id, state.get("remote") or broker.dispatch.remote)
        return Acted(session_id, f"answer recorded for {task_id}; session {session_id} queued again for a worker",
                     dispatched=True)
    return Acted(session_id, f"answer recorded for {task_id}: session {session_id} is {state.get('state')}; its "
                             "worker takes it at the next task boundary", dispatched=True)


def note_dispatched(found: Found, session_id: str, text: str, task_id: str | None, by: str) -> Acted:
    broker, state = found
    known(state, session_id)
    if task_id and task_id not in {t["id"] for t in state.get("tasks", [])}:
        raise BadInput(f"session {session_id} has no task {task_id!r}; see `tilth status {session_id}`")
    broker.leave(session_id, "note", task_id, text, by)
    scope = f"task {task_id}" if task_id else "every later task"
    return Acted(session_id, f"note for session {session_id} ({scope}): its worker takes it at the next task "
                             "boundary", dispatched=True)


def resume_dispatched(found: Found, session_id: str, by: str) -> Acted:
    """Queued again for a worker; `by` is not kept (a job carries only what it runs)."""
    from tilth.dispatch.submit import resume_dispatched as requeue

    broker, state = found
    job = requeue(broker, session_id, state)
    if job is None:
        return Acted(session_id, f"session {session_id} is already queued (job {state.get('job')}); nothing to do",
                     dispatched=True)
    return Acted(session_id, f"session {session_id} queued again for a worker (job {job})", dispatched=True)
