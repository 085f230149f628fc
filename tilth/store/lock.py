"""session.lock and daemon.lock: one holder at a time, for the holder's whole life.

The lock is an flock held for the holder's life, so the kernel releases it the moment the
process dies (kill -9 included, zombie or not). The file's content (pid, role, start,
heartbeat) is for people, `tilth status` and `tilth stop`; liveness is judged by the flock
alone, never by `kill(pid, 0)` (a killed orphan can linger as a zombie).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path
from typing import Any, Self

import orjson

from tilth.core.clock import iso
from tilth.core.errors import SessionBusy, TilthError

# is_locked() probes with a shared lock held for microseconds; a would-be holder that
# meets a probe retries briefly instead of reporting a holder that is not there.
PROBE_RETRIES = (0.01, 0.02, 0.04, 0.08)


class HeldLock:
    """An exclusive flock on `path`, with `{pid, role, started, heartbeat}` written inside."""

    def __init__(self, path: Path, role: str, extra: dict[str, Any] | None = None):
        self.path = path
        self.role = role
        self.extra = extra or {}
        """More facts the holder publishes in the lock file (the supervisor: its view of the settings)."""
        self._fd: int | None = None
        self._started = iso()

    def busy(self, pid: object) -> TilthError:
        return TilthError(f"{self.path} is held by pid {pid}")

    def try_acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        for pause in (*PROBE_RETRIES, None):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if pause is None:
                    os.close(fd)
                    return False
                time.sleep(pause)
        self._fd = fd
        self.beat()
        return True

    def acquire(self) -> Self:
        if not self.try_acquire():
            holder = read_holder(self.path)
            raise self.busy(holder.get("pid", "?") if holder else "?")
        return self

    def beat(self) -> None:
        """Refresh the heartbeat, written in place: replacing the file would orphan the flock."""
        if self._fd is None:
            return
        body = orjson.dumps({**self.extra, "pid": os.getpid(), "role": self.role, "started": self._started,
                             "heartbeat": iso()})
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, body, 0)

    def still_linked(self) -> bool:
        """The held file is still the one at `path`: a lock taken on a file someone has since
        removed (with its directory) guards nothing."""
        try:
            return self._fd is not None and os.fstat(self._fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class SessionLock(HeldLock):
    """One writer per session. `role` is `run` for a runner; the supervisor and `tilth stop`
    hold it as `supervisor` / `cli` only for the moment of a state change."""

    def __init__(self, path: Path, session_id: str, role: str = "run"):
        super().__init__(path, role)
        self.session_id = session_id

    def busy(self, pid: object) -> TilthError:
        return SessionBusy(
            f"session {self.session_id!r} is already running (pid {pid}); "
            f"wait for it or stop it before running it again"
        )


def read_holder(path: Path) -> dict[str, Any] | None:
    try:
        holder: dict[str, Any] = orjson.loads(path.read_bytes())
        return holder
    except (OSError, orjson.JSONDecodeError):
        return None


def is_locked(path: Path) -> bool:
    """True while some live process holds the lock."""
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def live_holder(path: Path) -> dict[str, Any] | None:
    """The holder's content while the lock is held, else None."""
    return (read_holder(path) or {"pid": None}) if is_locked(path) else None


def wait_released(path: Path, timeout: float | None) -> bool:
    """Block until nobody holds the lock (the holder released it or died), or the timeout.

    A blocking flock is the event; it runs in a thread so the wait can have a deadline.
    For short-lived command-line processes only: after a timeout the thread stays parked.
    """
    if not is_locked(path):
        return True
    released = threading.Event()

    def block() -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        finally:
            os.close(fd)
        released.set()

    threading.Thread(target=block, daemon=True).start()
    return released.wait(timeout)
