"""`tilth worker`, whether `tilth start` dispatches, and the dispatched sessions' lines of `tilth status`
(`[dispatch]` in config.toml); one dispatched session is acted on and read through `actions/place.locate`
like any other."""

from __future__ import annotations

import argparse

from tilth.core.errors import BadInput

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (a cold start)
if TYPE_CHECKING:
    from tilth.core.config import Settings
    from tilth.dispatch.broker import Broker


def broker_or_none() -> Broker | None:
    """The broker when `[dispatch]` is configured, else None."""
    from tilth.actions.remote_read import broker_or_none as configured
    from tilth.store.home import tilth_home

    return configured(tilth_home())


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


def wanted(args: argparse.Namespace, settings: Settings) -> bool:
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


def status_lines() -> list[str]:
    """The dispatched sessions, one line each, for `tilth status` (none without [dispatch])."""
    from tilth.actions.remote_read import listing
    from tilth.store.home import tilth_home
    from tilth.views.remote_status import listing_lines

    found = listing(tilth_home())
    return [] if found is None else listing_lines(found.states, found.forgotten, found.down)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = sub.add_parser("worker", help="run dispatched sessions on this machine ([dispatch] in config.toml): "
                                           "RQ workers taking jobs from the broker")
    worker.add_argument("--concurrency", type=int, default=1, help="sessions this machine runs at once (default 1)")
    worker.set_defaults(handler=cmd_worker)
