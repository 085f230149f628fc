"""A dispatched session (one this machine does not have but the broker knows) as a place to act on
(`Dispatched`, which `place.locate` returns for it): answer, note, stop and resume through the broker
(the worker that runs the session writes answers and notes into its files, and stops at a safe point when
asked), its status, relayed logs and `tilth wait`; and the lookup (`look_up`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tilth.actions.acted import Acted, only_parked
from tilth.core.errors import BadInput, TilthError

if TYPE_CHECKING:
    from tilth.dispatch.broker import Broker
    from tilth.dispatch.recorded import Recorded

WAIT_EXIT = {"done": 0, "failed": 1, "refused": 1, "stopped": 3, "crashed": 3, "waiting": 5}
"""The end states of a dispatched session, with `tilth wait`'s exit code for each."""


def ended(broker: Broker, session_id: str, state: dict[str, Any]) -> bool:
    """The session has an end state and no worker holds it (a handed-back one is queued again)."""
    return state.get("state") in WAIT_EXIT and not broker.lease_holder(session_id)


def look_up(home: Path, session_id: str) -> Dispatched | None:
    """The session when this machine does not have it but the broker knows it (or the remote has it and
    the broker forgot it); None without `[dispatch]` or when neither knows it."""
    from tilth.actions.remote_read import broker_for, forgotten

    broker = broker_for(home)
    if broker is None:
        return None
    from tilth.dispatch.broker import BrokerDown

    try:
        state = broker.state(session_id)
    except BrokerDown as exc:
        raise BadInput(f"the broker {broker.dispatch.broker_shown} is unreachable ({exc}); start it or fix "
                       "[dispatch] broker_url") from None
    recorded = None
    if state is None and (found := forgotten(broker, home, [session_id])):
        recorded = found[0]
        state = as_listed(recorded, broker.dispatch.remote)
    return Dispatched(broker, state, session_id, recorded) if state is not None else None


def as_listed(recorded: Recorded, remote: str) -> dict[str, Any]:
    """A session only the remote's record has, as a state hash: a finished one as it ended, any other
    `forgotten`, the reason saying what its record shows."""
    base = {"id": recorded.id, "remote": remote, "branch": f"session/{recorded.id}"}
    if recorded.finished:
        return {**recorded.state, **base}
    shown = f"its record there is not trusted: {recorded.untrusted}" if recorded.untrusted else \
        f"{recorded.said} there, {recorded.state.get('progress', '?')} done"
    return {**recorded.state, **base, "state": "forgotten",
            "reason": f"on the remote but not in the broker (restarted without persistence?; {shown}); "
                      f"`tilth resume {recorded.id}` queues it again"}


class Unreachable(TilthError):
    """The broker did not answer: `the broker <url> is unreachable (<why>)`."""


class Dispatched:
    """A session a worker runs, seen through the broker's state hash of it (`state`, read at the lookup;
    `fresh_state` reads it again)."""

    dispatched = True
    known = True

    def __init__(self, broker: Broker, state: dict[str, Any], session_id: str, recorded: Recorded | None = None):
        self.broker, self.state, self.id = broker, state, session_id
        self.recorded = recorded
        """What the remote's record says of a session the broker forgot; None for one it knows."""

    def _known(self) -> None:
        """An action that needs the broker's record of the session."""
        if self.state.get("state") == "forgotten":
            raise BadInput(f"session {self.id} is {self.state['reason']}")
        if self.recorded is not None:
            raise BadInput(f"session {self.id} is {self.state.get('state')} on the remote, but the broker forgot it; "
                           f"`tilth resume {self.id}` registers it again (nothing runs), then try again")

    def _task_ids(self) -> dict[str, dict[str, Any]]:
        return {t["id"]: t for t in self.state.get("tasks", [])}

    def answer(self, text: str, *, by: str, task: str | None = None) -> Acted:
        """Left in the broker; the worker that runs the session next writes it into its files."""
        from tilth.actions.answering import checked_answer
        from tilth.dispatch.broker import enqueue

        text = checked_answer(text)
        self._known()
        tasks = self._task_ids()
        if task is None:
            task = only_parked(self.id, [i for i, t in tasks.items() if t["status"] == "parked"])
        if task not in tasks:
            raise BadInput(f"session {self.id} has no task {task!r}; `tilth status {self.id}` lists its tasks")
        if tasks[task]["status"] != "parked":
            raise BadInput(f"task {task} of session {self.id} is not waiting for an answer (it is "
                           f"{tasks[task]['status']})")
        self.broker.leave(self.id, "answer", task, text, by)
        if self.ended():
            enqueue(self.broker, self.id, self.state.get("remote") or self.broker.dispatch.remote)
            return Acted(self.id, f"answer recorded for {task}; session {self.id} queued again for a worker",
                         dispatched=True)
        return Acted(self.id, f"answer recorded for {task}: session {self.id} is {self.state.get('state')}; its "
                              "worker takes it at the next task boundary", dispatched=True)

    def note(self, text: str, *, by: str, task: str | None = None) -> Acted:
        from tilth.actions.noting import checked_note

        text = checked_note(text)
        self._known()
        if task and task not in self._task_ids():
            raise BadInput(f"session {self.id} has no task {task!r}; see `tilth status {self.id}`")
        self.broker.leave(self.id, "note", task, text, by)
        scope = f"task {task}" if task else "every later task"
        return Acted(self.id, f"note for session {self.id} ({scope}): its worker takes it at the next task "
                              "boundary", dispatched=True)

    def stop(self, *, by: str, now: bool = False) -> Acted:
        """Asked of its worker (`now` is not: a worker stops at a safe point)."""
        self._known()
        self.broker.request_stop(self.id, by)
        holder = self.broker.lease_holder(self.id)
        if holder:
            what = (f"session {self.id}: asked its worker ({holder}) to stop after the current iteration; "
                    f"`tilth wait {self.id}` waits for it")
        else:
            what = (f"session {self.id} was {self.state.get('state')}; it is stopped when a worker takes it "
                    f"(`tilth resume {self.id}` queues it again)")
        return Acted(self.id, what, dispatched=True)

    def resume(self, *, by: str, reload_settings: bool = False, foreground: bool = False) -> Acted:
        """Queued again for a worker; `by` is not kept (a job carries only what it runs), nor are this
        machine's settings (a worker takes its own), and it never runs in this process."""
        from tilth.dispatch.submit import resume_dispatched as requeue

        if self.recorded is not None and self.recorded.finished:
            from tilth.dispatch.recorded import recover

            return Acted(self.id, "\n".join(recover(self.broker, [self.recorded])), dispatched=True)
        job = requeue(self.broker, self.id, self.state)
        if job is None:
            return Acted(self.id, f"session {self.id} is already queued (job {self.state.get('job')}); nothing to do",
                         dispatched=True)
        return Acted(self.id, f"session {self.id} queued again for a worker (job {job})", dispatched=True)

    def status(self, as_json: bool) -> str:
        if as_json:
            import orjson

            return orjson.dumps(self.state).decode()
        from tilth.views.remote_status import one_lines

        return "\n".join(one_lines(self.state, self.state.get("id") or "?"))

    def fresh_state(self) -> dict[str, Any]:
        """The broker's state hash read again (the one of the lookup when it has none now)."""
        from tilth.dispatch.broker import BrokerDown

        try:
            return self.broker.state(self.id) or self.state
        except BrokerDown as exc:
            raise Unreachable(f"the broker {self.broker.dispatch.broker_shown} is unreachable ({exc})") from None

    def ended(self) -> bool:
        """The session has an end state and no worker holds it (a handed-back one is queued again)."""
        return ended(self.broker, self.id, self.state)

    def logs(self, say: Callable[[str], None], *, follow: bool = False, everything: bool = False,
             last: int | None = None) -> int:
        """The events its worker relayed, as readable lines; with `follow`, until it has ended."""
        from tilth.actions.remote_read import Relayed

        self._known()
        relayed = Relayed(self.broker, self.id, everything=everything)
        lines = relayed.read()
        for line in lines[max(0, len(lines) - last):] if last is not None else lines:
            say(line)
        while follow:
            state = self.broker.state(self.id) or {}
            for line in relayed.read(block_ms=1000):
                say(line)
            if ended(self.broker, self.id, state):
                break
        return 0

    def wait(self, timeout: float | None, say: Callable[[str], None], tell: Callable[[str], None]) -> int:
        """Until it has ended: `WAIT_EXIT` of its end state, 4 on timeout (or when the broker forgot it).
        `say`: the end; `tell`: what is not the answer (stderr)."""
        import time

        from tilth.views.follow import PROGRESS_S

        if self.state.get("state") == "forgotten":
            tell(f"session {self.id}: {self.state['reason']}")
            return 4
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        next_progress = started + PROGRESS_S
        while True:
            state = self.broker.state(self.id) or (self.state if self.recorded is not None else {})
            if ended(self.broker, self.id, state):
                say(f"session {self.id}: {state['state']}" + (f" ({state['reason']})" if state.get("reason") else ""))
                return WAIT_EXIT[state["state"]]
            now = time.monotonic()
            if deadline is not None and now > deadline:
                tell(f"session {self.id}: still {state.get('state')} after {timeout:g}s")
                return 4
            if now >= next_progress:
                next_progress = now + PROGRESS_S
                tell(f"tilth: still waiting after {now - started:.0f}s: {self.id} {state.get('state')}")
            self.broker.events(self.id, "$", block_ms=1000)
