"""The runner's notifications: an `EventLog` listener that tells the person who walked away
(`notify`, apprise URLs) that the session ended (done, failed, stopped, paused, waiting), naming a
cap that stopped it; that a task was parked on a question (with the `tilth answer` command); that
a task failed while the session goes on (unless `stop_on_failure`:
then the session's end, at once, says it); that a foreground run waits out a usage limit;
and (`crashed`, called by the loop) that the run crashed. Each attempt is a `notify_sent` /
`notify_failed` event; nothing here ever stops a run. A runner killed outright is announced by
the supervisor (`daemon/crash_notice.py`), which marks it crashed; one that recorded its own crash
is not marked again, so no crash is announced twice.
"""

from __future__ import annotations

from typing import Any

from tilth.core.notify_send import EVENTS, send
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths
from tilth.store.redaction import register_secret
from tilth.views.asking import answer_command, question_lines
from tilth.views.endreport import failed_lines, headline
from tilth.views.figures import spend
from tilth.views.reasons import session_end
from tilth.views.tally import SessionTally, duration, resume_command, tally

document(EVENTS)

KIND = {"done": "success", "failed": "failure", "crashed": "failure"}


def watch(paths: SessionPaths, urls: list[str], events: EventLog, continues: bool) -> Notifier | None:
    """Register the URLs as secrets and listen to the run's events; None when none is set."""
    for url in urls:
        register_secret(url)
    if not urls:
        return None
    notifier = Notifier(paths, urls, events, continues)
    events.listeners.append(notifier)
    return notifier


def crashed(events: EventLog, reason: str) -> None:
    """The run recorded its own crash (no `session_end` follows): tell whoever listens."""
    for listener in events.listeners:
        if isinstance(listener, Notifier):
            listener.crashed(reason)


class Notifier:
    def __init__(self, paths: SessionPaths, urls: list[str], events: EventLog, continues: bool):
        self.paths, self.urls, self.events, self.continues = paths, urls, events, continues
        self.cap: str | None = None

    def __call__(self, event: dict[str, Any]) -> None:
        try:
            self._on(event["type"], event.get("task"), event.get("data") or {})
        except Exception:
            pass  # a notification is never worth a run

    def _on(self, kind: str, task_id: str | None, data: dict[str, Any]) -> None:
        sid = self.paths.id
        if kind == "cap_reached":
            self.cap = str(data.get("cap"))
        elif kind == "task_failed" and self.continues and task_id:
            t = tally(self.paths)
            failed = next((task for task in t.tasks if task.id == task_id), None)
            why = failed.reason.removeprefix("failed ") if failed else "(no reason recorded)"
            lines = [f"Task {task_id}" + (f" ({failed.title})" if failed else "") + f" failed {why}"]
            lines += [f"Session {sid} goes on: {_counts(t)}",
                      f"Next: once it ends, `{resume_command(sid)}` retries {task_id}"]
            self._send("task_failed", f"tilth: task {task_id} failed in {sid}", "\n".join(lines), "failure")
        elif kind == "task_parked" and task_id:
            lines = [f"Task {task_id} waits for your answer ({data.get('asked_by', 'worker')} asked):",
                     str(data.get("question") or ""), f"Answer: {answer_command(sid, task_id)}",
                     f"Session {sid} goes on with the tasks that do not depend on it."]
            self._send("task_parked", f"tilth: {task_id} in {sid} needs your answer", "\n".join(lines), "warning")
        elif kind == "session_paused" and data.get("in_process"):
            self._send("session_paused", f"tilth: session {sid} paused until {data.get('until')}",
                       f"{data.get('reason') or 'usage limit'}; the run waits and goes on by itself.\n"
                       f"`tilth stop {sid}` stops it.", "warning")
        elif kind == "session_end":
            state = str(data.get("state"))
            try:
                t = tally(self.paths)
                tasks, body = f" ({t.done}/{len(t.tasks)} tasks)", short_report(t, self.paths)
                stop_words = t.reason if t.reason and t.reason.startswith("stopped ") else "stopped"
            except Exception as exc:  # the message still goes out, plainer
                said = session_end(state, data.get("reason"), data.get("by"))
                reason = f" ({said})" if said and said != state else ""
                stop_words = session_end(state, None, data.get("by"))
                tasks, body = "", (f"Session {sid}: {state}{reason}\n(no report: {type(exc).__name__})\n"
                                   f"Next: {'tilth pr ' + sid if state == 'done' else resume_command(sid)}")
            if state == "stopped" and self.cap:
                title = f"tilth: session {sid} stopped: cap {self.cap} reached{tasks}"
            elif state == "paused":
                title = f"tilth: session {sid} paused for a usage limit{tasks}"
            elif state == "waiting":
                title = f"tilth: session {sid} waits for your answer{tasks}"
            elif state == "stopped":
                title = f"tilth: session {sid} {stop_words}{tasks}"
            else:
                title = f"tilth: session {sid} {state}{tasks}"
            self._send("session_end", title, body, KIND.get(state, "warning"))

    def crashed(self, reason: str) -> None:
        try:
            sid = self.paths.id
            self._send("crashed", f"tilth: session {sid} crashed",
                       f"Session {sid}: crashed ({reason})\nNext: {resume_command(sid)}", "failure")
        except Exception:
            pass

    def _send(self, trigger: str, title: str, body: str, kind: str) -> None:
        error = send(self.urls, title, body, kind)
        try:
            self.events.emit("notify_failed" if error else "notify_sent", trigger=trigger, ok=error is None,
                             error=error)
        except Exception:
            pass  # e.g. a full disk while the run is already stopping for it


def _counts(t: SessionTally) -> str:
    pending = len(t.tasks) - t.done - t.failed - t.parked
    return f"{t.done}/{len(t.tasks)} tasks done, {t.failed} failed" + (f", {t.parked} parked" if t.parked else "") \
        + (f", {pending} left" if pending else "")


def short_report(t: SessionTally, paths: SessionPaths) -> str:
    """The end report's short lines: no per-task table, only the failed tasks and the next command."""
    lines = [headline(t), f"Tasks: {_counts(t)}"]
    lines += failed_lines(t)
    lines += question_lines(paths, parked := [task.id for task in t.tasks if task.outcome == "parked"])
    head = f" at {t.head_commit[:7]}" if t.head_commit else ""
    lines += [f"Cost: {spend(t.cost_usd, t.cost_is_lower_bound, t.unpriced_calls)}",
              f"Wall time: {duration(t.wall_seconds)}",
              f"Branch: {t.branch}{head}",
              f"Next: tilth pr {t.id}" if t.all_done else f"Next: {answer_command(t.id, parked[0])}" if parked
              else f"Next: {resume_command(t.id)}"]
    return "\n".join(lines)
