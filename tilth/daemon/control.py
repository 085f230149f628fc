"""The supervisor seen from outside: its files under $TILTH_HOME, starting it detached,
asking it to stop, and whether it runs (judged by the flock on daemon.lock, never by pid).

  daemon.lock  flock held for the supervisor's life; {pid, role, started, heartbeat} inside
  daemon.pid   the pid, for people and scripts (removed on a clean exit)
  daemon.log   the supervisor's stdout and stderr when detached
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tilth.core.clock import utc_now
from tilth.core.errors import TilthError
from tilth.store.lock import HeldLock, live_holder, wait_released

READY_TIMEOUT = 15.0
"""How long `tilth daemon` / `tilth resume` wait for a freshly started supervisor to say it is up."""


class DaemonRunning(TilthError):
    """A supervisor already holds daemon.lock."""


@dataclass(frozen=True)
class DaemonPaths:
    home: Path

    @property
    def lock(self) -> Path:
        return self.home / "daemon.lock"

    @property
    def pid(self) -> Path:
        return self.home / "daemon.pid"

    @property
    def log(self) -> Path:
        return self.home / "daemon.log"


class DaemonLock(HeldLock):
    def __init__(self, home: Path):
        super().__init__(DaemonPaths(home).lock, "supervisor", {"environment": environment_view()})
        self.home = home

    def busy(self, pid: object) -> TilthError:
        return DaemonRunning(f"a supervisor is already running for {self.home} (pid {pid}); "
                             "`tilth daemon stop` stops it")


def environment_view() -> dict[str, str]:
    """The supervisor's TILTH_* environment as `tilth config` compares it with a shell's: values,
    except keys, which appear only as a short one-way fingerprint."""
    from tilth.core.config import SECRET_FIELDS, env_name
    from tilth.core.travel import AGENT_KEY_VARIABLES, LOCAL_FIELDS

    secret = {env_name(field) for field in (*SECRET_FIELDS, *LOCAL_FIELDS)}
    agents = {name for names in AGENT_KEY_VARIABLES.values() for name in names}
    view = {name: (f"key {fingerprint(value)}" if name in secret else value)
            for name, value in sorted(os.environ.items()) if name.startswith("TILTH_")}
    return view | {name: f"key {fingerprint(os.environ[name])}" for name in sorted(agents) if os.environ.get(name)}


def fingerprint(secret: str | None) -> str | None:
    """A short one-way tag of a key, enough to tell two keys apart without storing either."""
    if not secret:
        return None
    import hashlib

    return hashlib.sha256(secret.encode()).hexdigest()[:8]


def environment_differences(supervisor: dict[str, Any], handing_over: bool = False) -> list[str]:
    """One line per TILTH_* variable the running supervisor sees differently from this shell: a
    WARNING where the supervisor's value wins, a note where the session's recorded one does. With
    `handing_over` (a start or resume records this shell's values) the notes are left out: the
    value is applied."""
    from tilth.core.config import env_name
    from tilth.core.travel import SUPERVISOR_FIELDS

    theirs, mine = supervisor.get("environment") or {}, environment_view()
    pid, own = supervisor.get("pid", "?"), {env_name(field) for field in SUPERVISOR_FIELDS}
    lines = []
    for name in sorted((set(theirs) | set(mine)) - {"TILTH_HOME"}):
        if theirs.get(name) == mine.get(name):
            continue
        seen = f"the supervisor (pid {pid}) has {_shown(name, theirs)}, this shell {_shown(name, mine)}"
        if name == env_name("notify"):
            why = "supervised sessions notify the supervisor's URLs"
        elif theirs.get(name, "").startswith("key ") or mine.get(name, "").startswith("key "):
            why = "runs of supervised sessions use the supervisor's key"
        elif name in own:
            why = "the supervisor uses its own value"
        elif handing_over:
            continue
        else:
            lines.append(f"note: {seen}: a session runs with the settings recorded when it was started or resumed, "
                         "so this shell's value applies to the sessions it starts or resumes")
            continue
        lines.append(f"WARNING: {seen}: {why}")
    return lines


def _shown(name: str, view: dict[str, str]) -> str:
    return f"{name}={view[name]}" if name in view else f"no {name}"


def missing_keys(supervisor: dict[str, Any], needed: list[str]) -> list[str]:
    """The key variables (`TILTH_API_KEY`, `ANTHROPIC_API_KEY`, ...) this shell sets and a session needs, but the
    running supervisor's environment lacks (keys never travel with a session)."""
    from tilth.core.travel import key_variable

    theirs = supervisor.get("environment") or {}
    return [key_variable(key) for key in needed if key_variable(key) in os.environ and key_variable(key) not in theirs]


def holder(home: Path) -> dict[str, Any] | None:
    """The running supervisor's {pid, started, heartbeat}, or None when none runs."""
    return live_holder(DaemonPaths(home).lock)


def running_pid(home: Path) -> int | None:
    info = holder(home)
    return info.get("pid") if info else None


def start_detached(home: Path, rescan: float | None = None, wait: bool = True, serve: int | None = None) -> int:
    """Start `python -m tilth.daemon` in its own session, stdin from /dev/null, output to
    daemon.log (with `serve`, running the dashboard on that port too). With `wait`, return once it
    holds daemon.lock (or say why it did not)."""
    paths = DaemonPaths(home)
    home.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "tilth.daemon"] + (["--rescan", str(rescan)] if rescan else [])
    argv += ["--serve", str(serve)] if serve is not None else []
    read_fd, write_fd = os.pipe() if wait else (None, None)
    if write_fd is not None:
        argv += ["--ready-fd", str(write_fd)]
    try:
        with open(paths.log, "ab") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=home,
                                    env={**os.environ, "TILTH_HOME": str(home)}, start_new_session=True,
                                    pass_fds=() if write_fd is None else (write_fd,))
    finally:
        if write_fd is not None:
            os.close(write_fd)
    if read_fd is None:
        return proc.pid
    try:
        return _await_ready(home, proc, read_fd)
    finally:
        os.close(read_fd)


def _await_ready(home: Path, proc: subprocess.Popen[bytes], read_fd: int) -> int:
    """The child writes `ready <pid>` or `busy <pid>` on the pipe; EOF means it died first."""
    ready, _, _ = select.select([read_fd], [], [], READY_TIMEOUT)
    words = os.read(read_fd, 100).decode().split() if ready else []
    if words[:1] == ["ready"]:
        return int(words[1])
    if words[:1] == ["busy"]:
        raise DaemonLock(home).busy(words[1])
    pid = running_pid(home)
    if pid is not None:  # another start won the race; it is the supervisor now
        return pid
    state = "did not come up in time" if not ready else f"exited ({proc.poll()})"
    raise TilthError(f"the supervisor {state}; see {DaemonPaths(home).log}")


def ensure_running(home: Path, wait: bool) -> tuple[int, bool]:
    """(pid, started): the running supervisor, or a new one started detached."""
    pid = running_pid(home)
    if pid is not None:
        return pid, False
    return start_detached(home, wait=wait), True


def stop(home: Path, timeout: float | None) -> tuple[int | None, bool]:
    """SIGTERM the supervisor and wait until it has exited (its running sessions finish
    their iteration first). (pid or None when none ran, exited within the timeout)."""
    pid = running_pid(home)
    if pid is None:
        return None, True
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    return pid, wait_released(DaemonPaths(home).lock, timeout)


def heartbeat_age(info: dict[str, Any]) -> float | None:
    """Seconds since the supervisor last refreshed its heartbeat."""
    try:
        beat = datetime.strptime(info["heartbeat"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except (KeyError, TypeError, ValueError):
        return None
    return max(0.0, (utc_now() - beat).total_seconds())
