"""One child process per running session: `python -m tilth run <id>`; the dashboard (`Dashboard`) and the
look for sessions an emptied broker forgot (`Recovery`) and the polls of followed pull requests (`Follower`)
are the supervisor's children too.

Each child is the leader of its own process group (start_new_session), so a session's
tools die with it on `tilth stop --now`, a Ctrl-C at the supervisor's terminal does not
reach it, and one session's crash never touches another.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from tilth.core.faults import PAUSE_ENV
from tilth.core.processes import kill_group
from tilth.store.home import SessionPaths

RUN_LOG = "run.log"
"""The child's stdout and stderr, in its session dir (a traceback lands here)."""


class Child:
    def __init__(self, paths: SessionPaths, resume: bool, on_exit: Callable[["Child"], None]):
        self.paths = paths
        self.resume = resume
        self.terminated = False
        """The supervisor asked it to stop (SIGTERM): if it had not begun running, it stays queued."""
        self.killed = False
        """The supervisor SIGKILLed it (a second stop signal): it ends as stopped, not crashed."""
        argv = [sys.executable, "-m", "tilth", "run", paths.id, "--from-queue", *(["--resume"] if resume else [])]
        # A test's pause point in the supervisor's environment must never freeze a user's session.
        env = {**{k: v for k, v in os.environ.items() if k != PAUSE_ENV}, "TILTH_HOME": str(paths.home)}
        with open(paths.dir / RUN_LOG, "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=paths.home, env=env, start_new_session=True)
        self.pid = self.proc.pid
        self._on_exit = on_exit
        # A child's exit is an event: a thread blocks on it and reports it at once.
        self.waiter = threading.Thread(target=self._wait, name=f"wait-{paths.id}", daemon=True)
        self.waiter.start()

    def _wait(self) -> None:
        self.proc.wait()
        self._on_exit(self)

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def terminate(self) -> None:
        """Ask for a clean stop: the child finishes its iteration, then exits as stopped."""
        self.terminated = True
        signal_pid(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        self.killed = True
        kill_group(self.pid)


class Dashboard:
    """`tilth daemon --serve`: the dashboard (`python -m tilth serve`, loopback) as the supervisor's
    child, in its own process group, its output in the supervisor's log. It stops with the
    supervisor, and by itself when the supervisor is gone (`--exit-with`, a kill -9 included)."""

    STOP_S = 5.0

    def __init__(self, home: Path, port: int):
        argv = [sys.executable, "-m", "tilth", "serve", "--port", str(port), "--exit-with", str(os.getpid())]
        env = {**{k: v for k, v in os.environ.items() if k != PAUSE_ENV}, "TILTH_HOME": str(home)}
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, cwd=home, env=env, start_new_session=True)
        self.pid = self.proc.pid

    def stop(self) -> None:
        """SIGTERM (open pages are closed), then SIGKILL of its group if it has not gone in STOP_S."""
        signal_pid(self.pid, signal.SIGTERM)
        try:
            self.proc.wait(self.STOP_S)
        except subprocess.TimeoutExpired:
            kill_group(self.pid)
            self.proc.wait()


class Recovery:
    """`python -m tilth resume --from-supervisor`: with `[dispatch]`, one look whether the broker came
    back empty and, if so, the sessions it forgot made known to it again and the unfinished ones queued
    (the supervisor itself never talks to the broker). Its few lines go to the supervisor's log."""

    def __init__(self, home: Path):
        self.proc = tilth_child(home, "resume", "--from-supervisor")
        self.pid = self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()


class Follower:
    """`python -m tilth follow <id> --once` (with `follow_pr`): one poll of a session's pull request and
    what it acts on (a re-run, a follow-up task run through the session's own worker and evaluator, a
    push); the supervisor itself never talks to the forge. Its lines go to the supervisor's log."""

    def __init__(self, home: Path, session_id: str):
        self.session_id = session_id
        self.proc = tilth_child(home, "follow", session_id, "--once")
        self.pid = self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()


def signal_pid(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def describe_exit(code: int | None) -> str:
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def tilth_child(home: Path, *args: str) -> subprocess.Popen[bytes]:
    """`python -m tilth <args>` for this home, in a process group of its own, its output the supervisor's."""
    env = {**{k: v for k, v in os.environ.items() if k != PAUSE_ENV}, "TILTH_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-m", "tilth", *args], stdin=subprocess.DEVNULL, cwd=home, env=env,
                            start_new_session=True)
