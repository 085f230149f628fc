"""Telling a person who walked away: one message to every configured apprise URL (`notify`).

`send` never raises and never waits longer than its timeout: apprise runs in a daemon thread
joined with a timeout, so a dead or silent endpoint costs at most that long and a hung one is
left behind. The URLs carry tokens: the caller registers them for redaction, and nothing here
puts a URL into the error it returns (a bad URL is named by its position). apprise's own log
lines never reach a terminal or a log file; the warnings of a failed send become the error.
apprise is imported only when a message is sent.
"""

from __future__ import annotations

import logging
import threading

TIMEOUT_S = 10.0
"""The longest a notification may hold up a run or the supervisor."""

KINDS = ("info", "success", "warning", "failure")
"""apprise's message types (colour or icon on most services)."""

EVENTS = {
    "notify_sent": ("a notification reached every configured service; data: trigger (session_end|task_failed|"
                    "session_paused|crashed|pr_green|pr_parked), ok, error (null); never the URL", "trigger ok error"),
    "notify_failed": ("a notification did not reach some service (or the URL is not one apprise knows); "
                      "data: trigger, ok (false), error (what failed, each URL named by its position only)",
                      "trigger ok error"),
}
"""The events recording each attempt, documented (`events.document`) by each module that emits them."""

_ERROR_CHARS = 300


class _Capture(logging.Handler):
    """apprise's warnings, kept per sending thread; nothing propagates to the process's logs."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.sinks: dict[int, list[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        sink = self.sinks.get(record.thread or 0)
        if sink is not None:
            try:
                sink.append(record.getMessage())
            except Exception:
                pass


_capture = _Capture()
_installed = threading.Lock()


def _install() -> None:
    with _installed:
        logger = logging.getLogger("apprise")
        if _capture not in logger.handlers:
            logger.addHandler(_capture)
            logger.propagate = False


def send(urls: list[str], title: str, body: str, kind: str = "info", timeout: float = TIMEOUT_S) -> str | None:
    """Send `title` and `body` to every URL: None when all took it, else what failed (one line)."""
    if not urls:
        return None
    outcome: list[str | None] = []

    def attempt() -> None:
        try:
            outcome.append(_deliver(urls, title, body, kind if kind in KINDS else "info"))
        except BaseException as exc:  # a broken service or an apprise bug is an error string, never a crash
            outcome.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:_ERROR_CHARS])

    worker = threading.Thread(target=attempt, name="tilth-notify", daemon=True)
    try:
        worker.start()
        worker.join(timeout)
    except BaseException as exc:
        return f"could not start the notification: {type(exc).__name__}"
    if not outcome:
        return f"no answer within {timeout:g}s; given up"
    return outcome[0]


def _deliver(urls: list[str], title: str, body: str, kind: str) -> str | None:
    import apprise

    _install()
    messages: list[str] = []
    _capture.sinks[threading.get_ident()] = messages
    try:
        sender = apprise.Apprise(asset=apprise.AppriseAsset(async_mode=False))
        problems = [f"notify URL {i} of {len(urls)} is not one apprise knows"
                    for i, url in enumerate(urls, 1) if not sender.add(url)]
        if len(sender) == 0:
            return "; ".join(problems)
        del messages[:]  # what `add` said may quote a URL
        result = sender.notify(body=body, title=title, notify_type=kind)
        if not result:
            logs = getattr(result, "logs", None)  # apprise 2: each service's warnings, whichever thread sent
            if callable(logs):
                messages = [str(entry.message) for entry in logs() if getattr(entry, "level", "") != "INFO"]
            said = "; ".join(dict.fromkeys(m.strip() for m in messages if m.strip()))
            problems.append("not delivered" + (f": {said}" if said else ""))
    finally:
        _capture.sinks.pop(threading.get_ident(), None)
    return "; ".join(problems)[:_ERROR_CHARS] or None
