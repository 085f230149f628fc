"""Signs of life while a command waits on something slow (a model's reply): a spinner with the
seconds waited on stderr when stderr is a terminal (wiped when the wait ends), else one line
saying what it waits on, so a log or a pipe shows where the time went."""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

from tilth.core.terminal import clean, unguarded

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Iterator, TextIO

FRAMES = "|/-\\"
FRAME_S = 0.25
CLEAR = "\r\x1b[K"
"""Back to the line's start and erase it: the spinner leaves nothing behind."""


@contextmanager
def waiting(what: str, line_to: TextIO | None = None, terminal: TextIO | None = None) -> Iterator[None]:
    """While the body runs: a spinner `| what 12s` on `terminal` (default stderr) when it is a
    terminal, else the line `  (what ...)` once on `line_to` (default stdout)."""
    spin_on = unguarded(terminal if terminal is not None else sys.stderr)  # its `\r` and erase are its own
    what = clean(what)
    if not spin_on.isatty():
        print(f"  ({what} ...)", file=line_to if line_to is not None else sys.stdout, flush=True)
        yield
        return
    done = threading.Event()

    def spin() -> None:
        started, frame = time.monotonic(), 0
        while True:
            spin_on.write(f"\r{FRAMES[frame % len(FRAMES)]} {what} {time.monotonic() - started:.0f}s")
            spin_on.flush()
            frame += 1
            if done.wait(FRAME_S):
                break
        spin_on.write(CLEAR)
        spin_on.flush()

    spinner = threading.Thread(target=spin, name="tilth-spinner", daemon=True)
    spinner.start()
    try:
        yield
    finally:
        done.set()
        spinner.join()
