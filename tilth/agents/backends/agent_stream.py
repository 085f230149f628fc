"""What a CLI agent's structured output stream says, in one shape for every CLI.

A stream reader (`claude_stream.ClaudeStream`, `codex_stream.CodexStream`) is fed the agent's
stdout one parsed JSON line at a time while it runs. Each line may yield `Step`s (one
`agent_step` event each, so `tilth logs -f` shows the agent working), and at the end the
reader's `report()` says how the run went: final text, tokens, cost, and whether it ended on
a usage limit. Limits are read from the agent's structured events only (an error event, a
result with an error status), never by searching its whole output: file contents echoed in a
tool result would match too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

STEP_CHARS = 400
"""A step's text is cut to this many characters; the full stream is kept under sessions/<id>/agents/."""

STEP_KINDS = ("message", "tool_use", "tool_result", "command", "file_change", "error", "retry", "init")


@dataclass(frozen=True)
class Step:
    """One thing the agent did or said, as an `agent_step` event."""

    kind: str
    """One of STEP_KINDS."""
    text: str
    """What it was, cut to STEP_CHARS: the message, the command line, the tool's input, the paths changed."""
    name: str | None = None
    """The tool's name (tool_use), the item's id, or None."""


@dataclass(frozen=True)
class Limit:
    """The agent stopped on a usage or rate limit of its account: not a failure of the task."""

    message: str
    """What the agent said, one line."""
    resets_at: datetime | None = None
    """When the limit lifts (UTC), when the agent said; None: back off."""


@dataclass
class AgentReport:
    """How one run of a CLI agent went, as far as its stream says."""

    session_id: str | None = None
    """The agent's own session / thread id."""
    model: str | None = None
    final_text: str | None = None
    """The agent's last message (the case or verdict is parsed from it)."""
    prompt_tokens: int | None = None
    """Input tokens over the whole run, cached and cache-writing ones included; None when not reported."""
    cached_tokens: int | None = None
    """Of prompt_tokens, those read from the provider's prompt cache (priced at the cached rate)."""
    cache_write_tokens: int | None = None
    """Of prompt_tokens, those written to the provider's prompt cache."""
    completion_tokens: int | None = None
    cost_usd: float | None = None
    """What the agent itself reported the run cost; None when it reports no cost."""
    turns: int | None = None
    is_error: bool = False
    """The agent said the run ended in error (an API error, a failed turn)."""
    error: str | None = None
    """The agent's own one-line account of the error."""
    limit: Limit | None = None
    """Set when the run ended on a usage/rate limit (then is_error is True as well)."""
    events: int = 0
    """JSON lines read."""
    extra: dict[str, Any] = field(default_factory=dict)


class StreamReader(Protocol):
    def feed(self, event: dict[str, Any]) -> list[Step]:
        """Take one JSON object from the agent's stdout; the steps it shows, possibly none."""

    def report(self) -> AgentReport:
        """How the run went, from everything fed so far."""


def cut(text: object, limit: int = STEP_CHARS) -> str:
    """One line of at most `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def flatten(content: object) -> str:
    """A message's content as text: a list of parts (Anthropic's and Qwen's shape) joined, their `text`."""
    if isinstance(content, list):
        return " ".join(flatten(part.get("text", "") if isinstance(part, dict) else part) for part in content)
    return "" if content is None else str(content)


def one_line(text: object) -> str:
    return " ".join(str(text).split())
