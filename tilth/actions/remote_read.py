"""What the broker holds of dispatched sessions, read for a person (`tilth status`, `tilth logs` and the
dashboard): the broker of this home (`[dispatch]` read without loading the settings when config.toml
does not mention it), every session it lists (`listing`, or the one line that says it is unreachable;
`forgotten`: those only the remote has, as their own record there shows them: a finished one listed as
it ended), and one session's relayed events as readable lines with the spend they add up to (`Relayed`).
What the broker holds is untrusted: ids are checked before they name anything, the rest is only ever
shown as text."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilth.core.errors import BadInput
from tilth.store.home import check_session_id, session_paths

if TYPE_CHECKING:
    from tilth.core.dispatching import Dispatch
    from tilth.dispatch.broker import Broker
    from tilth.dispatch.recorded import Recorded


@dataclass(frozen=True)
class Listing:
    states: list[dict[str, Any]]
    """Each listed session's state hash, its `id` the one the broker lists it by (a checked id)."""
    forgotten: list[dict[str, Any]]
    """The sessions only the remote has that have not finished (or whose record is not trusted): id,
    state (as the record says), progress, reason, worker (a lease holder); a finished one is in `states`,
    as it ended."""
    down: str | None = None
    """`the broker <url> is unreachable (<why>)`: nothing else could be read."""


def dispatch_settings(home: Path) -> Dispatch | None:
    """`[dispatch]` from config.toml; a config without the word is answered without loading settings."""
    config = home / "config.toml"
    try:
        if b"dispatch" not in config.read_bytes():
            return None
    except IsADirectoryError:
        pass  # load_settings refuses it in one line: a config that is not a file is never ignored
    except OSError:
        return None
    from tilth.core.settings_load import load_settings

    return load_settings(home).dispatch


def broker_or_none(home: Path) -> Broker | None:
    """The broker when `[dispatch]` is configured, else None."""
    dispatch = dispatch_settings(home)
    if dispatch is None:
        return None
    from tilth.dispatch.broker import Broker

    return Broker(dispatch)


def forgotten(broker: Broker, home: Path, only: list[str] | None = None) -> list[Recorded]:
    """Sessions on the remote the broker does not know, each with what its own record there says
    (`dispatch/recorded.py`); `only`: just these ids are asked about."""
    from tilth.dispatch.recorded import forgotten as on_remote_only

    return on_remote_only(broker, home, only)


_brokers: dict[str, Broker] = {}


def broker_for(home: Path) -> Broker | None:
    """The broker when `[dispatch]` is configured, else None; one client per broker URL in a process
    that asks often (the dashboard polls every second)."""
    dispatch = dispatch_settings(home)
    if dispatch is None:
        return None
    if dispatch.broker_url not in _brokers:
        from tilth.dispatch.broker import Broker

        _brokers[dispatch.broker_url] = Broker(dispatch)
    return _brokers[dispatch.broker_url]


def unreachable(broker: Broker, exc: BaseException) -> str:
    return f"the broker {broker.dispatch.broker_shown} is unreachable ({exc})"


def valid_id(session_id: object) -> bool:
    try:
        check_session_id(str(session_id))
    except BadInput:
        return False
    return True


def listing(home: Path, *, skip_local: bool = False, with_forgotten: bool = True) -> Listing | None:
    """Every session the broker lists (`skip_local`: not those this machine has a directory of), and
    with `with_forgotten` those on the remote it does not know (a `git ls-remote`); None without
    `[dispatch]`."""
    broker = broker_for(home)
    if broker is None:
        return None
    from tilth.dispatch.broker import BrokerDown

    try:
        ids = [i for i in broker.session_ids() if valid_id(i)]
        if skip_local:
            ids = [i for i in ids if not session_paths(i, home).session_json.is_file()]
        states = [{**(broker.state(i) or {}), "id": i} for i in ids]
        found = forgotten(broker, home) if with_forgotten else []
        lost = [{"id": r.id, "state": r.said, "progress": r.state.get("progress", "?"), "reason": r.untrusted,
                 "worker": broker.lease_holder(r.id) or ""} for r in found if not r.finished]
    except BrokerDown as exc:
        return Listing([], [], unreachable(broker, exc))
    states += [{**r.state, "recorded": True} for r in found if r.finished]
    return Listing(states, lost)


class Relayed:
    """A dispatched session's events as the worker relayed them to the broker, read on from where the
    previous read stopped: readable lines (`stamp`: with their time, as the dashboard shows them) and
    the model calls' spend. The stream holds what was relayed (trimmed when long, lost when the broker
    restarted without persistence), so its spend is a lower bound: `≥ $...`, `unknown` with none."""

    def __init__(self, broker: Broker, session_id: str, everything: bool = False, stamp: bool = False):
        from tilth.store.calls import Totals
        from tilth.views.readable import Readable

        self.broker, self.session_id, self.stamp = broker, session_id, stamp
        self.after = "-"
        self.readable = Readable(everything=everything)
        self.totals = Totals()

    def read(self, block_ms: int | None = None, *, quiet: bool = False) -> list[str]:
        """The lines relayed since the last read; `quiet`: none while the broker does not answer."""
        from tilth.dispatch.broker import BrokerDown
        from tilth.store.calls import Counted
        from tilth.store.events import is_event
        from tilth.views.follow import stamped

        lines: list[str] = []
        try:
            relayed = self.broker.events(self.session_id, self.after, block_ms=block_ms)
        except BrokerDown:
            if quiet:
                return []
            raise
        for entry_id, event in relayed:
            self.after = entry_id
            if not isinstance(event, dict) or not is_event(event):
                continue
            if event["type"] == "model_call":
                self.totals.count(Counted.from_event(event["data"]))
            try:
                said = self.readable.lines(event)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError):
                continue  # a relayed event that is not what its type says: not shown
            lines += stamped(event, said) if self.stamp else said
        return lines

    def spend(self, places: int = 4, brief: bool = True) -> str:
        from tilth.views.figures import spend

        return spend(self.totals.cost_usd, True, self.totals.unpriced_calls, places, brief)


_followed: dict[tuple[str, str], Relayed] = {}


def relayed_spend(broker: Broker, session_id: str, places: int = 2) -> str:
    """The spend of a session's relayed model calls, each read once per process (the dashboard asks every
    second); `unknown` while the broker does not answer."""
    from tilth.dispatch.broker import BrokerDown

    key = (broker.dispatch.broker_url, session_id)
    if key not in _followed:
        _followed[key] = Relayed(broker, session_id)
    follower = _followed[key]
    try:
        follower.read()
    except BrokerDown:
        return "unknown"
    return follower.spend(places)
