"""Reads Qwen Code 0.24.4's `qwen --output-format stream-json` stdout (JSONL), Claude Code's shape.

Verified against the real binary run on tests/fake_openai.py (tests/test_cli_agents_chat.py):

- `system/init` gives session_id and model; `system/retry` one line per rate-limit retry.
- `assistant` events carry a message id, its content blocks and that message's usage: `input_tokens`
  is the endpoint's whole `prompt_tokens` (cached ones included, unlike Claude Code's),
  `cache_read_input_tokens` the cached ones of it, `output_tokens` the completion. Each message id is
  counted once (its usage is the largest seen for it), so the usage so far is known while it runs;
  the `result` sums the run. No cost is reported: the model is priced by name.
- A failed API call ends as an assistant text and a `result` (`error_during_execution`, exit 1; a
  success with that text and exit 0 was also seen) whose text is `[API Error: <status> ...]`; a 429
  that outlived the retries reads `[API Error: 429 ...`, a provider quota with a reset time
  `Quota exhausted: ... reset at <time>` (Qwen Code fails those fast). Both are usage limits.
- `--max-session-turns` reached exits 53.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any

from tilth.agents.backends.agent_stream import AgentReport, Limit, Step, cut, flatten, one_line

RATE_LIMITED = re.compile(r"^\[API Error: 429\b")
QUOTA_EXHAUSTED = re.compile(r"^Quota exhausted:", re.IGNORECASE)
API_ERROR = re.compile(r"^\[API Error:")
RESET_AT = re.compile(r"\breset(?:s)? at (\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)", re.I)
TURN_CAP_EXIT = 53
_USAGE_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")


class QwenStream:
    def __init__(self) -> None:
        self._report = AgentReport()
        self._last_text: str | None = None
        self._result: dict[str, Any] | None = None
        self._turns: dict[str, dict[str, int]] = {}
        """The usage of each assistant message, by message id."""
        self._tool_names: dict[str, str] = {}

    def feed(self, event: dict[str, Any]) -> list[Step]:
        self._report.events += 1
        kind = event.get("type")
        if kind == "system":
            return self._system(event)
        if kind == "assistant":
            return self._assistant(event.get("message") or {})
        if kind == "user":
            return self._tool_results(event.get("message") or {})
        if kind == "result":
            self._result = event
            self._report.session_id = event.get("session_id") or self._report.session_id
        return []

    def report(self) -> AgentReport:
        report = self._report
        turns = self._turns.values()
        usage = (self._result or {}).get("usage")
        if not isinstance(usage, dict) or (not any(_count(usage, k) for k in _USAGE_KEYS) and self._turns):
            usage = {key: sum(_count(u, key) for u in turns) for key in _USAGE_KEYS} if self._turns else None
        if usage is not None:
            report.prompt_tokens = _count(usage, "input_tokens")
            report.cached_tokens = _count(usage, "cache_read_input_tokens")
            report.cache_write_tokens = _count(usage, "cache_creation_input_tokens")
            report.completion_tokens = _count(usage, "output_tokens")
        report.turns = len(self._turns) or None
        result = self._result
        said = self._last_text
        if result is not None:
            report.turns = result.get("num_turns") or report.turns
            error = result.get("error")
            said = (error.get("message") if isinstance(error, dict) else None) or result.get("result") or said
        failed = said is not None and (API_ERROR.match(said) or QUOTA_EXHAUSTED.match(said))
        report.is_error = bool(failed) or bool(result is not None and result.get("is_error"))
        if report.is_error:
            report.error = one_line(said or (result or {}).get("subtype") or "error")
            report.limit = limit_of(said or "")
            report.final_text = None
        else:
            report.final_text = said
        return report

    def _system(self, event: dict[str, Any]) -> list[Step]:
        if event.get("subtype") == "init":
            self._report.session_id = event.get("session_id") or self._report.session_id
            self._report.model = event.get("model") or self._report.model
            return [Step("init", cut(f"model {self._report.model} session {self._report.session_id}"))]
        if event.get("subtype") == "retry":
            data = event.get("data") or {}
            return [Step("retry", cut(f"attempt {data.get('attempt')}/{data.get('maxRetries')} "
                                      f"in {data.get('delayMs')} ms"))]
        return []

    def _assistant(self, message: dict[str, Any]) -> list[Step]:
        if isinstance(message.get("id"), str) and isinstance(message.get("usage"), dict):
            seen = self._turns.get(message["id"], {})
            self._turns[message["id"]] = {k: max(_count(seen, k), _count(message["usage"], k)) for k in _USAGE_KEYS}
        if isinstance(message.get("model"), str):
            self._report.model = message["model"]
        steps = []
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                self._last_text = str(block["text"])
                kind = "error" if API_ERROR.match(self._last_text) or QUOTA_EXHAUSTED.match(self._last_text) else "message"
                steps.append(Step(kind, cut(self._last_text)))
            elif block.get("type") == "tool_use":
                self._tool_names[str(block.get("id", ""))] = str(block.get("name", ""))
                steps.append(Step("tool_use", cut(json.dumps(block.get("input"), ensure_ascii=False)), block.get("name")))
        return steps

    def _tool_results(self, message: dict[str, Any]) -> list[Step]:
        content = message.get("content")
        steps = []
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = flatten(block.get("content"))
                steps.append(Step("tool_result", cut(f"error: {text}" if block.get("is_error") else text),
                                  self._tool_names.get(str(block.get("tool_use_id", "")))))
        return steps


def limit_of(message: str) -> Limit | None:
    """A 429 that outlived the retries, or a provider's quota (with its reset time when it gives one)."""
    if RATE_LIMITED.match(message) or QUOTA_EXHAUSTED.match(message):
        return Limit(one_line(message), reset_in(message))
    return None


def reset_in(message: str) -> datetime | None:
    """`... reset at 2026-11-29T00:00:00Z` in a provider's message, as UTC."""
    found = RESET_AT.search(message)
    if not found:
        return None
    try:
        moment = datetime.fromisoformat(found.group(1).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)


def _count(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


