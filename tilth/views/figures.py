"""How a session's figures are written for a person: spend (`$0.0123`, `≥ $0.0123`), tokens
(`1,234+ (3 calls with unknown usage)`) and verdicts (`reject (weak_test): <concern>`). Apart
from `views/tally.py` and `views/readable.py` so that `tilth status` imports neither git nor the
event wording."""

from __future__ import annotations


def money(usd: float, lower_bound: bool = False, places: int = 4) -> str:
    """`$0.0123`, or `≥ $0.0123` when some calls' cost could not be known."""
    return f"{'≥ ' if lower_bound else ''}${usd:.{places}f}"


def token_count(tokens: int, unknown_usage_calls: int, unit: str = "") -> str:
    """`1,234`, or `1,234+ (3 calls with unknown usage)` when some calls' counts were missing or unusable."""
    if not unknown_usage_calls:
        return f"{tokens:,}{unit}"
    calls = "call" if unknown_usage_calls == 1 else "calls"
    return f"{tokens:,}+{unit} ({unknown_usage_calls} {calls} with unknown usage)"


TEXT_CHARS = 200


def short(text: object, limit: int = TEXT_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def verdict_label(verdict: str, category: str | None = "", concern: str | None = "", limit: int = TEXT_CHARS) -> str:
    """`accept`, or `reject (weak_test): <concern>`: an accept never shows a category, and a
    reject shows one only when the evaluator gave a real one."""
    if verdict == "accept":
        return "accept"
    label = verdict + (f" ({category})" if category and category != "none" else "")
    return label + (f": {short(concern, limit)}" if concern and concern.strip() else "")


def duration(seconds: float | None, never: str = "(never ran)", hour_seconds: bool = True) -> str:
    """`42s`, `3m 07s`, `2h 05m 09s` (`2h 05m` without `hour_seconds`); `never` for None."""
    if seconds is None:
        return never
    s = int(round(seconds))
    h, m, s = s // 3600, s % 3600 // 60, s % 60
    if h:
        return f"{h}h {m:02d}m" + (f" {s:02d}s" if hour_seconds else "")
    return f"{m}m {s:02d}s" if m else f"{s}s"
