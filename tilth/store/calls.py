"""`model_call` events read back: what each adds to a session's totals. Shared by the roll-up
(`store/rollup.py`) and `agents/accounting.Meter`, so both count exactly alike.

Read as leniently as the provider's report was (`agents/accounting.Usage`): a count is usable
only as a non-negative whole number (`12.0` too), a cost only as a finite number >= 0; anything
else is unknown, never a number, and never lowers what was validly reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
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
    """Exactly `Meter.from_events` over the same events."""

    tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    unknown_usage_calls: int = 0
    unknown_cost_calls: int = 0
    unpriced_calls: int = 0
    cost_is_lower_bound: bool = False

    def add(self, counted: Counted) -> None:
        self.model_calls += 1
        count_into(self, counted)
        self.cost_is_lower_bound = self.unknown_cost_calls > 0


def count_into(totals: Any, counted: Counted) -> None:
    """Add one call's tokens, cost and unknowns to `totals` (`Totals` here, `accounting.Meter`)."""
    totals.tokens += counted.tokens
    totals.cost_usd += counted.cost_usd
    totals.unknown_usage_calls += not counted.usage_known
    totals.unknown_cost_calls += not counted.usage_known and not counted.cost_known
    totals.unpriced_calls += counted.usage_known and not counted.cost_known
