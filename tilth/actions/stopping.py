"""A person stops a session this machine has (`stop_here`, the local half of `stop_session`; a dispatched
session's stop is asked of its worker, `remote.Dispatched.stop`) after its current iteration (resumable),
or with `now` kills its runner; a queued, crashed-awaiting-auto-resume or paused session is simply stopped."""

from __future__ import annotations

from pathlib import Path

from tilth.actions.acted import Acted, changeable, record_act
from tilth.store.home import SessionPaths


def stop_here(home: Path, session_id: str, *, by: str, now: bool = False) -> Acted:
    from tilth.daemon.handoff import stop_session as stop_local

    paths, _ = changeable(home, session_id, archived_ok=True)
    def before_signal(pid: int) -> None:
        """A runner is told who stopped it before it is signalled, so its end (and report) can say so."""
        record_act(paths, "stop", by, now=now, pid=pid)

    stop = stop_local(paths, now=now, by=by, before_signal=before_signal)
    if stop.outcome == "nothing":
        return Acted(paths.id, stop.line)
    if stop.outcome == "asked":
        return Acted(paths.id, stop.line, ("acted",))
    if stop.outcome == "killed":
        written = _report(paths)
        return Acted(paths.id, stop.line + written, ("acted", "session_stopped"))
    return Acted(paths.id, stop.line, ("session_stopped", record_act(paths, "stop", by, now=now)))


def _report(paths: SessionPaths) -> str:
    """report.md for a runner killed before it could write its own (the end it would have written)."""
    from tilth.core.errors import TilthError
    from tilth.views.endreport import REPORT, record_report

    try:
        record_report(paths)
    except (TilthError, OSError) as exc:
        return f"; no {REPORT}: {exc}"
    return f"; report: {paths.dir / REPORT}"
