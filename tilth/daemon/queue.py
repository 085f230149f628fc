"""Pure decisions for the supervisor's tick: no files, no processes, no clock.

The queue itself is on disk: the sessions whose session.json says `queued` and that were
handed to the supervisor. Restarting the supervisor therefore loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from tilth.core.errors import BadInput
from tilth.store.session import SessionRecord, SessionState


@dataclass(frozen=True)
class Seen:
    """One session as the tick saw it."""

    record: SessionRecord
    locked: bool
    """Some process holds its session lock (a runner, or a state change in progress)."""
    ours: bool
    """The supervisor has a live child running it."""


def parse_when(text: str) -> datetime:
    """An ISO-8601 time; without a zone it is local time. Returned in UTC."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(f"--at {text!r} is not an ISO-8601 time (for example 2026-05-01T09:00 or "
                       "2026-05-01T07:00:00Z)") from None
    return (moment if moment.tzinfo else moment.astimezone()).astimezone(timezone.utc)


NEVER = datetime.max.replace(tzinfo=timezone.utc)


def start_time(record: SessionRecord) -> datetime | None:
    """None: start now. A start_at nobody can read never comes (the user sees it in status)."""
    if not record.start_at:
        return None
    try:
        return parse_when(record.start_at)
    except BadInput:
        return NEVER


def waiting(record: SessionRecord) -> bool:
    return record.state == SessionState.queued and record.supervised


def due(now: datetime, seen: list[Seen]) -> list[SessionRecord]:
    """Queued sessions whose start time has come, oldest first (created, then id)."""
    ready = [s.record for s in seen if waiting(s.record) and not s.locked and not s.ours
             and (start_time(s.record) or now) <= now]
    return sorted(ready, key=lambda r: (r.created, r.id))


def busy(seen: list[Seen]) -> int:
    """Slots in use: our live children, plus supervised runners we did not start (children
    of a previous supervisor that was killed keep running and keep their slots)."""
    return sum(1 for s in seen if s.ours or (s.record.supervised and s.record.state == SessionState.running
                                              and s.locked))


def to_start(now: datetime, seen: list[Seen], max_parallel: int) -> list[SessionRecord]:
    return due(now, seen)[:max(0, max_parallel - busy(seen))]


def stale(seen: list[Seen]) -> list[SessionRecord]:
    """Sessions that say running but that nobody runs: their runner died."""
    return [s.record for s in seen if s.record.state == SessionState.running and not s.locked and not s.ours]


def wakes(now: datetime, seen: list[Seen]) -> set[datetime]:
    """Future start times the scheduler should wake the tick for."""
    times = {start_time(s.record) for s in seen if waiting(s.record) and s.record.start_at}
    return {t for t in times if t is not None and now < t < NEVER}
