"""A usage limit pauses the session instead of failing the task.

The iteration that hit the limit does not count against the task's attempts; its edits stay in
the worktree. The pause lasts until the reset time the agent gave (capped by
`usage_limit_backoff_max_s`), else `usage_limit_backoff_s` doubled for each pause in a row since
the last task ended. A supervised run records `paused` with the time and exits, and the
supervisor resumes it then; a foreground run records the same and waits it out in-process
(a stop signal ends the wait), holding its lock.
"""

from __future__ import annotations

import os
from datetime import timedelta

from tilth.agents.protocol import UsageLimited
from tilth.core.clock import iso, utc_now
from tilth.core.config import Settings
from tilth.run.outcomes import Workspace
from tilth.run.stopflag import StopFlag
from tilth.store.events import document
from tilth.store.jsonio import parse_object
from tilth.store.session import SessionState, load_session, pause, set_state

document({
    "session_paused": ("an agent hit a usage limit: the session pauses (the attempt does not count); data: until, "
                       "wait_s, reason, reset_given (the agent said when the limit lifts), in_process (a foreground "
                       "run waiting it out; otherwise the supervisor resumes it at `until`)",
                       "until wait_s reason reset_given in_process"),
    "pause_over": "a foreground run waited out its usage-limit pause and goes on",
})

MIN_WAIT_S = 1.0
TAIL_BYTES = 1 << 20


class Paused(Exception):
    """The supervised run ends here, `paused` until `until`."""

    def __init__(self, until: str, reason: str):
        super().__init__(reason)
        self.until, self.reason = until, reason


def pause_seconds(settings: Settings, limit: UsageLimited, pauses_in_a_row: int) -> float:
    if limit.resets_at is not None:
        wait = (limit.resets_at - utc_now()).total_seconds()
    else:
        wait = settings.usage_limit_backoff_s * 2.0 ** min(pauses_in_a_row, 60)
    return max(MIN_WAIT_S, min(wait, settings.usage_limit_backoff_max_s))


def wait_out(ws: Workspace, settings: Settings, stop: StopFlag, task_id: str, limit: UsageLimited) -> None:
    wait = pause_seconds(settings, limit, pauses_in_a_row(ws))
    until, reason = iso(utc_now() + timedelta(seconds=wait)), f"usage limit: {limit}"
    supervised = load_session(ws.paths).supervised
    ws.events.emit("session_paused", task_id, until=until, wait_s=round(wait, 1), reason=reason,
                   reset_given=limit.resets_at is not None, in_process=not supervised)
    if supervised:
        raise Paused(until, reason)
    pause(ws.paths, until, reason)
    stop.sleep(wait)
    set_state(ws.paths, SessionState.running, pid=os.getpid())
    ws.events.emit("pause_over", task_id)


def pauses_in_a_row(ws: Workspace) -> int:
    """`session_paused` events since the last task ended, from the end of the journal."""
    path = ws.paths.events
    try:
        with open(path, "rb") as log:
            log.seek(max(0, path.stat().st_size - TAIL_BYTES))
            lines = log.read().splitlines()
    except FileNotFoundError:
        return 0
    count = 0
    for line in reversed(lines):
        kind = (parse_object(line) or {}).get("type")
        if kind in ("task_done", "task_failed"):
            break
        count += kind == "session_paused"
    return count
