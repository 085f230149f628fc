"""Reads Gemini CLI 0.61.0's `gemini -o stream-json` stdout (JSONL) and its usage.

Verified against the real binary run on tests/fake_gemini.py (the Gemini API through
`GOOGLE_GEMINI_BASE_URL`, `GEMINI_API_KEY`):

- stdout: `init` (session_id, model), the user's `message`, the assistant's text as `message`
  events with `delta: true` (joined here into one message), `tool_use` (tool_name, tool_id,
  parameters), `tool_result` (tool_id, status, output or error), and a last `result`: `status`
  success or error (`error.message`), `stats` {input_tokens (cached included), output_tokens (no
  thoughts), cached, total_tokens (thoughts included), models: the same per model}. No cost.
- Tokens while it runs: none on stdout before `result`. Its chat record
  (`$GEMINI_CLI_HOME/.gemini/tmp/<project>/chats/session-<time>-<id[:8]>.jsonl`) gets one `gemini`
  record per model call as the call ends (`tokens` {input, output, cached, thoughts}; a record is
  written again, same id, when its tool calls finish); it is read at every stdout line and, with a
  cap to keep, every `bounds.TICK_S` (`report()`), so a call's usage counts as its record is written. Calls outside the chat (a
  summary, a loop check) count only in `result`.
- Limits: a 429 that outlived its retries (`general.maxAttempts`), or one that says the daily quota
  is gone, ends with a `result` of status error and the process exits with 429 & 0xff = 173; its
  message may say "Suggested retry after 60s." (then the reset is that far off).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tilth.agents.backends.agent_stream import AgentReport, Limit, Step, cut
from tilth.agents.backends.jsonl_tail import JsonlTail
from tilth.core.clock import utc_now

RATE_LIMITED_EXIT = 429 & 0xFF
"""Gemini CLI exits with the HTTP status of the error that ended it; the shell sees it modulo 256."""
_RETRY_AFTER = re.compile(r"retry (?:after|in) (\d+(?:\.\d+)?)\s*(ms|s)\b", re.IGNORECASE)


class GeminiStream:
    def __init__(self, chats: Path | None = None) -> None:
        """`chats`: its `.gemini/tmp` directory, where the chat record of the run appears."""
        self._report = AgentReport()
        self._chats = chats
        self._record = JsonlTail()
        self._calls: dict[str, dict[str, int]] = {}
        """Each model call's tokens from the chat record, by message id (the latest record wins)."""
        self._result: dict[str, Any] | None = None
        self._text: list[str] = []
        self._tool_names: dict[str, str] = {}

    def feed(self, event: dict[str, Any]) -> list[Step]:
        self._report.events += 1
        self._read_record()
        kind = event.get("type")
        if kind == "message" and event.get("role") == "assistant":
            self._text.append(str(event.get("content") or ""))
            return []
        steps = self._end_message()
        if kind == "init":
            self._report.session_id = event.get("session_id") or self._report.session_id
            self._report.model = event.get("model") or self._report.model
            steps.append(Step("init", cut(f"model {self._report.model} session {self._report.session_id}")))
        elif kind == "tool_use":
            name = str(event.get("tool_name") or "")
            self._tool_names[str(event.get("tool_id"))] = name
            steps.append(Step("tool_use", cut(json.dumps(event.get("parameters"), ensure_ascii=False)), name))
        elif kind == "tool_result":
            said = event.get("output") if event.get("status") == "success" else \
                f"error: {(event.get('error') or {}).get('message') if isinstance(event.get('error'), dict) else ''}"
            steps.append(Step("tool_result", cut(said or event.get("status") or ""),
                              self._tool_names.get(str(event.get("tool_id")))))
        elif kind == "error":
            steps.append(Step("error", cut(event.get("message") or "")))
        elif kind == "result":
            self._result = event
        return steps

    def report(self) -> AgentReport:
        """Asked while it runs too (the caps): a message still streaming is read, not ended."""
        self._read_record()
        report = self._report
        if (streaming := "".join(self._text)).strip():
            report.final_text = streaming
        stats = (self._result or {}).get("stats")
        if isinstance(stats, dict) and self._result is not None:
            report.prompt_tokens = _count(stats.get("input_tokens"))
            report.cached_tokens = _count(stats.get("cached"))
            # thoughts are billed as output: total_tokens holds them, output_tokens does not
            report.completion_tokens = max(_count(stats.get("output_tokens")),
                                           _count(stats.get("total_tokens")) - report.prompt_tokens)
        elif self._calls:
            calls = self._calls.values()
            report.prompt_tokens = sum(c["input"] for c in calls)
            report.cached_tokens = sum(c["cached"] for c in calls)
            report.completion_tokens = sum(c["output"] + c["thoughts"] for c in calls)
            report.turns = len(self._calls)
        if self._result is not None and self._result.get("status") == "error":
            error = self._result.get("error")
            report.is_error = True
            report.error = " ".join(str((error or {}).get("message") if isinstance(error, dict) else error).split())
        return report

    def finish(self, stdout: str, stderr: str, exit_code: int) -> AgentReport:
        """The report at the end: an exit with a 429's status is a usage or rate limit."""
        report = self.report()
        if exit_code == RATE_LIMITED_EXIT and (self._result is None or report.is_error):
            report.is_error = True
            report.error = report.error or "rate limited (HTTP 429)"
            report.limit = Limit(report.error, _reset_of(report.error))
        return report

    def _end_message(self) -> list[Step]:
        text, self._text = "".join(self._text), []
        if not text.strip():
            return []
        self._report.final_text = text
        return [Step("message", cut(text))]

    def _read_record(self) -> None:
        if self._record.path is None:
            session = self._report.session_id
            if self._chats is None or not session:
                return
            found = sorted(self._chats.glob(f"*/chats/session-*-{session[:8]}.jsonl"))
            if not found:
                return
            self._record.path = found[0]
        for line in self._record.new():
            tokens = line.get("tokens")
            if line.get("type") == "gemini" and isinstance(tokens, dict):
                self._calls[str(line.get("id"))] = {key: _count(tokens.get(key))
                                                    for key in ("input", "output", "cached", "thoughts")}


def _reset_of(message: str) -> datetime | None:
    found = _RETRY_AFTER.search(message)
    if found is None:
        return None
    seconds = float(found.group(1)) / (1000 if found.group(2).lower() == "ms" else 1)
    return utc_now() + timedelta(seconds=seconds)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
