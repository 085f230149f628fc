"""The supervisor's one notification: a runner died, so no runner is alive to say so. Sent
once per crash the supervisor marks (`transitions.mark_crashed` changes a session only once),
in a thread of its own so a dead endpoint never holds up a tick; the attempt is recorded in the
session's journal (`notify_sent` / `notify_failed`). A crash the runner recorded itself is the
runner's to announce (`run/session_notices.py`) and is never marked here."""

from __future__ import annotations

import logging
import threading

from tilth.core.notify_send import EVENTS, TIMEOUT_S, send
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths
from tilth.store.prd_peek import peek_plan
from tilth.store.prd_rules import TaskStatus
from tilth.store.redaction import register_secret
from tilth.store.session import load_session

document(EVENTS)

log = logging.getLogger("tilth.daemon")


class Notices:
    def __init__(self) -> None:
        self.urls: list[str] = []
        self.sending: list[threading.Thread] = []

    def use(self, urls: list[str]) -> None:
        """The URLs of the home's settings as last loaded, each registered for redaction."""
        for url in urls:
            register_secret(url)
        self.urls = list(urls)

    def crashed(self, paths: SessionPaths) -> None:
        """The supervisor has just marked the session crashed: tell the person, in the background."""
        if not self.urls:
            return
        try:
            title, body = crash_message(paths)
        except Exception as exc:
            title, body = f"tilth: session {paths.id} crashed", f"(its record is unreadable: {type(exc).__name__})"
        thread = threading.Thread(target=self._send, args=(paths, list(self.urls), title, body),
                                  name=f"notify-{paths.id}", daemon=True)
        self.sending = [t for t in self.sending if t.is_alive()] + [thread]
        thread.start()

    def _send(self, paths: SessionPaths, urls: list[str], title: str, body: str) -> None:
        error = send(urls, title, body, "failure")
        try:
            EventLog(paths.events).emit("notify_failed" if error else "notify_sent", trigger="crashed",
                                        ok=error is None, error=error)
        except Exception:
            pass
        if error:
            log.warning("session %s: the crash notification failed: %s", paths.id, error)

    def drain(self) -> None:
        """Let notifications under way finish (each is bounded by its timeout) before the supervisor exits."""
        for thread in self.sending:
            thread.join(TIMEOUT_S + 1)


def crash_message(paths: SessionPaths) -> tuple[str, str]:
    record = load_session(paths)
    lines = [f"Session {record.id}: crashed ({record.reason or 'runner gone'})"]
    try:
        statuses = [task.status for task in peek_plan(paths.prd)]
        done, failed = statuses.count(TaskStatus.done), statuses.count(TaskStatus.failed)
        lines.append(f"Tasks: {done}/{len(statuses)} tasks done, {failed} failed")
    except Exception:
        pass
    lines.append(f"Branch: {record.branch}")
    if record.auto_resume_at:
        lines.append(f"Next: the supervisor resumes it at {record.auto_resume_at} (`tilth stop {record.id}` "
                     f"cancels that; `tilth resume {record.id}` resumes it now)")
    else:
        lines.append(f"Next: tilth resume {record.id}")
    return f"tilth: session {record.id} crashed", "\n".join(lines)
