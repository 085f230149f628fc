"""Who acts on a session: `ACTORS` (`tilth` on a terminal, or the dashboard), and `known_actor`, the
one reading of a `by` that came from outside this process (a broker item, a session file carried by
the shared remote): one of `ACTORS`, else `unknown`, a label only, never a decision."""

from __future__ import annotations

ACTORS = ("cli", "dashboard")
"""Who acts: `tilth` on a terminal, or the dashboard."""

UNKNOWN = "unknown"
"""A `by` that is none of `ACTORS`: recorded as this, never passed on as given."""


def known_actor(by: object) -> str:
    return by if isinstance(by, str) and by in ACTORS else UNKNOWN
