"""The runner's copy of a dispatched session in the broker, for `tilth status/logs/wait` on any
machine: events.jsonl's lines appended to the session's stream, and its state hash.

Best effort and self-healing: the mirror remembers how far into events.jsonl it got, so after a
broker outage the next event sends everything it missed; the session's files and branch on the
remote stay the truth.
"""

from __future__ import annotations

import logging
import os
import time

from tilth.dispatch.broker import Broker, BrokerDown
from tilth.store.answers import last_question
from tilth.store.home import SessionPaths
from tilth.store.prd_peek import peek_plan
from tilth.store.session_peek import peek_session

log = logging.getLogger("tilth.dispatch")
FINAL_RETRY_S = 1.0
"""How often a final state the broker did not take is tried again: it is the last thing the job does."""
STATE_EVENTS = {"session_started", "task_started", "task_done", "task_failed", "task_parked", "session_end",
                "session_paused"}


class Mirror:
    def __init__(self, broker: Broker, paths: SessionPaths):
        self.broker, self.paths = broker, paths
        self.offset = self._mirrored_bytes()
        self.final = False
        """The run's last push is on the remote: its end state may be shown (until then `finishing`)."""
        self.on_remote = state_of(paths)["progress"]
        """The progress the remote has (the files restored, then each successful push): what is shown."""

    def _mirrored_bytes(self) -> int:
        """Where a previous worker's mirror stopped: the journal it restored already went out."""
        try:
            return os.path.getsize(self.paths.events)
        except FileNotFoundError:
            return 0

    def catch_up(self) -> None:
        try:
            with open(self.paths.events, "rb") as f:
                f.seek(self.offset)
                fresh = f.read()
        except FileNotFoundError:
            return
        complete = fresh[:fresh.rfind(b"\n") + 1]
        if not complete:
            return
        lines = [line for line in complete.splitlines() if line.strip()]
        try:
            self.broker.append_events(self.paths.id, lines)
        except BrokerDown:
            return
        self.offset += len(complete)
        if any(any(f'"type":"{kind}"'.encode() in line for kind in STATE_EVENTS) for line in lines):
            self.publish_state()

    def pushed(self) -> None:
        self.on_remote = state_of(self.paths)["progress"]

    def publish_state(self, **extra: object) -> None:
        """The state hash now; the final one (`final`: nothing follows it) is tried again until the
        broker answers, for up to `push_patience_s`."""
        state = state_of(self.paths)
        if not self.final and state["state"] not in ("running", "queued", "paused"):
            state["state"] = "finishing"
        state["progress"] = self.on_remote
        try:
            self.broker.set_state(self.paths.id, {**state, **extra})
        except BrokerDown:
            if not self.final:
                log.warning("session %s: broker unreachable; its state goes out with the next event", self.paths.id)
            elif self._publish_when_back({**state, **extra}):
                self.catch_up()

    def _publish_when_back(self, fields: dict[str, object]) -> bool:
        patience = self.broker.dispatch.push_patience_s
        log.warning("session %s: broker unreachable; its end state (%s) goes out when it answers again (trying "
                    "for up to %.0fs)", self.paths.id, fields["state"], patience)
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            time.sleep(FINAL_RETRY_S)
            try:
                self.broker.set_state(self.paths.id, fields)
            except BrokerDown:
                continue
            log.warning("session %s: the broker answers again; its end state (%s) is published", self.paths.id,
                        fields["state"])
            return True
        log.error("session %s: the broker did not answer for %.0fs; its end state is on the remote only "
                  "(`tilth status` reads it there once the broker has forgotten the session)", self.paths.id, patience)
        return False


def state_of(paths: SessionPaths) -> dict[str, object]:
    record = peek_session(paths)
    try:
        tasks = [{"id": t.id, "title": t.title, "status": t.status} for t in peek_plan(paths.prd)]
    except Exception:
        tasks = []
    done = sum(t["status"] == "done" for t in tasks)
    questions = [{"task": t["id"], "question": asked.question if asked else ""} for t in tasks
                 if t["status"] == "parked" for asked in [last_question(paths.dir, t["id"])]]
    current = next((t["id"] for t in tasks if t["status"] == "in_progress"), "")
    return {"id": paths.id, "state": record.state, "reason": record.reason or "", "progress": f"{done}/{len(tasks)}",
            "current": current, "branch": record.branch, "tasks": tasks, "questions": questions}
