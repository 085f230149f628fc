"""The supervisor process (`tilth daemon --foreground`, `python -m tilth.daemon`): hold
daemon.lock for life, write daemon.pid, tell the starter it is up, run the Supervisor (with
`--serve`, the dashboard too, as its child: `children.Dashboard`), and on SIGTERM/SIGINT stop in
order: no new runners, forward SIGTERM so each running session finishes its iteration and
stops, wait for them, stop the dashboard, exit. A second signal, or the end of the grace period
(`stop_grace_s`), kills them: a session's work never holds a stop up.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import time
from pathlib import Path

from tilth.daemon.children import Dashboard
from tilth.daemon.control import DaemonLock, DaemonPaths, running_pid
from tilth.daemon.supervisor import RESCAN_S, Supervisor
from tilth.store.jsonio import write_atomic

log = logging.getLogger("tilth.daemon")


class Signals:
    """SIGTERM/SIGINT/SIGHUP only count; the wakeup fd turns a signal into a readable pipe."""

    def __init__(self) -> None:
        self.count = 0
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self.write_fd, False)

    def install(self) -> "Signals":
        signal.set_wakeup_fd(self.write_fd)
        # SIGHUP too: `--foreground` in a terminal that closes stops in order. (A handler,
        # unlike SIG_IGN, is not inherited by the runners.)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: object) -> None:
        self.count += 1

    def nudge(self) -> None:
        try:
            os.write(self.write_fd, b"\0")
        except BlockingIOError:
            pass  # the pipe is full, so the main thread is due to wake anyway

    def wait(self, timeout: float | None = None) -> None:
        """Block until a signal arrives, a nudge, or `timeout` seconds pass."""
        select.select([self.read_fd], [], [], timeout)
        try:
            while os.read(self.read_fd, 4096):
                pass
        except BlockingIOError:
            pass


def _tell(ready_fd: int | None, message: str) -> None:
    if ready_fd is None:
        return
    try:
        os.write(ready_fd, message.encode())
    except OSError:
        pass
    finally:
        os.close(ready_fd)


def serve(home: Path, rescan_s: float = RESCAN_S, ready_fd: int | None = None, dashboard_port: int | None = None) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("apscheduler", "watchfiles"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    home.mkdir(parents=True, exist_ok=True)
    lock = DaemonLock(home)
    if not lock.try_acquire():
        pid = running_pid(home)
        _tell(ready_fd, f"busy {pid}\n")
        print(f"tilth: {lock.busy(pid)}", file=sys.stderr)
        return 2
    pid_file = DaemonPaths(home).pid
    dashboard = None
    try:
        write_atomic(pid_file, f"{os.getpid()}\n".encode())
        signals = Signals().install()
        supervisor = Supervisor(home, lock, rescan_s, signals.nudge)
        supervisor.start()
        if dashboard_port is not None:
            dashboard = Dashboard(home, dashboard_port)
            log.info("dashboard pid %d on port %d (`tilth serve`)", dashboard.pid, dashboard_port)
        _tell(ready_fd, f"ready {os.getpid()}\n")
        log.info("supervisor pid %d up for %s (rescan every %ss)", os.getpid(), home, rescan_s)
        while not signals.count:
            signals.wait()
        running = supervisor.stop_accepting()
        grace = supervisor.settings().stop_grace_s
        log.info("stop requested: %d running session(s) finish their iteration (up to %ss), then stop",
                 len(running), grace)
        deadline, escalated = time.monotonic() + grace, False
        while any(child.returncode is None for child in running):
            if (signals.count > 1 or time.monotonic() >= deadline) and not escalated:
                escalated = True
                why = "second stop signal" if signals.count > 1 else f"still running after {grace}s"
                log.warning("%s: killing the running sessions now (resumable)", why)
                for child in running:
                    child.kill()
            signals.wait(None if escalated else max(0.0, deadline - time.monotonic()))
        supervisor.finish(running)
        log.info("supervisor pid %d stopped", os.getpid())
        return 0
    finally:
        if dashboard is not None:
            dashboard.stop()
        try:
            if pid_file.read_text().strip() == str(os.getpid()):
                pid_file.unlink()
        except OSError:
            pass
        lock.release()
