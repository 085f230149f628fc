"""Token and cost totals, computed in this one place: what each `model_call` event adds
(`Counted`) and their sum (`Totals`), which the roll-up's session and task totals
(`store/rollup.py`), the runner's `agents/accounting.Meter` and the report's tally
(`views/tally.py`) all are, so every figure counts exactly alike.

Read as leniently as the provider's report was (`agents/accounting.Usage`): a count is usable
only as a non-negative whole number (`12.0` too), a cost only as a finite number >= 0; anything
else is unknown, never a number, and never lowers what was validly reported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CALL_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _count(value: Any) -> int | None:
    """A usable token count: a non-negative whole number (`12.0` too); anything else is unknown."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def is_dollars(value: Any) -> bool:
    return _dollars(value) is not None


def _dollars(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        usd = float(value)
    except OverflowError:
        return None
    return usd if math.isfinite(usd) and usd >= 0 else None


@dataclass(frozen=True)
class Counted:
    """What one `model_call` event adds to the totals (`agents/accounting.Meter` and the roll-up)."""

    tokens: int
    cost_usd: float
    usage_known: bool
    cost_known: bool
    prompt: int = 0
    """Input tokens, cached ones included (0 when unknown), for a task's receipt."""
    cached: int = 0
    completion: int = 0

    @classmethod
    def from_event(cls, data: Mapping[str, Any]) -> Counted:
        """Read as leniently as a provider's report: events from before `usage_known` existed,
        null or negative counts, and a missing or negative cost neither crash nor lower spend."""
        prompt, completion, total = (_count(data.get(k)) for k in CALL_COUNTS)
        known = data.get("usage_known")
        cost = _dollars(data.get("cost_usd"))
        cached = min(_count(data.get("cached_tokens")) or 0, prompt or 0)
        return cls(tokens=max(total or 0, (prompt or 0) + (completion or 0)), cost_usd=cost or 0.0,
                   usage_known=known if isinstance(known, bool) else prompt is not None and completion is not None,
                   cost_known=cost is not None and data.get("cost_source") in ("provider", "price_table"),
                   prompt=prompt or 0, cached=cached, completion=completion or 0)


@dataclass
class Totals:
    """What some `model_call` events add up to (a session's, a task's)."""

    tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    unknown_usage_calls: int = 0
    """Calls whose token counts were missing or unusable: `tokens` is a lower bound."""
    unknown_cost_calls: int = 0
    """Of those, the ones with no cost from the provider or price table: `cost_usd` is a lower bound."""
    unpriced_calls: int = 0
    """Calls with known usage but no provider cost and no price-table entry."""
    cost_is_lower_bound: bool = False
    prompt_tokens: int = 0
    """Input tokens, cached ones included (a task's receipt)."""
    cached_tokens: int = 0
    completion_tokens: int = 0

    def count(self, counted: Counted) -> None:
        """Add one call."""
        self.model_calls += 1
        self.tokens += counted.tokens
        self.cost_usd += counted.cost_usd
        self.unknown_usage_calls += not counted.usage_known
        self.unknown_cost_calls += not counted.usage_known and not counted.cost_known
        self.unpriced_calls += counted.usage_known and not counted.cost_known
        self.cost_is_lower_bound = self.unknown_cost_calls > 0
        self.prompt_tokens += counted.prompt
        self.cached_tokens += counted.cached
        self.completion_tokens += counted.completion

    @classmethod
    def of_events(cls, events: Iterable[Mapping[str, Any]]) -> Totals:
        """The totals of the `model_call` events among `events`."""
        totals = cls()
        for _, counted in model_calls(events):
            totals.count(counted)
        return totals


def model_calls(events: Iterable[Mapping[str, Any]]) -> Iterable[tuple[Mapping[str, Any], Counted]]:
    """Each `model_call` event with what it adds (a damaged `data` adds a call of unknown usage)."""
    for event in events:
        if event.get("type") == "model_call":
            data = event.get("data")
            yield event, Counted.from_event(data if isinstance(data, Mapping) else {})
