"""`tilth worker`, and `start/status/logs/wait/stop/resume` for sessions dispatched through the
broker (`[dispatch]` in config.toml): a session not on this machine is looked up there."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from tilth.core.errors import BadInput

WAIT_EXIT = {"done": 0, "failed": 1, "refused": 1, "stopped": 3, "crashed": 3, "waiting": 5}


def dispatch_settings():
    """`[dispatch]` from config.toml; a config without the word is answered without loading settings."""
    from tilth.store.home import tilth_home

    config = tilth_home() / "config.toml"
    try:
        if b"dispatch" not in config.read_bytes():
            return None
    except IsADirectoryError:
        pass  # load_settings refuses it in one line: a config that is not a file is never ignored
    except OSError:
        return None
    from tilth.core.config import load_settings

    return load_settings(tilth_home()).dispatch


def broker_or_none():
    """The broker when `[dispatch]` is configured, else None."""
    dispatch = dispatch_settings()
    if dispatch is None:
        return None
    from tilth.dispatch.broker import Broker

    return Broker(dispatch)


def ended(broker, session_id: str, state: dict) -> bool:
    """The session has an end state and no worker holds it (a handed-back one is queued again)."""
    return state.get("state") in WAIT_EXIT and not broker.lease_holder(session_id)


def remote_state(session_id: str | None) -> tuple[Any, dict] | None:
    """(broker, state) for a session this machine does not have but the broker knows."""
    if not session_id:
        return None
    from tilth.store.home import session_paths

    if (session_paths(session_id).dir / "session.json").is_file():
        return None
    broker = broker_or_none()
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
    from pathlib import Path

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
    """A command that needs the broker's record of the session."""
    if state.get("state") == "forgotten":
        raise BadInput(f"session {session_id} is {state['reason']}")


def cmd_worker(args: argparse.Namespace) -> int:
    from tilth.dispatch.broker import BrokerDown

    broker = broker_or_none()
    if broker is None:
        raise BadInput("`tilth worker` needs a [dispatch] section in config.toml (broker_url, remote); see "
                       "docs/dispatch.md")
    if args.concurrency < 1:
        raise BadInput("--concurrency must be at least 1")
    from tilth.dispatch.signing import load_secret

    load_secret(broker.dispatch)  # a secret file that cannot be used is said here, not in every job
    try:
        broker.redis.ping()
    except BrokerDown as exc:
        raise BadInput(f"the broker {broker.dispatch.broker_shown} is unreachable ({exc}); start it first") from None
    from tilth.dispatch.workers import serve

    print(f"tilth worker: {args.concurrency} worker(s) on queue {broker.dispatch.queue!r} of "
          f"{broker.dispatch.broker_shown}", flush=True)
    return serve(args.concurrency)


def wanted(args: argparse.Namespace, settings) -> bool:
    """`tilth start` dispatches: `--dispatch`, or `[dispatch] always` without `--foreground`."""
    dispatch = settings.dispatch
    if not (args.dispatch or (dispatch is not None and dispatch.always and not args.foreground)):
        return False
    if dispatch is None:
        raise BadInput("--dispatch needs a [dispatch] section in config.toml (broker_url, remote); see "
                       "docs/dispatch.md")
    if args.foreground or args.at:
        raise BadInput("--dispatch hands the session to a worker; drop --foreground and --at")
    return True


def start(args: argparse.Namespace, plan, seed, backend, settings, say) -> int:
    from tilth.dispatch.submit import start_dispatched

    remote = args.repo or settings.dispatch.remote
    paths = start_dispatched(remote, plan, args.id, args.base, backend, settings, args.check, seed, say)
    print(f"session {paths.id} dispatched to queue {settings.dispatch.queue!r} (remote {remote}); "
          f"a `tilth worker` runs it")
    print(f"  follow it:    tilth logs {paths.id} -f")
    print(f"  wait for it:  tilth wait {paths.id}")
    return 0


def status_one(found: tuple[Any, dict], as_json: bool) -> int:
    broker, state = found
    if as_json:
        import orjson

        print(orjson.dumps(state).decode())
        return 0
    lines = [f"session {state.get('id') or '?'}: {state.get('state')} ({state.get('progress', '?')} done), "
             f"dispatched" + (f", on {state['worker']}" if state.get("worker") else "")]
    if state.get("reason"):
        lines.append(f"reason   {state['reason']}")
    lines += [f"branch   {state.get('branch', '')} on {state.get('remote', '')}"]
    lines += [f"  {t['status']:<11} {t['id']}: {t['title']}" for t in state.get("tasks", [])]
    for q in state.get("questions") or []:
        lines += [f"question {q['task']} {q['question']}",
                  f"  answer:  tilth answer {state.get('id') or '?'} {q['task']} \"<your answer>\""]
    print("\n".join(lines))
    return 0


def status_lines() -> list[str]:
    """The dispatched sessions, one line each, for `tilth status` (none without [dispatch])."""
    broker = broker_or_none()
    if broker is None:
        return []
    from tilth.dispatch.broker import BrokerDown

    try:
        ids = broker.session_ids()
        states = [(i, broker.state(i) or {}) for i in ids]
        lost = forgotten(broker)
    except BrokerDown as exc:
        return [f"dispatched: the broker {broker.dispatch.broker_shown} is unreachable ({exc})"]
    if not states and not lost:
        return []
    return ["dispatched sessions (broker):"] + [
        f"  {i}  {s.get('state', '?'):<8} {s.get('progress', '?'):>5}  {(s.get('current') if s.get('state') in LIVE else '') or '-':<8} "
        f"{s.get('worker') or '-'}" + (f"  {s['reason']}" if s.get("state") == "refused" else "")
        for i, s in states] + [
        f"  {i}  forgotten  on the remote, not in the broker: `tilth resume {i}` queues it again" for i in lost]


LIVE = ("running", "paused", "crashed")
"""The broker states in which a session has a current task; an ended one has none."""


def logs(found: tuple[Any, dict], session_id: str, follow: bool, everything: bool, last: int | None = None) -> int:
    from tilth.views.readable import Readable

    broker, state = found
    known(state, session_id)
    readable = Readable(everything=everything)
    after, lines = "-", []
    for entry_id, event in broker.events(session_id):
        after = entry_id
        lines += readable.lines(event)
    for line in lines[max(0, len(lines) - last):] if last is not None else lines:
        print(line, flush=True)
    while follow:
        state = broker.state(session_id) or {}
        for entry_id, event in broker.events(session_id, after, block_ms=1000):
            after = entry_id
            for line in readable.lines(event):
                print(line, flush=True)
        if ended(broker, session_id, state):
            break
    return 0


def wait(found: tuple[Any, dict], session_id: str, timeout: float | None) -> int:
    broker, state = found
    if state.get("state") == "forgotten":
        print(f"session {session_id}: {state['reason']}", file=sys.stderr)
        return 4
    from tilth.views.follow import PROGRESS_S

    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    next_progress = started + PROGRESS_S
    while True:
        state = broker.state(session_id) or {}
        if ended(broker, session_id, state):
            print(f"session {session_id}: {state['state']}" + (f" ({state['reason']})" if state.get("reason") else ""))
            return WAIT_EXIT[state["state"]]
        now = time.monotonic()
        if deadline is not None and now > deadline:
            print(f"session {session_id}: still {state.get('state')} after {timeout:g}s", file=sys.stderr)
            return 4
        if now >= next_progress:
            next_progress = now + PROGRESS_S
            print(f"tilth: still waiting after {now - started:.0f}s: {session_id} {state.get('state')}",
                  file=sys.stderr, flush=True)
        broker.events(session_id, "$", block_ms=1000)


def stop(found: tuple[Any, dict], session_id: str) -> int:
    broker, state = found
    known(state, session_id)
    broker.request_stop(session_id)
    holder = broker.lease_holder(session_id)
    if holder:
        print(f"session {session_id}: asked its worker ({holder}) to stop after the current iteration; "
              f"`tilth wait {session_id}` waits for it")
    else:
        print(f"session {session_id} was {state.get('state')}; it is stopped when a worker takes it "
              f"(`tilth resume {session_id}` queues it again)")
    return 0


def answer(found: tuple[Any, dict], session_id: str, task_id: str, text: str) -> int:
    """Left in the broker; the worker that runs the session next writes it into its files."""
    from tilth.dispatch.broker import enqueue

    broker, state = found
    known(state, session_id)
    tasks = {t["id"]: t for t in state.get("tasks", [])}
    if task_id not in tasks:
        raise BadInput(f"session {session_id} has no task {task_id!r}; `tilth status {session_id}` lists its tasks")
    if tasks[task_id]["status"] != "parked":
        raise BadInput(f"task {task_id} of session {session_id} is not waiting for an answer (it is "
                       f"{tasks[task_id]['status']})")
    broker.leave(session_id, "answer", task_id, text)
    if ended(broker, session_id, state):
        enqueue(broker, session_id, state.get("remote") or broker.dispatch.remote)
        print(f"answer recorded for {task_id}; session {session_id} queued again for a worker")
    else:
        print(f"answer recorded for {task_id}: session {session_id} is {state.get('state')}; its worker takes it "
              "at the next task boundary")
    return 0


def note(found: tuple[Any, dict], session_id: str, text: str, task_id: str | None) -> int:
    broker, state = found
    known(state, session_id)
    if task_id and task_id not in {t["id"] for t in state.get("tasks", [])}:
        raise BadInput(f"session {session_id} has no task {task_id!r}; see `tilth status {session_id}`")
    broker.leave(session_id, "note", task_id, text)
    scope = f"task {task_id}" if task_id else "every later task"
    print(f"note for session {session_id} ({scope}): its worker takes it at the next task boundary")
    return 0


def resume(found: tuple[Any, dict], session_id: str) -> int:
    from tilth.dispatch.submit import resume_dispatched

    broker, state = found
    job = resume_dispatched(broker, session_id, state)
    if job is None:
        print(f"session {session_id} is already queued (job {state.get('job')}); nothing to do")
        return 0
    print(f"session {session_id} queued again for a worker (job {job})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    worker = sub.add_parser("worker", help="run dispatched sessions on this machine ([dispatch] in config.toml): "
                                           "RQ workers taking jobs from the broker")
    worker.add_argument("--concurrency", type=int, default=1, help="sessions this machine runs at once (default 1)")
    worker.set_defaults(handler=cmd_worker)
