"""Command-line handlers for the supervisor: `tilth daemon`, `stop` (`actions/stopping.py`), `wait`,
`logs`."""

from __future__ import annotations

import argparse
import os
import sys

from tilth.cli.inputs import seconds
from tilth.cli.pick import ID_HELP, pick_paths, pick_session

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (~5 ms of a cold start)
if TYPE_CHECKING:
    from pathlib import Path

# Each handler imports what it uses: daemon.supervisor brings apscheduler, views.follow
# watchfiles, store.session pydantic; none of them may load for `tilth --help`.


def revive_supervisor(home: Path) -> None:
    """`tilth status`: a supervisor that died while supervised work waits -> start one, say so on stderr."""
    from tilth.daemon.revive import revive

    line = revive(home)
    if line:
        print(line, file=sys.stderr)


def cmd_daemon(args: argparse.Namespace) -> int:
    from tilth.daemon import control
    from tilth.store.home import tilth_home

    home = tilth_home()
    seconds(args.timeout, "--timeout")
    seconds(args.rescan, "--rescan", least=0.1)
    if args.action == "status":
        return daemon_status(home)
    if args.action == "stop":
        pid, stopped = control.stop(home, args.timeout)
        if pid is None:
            print("no supervisor is running")
        elif stopped:
            print(f"supervisor pid {pid} stopped")
        else:
            print(f"supervisor pid {pid} is still stopping: its sessions are finishing their iteration", file=sys.stderr)
            return 4
        return 0
    if args.action == "unit":
        from tilth.daemon.unit import unit_text

        print(unit_text(home), end="")
        return 0
    if args.action in ("install", "uninstall"):
        from tilth.daemon.unit import install, uninstall

        ok, line = install(home) if args.action == "install" else uninstall()
        print(line if ok else f"tilth: {line}", file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1
    if args.foreground:
        # The supervisor runs from the light entry point (no model SDK imported): same pid,
        # so a service manager keeps tracking it.
        # Without --rescan the supervisor uses its own default (daemon.supervisor.RESCAN_S).
        rescan = [] if args.rescan is None else ["--rescan", str(args.rescan)]
        dashboard = [] if args.serve is None else ["--serve", str(args.serve)]
        argv = [sys.executable, "-m", "tilth.daemon", *rescan, *dashboard]
        if args.serve is not None:
            print(dashboard_lines(home, args.serve), flush=True)
        os.execv(sys.executable, argv)
    running = control.running_pid(home)
    if running is not None:
        raise control.DaemonLock(home).busy(running)
    pid = control.start_detached(home, rescan=args.rescan, serve=args.serve)
    print(f"supervisor started (pid {pid}); log: {control.DaemonPaths(home).log}")
    if args.serve is not None:
        print(dashboard_lines(home, args.serve))
    return 0


def dashboard_lines(home: Path, port: int) -> str:
    """Where the supervisor's dashboard listens and its one-time login link: its own output goes to a
    log, so the link a person clicks is made and printed here."""
    if not port:
        return (f"dashboard: a free port (its address: {home / 'serve.json'}; the supervisor's child, it stops with "
                "the supervisor)\nlog in: `tilth serve --login` prints a one-time login link once it is up")
    from tilth.store.dashboard_secret import DashboardSecret, login_link

    url = f"http://127.0.0.1:{port}/"
    return (f"dashboard: {url} (the supervisor's child; it stops with the supervisor)\n"
            f"log in: {login_link(url, DashboardSecret(home).mint_login())}  (works once; `tilth serve --login` "
            "prints another)")


def daemon_status(home: Path) -> int:
    from tilth.daemon import control

    info = control.holder(home)
    if info is None:
        print(f"supervisor: not running for {home}")
        return 3
    age = control.heartbeat_age(info)
    print(f"supervisor: running for {home}")
    print(f"  pid {info.get('pid')}, since {info.get('started')}, heartbeat "
          f"{'?' if age is None else f'{age:.0f}s'} ago")
    print(f"  log {control.DaemonPaths(home).log}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from tilth.actions.place import stop_session
    from tilth.cli.show_acted import show
    from tilth.store.home import tilth_home

    return show(stop_session(tilth_home(), args.id or pick_paths(None).id, by="cli", now=args.now))


def say(line: str) -> None:
    print(line, flush=True)


def tell(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cmd_wait(args: argparse.Namespace) -> int:
    from tilth.actions.place import locate, wait_here
    from tilth.store.home import session_paths, tilth_home

    seconds(args.timeout, "--timeout")
    if args.ids and len(args.ids) == 1:
        return locate(tilth_home(), args.ids[0]).wait(args.timeout, say, tell)
    sessions = [session_paths(i) for i in args.ids] if args.ids else [pick_session(None)[0]]
    return wait_here(sessions, args.timeout, say, tell)


def cmd_logs(args: argparse.Namespace) -> int:
    from tilth.actions.place import locate
    from tilth.store.home import tilth_home

    return locate(tilth_home(), args.id or pick_paths(None).id).logs(say, follow=args.follow, everything=args.all, last=args.lines)


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a count of lines")
    return value


WAIT_CODES = ("0 all done, 1 a task failed (or a dispatched session was refused), 2 bad input, 3 stopped, crashed "
              "or paused, 4 timed out (or a dispatched session the broker forgot), 5 waiting for an answer "
              "(`tilth answer`); several sessions: the highest")
"""views/follow.EXIT_CODES and EXIT_TIMEOUT, actions/remote.WAIT_EXIT, in words (tests/test_cli_edges.py
checks that every code is here)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    daemon = sub.add_parser("daemon", help="the supervisor that runs sessions in the background")
    daemon.add_argument("action", nargs="?", choices=["status", "stop", "unit", "install", "uninstall"],
                        help="status: is it running; stop: stop it (sessions finish their iteration); "
                             "unit: print a systemd user unit; install: write it and enable it with "
                             "systemctl --user (back after a crash or reboot); uninstall: disable and remove "
                             "it. Without one: start it")
    daemon.add_argument("--foreground", action="store_true", help="run the supervisor in this process")
    # No default here: naming daemon.supervisor.RESCAN_S would import apscheduler for `--help`;
    # the supervisor applies it when --rescan is not given.
    daemon.add_argument("--rescan", type=float, default=None, help="seconds between safety-net rescans")
    daemon.add_argument("--timeout", type=float, default=None, help="with stop: give up waiting after S seconds")
    daemon.add_argument("--serve", type=int, nargs="?", const=8765, default=None, metavar="PORT",
                        help="also run the dashboard (`tilth serve` on 127.0.0.1:PORT, default 8765) as the "
                             "supervisor's child; it stops with the supervisor")
    daemon.set_defaults(handler=cmd_daemon)

    stop = sub.add_parser("stop", help="stop a session after its current iteration (resumable)")
    stop.add_argument("id", nargs="?", help=ID_HELP)
    stop.add_argument("--now", action="store_true", help="kill it now instead (resume recovers the work)")
    stop.set_defaults(handler=cmd_stop)

    wait = sub.add_parser("wait", help="block until sessions end; the exit code says how",
                          description="block until sessions end; the exit code says how. A line on stderr every 30 s "
                                      "names what is still awaited. Exit codes: " + WAIT_CODES + ".")
    wait.add_argument("ids", nargs="*", metavar="id", help="session ids (default: the most recent)")
    wait.add_argument("--timeout", type=float, default=None, help="give up after S seconds (exit 4)")
    wait.set_defaults(handler=cmd_wait)

    logs_parser = sub.add_parser("logs", help="what a session did, one readable line per step")
    logs_parser.add_argument("id", nargs="?", help=ID_HELP)
    logs_parser.add_argument("-f", "--follow", action="store_true", help="keep following until the session ends")
    logs_parser.add_argument("-n", "--lines", type=_count, default=None, metavar="N",
                             help="show only the last N lines (then follow, with -f)")
    logs_parser.add_argument("--all", action="store_true",
                             help="every event, bookkeeping included (context loads, model calls, "
                                  "hooks that allowed a call)")
    logs_parser.set_defaults(handler=cmd_logs)
