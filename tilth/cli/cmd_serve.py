"""`tilth serve`: the live web dashboard of $TILTH_HOME (`web/`), where a person answers, notes,
stops and resumes (`actions/`), and the line `tilth start` prints when one is running. It always needs
a login: the one-time link it prints, `tilth serve --login` (another link for the running dashboard),
`--rotate-secret` (a new secret: every login ends). A configured token is another way in: from
`--token-file` or `--token` (seen by anyone who can list processes), else $TILTH_DASHBOARD_TOKEN.
The web stack (starlette, uvicorn) is imported by the server only."""

from __future__ import annotations

import argparse
import os

from tilth.core.errors import BadInput

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (a cold start)
if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_ENV = "TILTH_DASHBOARD_TOKEN"
TOKEN_FILE_BYTES = 4096


def token_from(args: argparse.Namespace) -> str | None:
    """The token from --token-file, $TILTH_DASHBOARD_TOKEN or --token (at most one of the options);
    None without one. An empty or unreadable one is one line."""
    if args.token is not None and args.token_file is not None:
        raise BadInput("--token and --token-file both given; pass one (--token-file keeps it out of `ps`)")
    if args.token_file is not None:
        try:
            with open(args.token_file, "rb") as f:
                raw = f.read(TOKEN_FILE_BYTES + 1)
        except OSError as exc:
            raise BadInput(f"--token-file {args.token_file}: {exc.strerror or exc}") from None
        if len(raw) > TOKEN_FILE_BYTES:
            raise BadInput(f"--token-file {args.token_file} is over {TOKEN_FILE_BYTES} bytes; it should hold only the token")
        try:
            token = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise BadInput(f"--token-file {args.token_file} is not UTF-8 text") from None
        if not token or any(c.isspace() for c in token):
            raise BadInput(f"--token-file {args.token_file} must hold one token on one line (it is empty or has spaces)")
        return token
    if args.token is not None:
        return str(args.token)
    from_env = os.environ.get(TOKEN_ENV)
    if from_env is not None and not from_env.strip():
        raise BadInput(f"${TOKEN_ENV} is set but empty; unset it or put the token in it")
    return from_env.strip() if from_env else None


def cmd_serve(args: argparse.Namespace) -> int:
    from tilth.store.home import tilth_home

    if args.rotate_secret or args.login:
        return login_commands(tilth_home(), args.rotate_secret, args.login)
    from tilth.web.server import serve

    token = token_from(args)
    return serve(tilth_home(), args.host, args.port, token, exit_with=args.exit_with,
                 echo=lambda line: print(line, flush=True))


def login_commands(home: Path, rotate: bool, login: bool) -> int:
    """`--rotate-secret` and/or `--login`: no server is started."""
    from tilth.store.dashboard_secret import DashboardSecret, login_link
    from tilth.web.presence import running_url

    secret = DashboardSecret(home)
    if rotate:
        secret.rotate()
        print(f"a new dashboard secret is in {secret.file}: every browser must log in again (a running "
              "dashboard takes it at its next request)" + ("" if login else "; `tilth serve --login` prints a link"))
    if login:
        secret.value()  # someone else's dashboard says so before "none is running" would mislead
        url = running_url(home)
        if url is None:
            raise BadInput(f"no dashboard is running for {home}; `tilth serve` starts one and prints its login link")
        print(f"log in: {login_link(url, secret.mint_login())}  (works once, within a day)")
    return 0


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


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="a live web dashboard of every session, to answer, note, stop and resume "
                                         "from; open the one-time login link it prints")
    serve.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default: {DEFAULT_HOST})")
    serve.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT}; 0: a free one)")
    serve.add_argument("--login", action="store_true", help="print a new one-time login link for the dashboard "
                       "running for this $TILTH_HOME, and exit")
    serve.add_argument("--rotate-secret", action="store_true", help="make a new dashboard secret (every browser "
                       "must log in again, unused login links stop working), and exit")
    serve.add_argument("--token-file", metavar="PATH", help="also let in whoever gives the token in this file "
                       "(`?token=` or the login form once, then a cookie; or `Authorization: Bearer` to read)")
    serve.add_argument("--token", help=f"the token itself (visible in `ps`: prefer --token-file or ${TOKEN_ENV})")
    serve.add_argument("--exit-with", type=int, default=None, help=argparse.SUPPRESS)  # the supervisor's pid
    serve.set_defaults(handler=cmd_serve)
