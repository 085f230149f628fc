"""Reads Codex CLI 0.169.0's `codex exec --json` stdout (JSONL).

Verified against the real binary run on the stubs in tests/fake_responses.py (docs/cli-agents.md §2
and §5; the captured streams are tests/streams/codex-*.jsonl):

- `thread.started` gives the thread id; `item.started` / `item.completed` carry command_execution,
  file_change, agent_message and `error` (warning) items; top-level `error` events are retries
  ("Reconnecting... n/m (...)") or the final error, repeated by `turn.failed`.
- `turn.completed` usage: `input_tokens` already includes `cached_input_tokens` (the stub sent
  321+400+500 input with 20 cached and Codex printed 1221 / 20), and `output_tokens` already includes
  `reasoning_output_tokens` (3 reasoning inside 17 output came out as 32 output / 3 reasoning), so
  neither is added again. Codex reports no cost and no request count.
- Limits: only the `turn.failed` message is read. An account usage limit is "You’ve hit your usage
  limit. ... try again at <local time>." (Codex's own text, built from the 429's `resets_at`); a plain
  429 that outlived the retries is "exceeded retry limit, last status: 429 Too Many Requests, ...".
  An HTTP 500 also reads "We’re currently experiencing high demand, ..." and is not a limit.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone, tzinfo
from typing import Any

from tilth.agents.backends.agent_stream import AgentReport, Limit, Step, cut
from tilth.core.clock import local_now

_USAGE_LIMIT = re.compile(r"hit your usage limit", re.IGNORECASE)
_RATE_LIMITED = re.compile(r"\blast status: 429\b")
_TRY_AGAIN_AT = re.compile(r"try again at (.+?)\.?\s*$", re.IGNORECASE)
_ORDINAL = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th),")


class CodexStream:
    def __init__(self, local_tz: tzinfo | None = None) -> None:
        """`local_tz`: the zone Codex wrote its reset time in; None: this machine's local time."""
        self._report = AgentReport()
        self._local_tz = local_tz
        self._failure: str | None = None

    def feed(self, event: dict[str, Any]) -> list[Step]:
        self._report.events += 1
        kind = event.get("type")
        if kind == "thread.started":
            self._report.session_id = event.get("thread_id")
            return [Step("init", cut(f"thread {self._report.session_id}"))]
        if kind in ("item.started", "item.completed"):
            return self._item(event.get("item") or {}, completed=kind == "item.completed")
        if kind == "error":
            message = str(event.get("message", ""))
            return [Step("retry" if message.startswith("Reconnecting...") else "error", cut(message))]
        if kind == "turn.completed":
            self._failure = None
            self._add_usage(event.get("usage") or {})
        elif kind == "turn.failed":
            self._failure = " ".join(str((event.get("error") or {}).get("message") or "turn failed").split())
        return []

    def report(self) -> AgentReport:
        report = self._report
        report.is_error = self._failure is not None
        report.error = self._failure
        report.limit = self._limit_of(self._failure) if self._failure else None
        return report

    def _item(self, item: dict[str, Any], completed: bool) -> list[Step]:
        kind, item_id = item.get("type"), item.get("id")
        if kind == "command_execution":
            text = str(item.get("command", ""))
            if completed:
                text += f" (exit {item.get('exit_code')})"
            return [Step("command", cut(text), item_id)]
        if not completed:
            return []
        if kind == "file_change":
            changes = item.get("changes") or []
            text = ", ".join(f"{c.get('kind')} {c.get('path')}" for c in changes if isinstance(c, dict))
            if item.get("status") not in (None, "completed"):
                text += f" ({item.get('status')})"
            return [Step("file_change", cut(text), item_id)]
        if kind == "agent_message":
            self._report.final_text = item.get("text")
            return [Step("message", cut(item.get("text", "")), item_id)]
        if kind == "error":
            return [Step("error", cut(item.get("message", "")), item_id)]
        return []

    def _add_usage(self, usage: dict[str, Any]) -> None:
        report = self._report
        if "input_tokens" in usage:
            report.prompt_tokens = (report.prompt_tokens or 0) + int(usage["input_tokens"] or 0)
        if "cached_input_tokens" in usage:
            report.cached_tokens = (report.cached_tokens or 0) + int(usage["cached_input_tokens"] or 0)
        if "cache_write_input_tokens" in usage:
            report.cache_write_tokens = (report.cache_write_tokens or 0) + int(usage["cache_write_input_tokens"] or 0)
        if "output_tokens" in usage:
            report.completion_tokens = (report.completion_tokens or 0) + int(usage["output_tokens"] or 0)

    def _limit_of(self, message: str) -> Limit | None:
        if _USAGE_LIMIT.search(message):
            return Limit(message, self._reset_time(message))
        if _RATE_LIMITED.search(message):
            return Limit(message)
        return None

    def _reset_time(self, message: str) -> datetime | None:
        """Codex writes the reset in local time: "3:05 PM" on the same day, else "Nov 24th, 2026 12:21 AM"."""
        found = _TRY_AGAIN_AT.search(message)
        if not found:
            return None
        when = _ORDINAL.sub(r"\1,", found.group(1).strip())
        try:
            moment = datetime.strptime(when, "%b %d, %Y %I:%M %p")
        except ValueError:
            try:
                clock = datetime.strptime(when, "%I:%M %p")
            except ValueError:
                return None
            today = local_now(self._local_tz)
            moment = today.replace(hour=clock.hour, minute=clock.minute, second=0, microsecond=0, tzinfo=None)
        local = moment.replace(tzinfo=self._local_tz) if self._local_tz else moment.astimezone()
        return local.astimezone(timezone.utc)
