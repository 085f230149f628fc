"""One run of a CLI agent: a fresh process in the worktree, in its own process group, behind
the sandbox, bounded by a wall-clock timeout that kills the whole group.

stdout is read line by line while the agent runs: every line goes (redacted) to
`sessions/<id>/agents/<stem>.stdout` as it arrives, and every JSON line to `on_line`, so a
stream reader can turn the agent's events into journal events live. stderr is kept whole
(redacted) in `<stem>.stderr`. stdin is the prompt file, never an open pipe (an agent that
reads stdin to EOF would hang on one). When `on_line` returns a reason (a cap crossed by the usage
streamed so far), the whole group is killed at once and the run is `stopped` with that reason.
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tilth.agents.tools.shell import MAX_OUTPUT_BYTES, kill_group
from tilth.store.jsonio import parse_object, write_atomic
from tilth.store.redaction import redact

POLL_SECONDS = 0.5
KEEP_CHARS = 1_000_000
"""stdout kept in memory for parsing (the tail); the log file holds all of it."""


@dataclass(frozen=True)
class Finished:
    exit_code: int
    stopped: str | None
    """None on a normal exit, else "timeout", "too much output" or the reason `on_line` gave (a cap)."""
    stdout: str
    """The tail of stdout (KEEP_CHARS)."""
    stderr: str
    duration_ms: int
    stdout_bytes: int


class _Tee(threading.Thread):
    """Copies the agent's stdout to its log as it comes, handing each JSON line on."""

    def __init__(self, pipe, log: Path, on_line: Callable[[dict], str | None] | None, group: int):
        super().__init__(daemon=True)
        self.pipe, self.log, self.on_line, self.group = pipe, log, on_line, group
        self.stop_reason: str | None = None
        self.bytes = 0
        self.tail: list[bytes] = []
        self.kept = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with open(self.log, "ab") as out:
                for line in iter(self.pipe.readline, b""):
                    self.bytes += len(line)
                    out.write(redact(line))
                    out.flush()
                    self._keep(line)
                    if self.on_line is not None and self.bytes <= MAX_OUTPUT_BYTES and line.startswith(b"{"):
                        event = parse_object(line)
                        if event is not None and (reason := self.on_line(event)) and self.stop_reason is None:
                            self.stop_reason = reason
                            kill_group(self.group)
        except BaseException as exc:  # handed to the waiting thread, which re-raises it
            self.error = exc
            for _ in iter(lambda: self.pipe.read(65536), b""):
                pass

    def _keep(self, line: bytes) -> None:
        self.tail.append(line)
        self.kept += len(line)
        while self.kept > KEEP_CHARS and len(self.tail) > 1:
            self.kept -= len(self.tail.pop(0))


def run_agent(argv: list[str], cwd: Path, env: dict[str, str], stdin: Path, timeout: float, logs: Path, stem: str,
              on_line: Callable[[dict], str | None] | None = None) -> Finished:
    """Run to the end (or the timeout); raises OSError when the agent cannot be started."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{stem}.stdout"
    write_atomic(log, b"")
    started = time.monotonic()
    with open(stdin, "rb") as prompt, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=prompt, stdout=subprocess.PIPE, stderr=err,
                                start_new_session=True)
        tee = _Tee(proc.stdout, log, on_line, proc.pid)
        tee.start()
        try:
            stopped = _wait(proc, tee, timeout)
        finally:
            kill_group(proc.pid)
            code = proc.wait()
            tee.join()
            proc.stdout.close()
        if tee.error is not None:
            raise tee.error
        err.seek(0)
        errors = err.read()
    write_atomic(logs / f"{stem}.stderr", errors)
    return Finished(code, stopped, b"".join(tee.tail).decode(errors="replace"), errors.decode(errors="replace"),
                    int((time.monotonic() - started) * 1000), tee.bytes)


def _wait(proc: subprocess.Popen, tee: _Tee, timeout: float) -> str | None:
    """Block until the agent exits, leaving it unreaped so its pid (= the group id) is not reused."""
    fd = os.pidfd_open(proc.pid)
    try:
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            if select.select([fd], [], [], min(remaining, POLL_SECONDS))[0]:
                return tee.stop_reason
            if tee.stop_reason is not None:
                return tee.stop_reason
            if tee.bytes > MAX_OUTPUT_BYTES:
                return "too much output"
            if tee.error is not None:
                return "output handling failed"
        return "timeout"
    finally:
        os.close(fd)
