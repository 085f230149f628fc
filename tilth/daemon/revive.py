"""A dead supervisor with work waiting is started again: `tilth status` notices that no
supervisor holds daemon.lock although one died (its daemon.pid is left behind: killed,
OOM, power loss; an orderly exit such as `tilth daemon stop` removes it, and that choice
is respected) while supervised sessions are queued, crashed and due for auto-resume, paused
by a usage limit, or orphaned (said running, runner gone), and starts one detached. `tilth
start`/`resume` start one anyway (handoff.submit). The systemd unit (`tilth daemon install`)
covers reboots.

`revive` answers the usual case (a supervisor holds daemon.lock, or none died) from the lock
and daemon.pid alone: `tilth status` calls it every time and must not load the session model
(pydantic) for that; `queue` and the session records are loaded only when a supervisor died."""

from __future__ import annotations

from pathlib import Path

from tilth.core.errors import BadInput, TilthError
from tilth.daemon.control import DaemonPaths, DaemonRunning, running_pid, start_detached
from tilth.store.home import all_session_ids, session_paths
from tilth.store.lock import is_locked

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tilth.daemon import queue


def look(home: Path, ours: set[str] | frozenset[str] = frozenset()) -> list[queue.Seen]:
    """Every readable session as the tick sees it (a damaged session.json is skipped);
    the lock is looked at only for queued, running and paused sessions."""
    from tilth.daemon import queue
    from tilth.store.session import SessionState, load_session

    seen = []
    for sid in all_session_ids(home):
        paths = session_paths(sid, home)
        try:
            record = load_session(paths)
        except BadInput:
            continue
        active = record.state in (SessionState.queued, SessionState.running, SessionState.paused)
        seen.append(queue.Seen(record, locked=active and is_locked(paths.lock), ours=sid in ours))
    return seen


def revive(home: Path) -> str | None:
    """Start a supervisor when the last one died and one is needed; the one line that says so
    (or why it could not), None when nothing was done."""
    if running_pid(home) is not None or not DaemonPaths(home).pid.exists():
        return None  # the usual case, answered without loading the settings model
    from tilth.core.config import Settings
    from tilth.core.settings_load import load_settings
    from tilth.daemon import queue

    try:
        settings = load_settings(home)
    except BadInput:
        settings = Settings()  # the supervisor will say what is wrong with them in its log
    why = queue.needs_supervisor(look(home), queue.AutoResume.from_settings(settings))
    if not why:
        return None
    try:
        pid = start_detached(home, wait=True)
    except DaemonRunning:
        return None  # another command started one meanwhile
    except TilthError as exc:
        return f"tilth: no supervisor was running while {'; '.join(why)} waited, and starting one failed: {exc}"
    return f"tilth: no supervisor was running while {'; '.join(why)} waited; started one (pid {pid})"
