"""watchfiles on sessions/: a session appearing, or a session.json / prd.json changing,
wakes the supervisor's tick within a second.

watchfiles can miss a file written right after its directory was created (the directory
is watched only once it exists); the supervisor's periodic rescan is the safety net.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from watchfiles import Change, watch

log = logging.getLogger("tilth.daemon")

WATCHED_NAMES = ("session.json", "prd.json")
DEBOUNCE_MS = 300
"""Upper bound on how long a burst of changes is gathered into one wake."""


class Watcher:
    def __init__(self, root: Path, on_change: Callable[[], None]):
        self.root = root
        self.on_change = on_change
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watcher", daemon=True)

    def relevant(self, change: Change, path: str) -> bool:
        p = Path(path)
        return p.name in WATCHED_NAMES or p.parent == self.root

    def start(self) -> "Watcher":
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            for _ in watch(self.root, watch_filter=self.relevant, stop_event=self._stop, debounce=DEBOUNCE_MS,
                           step=50, rust_timeout=1000, raise_interrupt=False):
                self.on_change()
        except Exception:  # the rescan still runs; say why the fast path is gone
            log.exception("the sessions/ watcher stopped; relying on the periodic rescan")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
