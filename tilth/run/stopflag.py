"""Signals only set a flag; the loop checks it at safe points (between iterations and tasks)."""

from __future__ import annotations

import signal
import threading

from tilth.core.errors import StopRequested


class StopFlag:
    def __init__(self) -> None:
        self._event = threading.Event()
        self.by_signal = False
        """The stop came from SIGTERM/SIGINT (a shutdown), not from `set` (e.g. a dispatched
        session's `tilth stop` or a lost lease)."""
        self.reason = ""

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def install(self) -> "StopFlag":
        signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)
        return self

    def _set(self, signum: int, frame: object) -> None:
        self.by_signal = True
        self._event.set()

    def set(self, reason: str) -> None:
        """A stop asked from inside the process (another thread)."""
        self.reason = self.reason or reason
        self._event.set()

    def check(self) -> None:
        if self.requested:
            raise StopRequested(self.reason)

    def sleep(self, seconds: float) -> None:
        """Wait, unless a stop comes first (then StopRequested)."""
        if self._event.wait(max(0.0, seconds)):
            raise StopRequested(self.reason)
