"""The runner's transcript: journal events, as they are written, become transcript.md blocks.

A step is the agent's words (`thought`), what it did (`action`) and what came back
(`execution_result`): one `tool_call` of tilth's own loop, one scripted step, the checks, the
verify commands, or a CLI agent's message, tool use and tool result gathered from its `agent_step` events. The
case and the verdict come from the ledger entry the `verdict` event announces; the final block
from `session_end` and the report that follows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import orjson

from tilth.store.ledger import read_entries
from tilth.store.transcript import Transcript

ACTIONS = ("tool_use", "command", "file_change")


class Recorder:
    def __init__(self, transcript: Transcript, ledger_dir: Path, title_of: Callable[[str], str]):
        self.transcript, self.ledger_dir, self.title_of = transcript, ledger_dir, title_of
        self.attempt: tuple[str, int] | None = None
        self.steps = 0
        self.pending: dict[str, Any] | None = None
        self.ending: tuple[str, str] | None = None

    def __call__(self, event: dict[str, Any]) -> None:
        kind, data, at = event["type"], event["data"], event["ts"]
        task, iteration = event.get("task"), event.get("iter")
        if kind == "agent_step":
            self._agent(data, at)
            return
        self._flush()
        if kind == "prompt_assembled" and data.get("role") == "worker" and task and iteration:
            self.attempt, self.steps = (task, iteration), 0
            self.transcript.attempt(task, self.title_of(task), iteration)
        elif kind == "tool_call":
            self._step(at, data.get("thought"), {"tool": data.get("name"), "arguments": _parsed(data.get("args"))},
                       data.get("result"))
        elif kind == "scripted_step":
            action = {key: data.get(key) for key in ("written", "deleted", "commands") if data.get(key)}
            codes = data.get("exit_codes") or []
            self._step(at, "(scripted backend: no model)", action or "(no change)",
                       f"exit codes {codes}" if codes else None)
        elif kind == "checks_run":
            results = data.get("results") or []
            self._step(at, None, {"checks": [r.get("command") for r in results]},
                       "\n".join(f"{r.get('command')}: exit {r.get('exit_code')}" for r in results))
        elif kind == "verifies_run":
            results = data.get("results") or []
            self._step(at, None, {"verify": [r.get("command") for r in results]},
                       "\n".join(f"{r.get('criterion')}: `{r.get('command')}` exit {r.get('exit_code')}"
                                 for r in results))
        elif kind == "verdict" and task:
            entries = read_entries(self.ledger_dir, task)
            if entries:
                self.transcript.case(entries[-1].case)
                self.transcript.verdict(entries[-1].verdict)
        elif kind == "task_done":
            self.transcript.outcome(f"done: commit {data.get('sha')}")
        elif kind == "task_failed":
            self.transcript.outcome(f"FAILED placeholder {data.get('sha')}: {data.get('reason')}")
        elif kind == "task_parked":
            self.transcript.outcome(f"PARKED placeholder {data.get('sha')}: waits for a person's answer to "
                                    f"{data.get('question')!r} (`tilth answer`)")
        elif kind == "task_answered":
            self.transcript.outcome(f"answered: {task} is pending again")
        elif kind == "session_end":
            self.ending = (str(data.get("state")), at)
        elif kind == "session_report" and self.ending:
            self.transcript.final(self.ending[0], self.ending[1], str(data.get("text") or ""))
            self.ending = None

    def _step(self, at: str, thought: str | None, action: object, result: str | None) -> None:
        self.steps += 1
        self.transcript.step(self.steps, at, thought, action, result)

    def _agent(self, data: dict[str, Any], at: str) -> None:
        """A CLI agent's message, action and result arrive as separate steps: gathered into one."""
        kind, text, name = data.get("kind"), data.get("text") or "", data.get("name")
        pending = self.pending
        if kind in ACTIONS and pending and pending.get("name") == name and pending.get("action"):
            pending["action"] = {kind: text}  # the same command again, now finished
            return
        if kind == "message" or kind in ACTIONS:
            if pending and (pending.get("action") or (kind == "message" and pending.get("thought"))):
                self._flush()
            pending = self.pending = self.pending or {"at": at}
            if kind == "message":
                pending["thought"] = text
            else:
                pending.update(action={kind: name, "input": text} if kind == "tool_use" else {kind: text}, name=name)
        elif kind == "tool_result" and pending:
            pending["result"] = text
            self._flush()
        else:
            self._flush()
            self._step(at, None, {kind: text}, None)

    def _flush(self) -> None:
        if self.pending is not None:
            pending, self.pending = self.pending, None
            self._step(pending["at"], pending.get("thought"), pending.get("action") or "(a message, no action)",
                       pending.get("result"))


def _parsed(args: str | None) -> object:
    try:
        return orjson.loads(args or "{}")
    except orjson.JSONDecodeError:
        return args
