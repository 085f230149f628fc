"""Run the model's tool calls against the worktree and turn every outcome into text.

Nothing a model sends can crash the loop: malformed JSON, unknown tools, bad arguments
and refused paths all come back as an `error: ...` tool result the model can act on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import orjson

from tilth.agents.backends.chat import ToolCall
from tilth.agents.hooks import Hooks
from tilth.agents.tools.fs import Workspace
from tilth.agents.confinement import Confinement
from tilth.agents.tools.shell import bash_text, run_command
from tilth.core.errors import ToolError
from tilth.store.events import EventLog, document
from tilth.store.kb import KnowledgeBase
from tilth.store.redaction import redact_text
from tilth.store.script_runs import DEFAULT_KEEP

document({"tool_call": ("the agent called a tool; data: role, name, ok, args (truncated), result_chars, result (its "
                        "first RESULT_CHARS), thought (the model's text with the call, cut short; first call of a "
                        "reply only), run_id (a bash call's script artifact, `runs/run-<run_id>/`, when one was "
                        "written), exit_code and stopped (a bash call that ran: its exit code, and why it was "
                        "stopped: timeout, too much output, else null)",
                        "role name ok args result_chars result thought run_id exit_code stopped")})
RESULT_CHARS = 2000

def parse_arguments(call: ToolCall) -> dict[str, Any]:
    try:
        args = orjson.loads(call.arguments or "{}")
    except orjson.JSONDecodeError as exc:
        raise ToolError(f"the arguments of {call.name} were not valid JSON ({exc}); send a JSON object") from None
    if not isinstance(args, dict):
        raise ToolError(f"the arguments of {call.name} must be a JSON object")
    return args


class Toolbox:
    def __init__(self, root: Path, role: str, events: EventLog, tool_timeout: float, read_only: bool,
                 notes: KnowledgeBase | None = None, *, sandbox: Confinement, hooks: Hooks | None = None,
                 runs: Path | None = None, keep_runs: int = DEFAULT_KEEP):
        """`runs`: the session's `runs/` dir, where each bash call leaves its script artifact
        (None without a session: no artifact)."""
        self.sandbox = sandbox
        self.workspace = Workspace(root, read_only=read_only, git_dir=self.sandbox.git_dir)
        self.root, self.role, self.events, self.tool_timeout = root, role, events, tool_timeout
        self.hooks, self.runs, self.keep_runs = hooks, runs, keep_runs
        self.last_run_id: str | None = None
        self.last_exit: tuple[int | None, str | None] | None = None
        self.handlers: dict[str, Callable[..., str]] = {
            "read_file": self.workspace.read_file,
            "list_files": self.workspace.list_files,
            "grep": self.workspace.grep,
        }
        if not read_only:
            self.handlers.update(write_file=self.workspace.write_file, edit_file=self.workspace.edit_file,
                                 bash=self.bash)
        if notes is not None:
            self.handlers.update(note_write=notes.write, note_read=notes.read)

    def bash(self, command: str, timeout: float | None = None) -> str:
        limit = min(float(timeout), self.tool_timeout) if timeout else self.tool_timeout
        result = run_command(command, self.root, timeout=limit, env=self.sandbox.env, wrapper=self.sandbox.wrapper,
                             runs=self.runs, keep_runs=self.keep_runs, max_processes=self.sandbox.max_processes)
        self.last_run_id = result.run_id
        self.last_exit = (result.exit_code, result.stopped)
        return bash_text(result, limit)

    def run(self, call: ToolCall, task_id: str | None, iteration: int, thought: str | None = None) -> str:
        ok, self.last_run_id, self.last_exit = False, None, None
        try:
            handler = self.handlers.get(call.name)
            if handler is None:
                raise ToolError(f"there is no tool named {call.name!r}; available: {', '.join(self.handlers)}")
            args = parse_arguments(call)
            verdict = self.hooks.run("pre_tool", task_id, iteration, tool=call.name, args=args) if self.hooks else None
            if verdict and verdict.message:
                raise ToolError(verdict.message)
            result = handler(**args)
            ok = True
        except ToolError as exc:
            result = f"error: {exc}"
        except TypeError as exc:
            result = f"error: bad arguments for {call.name}: {exc}"
        result = redact_text(result)  # what a tool read or printed reaches the model and the journal only redacted
        self.events.emit("tool_call", task_id, iteration, role=self.role, name=call.name, ok=ok,
                         args=call.arguments[:500], result_chars=len(result), result=result[:RESULT_CHARS],
                         thought=thought[:RESULT_CHARS] if thought else None,
                         **({"run_id": self.last_run_id} if self.last_run_id else {}),
                         **({"exit_code": self.last_exit[0], "stopped": self.last_exit[1]} if self.last_exit else {}))
        return result
