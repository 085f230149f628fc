"""run_bash: one shell command in the worktree, bounded in time and output.

The command runs as `bash -c` in its own session (so its own process group) with stdin from
/dev/null. Its stdout and its stderr each go to a temporary file, not a pipe: only bash itself
is waited for, so a background child holding the output open cannot stall the call. The model
sees stdout, then the stderr (if any) under a `[stderr]` line; with `runs` given (a session's
`runs/` dir) both are also kept whole as a script artifact (`store/script_runs.py`).

When bash exits, or the timeout fires, the whole process group is sent SIGKILL: nothing the
command started outlives the tool call, background jobs included. A process that leaves
the group on purpose (setsid, double fork into a new session) is not tracked.

Linux only: bash is awaited through a pidfd and reaped only after the group is killed, so
its pid (the group id) cannot be reused by an unrelated group in between. Output past
MAX_OUTPUT_BYTES (stdout and stderr together) stops the command, since the temporary files
would otherwise grow unbounded.
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tilth.core.errors import ToolError
from tilth.core.processes import kill_group
from tilth.store.script_runs import DEFAULT_KEEP, Finished, record

MAX_OUTPUT_BYTES = 50_000_000
SIZE_CHECK_SECONDS = 0.5
STDERR_MARK = "[stderr]"


@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    output: str
    """stdout, then a `[stderr]` line and stderr when there is any; capped to max_output (head and tail kept)."""
    stopped: str | None
    """None on a normal exit, else "timeout" or "too much output"."""
    run_id: str | None = None
    """The script artifact (`runs/run-<run_id>/`), when one was written."""

    @property
    def timed_out(self) -> bool:
        return self.stopped == "timeout"


def model_text(stdout: str, stderr: str) -> str:
    """What the model reads of a command's output: stdout, then stderr under its own line."""
    if not stderr:
        return stdout
    sep = "" if not stdout or stdout.endswith("\n") else "\n"
    return f"{stdout}{sep}{STDERR_MARK}\n{stderr}"


def run_command(command: str, cwd: Path, timeout: float = 120, max_output: int = 20_000,
                env: dict[str, str] | None = None, wrapper: list[str] = (), runs: Path | None = None,
                keep_runs: int = DEFAULT_KEEP) -> CommandResult:
    """Run `bash -c command`, behind `wrapper` (a sandbox argv prefix) if given; `env`, when
    given, replaces the environment (as in subprocess). With `runs`, the run is recorded there."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        began = time.monotonic()
        try:
            proc = subprocess.Popen([*wrapper, "bash", "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, start_new_session=True)
        except OSError as e:
            raise ToolError(f"could not start bash in {cwd}: {e.strerror}") from None
        try:
            stopped = wait_for_exit(proc, (out, err), timeout)
        finally:
            kill_group(proc.pid)
            code = proc.wait()
        duration_ms = int((time.monotonic() - began) * 1000)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(MAX_OUTPUT_BYTES), err.read(MAX_OUTPUT_BYTES)
    run_id = None
    if runs is not None:
        run_id = record(runs, Finished(command, code, stopped == "timeout", stopped is not None, duration_ms,
                                       stdout, stderr), keep_runs)
    text = model_text(stdout.decode("utf-8", errors="replace"), stderr.decode("utf-8", errors="replace"))
    return CommandResult(code, _cap(text, max_output), stopped, run_id)


def bash_text(result: CommandResult, timeout: float) -> str:
    """The output, then "[exit code N]" (or why the command was stopped): text for a model."""
    if result.stopped == "timeout":
        footer = f"[timed out after {timeout:g} s; the command and every process it started were killed]"
    elif result.stopped == "too much output":
        footer = f"[stopped: output passed {MAX_OUTPUT_BYTES} bytes; the command and its processes were killed]"
    else:
        footer = f"[exit code {result.exit_code}]"
    text = result.output
    return text + ("" if not text or text.endswith("\n") else "\n") + footer


def run_bash(command: str, cwd: Path, timeout: float = 120, max_output: int = 20_000,
             env: dict[str, str] | None = None, wrapper: list[str] = ()) -> str:
    """`run_command` as text for a model (`bash_text`), with no artifact."""
    return bash_text(run_command(command, cwd, timeout, max_output, env, wrapper), timeout)


def wait_for_exit(proc: subprocess.Popen, outputs, timeout: float) -> str | None:
    """Block until the process exits, leaving it unreaped so its pid (= the group id) is not reused.

    Returns None on a normal exit, else why the command must be stopped.
    """
    fd = os.pidfd_open(proc.pid)
    try:
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            if select.select([fd], [], [], min(remaining, SIZE_CHECK_SECONDS))[0]:
                return None
            if sum(os.fstat(f.fileno()).st_size for f in outputs) > MAX_OUTPUT_BYTES:
                return "too much output"
        return "timeout"
    finally:
        os.close(fd)


def _cap(text: str, max_output: int) -> str:
    if len(text) <= max_output:
        return text
    half = max_output // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters cut ...]\n{text[len(text) - half:]}"
