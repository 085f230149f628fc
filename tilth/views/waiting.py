"""What a running session waits on, in words: a model call (`model_waiting`), a retry's backoff,
a CLI agent run (`agent_started`), as `store/rollup_fold.track_waiting` follows them. `tilth status`,
`tilth logs -f` (a line after HEARTBEAT_S of silence) and the dashboard say it the same way."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tilth.core.clock import parse_utc
from tilth.store.rollup_fold import Waiting

HEARTBEAT_S = 10.0
"""`tilth logs -f` prints a line after this long without one (the promise: at least every 15 s)."""


def waited_s(w: Waiting, now: datetime) -> float | None:
    since = parse_utc(w.since)
    return None if since is None else max(0.0, (now - since).total_seconds())


def waiting_text(w: Waiting, now: datetime) -> str:
    """`the worker's model gpt-4o-mini, 23 s so far (attempt 2)`."""
    waited = waited_s(w, now)
    so_far = "" if waited is None else f", {_seconds(waited)} so far"
    who = f"the {w.role}'s" if w.role else "the"
    if w.on == "agent":
        return f"{who} agent {w.name}{so_far}"
    if w.on == "retry":
        return f"{who} model {w.name}: waiting to send attempt {w.attempt}{so_far}"
    return f"{who} model {w.name}{so_far}" + (f" (attempt {w.attempt})" if w.attempt > 1 else "")


def waiting_data(waiting: dict[str, Waiting], now: datetime) -> list[dict[str, Any]]:
    """`status --json`'s `waiting`: one entry per task with something in flight."""
    return [{"task": task or None, "iteration": w.iteration, "on": w.on, "role": w.role, "name": w.name,
             "since": w.since, "waited_s": None if (s := waited_s(w, now)) is None else round(s, 1),
             "attempt": w.attempt, "text": waiting_text(w, now)} for task, w in waiting.items()]


def _seconds(s: float) -> str:
    whole = int(s)
    return f"{whole} s" if whole < 120 else f"{whole // 60} min {whole % 60:02d} s"
