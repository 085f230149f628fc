"""`tilth serve` running: bind the socket first (a port in use, or a secret others may read, is one
line and exit 2, before anything else), claim `serve.lock` and publish `serve.json`
(`web/presence.py`), print the address and a one-time login link (started by the supervisor: how to get
one, since its output goes to a log; `tilth daemon --serve` prints the link itself), serve with uvicorn
until SIGTERM/SIGINT (or, started by the supervisor, until that parent is gone), then withdraw serve.json."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from tilth.core.errors import BadInput, TilthError
from tilth.web.presence import Presence

if TYPE_CHECKING:
    import uvicorn

SHUTDOWN_S = 2
"""Open event streams never end by themselves: a stop waits this long for them, then closes them."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_token(token: str | None) -> None:
    if token is not None and not token.strip():
        raise BadInput("the token is empty; pass a token every request must carry")


def bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BadInput(f"--host {host}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise BadInput(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(False)
    return sock


def url_of(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def serve(home: Path, host: str, port: int, token: str | None, exit_with: int | None = None,
          echo: Callable[[str], None] = print) -> int:
    import uvicorn

    from tilth.web.app import make_app
    from tilth.web.streaming import quiet_dropped_streams

    from tilth.store.dashboard_secret import DashboardSecret, login_link

    check_token(token)
    secret = DashboardSecret(home)
    secret.value()
    sock = bind(host, port)
    presence = Presence(home)
    if not presence.claim():
        from tilth.web.presence import running_url

        sock.close()
        raise TilthError(f"a dashboard already serves {home}" + (f" at {running_url(home)}" if running_url(home) else ""))
    url = url_of(sock, host)
    try:
        presence.publish(url)
        echo(f"dashboard: {url}")
        if exit_with is None:
            echo(f"log in: {login_link(url, secret.mint_login())}  (works once; `tilth serve --login` prints another)")
        else:
            echo("log in: `tilth serve --login` prints a one-time login link")
        sys.stdout.flush()
        app = make_app(home, token, loopback_only=is_loopback(host), stopping=lambda: server.should_exit)
        quiet_dropped_streams()
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=SHUTDOWN_S)
        server = uvicorn.Server(config)
        # uvicorn turns SIGTERM into a graceful stop, then raises it again for the handler it
        # found: that must not be the default one, which would end the process before serve.json goes.
        signal.signal(signal.SIGTERM, _stopped)
        asyncio.run(_run(server, sock, exit_with))
        return 0
    finally:
        presence.withdraw()
        sock.close()


def _stopped(signum: int, frame: object) -> None:
    """SIGTERM after uvicorn's graceful stop: nothing left to do but return."""


async def _run(server: uvicorn.Server, sock: socket.socket, exit_with: int | None) -> None:
    if exit_with is not None:
        asyncio.get_running_loop().create_task(_watch_parent(server, exit_with))
    await server.serve(sockets=[sock])


async def _watch_parent(server: uvicorn.Server, parent: int) -> None:
    """Started by the supervisor: stop once it is gone (killed with -9 included)."""
    while os.getppid() == parent:
        await asyncio.sleep(1.0)
    server.should_exit = True
