"""`tilth serve`: the read-only live web dashboard of $TILTH_HOME (`web/`), and the line
`tilth start` prints when one is running. The web stack (starlette, uvicorn) is imported by the
handler only."""

from __future__ import annotations

import argparse

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def cmd_serve(args: argparse.Namespace) -> int:
    from tilth.store.home import tilth_home
    from tilth.web.server import serve

    return serve(tilth_home(), args.host, args.port, args.token, exit_with=args.exit_with,
                 echo=lambda line: print(line, flush=True))


def dashboard_line(session_id: str) -> str | None:
    """`dashboard: <url of the session's page>` while a dashboard serves this home (judged by its
    flock), else None."""
    from tilth.store.home import tilth_home
    from tilth.web.presence import running_url

    url = running_url(tilth_home())
    return f"dashboard: {url.rstrip('/')}/s/{session_id}" if url else None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port (0-65535; 0 picks a free one)")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="a read-only live web dashboard of every session (loopback unless --token)")
    serve.add_argument("--host", default=DEFAULT_HOST,
                       help=f"address to listen on (default: {DEFAULT_HOST}); anything but loopback needs --token")
    serve.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT}; 0: a free one)")
    serve.add_argument("--token", help="require this token on every request (`?token=` once, then a cookie; "
                                       "or `Authorization: Bearer`)")
    serve.add_argument("--exit-with", type=int, default=None, help=argparse.SUPPRESS)  # the supervisor's pid
    serve.set_defaults(handler=cmd_serve)
