"""One run of a CLI agent: a fresh process in the worktree, in its own process group, behind
the sandbox, bounded by a wall-clock timeout that kills the whole group, by MAX_OUTPUT_BYTES of
output and by `max_processes` processes at once (`agents/bounds.py`).

stdout and stderr are pipes read as the bytes arrive: every stdout line goes (redacted) to
`sessions/<id>/agents/<stem>.stdout` as it arrives, and every JSON line to `on_line` (every line,
as `{"text": line}`, for an agent with plain output), so a stream reader can turn the agent's
events into journal events live. stderr is kept whole (redacted) in `<stem>.stderr`. The moment
stdout and stderr together pass MAX_OUTPUT_BYTES the agent is stopped as `too much output`; the
logs never hold more than that. stdin is the prompt file, never an open pipe (an agent that reads
stdin to EOF would hang on one). When `on_line` returns a reason (a cap crossed by the usage
streamed so far), the whole group is killed at once and the run is `stopped` with that reason;
so when `every_tick` does, which is called every `bounds.TICK_S` whether the agent prints or not:
an agent that reports its usage in a file of its own (Copilot, Gemini) is held to the caps while
its stdout is quiet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable

from tilth.agents.bounds import DEFAULT_MAX_PROCESSES, Tick, collected
from tilth.agents.tools.shell import run_bounded
from tilth.store.jsonio import parse_object, write_atomic
from tilth.store.redaction import redact

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


class _Lines:
    """The agent's stdout as it comes: each whole line to its log (redacted) and, when it is JSON (or
    `plain`: every line, as `{"text": line}`), to `on_line`; the last KEEP_CHARS kept."""

    def __init__(self, log: BinaryIO, on_line: Callable[[dict[str, Any]], str | None] | None, plain: bool = False):
        self.log, self.on_line, self.plain = log, on_line, plain
        self.stop_reason: str | None = None
        self.bytes = 0
        self.partial: list[bytes] = []
        self.tail: list[bytes] = []
        self.kept = 0

    def __call__(self, chunk: bytes) -> str | None:
        self.bytes += len(chunk)
        if b"\n" not in chunk:
            self.partial.append(chunk)  # joined once its line ends: a long line costs no quadratic copying
            return self.stop_reason
        *lines, rest = b"".join([*self.partial, chunk]).split(b"\n")
        self.partial = [rest] if rest else []
        for line in lines:
            self._line(line + b"\n")
        return self.stop_reason

    def finish(self) -> None:
        if self.partial:
            self._line(b"".join(self.partial))
            self.partial = []

    def _line(self, line: bytes) -> None:
        self.log.write(redact(line))
        self.log.flush()
        self.tail.append(line)
        self.kept += len(line)
        while self.kept > KEEP_CHARS and len(self.tail) > 1:
            self.kept -= len(self.tail.pop(0))
        if self.on_line is not None and (self.plain or line.startswith(b"{")):
            event = {"text": line.decode(errors="replace").rstrip("\r\n")} if self.plain else parse_object(line)
            if event is not None and (reason := self.on_line(event)) and self.stop_reason is None:
                self.stop_reason = reason


def run_agent(argv: list[str], cwd: Path, env: dict[str, str], stdin: Path, timeout: float, logs: Path, stem: str,
              on_line: Callable[[dict[str, Any]], str | None] | None = None,
              max_processes: int | None = DEFAULT_MAX_PROCESSES, plain_lines: bool = False,
              every_tick: Tick | None = None) -> Finished:
    """Run to the end (or the timeout); raises OSError when the agent cannot be started.
    `plain_lines`: every stdout line goes to `on_line` as `{"text": line}`, JSON or not."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{stem}.stdout"
    write_atomic(log, b"")
    started = time.monotonic()
    errors, to_errors = collected()
    with open(stdin, "rb") as prompt, open(log, "ab") as out:
        lines = _Lines(out, on_line, plain_lines)
        code, stopped = run_bounded(argv, cwd, env, prompt, (lines, to_errors), timeout, max_processes, every_tick)
        lines.finish()
    write_atomic(logs / f"{stem}.stderr", bytes(errors))
    return Finished(code, stopped, b"".join(lines.tail).decode(errors="replace"), errors.decode(errors="replace"),
                    int((time.monotonic() - started) * 1000), lines.bytes)
