"""A worker's hold on one dispatched session: the lease in the broker, renewed every third of
`lease_s` (taken again if it lapsed and nobody took it since), a person's `tilth stop` passed to
the run, and what happens when the hold is lost (the run stops without pushing, its log and the
session's journal naming the worker that has the session; `hand_on`: the session is queued again
unless another worker holds it or it has ended)."""

from __future__ import annotations

import logging
import threading
import time

from tilth.core.clock import wall
from tilth.dispatch.broker import ENDED, Broker, BrokerDown, enqueue
from tilth.run.stopflag import StopFlag
from tilth.store.events import EventLog, document

log = logging.getLogger("tilth.dispatch")

document({"lease_lost": ("a dispatched session's worker lost it to another worker and stops without pushing, "
                         "the attempt in flight at once (`attempt_cut`) (written on the losing worker only); data: "
                         "to (the other worker's token: host:pid:tag), how (holds: it holds the lease now; took: it "
                         "took the session while this worker's lease had lapsed)", "to how")})


def wait_for_lease(broker: Broker, session_id: str, token: str) -> bool:
    """A worker that just died may still hold the lease for up to `lease_s`; after twice that the
    holder is alive and renewing it, and this job has nothing to do."""
    deadline = time.monotonic() + 2 * broker.dispatch.lease_s
    while not broker.take_lease(session_id, token):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


class Holding(threading.Thread):
    """Renews the lease every third of `lease_s` and passes a person's `tilth stop` to the run."""

    def __init__(self, broker: Broker, session_id: str, token: str, remote: str):
        super().__init__(daemon=True, name=f"lease-{session_id}")
        self.broker, self.session_id, self.token, self.remote = broker, session_id, token, remote
        self.every = broker.dispatch.lease_s / 3
        self.flag = StopFlag()
        self.lost = False
        self.user_stop = False
        self.relayed = 0
        """Inbox items written into the files since the last push."""
        self.secret: bytes | None = None
        self.journal: EventLog | None = None
        """The session's events.jsonl, once its files are here: a lost hold is written there too."""
        self.renewed = time.monotonic()
        self._checking = threading.Lock()
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(min(1.0, self.every)):
            try:
                if time.monotonic() - self.renewed >= self.every and not self.still_held():
                    return
                self.poll_stop()
            except BrokerDown:
                continue  # the lease outlives a short outage; a long one ends in `lost` once it is back

    def lapsed(self) -> bool:
        """The lease may have expired (this process was frozen, or the broker away): nothing goes out
        from here until a renewal or `still_held` says whose the session is."""
        return time.monotonic() - self.renewed >= self.broker.dispatch.lease_s

    def still_held(self) -> bool:
        """Renew the lease. One that lapsed while this process was frozen or the broker away is taken
        again only if nobody took it meanwhile (the broker records each taker): no other worker ran the
        session. One another worker holds, or took and let go, is lost: the run stops, and nothing is
        pushed from here again (the remote refuses a push that is not a fast-forward anyway)."""
        with self._checking:
            if self.lost:
                return False
            if self.broker.renew_lease(self.session_id, self.token):
                self.renewed = time.monotonic()
                return True
            how, other = self.broker.retake_lease(self.session_id, self.token)
            if how == "again":
                log.warning("session %s: the lease lapsed and nobody took it; taken again", self.session_id)
            elif how == "unrecorded":
                log.warning("session %s: the lease lapsed and the broker has no record of who took it since (it "
                            "restarted without its data?); taken again: a push of a session another worker moved "
                            "on is refused by the remote", self.session_id)
            else:
                self.lose_to(other, "holds" if how == "held" else "took")
                return False
            self.renewed = time.monotonic()
            return True

    def lose_to(self, other: str, how: str) -> None:
        """The session is another worker's now (`how`: it `holds` the lease, or `took` the session
        while this lease had lapsed): said in the log and the session's journal."""
        which = "which holds its lease now" if how == "holds" else "which took it while this worker's lease had lapsed"
        if self.journal is not None:
            try:
                self.journal.emit("lease_lost", to=other, how=how)
            except OSError:
                pass  # the log still says it
        self.give_up(f"lease lost to worker {other}, {which}; stopping without pushing",
                     f"lost the session to worker {other}, {which}")

    def give_up(self, logged: str, reason: str) -> None:
        """The session is someone else's to run now (or nobody's: `hand_on` queues it again)."""
        self.lost = True
        log.error("session %s: %s", self.session_id, logged)
        self.flag.set(reason, at_once=True)  # the attempt in flight would only be refused: not one more model call

    def poll_stop(self) -> None:
        if not self.user_stop and (where := self.broker.stop_requested_on(self.session_id)):
            self.user_stop = True
            self.flag.set(f"stop requested with {where}" if where.startswith("`") else f"stop requested on {where}")

    def stop(self) -> None:
        self._done.set()


def hand_on(broker: Broker, session_id: str, remote: str) -> None:
    """A run that stopped because it lost the lease or its push was refused: the session is
    queued again once no lease holds it and it has not ended (the sweep finds it otherwise)."""
    try:
        state = (broker.state(session_id) or {}).get("state")
        if broker.lease_holder(session_id) or state in ENDED:
            return
        enqueue(broker, session_id, remote)
        log.warning("session %s: queued again for the next worker", session_id)
    except BrokerDown:
        pass


ORPHANED = ("running", "finishing")


def sweep(broker: Broker) -> list[str]:
    """Every worker machine, every `maintenance_s`: sessions the broker shows running that no lease
    holds (their worker died, froze, or lost the broker for longer than `lease_s`) are queued again,
    each by one machine only. The lease, not RQ's heartbeat threshold, decides: a dead worker's
    session moves on about `lease_s` after it died."""
    queued = []
    for session_id in broker.session_ids():
        state = broker.state(session_id) or {}
        if state.get("state") not in ORPHANED or broker.lease_holder(session_id):
            continue
        try:
            updated = float(state.get("updated") or 0)
        except ValueError:
            updated = 0.0
        if wall() - updated < broker.dispatch.lease_s:
            continue  # a worker that just took it has not said so yet
        claim = broker.key("sweep", session_id)
        if not broker.redis.set(claim, b"1", nx=True, px=int(broker.dispatch.lease_s * 1000)):
            continue
        try:
            enqueue(broker, session_id, state.get("remote") or broker.dispatch.remote)
        except BrokerDown:
            raise
        except Exception as exc:  # an id or remote the broker should never hold: left for a person
            log.error("session %r: not queued again: %s", session_id, exc)
            continue
        log.warning("session %s: running with no worker holding it; queued again", session_id)
        queued.append(session_id)
    return queued
