"""A session a fallback agent played in, as a person reads it (`worker_fallback`, `evaluator_fallback`):
which role switched from which backend to which, why, until when, whether its primary took the
turns again, and the cost per backend. From the roll-up (`Rollup.fallbacks`, `Rollup.backend_costs`):
the report's lines and `tilth status --json`'s fields; nothing for a session no fallback played in."""

from __future__ import annotations

from typing import Any

from tilth.core.clock import parse_utc
from tilth.store.rollup_fold import Rollup
from tilth.views.figures import money


def fallback_data(rollup: Rollup) -> dict[str, Any]:
    """`fallbacks` (by role) and `cost_by_backend` (dollars), for status --json; empty when none took over."""
    if not rollup.fallbacks:
        return {"fallbacks": {}, "cost_by_backend": {}}
    return {"fallbacks": rollup.fallbacks,
            "cost_by_backend": {name: round(cost, 6) for name, cost in sorted(rollup.backend_costs.items())}}


def fallback_lines(rollup: Rollup) -> list[str]:
    """`Fallback:   worker claude -> openai at 11:20:05 (usage limit ...); claude again after 12:20:05`, and the
    cost per backend."""
    lines = []
    for role, said in sorted(rollup.fallbacks.items()):
        since, until = _clock(said.get("since")), _clock(said.get("until"))
        back = f"; {said.get('primary')} again after {until}" if said.get("back") else \
            f"; {said.get('primary')} out until {until}"
        lines.append(f"Fallback:   {role} {said.get('primary')} -> {said.get('fallback')} at {since} "
                     f"({' '.join(str(said.get('reason') or '').split())[:200]}){back}")
    if lines:
        lines.append("By backend: " + ", ".join(f"{name} {money(cost)}"
                                                for name, cost in sorted(rollup.backend_costs.items())))
    return lines


def _clock(ts: object) -> str:
    moment = parse_utc(ts if isinstance(ts, str) else None)
    return moment.astimezone().strftime("%H:%M:%S") if moment else "?"
