"""How a session's spend is written for a person: `$0.0123`, `≥ $0.0123`, `1,234+ (3 calls with
unknown usage)`. Apart from `views/tally.py` so that `tilth status` does not import git."""

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
