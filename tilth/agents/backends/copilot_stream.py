"""Reads Copilot CLI 1.0.102's `copilot --output-format json` stdout (JSONL) and its usage.

Verified against the real binary run on tests/fake_openai.py (Chat Completions through
`COPILOT_PROVIDER_BASE_URL`, `COPILOT_OFFLINE=true`):

- stdout carries the session's events: `assistant.message` (its `content` and `toolRequests`),
  `tool.execution_complete`, `model.call_failure` per failed attempt, `assistant.turn_retry`,
  `session.error` when the run gives up, and a last `result` (`sessionId`, `exitCode`). Its
  `assistant.usage` events are left out of the JSON output: no token count reaches stdout.
- Tokens while it runs: the OpenTelemetry file exporter (`COPILOT_OTEL_EXPORTER_TYPE=file`, a local
  JSONL file, nothing sent anywhere) writes one `chat <model>` span per model call as its turn
  ends (after the tools it asked for ran), not in step with stdout (`gen_ai.usage.input_tokens`,
  cached ones included, `.cache_read.input_tokens`, `.cache_write.input_tokens`,
  `gen_ai.usage.output_tokens`). It is read at every stdout line and, with a cap to keep, every
  `bounds.TICK_S` (`report()`), so a call's usage counts within that of the span's writing however
  quiet stdout is: read only at stdout lines, a span written after the next request's
  `model.call_start` line waited for that call's answer, and the call after it could be made.
  Its session-state `events.jsonl` is flushed seconds late and is not used.
- Tokens at the end: `--usage-output-file` (JSON, written as it exits): `modelMetrics` per model
  with `requests.count` and `usage` {inputTokens (cached included), outputTokens, cacheReadTokens,
  cacheWriteTokens}. Its `cost` fields are premium requests (0 with your own provider), never USD:
  tilth prices the tokens itself.
- Limits: `session.error` with `errorType` `rate_limit` (a 429 after its 5 retries, or at once for
  `insufficient_quota`) or `quota_exhausted`; it exits 1. No reset time is given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tilth.agents.backends.agent_stream import AgentReport, Limit, Step, cut
from tilth.agents.backends.jsonl_tail import JsonlTail
from tilth.store.jsonio import parse_object

LIMIT_ERRORS = ("rate_limit", "quota_exhausted")
_SPAN_USAGE = {"prompt": "gen_ai.usage.input_tokens", "completion": "gen_ai.usage.output_tokens",
               "cached": "gen_ai.usage.cache_read.input_tokens", "cache_write": "gen_ai.usage.cache_write.input_tokens"}
_FILE_USAGE = {"prompt": "inputTokens", "completion": "outputTokens", "cached": "cacheReadTokens",
               "cache_write": "cacheWriteTokens"}


class CopilotStream:
    def __init__(self, spans: Path | None = None, usage_file: Path | None = None) -> None:
        """`spans`: its OpenTelemetry JSONL file; `usage_file`: its `--usage-output-file`."""
        self._report = AgentReport()
        self._spans = JsonlTail(spans)
        self._usage_file = usage_file
        self._calls: dict[str, dict[str, int]] = {}
        """Each model call's usage, by span id."""
        self._tool_names: dict[str, str] = {}
        self._error: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any]) -> list[Step]:
        self._report.events += 1
        self._read_spans()
        kind, data = event.get("type"), event.get("data") or {}
        if not isinstance(data, dict):
            return []
        if kind == "session.tools_updated" and data.get("model"):
            self._report.model = str(data["model"])
            return [Step("init", cut(f"model {self._report.model}"))]
        if kind == "assistant.message":
            return self._message(data)
        if kind == "tool.execution_complete":
            result = data.get("result") or data.get("error") or {}
            text = (result.get("content") or result.get("message") or "") if isinstance(result, dict) else result
            text = text if data.get("success", True) else f"error: {text}"
            return [Step("tool_result", cut(text), self._tool_names.get(str(data.get("toolCallId")), None))]
        if kind == "assistant.turn_retry":
            return [Step("retry", cut(f"retrying: {data.get('reason')}"))]
        if kind == "model.call_failure":
            return [Step("error", cut(f"{data.get('statusCode')} {data.get('errorMessage') or ''}"))]
        if kind == "session.error":
            self._error = data
            return [Step("error", cut(data.get("message") or data.get("errorType") or "error"))]
        if kind == "result":
            self._report.session_id = event.get("sessionId") or self._report.session_id
        return []

    def report(self) -> AgentReport:
        self._read_spans()
        report = self._report
        if not self._from_usage_file(report) and self._calls:
            calls = self._calls.values()
            report.prompt_tokens = sum(c["prompt"] for c in calls)
            report.completion_tokens = sum(c["completion"] for c in calls)
            report.cached_tokens = sum(c["cached"] for c in calls)
            report.cache_write_tokens = sum(c["cache_write"] for c in calls)
            report.turns = len(self._calls)
        if self._error is not None:
            report.is_error = True
            report.error = " ".join(str(self._error.get("message") or self._error.get("errorType")).split())
            if self._error.get("errorType") in LIMIT_ERRORS:
                report.limit = Limit(report.error)
        return report

    def _message(self, data: dict[str, Any]) -> list[Step]:
        steps = []
        content = data.get("content")
        if isinstance(content, str) and content.strip():
            self._report.final_text = content
            steps.append(Step("message", cut(content)))
        for request in data.get("toolRequests") or []:
            if isinstance(request, dict):
                name = str(request.get("name") or "")
                self._tool_names[str(request.get("toolCallId"))] = name
                steps.append(Step("tool_use", cut(json.dumps(request.get("arguments"), ensure_ascii=False)), name))
        self._report.model = data.get("model") or self._report.model
        return steps

    def _read_spans(self) -> None:
        for span in self._spans.new():
            attributes = span.get("attributes")
            if span.get("type") != "span" or not isinstance(attributes, dict) or \
                    attributes.get("gen_ai.operation.name") != "chat":
                continue
            self._calls[str(span.get("spanId"))] = {key: _count(attributes.get(name))
                                                     for key, name in _SPAN_USAGE.items()}

    def _from_usage_file(self, report: AgentReport) -> bool:
        """The totals of the usage file, once Copilot wrote it (at its end)."""
        if self._usage_file is None:
            return False
        try:
            found = parse_object(self._usage_file.read_bytes())
        except OSError:
            return False
        metrics = (found or {}).get("modelMetrics")
        if not isinstance(metrics, dict) or not metrics:
            return False
        models = [m for m in metrics.values() if isinstance(m, dict)]
        usages: list[dict[str, Any]] = [m["usage"] if isinstance(m.get("usage"), dict) else {} for m in models]
        report.prompt_tokens = sum(_count(u.get(_FILE_USAGE["prompt"])) for u in usages)
        report.completion_tokens = sum(_count(u.get(_FILE_USAGE["completion"])) for u in usages)
        report.cached_tokens = sum(_count(u.get(_FILE_USAGE["cached"])) for u in usages)
        report.cache_write_tokens = sum(_count(u.get(_FILE_USAGE["cache_write"])) for u in usages)
        report.turns = sum(_count((m.get("requests") or {}).get("count")) for m in models)
        if isinstance(found, dict) and isinstance(found.get("currentModel"), str):
            report.model = found["currentModel"]
        return True


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
