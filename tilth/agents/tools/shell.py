"""run_bash: one shell command in the worktree, bounded in time and output.

The command runs as `bash -c` in its own session (so its own process group) with stdin from
/dev/null. Its stdout and stderr go to a temporary file, not a pipe: only bash itself is
waited for, so a background child holding the output open cannot stall the call.

When bash exits, or the timeout fires, the whole process group is sent SIGKILL: nothing the
command started outlives the tool call, background jobs included. A process that leaves
the group on purpose (setsid, double fork into a new session) is not tracked.

Linux only: bash is awaited through a pidfd and reaped only after the group is killed, so
its pid (the group id) cannot be reused by an unrelated group in between. Output past
MAX_OUTPUT_BYTES stops the command, since the temporary file would otherwise grow unbounded.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tilth.core.errors import ToolError

HIDDEN_ENV_PREFIXES = ("TILTH_", "OPENAI_", "OPENROUTER_", "ANTHROPIC_")
MAX_OUTPUT_BYTES = 50_000_000
SIZE_CHECK_SECONDS = 0.5


def agent_env() -> dict[str, str]:
    """The environment an agent's commands see: no harness paths, no keys."""
    return {k: v for k, v in os.environ.items() if not k.startswith(HIDDEN_ENV_PREFIXES)}


@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    output: str
    """Combined stdout+stderr, capped to max_output (head and tail kept)."""
    stopped: str | None
    """None on a normal exit, else "timeout" or "too much output"."""

    @property
    def timed_out(self) -> bool:
        return self.stopped == "timeout"


def run_command(command: str, cwd: Path, timeout: float = 120, max_output: int = 20_000,
                env: dict[str, str] | None = None, wrapper: list[str] = ()) -> CommandResult:
    """Run `bash -c command`, behind `wrapper` (a sandbox argv prefix) if given; `env`, when
    given, replaces the environment (as in subprocess)."""
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen([*wrapper, "bash", "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            raise ToolError(f"could not start bash in {cwd}: {e.strerror}") from None
        try:
            stopped = wait_for_exit(proc, out, timeout)
        finally:
            kill_group(proc.pid)
            code = proc.wait()
        out.seek(0)
        text = out.read(MAX_OUTPUT_BYTES).decode("utf-8", errors="replace")
    return CommandResult(code, _cap(text, max_output), stopped)


def run_bash(command: str, cwd: Path, timeout: float = 120, max_output: int = 20_000,
             env: dict[str, str] | None = None, wrapper: list[str] = ()) -> str:
    """Combined stdout+stderr, then "[exit code N]" (or why the command was stopped): text for a model."""
    result = run_command(command, cwd, timeout, max_output, env, wrapper)
    if result.stopped == "timeout":
        footer = f"[timed out after {timeout:g} s; the command and every process it started were killed]"
    elif result.stopped == "too much output":
        footer = f"[stopped: output passed {MAX_OUTPUT_BYTES} bytes; the command and its processes were killed]"
    else:
        footer = f"[exit code {result.exit_code}]"
    text = result.output
    return text + ("" if not text or text.endswith("\n") else "\n") + footer


def wait_for_exit(proc: subprocess.Popen, out, timeout: float) -> str | None:
    """Block until the process exits, leaving it unreaped so its pid (= the group id) is not reused.

    Returns None on a normal exit, else why the command must be stopped.
    """
    fd = os.pidfd_open(proc.pid)
    try:
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            if select.select([fd], [], [], min(remaining, SIZE_CHECK_SECONDS))[0]:
                return None
            if os.fstat(out.fileno()).st_size > MAX_OUTPUT_BYTES:
                return "too much output"
        return "timeout"
    finally:
        os.close(fd)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _cap(text: str, max_output: int) -> str:
    if len(text) <= max_output:
        return text
    half = max_output // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters cut ...]\n{text[len(text) - half:]}"
