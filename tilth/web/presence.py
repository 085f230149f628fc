"""A running dashboard, seen from outside: `$TILTH_HOME/serve.json` ({url, pid}, written
atomically while it runs, removed on exit) and `serve.lock`, an flock held for the server's
life. Liveness is the flock, never the pid: a dashboard killed with -9 leaves serve.json
behind, and `running_url` then says nothing. The token is never written here.

Stdlib and `store/` only: `tilth start` asks `running_url` without loading the web stack.
"""

from __future__ import annotations

import os
from pathlib import Path

from tilth.store.jsonio import write_json
from tilth.store.lock import HeldLock, is_locked, read_holder

SERVE_JSON = "serve.json"
SERVE_LOCK = "serve.lock"


class Presence:
    """Held by the server: the flock for its life, serve.json while it serves."""

    def __init__(self, home: Path):
        self.home = home
        self.lock = HeldLock(home / SERVE_LOCK, "serve")
        self.file = home / SERVE_JSON

    def claim(self) -> bool:
        """Take the flock; False while another dashboard serves this home."""
        self.home.mkdir(parents=True, exist_ok=True)
        return self.lock.try_acquire()

    def publish(self, url: str) -> None:
        write_json(self.file, {"url": url, "pid": os.getpid()})

    def withdraw(self) -> None:
        try:
            if (read_holder(self.file) or {}).get("pid") == os.getpid():
                self.file.unlink()
        except OSError:
            pass
        self.lock.release()


def running_url(home: Path) -> str | None:
    """The URL of the dashboard serving this home, None when none runs."""
    if not is_locked(home / SERVE_LOCK):
        return None
    url = (read_holder(home / SERVE_JSON) or {}).get("url")
    return url if isinstance(url, str) else None
