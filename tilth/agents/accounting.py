"""What model calls cost, and the caps that stop a session before it costs too much.

Totals are rebuilt from events.jsonl when a run starts (so spend is bounded across resumes)
and kept incrementally after that. Caps are checked between iterations and between tasks;
a tripped cap stops the session cleanly with state `stopped`, resumable once raised.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tilth.core.config import Settings
from tilth.core.errors import StopRequested
from tilth.store.events import EventLog, document

document(
    {
        "model_call": "one completed model request; data: role, model, prompt_tokens, completion_tokens, "
                      "total_tokens, latency_ms, cost_usd, cost_source (provider|price_table|unknown), finish_reason",
        "cap_reached": "a spend, wall-clock or evaluator-call cap stopped the session; data: cap, limit, value",
    }
)


class CapReached(StopRequested):
    """A configured cap tripped; the session stops as it would on SIGTERM."""


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


def call_cost(settings: Settings, model: str, usage: Usage, reported: float | None) -> tuple[float, str]:
    if reported is not None:
        return float(reported), "provider"
    price = settings.prices.get(model)
    if price is None:
        return 0.0, "unknown"
    return (usage.prompt_tokens * price.prompt + usage.completion_tokens * price.completion) / 1_000_000, "price_table"


@dataclass
class Meter:
    """Running totals for one session."""

    cost_usd: float = 0.0
    tokens: int = 0
    calls: int = 0
    evaluator_calls: Counter = field(default_factory=Counter)

    @classmethod
    def from_events(cls, events: list[dict[str, Any]]) -> "Meter":
        meter = cls()
        for event in events:
            if event["type"] == "model_call":
                meter.add(event["data"]["role"], event["task"], event["data"]["total_tokens"], event["data"]["cost_usd"])
        return meter

    def add(self, role: str, task_id: str | None, tokens: int, cost: float) -> None:
        self.calls += 1
        self.tokens += tokens
        self.cost_usd += cost
        if role == "evaluator" and task_id:
            self.evaluator_calls[task_id] += 1

    def record(self, events: EventLog, role: str, model: str, task_id: str, iteration: int, usage: Usage,
               cost: float, cost_source: str, latency_ms: int, finish_reason: str | None) -> None:
        self.add(role, task_id, usage.total_tokens, cost)
        events.emit("model_call", task_id, iteration, role=role, model=model, prompt_tokens=usage.prompt_tokens,
                    completion_tokens=usage.completion_tokens, total_tokens=usage.total_tokens,
                    latency_ms=latency_ms, cost_usd=cost, cost_source=cost_source, finish_reason=finish_reason)


class Caps:
    def __init__(self, settings: Settings, meter: Meter, events: EventLog):
        self.settings = settings
        self.meter = meter
        self.events = events
        self.started = time.monotonic()

    def check(self, task_id: str | None = None) -> None:
        s = self.settings
        tripped = None
        if s.max_spend_usd is not None and self.meter.cost_usd >= s.max_spend_usd:
            tripped = ("max_spend_usd", s.max_spend_usd, round(self.meter.cost_usd, 6))
        elif s.max_wall_clock_s is not None and time.monotonic() - self.started >= s.max_wall_clock_s:
            tripped = ("max_wall_clock_s", s.max_wall_clock_s, round(time.monotonic() - self.started, 1))
        elif (s.max_evaluator_calls_per_task is not None and task_id
              and self.meter.evaluator_calls[task_id] >= s.max_evaluator_calls_per_task):
            tripped = ("max_evaluator_calls_per_task", s.max_evaluator_calls_per_task, self.meter.evaluator_calls[task_id])
        if tripped:
            cap, limit, value = tripped
            self.events.emit("cap_reached", task_id, cap=cap, limit=limit, value=value)
            raise CapReached(f"{cap} reached ({value} >= {limit}); raise it (TILTH_{cap.upper()}) and resume")
