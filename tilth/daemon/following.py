"""With `follow_pr`: the supervisor follows every open pull request tilth opened, one poll at a time.

Each poll is a child (`Follower`: `tilth follow <id> --once`), so the tick never waits on the forge or on a
follow-up task's agents; at most one runs at once, and one PR is polled again no sooner than `follow_poll_s`
(with jitter of 10%, so several supervisors' polls spread out) after its last poll began. A session that runs
or waits in the queue is left alone until it settles: its runner holds the session, and a follow-up task
would have to wait for it anyway.
"""

from __future__ import annotations

import logging
import os
import random
import signal
from datetime import datetime, timedelta
from pathlib import Path

from tilth.core.config import Settings
from tilth.core.errors import BadInput
from tilth.daemon.children import Follower, describe_exit
from tilth.daemon.queue import Seen
from tilth.store.home import session_paths
from tilth.store.pr_record import load_pr
from tilth.store.session import SessionState

log = logging.getLogger("tilth.daemon")

BUSY = (SessionState.running, SessionState.queued)


class Follows:
    def __init__(self, home: Path):
        self.home = home
        self.current: Follower | None = None
        self.due: dict[str, datetime] = {}

    def tick(self, settings: Settings, seen: list[Seen], now: datetime) -> None:
        if self.current is not None:
            if self.current.returncode is None:
                return
            log.info("session %s: pull request polled (%s)", self.current.session_id,
                     describe_exit(self.current.returncode))
            self.current = None
        if not settings.follow_pr:
            return
        for sid in self._followed(seen, now):
            if self.due.get(sid, now) <= now:
                self.due[sid] = now + timedelta(seconds=settings.follow_poll_s * random.uniform(0.9, 1.1))
                self.current = Follower(self.home, sid)
                log.info("session %s: polling its pull request (pid %d)", sid, self.current.pid)
                return

    def _followed(self, seen: list[Seen], now: datetime) -> list[str]:
        """Sessions with an open pull request tilth opened, least recently polled first."""
        found = []
        for one in seen:
            if one.locked or one.ours or one.record.state in BUSY:
                continue
            try:
                pr = load_pr(session_paths(one.record.id, self.home).dir)
            except BadInput:
                continue
            if pr is not None and pr.followed:
                found.append(one.record.id)
        return sorted(found, key=lambda sid: self.due.get(sid, now))

    def stop(self) -> None:
        """The poll in flight and its follow-up task stop with the supervisor (SIGTERM to its group)."""
        if self.current is not None and self.current.returncode is None:
            try:
                os.killpg(self.current.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
