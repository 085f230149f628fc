"""Reads Claude Code 2.1.330's `claude -p --output-format stream-json --verbose` stdout (JSONL).

Verified against the real binary run on the stubs in tests/fake_anthropic.py (docs/cli-agents.md §1
and §5; the captured streams are tests/streams/claude-*.jsonl):

- `system/init` gives session_id and model; `system/api_retry` one line per retry.
- `assistant` events carry one content block each (text and tool_use of one reply arrive as separate
  events) and only the message_start usage, repeated per block, so tokens are taken from
  `result.usage`, which is summed over the run. Until that result arrives (and for a run killed
  before it) the usage is the streamed turns', each message id counted once: input and cache
  tokens exact, output tokens a lower bound.
- A failed API call ends with a synthetic `assistant` event (`is_api_error_message`, model
  "<synthetic>") and a `result` whose `subtype` is still "success": `is_error` tells.
- Limits: every 429 ends with `api_error_status: 429` on the result. An account usage limit (seen
  with a subscription token, CLAUDE_CODE_OAUTH_TOKEN) adds `api_error: "usage_limit_reached"` and,
  before it, a `rate_limit_event` with status "rejected" and `resetsAt` (unix seconds); with an API
  key it is a bare 429 with no reset time. 500 and 529 are plain errors.
"""

from __future__ import annotations

import json

from datetime import datetime, timezone
from typing import Any

from tilth.agents.backends.agent_stream import AgentReport, Limit, Step, cut, flatten, one_line


class ClaudeStream:
    def __init__(self) -> None:
        self._report = AgentReport()
        self._last_text: str | None = None
        self._api_error: dict[str, Any] | None = None
        """The latest synthetic API-error assistant event, until a real reply follows it."""
        self._resets_at: datetime | None = None
        self._tool_names: dict[str, str] = {}
        self._result: dict[str, Any] | None = None
        self._turns: dict[str, dict[str, Any]] = {}
        """The usage of each assistant message, by message id (its blocks repeat it)."""

    def feed(self, event: dict[str, Any]) -> list[Step]:
        self._report.events += 1
        kind = event.get("type")
        if kind == "system":
            return self._system(event)
        if kind == "assistant":
            return self._assistant(event)
        if kind == "user":
            return self._tool_results(event)
        if kind == "rate_limit_event":
            info = event.get("rate_limit_info") or {}
            rejected = info.get("status") == "rejected"
            self._resets_at = _from_unix(info.get("resetsAt")) if rejected else None
            return []
        if kind == "result":
            self._result = event
            if event.get("session_id"):
                self._report.session_id = event["session_id"]
        return []

    def report(self) -> AgentReport:
        report = self._report
        report.final_text = self._last_text
        result = self._result
        if result is None:
            self._streamed_usage(report)
            # killed before the end: the last API error, if nothing came after it, is how it ended
            if self._api_error is not None:
                report.is_error = True
                report.error = one_line(_text_of(self._api_error))
                report.limit = self._limit_of(self._api_error, report.error)
            return report
        report.cost_usd = result.get("total_cost_usd")
        report.turns = result.get("num_turns")
        usage = result.get("usage")
        if isinstance(usage, dict):
            report.prompt_tokens = sum(int(usage.get(key) or 0) for key in (
                "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
            report.completion_tokens = int(usage.get("output_tokens") or 0)
            report.cached_tokens = int(usage.get("cache_read_input_tokens") or 0)
            report.cache_write_tokens = int(usage.get("cache_creation_input_tokens") or 0)
        report.is_error = bool(result.get("is_error"))
        if report.is_error:
            report.error = one_line(result.get("result") or result.get("terminal_reason") or "error")
            report.limit = self._limit_of(result, report.error)
        elif isinstance(result.get("result"), str):
            report.final_text = result["result"]
        return report

    def _streamed_usage(self, report: AgentReport) -> None:
        if not self._turns:
            return
        turns = self._turns.values()
        report.cached_tokens = sum(_count(u, "cache_read_input_tokens") for u in turns)
        report.cache_write_tokens = sum(_count(u, "cache_creation_input_tokens") for u in turns)
        report.prompt_tokens = sum(_count(u, "input_tokens") for u in turns) + report.cached_tokens + \
            report.cache_write_tokens
        report.completion_tokens = sum(_count(u, "output_tokens") for u in turns)
        report.turns = len(self._turns)

    def _limit_of(self, event: dict[str, Any], message: str) -> Limit | None:
        if event.get("api_error_status") != 429 and event.get("api_error") != "usage_limit_reached":
            return None
        info = (event.get("api_error_params") or {}).get("rate_limit_info") or {}
        return Limit(message, _from_unix(info.get("resetsAt")) or self._resets_at)

    def _system(self, event: dict[str, Any]) -> list[Step]:
        if event.get("subtype") == "init":
            self._report.session_id = event.get("session_id") or self._report.session_id
            self._report.model = event.get("model") or self._report.model
            return [Step("init", cut(f"model {self._report.model} session {self._report.session_id}"))]
        if event.get("subtype") == "api_retry":
            return [Step("retry", cut(f"attempt {event.get('attempt')}/{event.get('max_retries')}: "
                                      f"{event.get('error_status')} {event.get('error')}"))]
        return []

    def _assistant(self, event: dict[str, Any]) -> list[Step]:
        if event.get("is_api_error_message"):
            self._api_error = event
            if event.get("api_error_status") == 429:
                info = (event.get("api_error_params") or {}).get("rate_limit_info") or {}
                self._resets_at = _from_unix(info.get("resetsAt")) or self._resets_at
            return [Step("error", cut(_text_of(event)))]
        self._api_error = None
        message = event.get("message") or {}
        if isinstance(message.get("id"), str) and isinstance(message.get("usage"), dict):
            seen = self._turns.get(message["id"], {})
            self._turns[message["id"]] = {k: max(_count(seen, k), _count(message["usage"], k)) for k in _USAGE_KEYS}
        steps = []
        for block in (event.get("message") or {}).get("content") or []:
            if block.get("type") == "text" and block.get("text", "").strip():
                self._last_text = block["text"]
                steps.append(Step("message", cut(block["text"])))
            elif block.get("type") == "tool_use":
                self._tool_names[block.get("id", "")] = block.get("name", "")
                steps.append(Step("tool_use", cut(json.dumps(block.get("input"), ensure_ascii=False)), block.get("name")))
        return steps

    def _tool_results(self, event: dict[str, Any]) -> list[Step]:
        content = (event.get("message") or {}).get("content")
        steps = []
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = flatten(block.get("content"))
                if block.get("is_error"):
                    text = f"error: {text}"
                steps.append(Step("tool_result", cut(text), self._tool_names.get(block.get("tool_use_id", ""))))
        return steps


_USAGE_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def _count(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _text_of(event: dict[str, Any]) -> str:
    return flatten((event.get("message") or {}).get("content"))




def _from_unix(value: object) -> datetime | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return datetime.fromtimestamp(value, timezone.utc)
    return None
