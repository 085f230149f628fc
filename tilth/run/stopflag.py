"""Signals only set a flag; the loop checks it at safe points (between iterations and tasks)."""

from __future__ import annotations

import signal

from tilth.core.errors import StopRequested


class StopFlag:
    def __init__(self) -> None:
        self.requested = False

    def install(self) -> "StopFlag":
        signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)
        return self

    def _set(self, signum: int, frame: object) -> None:
        self.requested = True

    def check(self) -> None:
        if self.requested:
            raise StopRequested()
