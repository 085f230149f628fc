"""`tilth worker`, and `start/status/logs/wait` for sessions dispatched through the broker (`[dispatch]`
in config.toml): a session not on this machine is looked up there (`actions/remote.py`, which also
answers, notes, stops and resumes one)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from tilth.core.errors import BadInput

def broker_or_none():
    """The broker when `[dispatch]` is configured, else None."""
    from tilth.actions.remote import broker_or_none as configured
    from tilth.store.home import tilth_home

    return configured(tilth_home())


def remote_state(session_id: str | None) -> tuple[Any, dict] | None:
    """(broker, state) for a session this machine does not have but the broker knows."""
    from tilth.actions.remote import remote_state as look_up
    from tilth.store.home import tilth_home

    return look_up(tilth_home(), session_id)


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
    from tilth.actions.remote import forgotten
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
        f"  {i}  {s.get('state', '?'):<8} {s.get('progress', '?'):>5}  {s.get('current') or '-':<8} "
        f"{s.get('worker') or '-'}" + (f"  {s['reason']}" if s.get("state") == "refused" else "")
        for i, s in states] + [
        f"  {i}  forgotten  on the remote, not in the broker: `tilth resume {i}` queues it again" for i in lost]


def logs(found: tuple[Any, dict], session_id: str, follow: bool, everything: bool, last: int | None = None) -> int:
    from tilth.actions.remote import ended, known
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
    from tilth.actions.remote import WAIT_EXIT, ended

    broker, state = found
    if state.get("state") == "forgotten":
        print(f"session {session_id}: {state['reason']}", file=sys.stderr)
        return 4
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        state = broker.state(session_id) or {}
        if ended(broker, session_id, state):
            print(f"session {session_id}: {state['state']}" + (f" ({state['reason']})" if state.get("reason") else ""))
            return WAIT_EXIT[state["state"]]
        if deadline is not None and time.monotonic() > deadline:
            print(f"session {session_id}: still {state.get('state')} after {timeout:g}s", file=sys.stderr)
            return 4
        broker.events(session_id, "$", block_ms=1000)


def register(sub: argparse._SubParsersAction) -> None:
    worker = sub.add_parser("worker", help="run dispatched sessions on this machine ([dispatch] in config.toml): "
                                           "RQ workers taking jobs from the broker")
    worker.add_argument("--concurrency", type=int, default=1, help="sessions this machine runs at once (default 1)")
    worker.set_defaults(handler=cmd_worker)
