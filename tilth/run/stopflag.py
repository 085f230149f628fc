"""Signals only set a flag; the loop checks it at safe points (between iterations and tasks). A stop
`at_once` (a dispatched worker that lost its session: the attempt's result would be refused) is also
honoured inside an attempt: after every model call, on a CLI agent's every streamed line (the agent's
process group killed) and between the worker's turn and the evaluator (`urgent`)."""

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
        self.at_once = False

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

    def set(self, reason: str, at_once: bool = False) -> None:
        """A stop asked from inside the process (another thread); `at_once`: not after the current
        iteration but after the current model call."""
        self.reason = reason if at_once and not self.at_once else self.reason or reason
        self.at_once = self.at_once or at_once
        self._event.set()

    def urgent(self) -> str | None:
        """Why the run must stop at once (`set(..., at_once=True)`); None otherwise."""
        return self.reason if self.at_once and self.requested else None

    def check_urgent(self) -> None:
        if (why := self.urgent()) is not None:
            raise StopRequested(why)

    def check(self) -> None:
        if self.requested:
            raise StopRequested(self.reason)

    def sleep(self, seconds: float) -> None:
        """Wait, unless a stop comes first (then StopRequested)."""
        if self._event.wait(max(0.0, seconds)):
            raise StopRequested(self.reason)
