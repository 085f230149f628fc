"""A JSONL file another process appends to, read as it grows: each call hands back the JSON objects
of the lines completed since the last call (a line still being written waits for its newline).

The Copilot and Gemini CLIs print no token counts on stdout while they run; they append them to
a file of their own (Copilot's OpenTelemetry file, Gemini's chat record), which their stream
readers read through this at each stdout line and on a timer (`report()`, `command.CliAgent`),
so the spend cap sees each model call as it ends, whether stdout speaks or not.
A file replaced by a shorter one is read again from its start."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tilth.store.jsonio import parse_object

MAX_READ = 8 * 1024 * 1024
"""At most this much is read per call: a runaway file cannot stall the agent's output."""


class JsonlTail:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def new(self) -> list[dict[str, Any]]:
        """The objects of the lines completed since the last call; none when the file is not there."""
        if self.path is None:
            return []
        try:
            size = os.stat(self.path).st_size
        except OSError:
            return []
        if size < self._offset:
            self._offset, self._partial = 0, b""
        if size == self._offset:
            return []
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read(MAX_READ)
        except OSError:
            return []
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        return [found for line in lines if (found := parse_object(line)) is not None]
