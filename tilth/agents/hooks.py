"""Hooks: executables run at `pre_tool`, `post_task` and `session_end`.

Found only in `$TILTH_HOME/hooks/`: the user's own configuration (the examples in tilth's top-level
`hooks/` are installed there by copying). Never from the repository or the session branch: a
`.tilth/hooks/` the worker writes would otherwise become a program tilth runs on the host once the
branch is merged. A hook runs on the host, unconfined, with the user's environment minus tilth's
settings and model keys; a git it runs on the worktree is pointed at the recorded git dir with
every program-running setting off (`git/worktree_git.env`). Before them every
tool call passes tilth's built-in policy (`agents/policy.py`, in-process: it blocks
destructive commands and agent commits/pushes), which is a `hook_run` event only when it
blocks. A hook for a point is an executable file
named `<point>` or `<point>.<anything>`. It gets one JSON object on stdin (`point`,
`session`, `task`, `iteration`, and `tool`/`args` for pre_tool, `outcome`/`commit` for
post_task, `state` for session_end) and its working directory is the worktree.

Contract: exit 0 is success and silent to the agent; exit 2 blocks (pre_tool only: the
tool call does not run and the hook's output is the tool result the model reads); any
other exit is a failure, shown to the agent for pre_tool and recorded otherwise. Every
invocation is a `hook_run` event either way.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tilth.agents.policy import NAME, refusal
from tilth.git import worktree_git
from tilth.store.events import EventLog, document

document({"hook_run": ("a hook ran; data: point, hook, exit_code, outcome (ok|blocked|failed), output, duration_ms",
                       "point hook exit_code outcome output duration_ms")})

POINTS = ("pre_tool", "post_task", "session_end")
TIMEOUT = 30
BLOCK = 2
OUTPUT_READ = 64 * 1024
"""Of each of a hook's stdout and stderr, at most this much is read back (the event keeps 2,000 characters)."""


@dataclass(frozen=True)
class HookVerdict:
    blocked: bool
    message: str
    """What the agent is told; empty when every hook succeeded."""


HIDDEN_FROM_HOOKS = ("TILTH_", "OPENAI_", "OPENROUTER_", "ANTHROPIC_")


def hook_dirs(home: Path) -> list[Path]:
    return [home / "hooks"]


def hook_env(git_dir: Path | None, worktree: Path) -> dict[str, str]:
    """The user's environment without tilth's settings and model keys, its git made safe."""
    mine = {k: v for k, v in os.environ.items() if not k.startswith(HIDDEN_FROM_HOOKS)}
    return worktree_git.env(git_dir, worktree, mine)


def find_hooks(dirs: list[Path], point: str) -> list[Path]:
    found = []
    for directory in dirs:
        if directory.is_dir():
            found += sorted(p for p in directory.iterdir()
                            if (p.name == point or p.name.startswith(point + ".")) and p.is_file()
                            and os.access(p, os.X_OK))
    return found


class Hooks:
    def __init__(self, dirs: list[Path], worktree: Path, events: EventLog, session_id: str,
                 git_dir: Path | None = None):
        self.dirs, self.worktree, self.events, self.session_id = dirs, worktree, events, session_id
        self.git_dir = git_dir

    def run(self, point: str, task_id: str | None, iteration: int | None, **payload: Any) -> HookVerdict:
        messages, blocked = [], False
        if point == "pre_tool" and (why := refusal(payload.get("tool", ""), payload.get("args") or {})):
            output = f"blocked: {why}."
            self.events.emit("hook_run", task_id, iteration, point=point, hook=NAME, exit_code=BLOCK,
                             outcome="blocked", output=output, duration_ms=0)
            messages, blocked = [output], True
        body = orjson.dumps({"point": point, "session": self.session_id, "task": task_id, "iteration": iteration,
                             **payload})
        for hook in find_hooks(self.dirs, point):
            started = time.monotonic()
            code, output = run_hook(hook, body, self.worktree, hook_env(self.git_dir, self.worktree))
            outcome = "ok" if code == 0 else "blocked" if code == BLOCK and point == "pre_tool" else "failed"
            self.events.emit("hook_run", task_id, iteration, point=point, hook=str(hook), exit_code=code,
                             outcome=outcome, output=output[:2000],
                             duration_ms=int((time.monotonic() - started) * 1000))
            if outcome == "blocked":
                blocked = True
                messages.append(output or f"blocked by the {hook.name} hook")
            elif outcome == "failed":
                messages.append(f"the {hook.name} hook failed (exit {code}): {output[:500]}")
        return HookVerdict(blocked, "\n".join(messages))


def run_hook(hook: Path, body: bytes, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """One hook run: its exit code (-1 when it timed out or could not start) and its output. It runs in
    a process group of its own with its output in files, not pipes: it has ended when it exits, even if
    something it started in the background still holds its output, and at its end (or at `TIMEOUT`)
    whatever is left of its group is killed."""
    with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        given.write(body)
        given.seek(0)
        try:
            process = subprocess.Popen([str(hook)], stdin=given, stdout=out, stderr=err, cwd=cwd, env=env,
                                       start_new_session=True)
        except OSError as exc:
            return -1, f"hook could not run: {exc.strerror}"
        try:
            exited = ended_within(process.pid, TIMEOUT)
        finally:  # the leader is not reaped yet, so its group id cannot have been reused
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
        if not exited:
            return -1, f"hook timed out after {TIMEOUT}s"
        parts = []
        for stream in (out, err):
            stream.seek(0)
            parts.append(stream.read(OUTPUT_READ))
        return code, b"".join(parts).decode(errors="replace").strip()


def ended_within(pid: int, seconds: float) -> bool:
    """Whether the child `pid` exits within `seconds`, waited on through a pidfd: it is left unreaped."""
    fd = os.pidfd_open(pid)
    try:
        return bool(select.select([fd], [], [], seconds)[0])
    finally:
        os.close(fd)
