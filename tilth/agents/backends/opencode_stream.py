"""Reads OpenCode 1.18.33's `opencode run --format json` stdout (JSONL).

Verified against the real binary run on tests/fake_openai.py (tests/test_cli_agents_chat.py):

- Each event has `type`, `sessionID` and a `part`: `step_start`, `text` (a whole text part), `tool_use`
  (a finished tool call: `tool`, `state.input`, `state.output`, `state.status`), `step_finish` (one per
  model call). There is no final total.
- `step_finish.part.tokens`: `input` EXCLUDES the cached tokens (the stub's 1000 prompt tokens with
  200 cached came out as input 800, cache.read 200), `cache.write` apart, `output` excludes
  `reasoning`; so a call's prompt is input + cache.read + cache.write and its completion output +
  reasoning. `cost` is 0 unless the provider config prices the model, which tilth's does not: the
  model is priced by name.
- A failed call that outlived its retries (5, fixed) is an `error` event (`error.name` "APIError",
  `error.data.statusCode`, `error.data.message`) and exit 1; a 429 there is a usage limit.
"""

from __future__ import annotations

import json
from typing import Any

from tilth.agents.backends.agent_stream import AgentReport, Limit, Step, cut
from tilth.agents.backends.qwen_stream import reset_in


class OpenCodeStream:
    def __init__(self) -> None:
        self._report = AgentReport()
        self._steps = 0

    def feed(self, event: dict[str, Any]) -> list[Step]:
        report = self._report
        report.events += 1
        kind = event.get("type")
        part = _object(event.get("part"))
        first = report.session_id is None and isinstance(event.get("sessionID"), str)
        if first:
            report.session_id = event["sessionID"]
        steps = [Step("init", cut(f"session {report.session_id}"))] if first else []
        if kind == "text" and str(part.get("text", "")).strip():
            report.final_text = str(part["text"])
            steps.append(Step("message", cut(part["text"])))
        elif kind == "tool_use":
            steps += _tool(part)
        elif kind == "step_finish":
            self._add_usage(part.get("tokens"))
        elif kind == "error":
            steps.append(self._error(event.get("error")))
        return steps

    def report(self) -> AgentReport:
        self._report.turns = self._steps or None
        return self._report

    def _add_usage(self, tokens: object) -> None:
        if not isinstance(tokens, dict):
            return
        report = self._report
        cache = _object(tokens.get("cache"))
        read, written = _count(cache, "read"), _count(cache, "write")
        report.prompt_tokens = (report.prompt_tokens or 0) + _count(tokens, "input") + read + written
        report.cached_tokens = (report.cached_tokens or 0) + read
        report.cache_write_tokens = (report.cache_write_tokens or 0) + written
        report.completion_tokens = (report.completion_tokens or 0) + _count(tokens, "output") + \
            _count(tokens, "reasoning")
        self._steps += 1

    def _error(self, error: object) -> Step:
        said_error, data = _object(error), _object(_object(error).get("data"))
        status = data.get("statusCode")
        message = " ".join(str(data.get("message") or said_error.get("name") or "error").split())
        said = f"{status} {message}" if isinstance(status, int) else message
        report = self._report
        report.is_error, report.error, report.final_text = True, f"{said_error.get('name') or 'error'}: {said}", None
        if status == 429:
            report.limit = Limit(said, reset_in(message))
        return Step("error", cut(report.error))


def _tool(part: dict[str, Any]) -> list[Step]:
    state = _object(part.get("state"))
    name = part.get("tool") if isinstance(part.get("tool"), str) else None
    steps = [Step("tool_use", cut(json.dumps(state.get("input"), ensure_ascii=False)), name)]
    if "output" in state or state.get("status") == "error":
        output = state.get("output") if state.get("status") != "error" else f"error: {state.get('error')}"
        steps.append(Step("tool_result", cut(output), name))
    return steps


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(tokens: dict[str, Any], key: str) -> int:
    value = tokens.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
