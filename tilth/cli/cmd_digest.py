"""`tilth digest`: what happened across sessions in a window, and what needs the person."""

from __future__ import annotations

import argparse


def cmd_digest(args: argparse.Namespace) -> int:
    import orjson

    from tilth.store.home import tilth_home
    from tilth.views.digest import build_digest, parse_since, render

    digest = build_digest(tilth_home(), parse_since(args.since))
    print(orjson.dumps(digest).decode() if args.json else render(digest))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    digest = sub.add_parser("digest", help="what happened across sessions lately (tasks, spend, branch heads) "
                                           "and what needs you")
    digest.add_argument("--since", default="24h", metavar="WHEN",
                        help="a span back from now (30m, 12h, 2d) or an ISO time (default: 24h)")
    digest.add_argument("--json", action="store_true", help="machine-readable output")
    digest.set_defaults(handler=cmd_digest)
