"""Handing a local session to the supervisor for an action: the keys check before it (keys never
travel with a session) and the hand-over with the lines that say where it went."""

from __future__ import annotations

from pathlib import Path

from tilth.core.errors import BadInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tilth.core.config import Settings
    from tilth.store.home import SessionPaths


def supervisor_sees_keys(home: Path, settings: Settings) -> list[str]:
    """Before a session is handed over: a running supervisor lacking a key this process gives the
    session is refused (keys never travel with a session); other differences come back as warnings."""
    from tilth.core.travel import keys_in_use
    from tilth.daemon.control import environment_differences, holder, missing_keys

    info = holder(home)
    if info is None:
        return []  # the supervisor is started from this process, with its environment
    missing = missing_keys(info, keys_in_use(settings))
    if missing:
        names = " and ".join(missing)
        where = f"put it in {home / 'config.toml'}, or " if all(n.startswith("TILTH_") for n in missing) else ""
        raise BadInput(f"the running supervisor (pid {info.get('pid')}) was started without {names}, which this "
                       f"session needs and which is never written to disk: {where}"
                       "`tilth daemon stop` and start again from this shell")
    return list(environment_differences(info, handing_over=True))


def hand_over(paths: SessionPaths, reason: str, resume: bool, by: str, start_at: str | None = None) -> list[str]:
    """Queue the session (a `session_queued` event naming `by`) and make sure a supervisor runs;
    the lines that say so."""
    from tilth.daemon.handoff import submit

    h = submit(paths, reason, resume, start_at, wait=reason != "start", by=by)
    when = f"scheduled for {h.start_at}" if h.start_at else "queued"
    how = "started" if h.started_supervisor else "running"
    return [f"session {h.session_id} {when}; supervisor pid {h.supervisor_pid} ({how})",
            f"  follow it:    tilth logs {h.session_id} -f",
            f"  wait for it:  tilth wait {h.session_id}",
            "  all sessions: tilth status"]
