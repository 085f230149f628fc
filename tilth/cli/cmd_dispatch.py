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
    _, state = found
    if as_json:
        import orjson

        print(orjson.dumps(state).decode())
        return 0
    from tilth.views.remote_status import one_lines

    print("\n".join(one_lines(state, state.get("id") or "?")))
    return 0


def status_lines() -> list[str]:
    """The dispatched sessions, one line each, for `tilth status` (none without [dispatch])."""
    from tilth.actions.remote_read import listing
    from tilth.store.home import tilth_home
    from tilth.views.remote_status import listing_lines

    found = listing(tilth_home())
    return [] if found is None else listing_lines(found.states, found.forgotten, found.down)


def logs(found: tuple[Any, dict], session_id: str, follow: bool, everything: bool, last: int | None = None) -> int:
    from tilth.actions.remote import ended, known
    from tilth.actions.remote_read import Relayed

    broker, state = found
    known(state, session_id)
    relayed = Relayed(broker, session_id, everything=everything)
    lines = relayed.read()
    for line in lines[max(0, len(lines) - last):] if last is not None else lines:
        print(line, flush=True)
    while follow:
        state = broker.state(session_id) or {}
        for line in relayed.read(block_ms=1000):
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


def register(sub: argparse._SubParsersAction) -> None:
    worker = sub.add_parser("worker", help="run dispatched sessions on this machine ([dispatch] in config.toml): "
                                           "RQ workers taking jobs from the broker")
    worker.add_argument("--concurrency", type=int, default=1, help="sessions this machine runs at once (default 1)")
    worker.set_defaults(handler=cmd_worker)
