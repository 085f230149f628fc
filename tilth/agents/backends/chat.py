"""One model call with the official `openai` SDK: retries, streaming, accounting.

The SDK's own retries are off (max_retries=0) so that every attempt is our event and
Retry-After, backoff and the bound are ours to decide.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from tilth.agents.accounting import Meter, Usage, call_cost
from tilth.agents.backends.openai_sdk import import_openai
from tilth.agents.protocol import UsageLimited
from tilth.core.clock import utc_now, wall
from tilth.core.config import Settings
from tilth.core.errors import TilthError
from tilth.store.events import EventLog, document

document(
    {
        "model_attempt": ("one HTTP attempt at a model call; data: role, model, attempt, outcome "
                          "(ok|rate_limited|server_error|timeout|connection_error|empty_reply|bad_response|"
                          "client_error), status, wait_s", "role model attempt outcome status wait_s"),
        "model_waiting": ("an HTTP attempt at a model call was sent and its answer is awaited (`tilth status` and "
                          "`tilth logs -f` say so while it lasts); data: role, model, attempt", "role model attempt"),
    }
)

RETRYABLE_STATUS = {408, 409, 429}


class ProviderError(TilthError):
    """The model endpoint refused or kept failing; the session stops, resumable."""

    exit_code = 3


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class ModelReply:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None

    def as_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    if headers.get("retry-after-ms"):
        try:
            return float(headers["retry-after-ms"]) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        moment = email.utils.parsedate_to_datetime(value)
        return max(0.0, moment.timestamp() - wall()) if moment else None


def _classify(exc: Exception) -> tuple[str, int | None, bool]:
    """(outcome, http status, retryable)"""
    openai = import_openai()

    if isinstance(exc, openai.APITimeoutError):
        return "timeout", None, True
    if isinstance(exc, openai.APIConnectionError):
        return "connection_error", None, True
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 429:
            return "rate_limited", status, True
        if status >= 500 or status in RETRYABLE_STATUS:
            return "server_error", status, True
        return "client_error", status, False
    return "bad_response", None, True


_SDK_CLIENTS: dict[tuple[str, str, float], Any] = {}


def sdk_client(base_url: str, api_key: str, timeout: float) -> Any:
    """One SDK client per endpoint for the process's life: building one costs a TLS context
    (reading the CA bundle, ~45 ms) and a new connection, which every job would otherwise pay."""
    key = (base_url, api_key, timeout)
    if key not in _SDK_CLIENTS:
        openai = import_openai()  # imported here: it costs most of a second, and most tilth processes never call a model

        _SDK_CLIENTS[key] = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout)
    return _SDK_CLIENTS[key]


class ChatClient:
    def __init__(self, role: str, settings: Settings, meter: Meter, events: EventLog):
        self.role, self.settings, self.meter, self.events = role, settings, meter, events
        openai = import_openai()

        self._errors = (openai.OpenAIError, ValueError)
        self.base_url, api_key, self.model = settings.endpoint(role)
        self.client = sdk_client(self.base_url, api_key, settings.request_timeout)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], task_id: str | None, iteration: int,
                 tool_choice: str = "auto") -> ModelReply:
        s = self.settings
        for attempt in range(1, s.max_retries + 2):
            started = time.monotonic()
            retry_after = None
            status: int | None
            self.events.emit("model_waiting", task_id, iteration, role=self.role, model=self.model, attempt=attempt)
            self.meter.stop_if_halted()  # a retry too: no call is made for a run that must stop
            try:
                reply, usage = self._request(messages, tools, tool_choice)
                outcome, status, retryable = ("ok", 200, False) if reply else ("empty_reply", 200, True)
            except self._errors as exc:
                outcome, status, retryable = _classify(exc)
                retry_after, error = _retry_after(exc), exc
            wait = 0.0
            if retryable and attempt <= s.max_retries:
                backoff = s.retry_base_delay * 2 ** (attempt - 1) * random.uniform(0.5, 1.0)
                wait = min(s.retry_max_delay, retry_after if retry_after is not None else backoff)
            self.events.emit("model_attempt", task_id, iteration, role=self.role, model=self.model,
                             attempt=attempt, outcome=outcome, status=status, wait_s=round(wait, 3))
            if outcome == "ok" and reply is not None:
                latency = int((time.monotonic() - started) * 1000)
                cost, source = call_cost(s, self.model, usage, self.base_url)
                self.meter.record(self.events, self.role, self.model, task_id, iteration, usage, cost, source,
                                  latency, reply.finish_reason, backend="openai")
                return reply
            if outcome == "rate_limited" and attempt > s.max_retries:
                resets = utc_now() + timedelta(seconds=retry_after) if retry_after else None
                raise UsageLimited(f"the {self.role} model ({self.model}) is rate limited (HTTP 429 after {attempt} "
                                   f"attempts): {' '.join(str(error).split())[:200]}", resets)
            if not retryable or attempt > s.max_retries:
                detail = "an empty reply" if outcome == "empty_reply" else f"{type(error).__name__}: {error}"
                raise ProviderError(
                    f"the {self.role} model ({self.model}) call failed after {attempt} attempt(s): "
                    f"{' '.join(detail.split())[:300]}; check TILTH_BASE_URL, the model name and key, then resume"
                )
            time.sleep(wait)
        raise AssertionError("unreachable")

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 tool_choice: str) -> tuple[ModelReply | None, Usage]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            if tool_choice != "auto":
                kwargs["tool_choice"] = tool_choice if tool_choice in ("required", "none") else \
                    {"type": "function", "function": {"name": tool_choice}}
        if self.settings.max_tokens:
            kwargs["max_tokens"] = self.settings.max_tokens
        if self.settings.stream:
            return self._streamed(kwargs)
        response = self.client.chat.completions.create(**kwargs)
        usage = _usage(getattr(response, "usage", None))
        choices = getattr(response, "choices", None)
        if not choices or choices[0].message is None:
            return None, usage
        message = choices[0].message
        calls = [ToolCall(c.id or f"call_{i}", c.function.name, c.function.arguments or "")
                 for i, c in enumerate(message.tool_calls or []) if getattr(c, "function", None)]
        return ModelReply(message.content, calls, choices[0].finish_reason), usage

    def _streamed(self, kwargs: dict[str, Any]) -> tuple[ModelReply | None, Usage]:
        stream = self.client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})
        content: list[str] = []
        calls: dict[int, ToolCall] = {}
        finish, usage, saw_choice = None, _usage(None), False
        for chunk in stream:
            if chunk.usage is not None:
                usage = _usage(chunk.usage)
            for choice in chunk.choices or []:
                saw_choice = True
                delta = choice.delta
                if delta and delta.content:
                    content.append(delta.content)
                for part in (delta.tool_calls or []) if delta else []:
                    call = calls.setdefault(part.index, ToolCall(f"call_{part.index}", "", ""))
                    call.id = part.id or call.id
                    if part.function:
                        call.name = call.name or part.function.name or ""
                        call.arguments += part.function.arguments or ""
                finish = choice.finish_reason or finish
        if not saw_choice or finish is None:
            return None, usage
        return ModelReply("".join(content) or None, [calls[i] for i in sorted(calls)], finish), usage


def _usage(raw: Any) -> Usage:
    """The SDK keeps whatever the provider sent (a string count, a dict, a negative number, null)
    and OpenRouter's `cost` as an extra field; `Usage` decides what of it to trust."""
    if raw is not None and not isinstance(raw, Mapping) and hasattr(raw, "__dict__"):
        raw = {**vars(raw), **(getattr(raw, "model_extra", None) or {})}
    if isinstance(raw, Mapping):
        details = raw.get("prompt_tokens_details")
        if details is not None and not isinstance(details, Mapping) and hasattr(details, "__dict__"):
            details = vars(details)
        if isinstance(details, Mapping):
            raw = {**raw, "cached_tokens": details.get("cached_tokens")}
        # cache writes: OpenRouter's prompt_tokens_details.cache_write_tokens, LiteLLM's and
        # Anthropic-shaped proxies' cache_creation_input_tokens (both already inside prompt_tokens)
        written = details.get("cache_write_tokens") if isinstance(details, Mapping) else None
        raw = {**raw, "cache_write_tokens": written if written is not None else raw.get("cache_creation_input_tokens")}
    return Usage.model_validate(raw)
