"""Pure decisions for the supervisor's tick: no files, no processes, no clock.

The queue itself is on disk: the sessions whose session.json says `queued` and that were
handed to the supervisor. Restarting the supervisor therefore loses nothing. So is the
auto-resume of a crashed session (its count and due time are in its session.json), and the
end of a pause after a usage limit (`paused_until`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from tilth.core.clock import parse_utc
from tilth.core.errors import BadInput
from tilth.store.session import SessionRecord, SessionState

if TYPE_CHECKING:
    from tilth.core.config import Settings


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


def wakes(now: datetime, seen: list[Seen], policy: AutoResume | None = None) -> set[datetime]:
    """Future start times, ends of pauses, and (with a policy) auto-resume times, the scheduler
    should wake the tick for."""
    times = {start_time(s.record) for s in seen if waiting(s.record) and s.record.start_at}
    times |= {pause_end(s.record) for s in seen}
    if policy is not None:
        times |= {resume_time(s.record, policy) for s in seen}
    return {t for t in times if t is not None and now < t < NEVER}


# -- sessions paused by a usage limit --------------------------------------------------------

DUE_NOW = datetime.min.replace(tzinfo=timezone.utc)


def pause_end(record: SessionRecord) -> datetime | None:
    """When the supervisor queues this paused session again; None when it does not (not paused,
    or not supervised: a foreground run waits out its own pause). A `paused_until` that is
    missing or unreadable is due now: a bad time must not hold a session for ever, and a limit
    that has not lifted yet only pauses it again."""
    if record.state != SessionState.paused or not record.supervised:
        return None
    return parse_utc(record.paused_until) or DUE_NOW


def to_unpause(now: datetime, seen: list[Seen]) -> list[SessionRecord]:
    """Paused supervised sessions whose pause has ended and that nobody holds, oldest first."""
    ready = [s.record for s in seen if not s.locked and not s.ours
             and (when := pause_end(s.record)) is not None and when <= now]
    return sorted(ready, key=lambda r: (r.created, r.id))


# -- auto-resume of crashed sessions --------------------------------------------------------

@dataclass(frozen=True)
class AutoResume:
    """The supervisor's auto-resume settings (`auto_resume_*` in core/config.Settings)."""

    attempts: int
    """Auto-resumes in a row before giving up; 0: never."""
    backoff_s: float
    """The wait before the first one; doubled for each further one."""
    backoff_max_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> AutoResume:
        return cls(settings.auto_resume_attempts, settings.auto_resume_backoff_s, settings.auto_resume_backoff_max_s)


def backoff(policy: AutoResume, attempt: int) -> float:
    """Seconds to wait before auto-resume number `attempt` (1, 2, ...): doubling, capped."""
    return min(policy.backoff_max_s, policy.backoff_s * 2.0 ** min(max(attempt - 1, 0), 60))


@dataclass(frozen=True)
class AfterCrash:
    """What becomes of a supervised session whose runner just died."""

    auto_resumes: int
    """Auto-resumes in a row so far (the current streak)."""
    resume_at: datetime | None
    """When the supervisor resumes it by itself; None: it waits for `tilth resume`."""
    gave_up: bool
    """Its auto-resumes are used up."""


@dataclass(frozen=True)
class LastRun:
    """What the journal says about the run whose runner died."""

    progressed: bool
    """It ended a task (done or failed) since the last auto-resume."""
    launched: bool
    """A supervisor launched it (a `tilth resume --foreground` of a once-supervised session was not)."""


RUN_BOUNDARIES = ("session_queued", "session_launched", "session_started", "session_end", "session_crashed",
                  "session_stopped", "session_auto_resumed", "session_unpaused")


def last_run(events: list[dict[str, Any]]) -> LastRun:
    """Read from the end of events.jsonl: task ends back to the last auto-resume, and whether
    the run's `session_started` (if its runner got that far) directly follows a
    `session_launched` among the events that bound runs."""
    progressed = progress_known = started = False
    launched = None
    for event in reversed(events):
        kind = event.get("type")
        if not progress_known and kind in ("task_done", "task_failed"):
            progressed = progress_known = True
        elif kind == "session_auto_resumed":
            progress_known = True
        if launched is None and kind in RUN_BOUNDARIES:
            if kind == "session_started" and not started:
                started = True
            else:
                launched = kind == "session_launched"
        if progress_known and launched is not None:
            break
    return LastRun(progressed, bool(launched))


def after_crash(record: SessionRecord, run: LastRun, now: datetime, policy: AutoResume) -> AfterCrash:
    """A runner died without recording its end. A session the supervisor launched is resumed
    after the backoff unless its streak of auto-resumes is used up; a run that ended a task
    starts the streak again. A foreground run is never resumed."""
    streak = 0 if run.progressed else record.auto_resumes
    if not record.supervised or not run.launched or policy.attempts <= 0:
        return AfterCrash(streak, None, False)
    if streak >= policy.attempts:
        return AfterCrash(streak, None, True)
    return AfterCrash(streak, now + timedelta(seconds=backoff(policy, streak + 1)), False)


def resume_time(record: SessionRecord, policy: AutoResume) -> datetime | None:
    """When the supervisor resumes this crashed session by itself; None when it does not
    (not crashed or not supervised, no time recorded, auto-resume turned off or used up since)."""
    if record.state != SessionState.crashed or not record.supervised or not record.auto_resume_at:
        return None
    if record.auto_resumes >= policy.attempts:
        return None
    return parse_utc(record.auto_resume_at)


def to_auto_resume(now: datetime, seen: list[Seen], policy: AutoResume) -> list[SessionRecord]:
    """Crashed sessions whose auto-resume time has come, oldest first."""
    ready = [s.record for s in seen if not s.locked and not s.ours
             and (when := resume_time(s.record, policy)) is not None and when <= now]
    return sorted(ready, key=lambda r: (r.created, r.id))


def needs_supervisor(seen: list[Seen], policy: AutoResume) -> list[str]:
    """Why a supervisor should run (empty: no reason): queued supervised sessions (scheduled
    ones too), crashed ones due for auto-resume, paused ones (it resumes them when the usage
    limit lifts), and supervised ones that say running while nobody holds their lock (their
    runner died with the supervisor away; it marks them crashed)."""
    queued = [s.record.id for s in seen if waiting(s.record)]
    crashed = [s.record.id for s in seen if resume_time(s.record, policy) is not None]
    paused = [s.record.id for s in seen if pause_end(s.record) is not None]
    orphaned = [s.record.id for s in seen if s.record.supervised and s.record.state == SessionState.running
                and not s.locked]
    why = []
    if queued:
        why.append(f"queued {', '.join(queued)}")
    if crashed:
        why.append(f"crashed {', '.join(crashed)} (due for auto-resume)")
    if paused:
        why.append(f"paused {', '.join(paused)} (usage limit)")
    if orphaned:
        why.append(f"{', '.join(orphaned)} (runner gone)")
    return why
