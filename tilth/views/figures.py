"""How a session's figures are written for a person: spend (`$0.0123`, `≥ $0.0123`), tokens
(`1,234+ (3 calls with unknown usage)`) and verdicts (`reject (weak_test): <concern>`). Apart
from `views/tally.py` and `views/readable.py` so that `tilth status` imports neither git nor the
event wording."""

from __future__ import annotations


def money(usd: float, lower_bound: bool = False, places: int = 4) -> str:
    """`$0.0123`, or `≥ $0.0123` when some calls' cost could not be known; a spend too small for
    `places` is `< $0.01`, never `$0.00`."""
    if 0 < usd < 0.5 * 10 ** -places:
        return f"{'≥ ' if lower_bound else ''}< ${10 ** -places:.{places}f}"
    return f"{'≥ ' if lower_bound else ''}${usd:.{places}f}"


def dollars(usd: float) -> str:
    """An amount a person set (a cap) exactly as set: `$1.00`, `$0.001`, `$0.0005`."""
    for places in range(2, 7):
        if abs(round(usd, places) - usd) < 1e-9:
            return f"${usd:.{places}f}"
    return f"${usd:.6f}"


def spend(usd: float, lower_bound: bool = False, unpriced_calls: int = 0, places: int = 4, brief: bool = False) -> str:
    """What was spent: `money`, or `unknown` when nothing was counted yet some calls had no price or
    no usage at all (never `$0`), with how many calls went uncounted (not said when `brief`, for a table cell)."""
    unpriced = f" ({plural(unpriced_calls, 'model call')} without a price)" if unpriced_calls and not brief else ""
    if (unpriced_calls or lower_bound) and usd == 0:
        return "unknown" + unpriced
    return money(usd, lower_bound or bool(unpriced_calls), places) + unpriced


def plural(count: int, word: str, words: str = "") -> str:
    """`1 model call`, `2 model calls`, `0 attempts` (`words` when the plural is not word + s)."""
    return f"{count:,} {word if count == 1 else words or word + 's'}"


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
