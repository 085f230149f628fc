"""run_bash: one shell command in the worktree, bounded in time, output and processes.

The command runs as `bash -c` in its own session (so its own process group) with stdin from
/dev/null. Its stdout and its stderr are pipes tilth reads as the bytes arrive
(`agents/bounds.Output`): the moment the two together pass MAX_OUTPUT_BYTES the command is
stopped as `too much output`, and no more than that is kept. Only bash itself is waited for;
once it exits, what is already in the pipes is taken without waiting for end of file, so a
background child holding the output open cannot stall the call. The model sees stdout, then the
stderr (if any) under a `[stderr]` line; with `runs` given (a session's `runs/` dir) both are also
kept whole as a script artifact (`store/script_runs.py`). The command may have at most
`max_processes` processes at once (`agents/bounds.ProcessLimit`): a fork bomb fails its forks.

When bash exits, or the timeout fires, the whole process group is sent SIGKILL: nothing the
command started outlives the tool call, background jobs included. A process that leaves
the group on purpose (setsid, double fork into a new session) is not tracked, unless the
command ran in a pids cgroup, whose every process is killed too.

Linux only: bash is awaited through a pidfd and reaped only after the group is killed, so
its pid (the group id) cannot be reused by an unrelated group in between.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Sequence

from tilth.agents.bounds import DEFAULT_MAX_PROCESSES, MAX_OUTPUT_BYTES, Output, ProcessLimit, Sink, Tick, collected
from tilth.agents.hidden_paths import hidden_paths, hint
from tilth.core.errors import ToolError
from tilth.core.processes import kill_group
from tilth.store.script_runs import DEFAULT_KEEP, Finished, record

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
    hidden: tuple[str, ...] = ()
    """Paths the output says are missing that the sandbox hides (`agents/hidden_paths.py`)."""

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
                env: dict[str, str] | None = None, wrapper: Sequence[str] = (), runs: Path | None = None,
                keep_runs: int = DEFAULT_KEEP, max_processes: int | None = DEFAULT_MAX_PROCESSES) -> CommandResult:
    """Run `bash -c command`, behind `wrapper` (a sandbox argv prefix) if given; `env`, when
    given, replaces the environment (as in subprocess). With `runs`, the run is recorded there."""
    (stdout, to_stdout), (stderr, to_stderr) = collected(), collected()
    began = time.monotonic()
    try:
        code, stopped = run_bounded([*wrapper, "bash", "-c", command], cwd, env, subprocess.DEVNULL,
                                    (to_stdout, to_stderr), timeout, max_processes)
    except OSError as e:
        raise ToolError(f"could not start bash in {cwd}: {e.strerror}") from None
    duration_ms = int((time.monotonic() - began) * 1000)
    out, err = bytes(stdout), bytes(stderr)
    run_id = None
    if runs is not None:
        run_id = record(runs, Finished(command, code, stopped == "timeout", stopped is not None, duration_ms,
                                       out, err), keep_runs)
    text = model_text(out.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace"))
    hidden = hidden_paths(text, code, (env or {}).get("PATH")) if wrapper and code != 0 else []
    if hidden:
        text = _cap(text, max_output - 400) + "\n" + hint(hidden)
    return CommandResult(code, _cap(text, max_output), stopped, run_id, tuple(hidden))


def run_bounded(argv: list[str], cwd: Path, env: dict[str, str] | None, stdin: int | BinaryIO,
                sinks: tuple[Sink, Sink], timeout: float,
                max_processes: int | None, tick: Tick | None = None) -> tuple[int, str | None]:
    """Run `argv` in a session of its own, its stdout and stderr handed to `sinks` and cut at the
    output cap as they arrive, at most `max_processes` processes at once; when it exits or is stopped
    its whole group is killed. (exit code, None or why it was stopped: "timeout", "too much output",
    or the reason a sink or `tick` gave)."""
    output = Output(sinks)
    limit = ProcessLimit(max_processes)
    try:
        try:
            proc = subprocess.Popen([*limit.prefix, *argv], cwd=cwd, env=env, stdin=stdin,
                                    stdout=output.child_ends[0], stderr=output.child_ends[1],
                                    start_new_session=True, preexec_fn=limit.preexec)
        finally:
            output.started()
        try:
            stopped = output.wait(proc.pid, timeout, tick)
        finally:
            kill_group(proc.pid)
            limit.end()
            code = proc.wait()
        if stopped != "too much output" and not output.drain():
            stopped = "too much output"
    finally:
        limit.end()
        output.close()
    return code, stopped


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
             env: dict[str, str] | None = None, wrapper: Sequence[str] = ()) -> str:
    """`run_command` as text for a model (`bash_text`), with no artifact."""
    return bash_text(run_command(command, cwd, timeout, max_output, env, wrapper), timeout)




def _cap(text: str, max_output: int) -> str:
    if len(text) <= max_output:
        return text
    half = max_output // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters cut ...]\n{text[len(text) - half:]}"
