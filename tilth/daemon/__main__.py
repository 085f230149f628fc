"""`python -m tilth.daemon`: the supervisor in this process. `tilth daemon` starts it
detached; this entry point imports no model SDK, which keeps the supervisor small."""

from __future__ import annotations

import argparse

from tilth.core.terminal import guard_std_streams
from tilth.daemon.process import serve
from tilth.daemon.supervisor import RESCAN_S
from tilth.store.home import tilth_home


def main() -> int:
    guard_std_streams()  # its log may be a terminal (`tilth daemon` in the foreground): nothing written there raw
    parser = argparse.ArgumentParser(prog="python -m tilth.daemon", description="the tilth supervisor")
    parser.add_argument("--rescan", type=float, default=RESCAN_S, help="seconds between safety-net rescans")
    parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve", type=int, metavar="PORT", help="also run the dashboard (`tilth serve`) on this port")
    args = parser.parse_args()
    return serve(tilth_home(), args.rescan, args.ready_fd, args.serve)


raise SystemExit(main())
