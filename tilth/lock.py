"""session.lock: one writer per session.

The lock is an flock held for the writer's whole life, so the kernel releases it the
moment the process dies (kill -9 included, zombie or not). The file's content (pid,
start, heartbeat) is for people and `tilth status`; liveness is judged by the flock alone.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import orjson

from tilth.clock import iso
from tilth.errors import SessionBusy


class SessionLock:
    def __init__(self, path: Path, session_id: str):
        self.path = path
        self.session_id = session_id
        self._fd: int | None = None
        self._started = iso()

    def acquire(self) -> "SessionLock":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = read_holder(self.path)
            pid = holder.get("pid", "?") if holder else "?"
            raise SessionBusy(
                f"session {self.session_id!r} is already running (pid {pid}); "
                f"wait for it or stop it before running it again"
            ) from None
        self._fd = fd
        self.beat()
        return self

    def beat(self) -> None:
        """Refresh the heartbeat, written in place: replacing the file would orphan the flock."""
        if self._fd is None:
            return
        body = orjson.dumps({"pid": os.getpid(), "started": self._started, "heartbeat": iso()})
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, body, 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "SessionLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def read_holder(path: Path) -> dict | None:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def is_locked(path: Path) -> bool:
    """True while some live process holds the session lock."""
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
