"""A `tilth worker` whose broker came back empty (restarted without persistence, or its data lost)
brings back the sessions it can vouch for: those whose record on the shared remote is the very one
this machine pushed last (files snapshot and branch tip; `carry.last_sent`, refs kept in its own
clone, never read from the broker or the remote). Each is made known to the broker again and queued
if unfinished, as `tilth resume --forgotten` does (`recorded.recover`: checked as a worker checks a
snapshot, claimed once, left alone while a lease holds it). A session another machine pushed after
this one, or that no worker ran yet, is left: this worker cannot say it is still as it left it;
a supervisor with `[dispatch]` or a person (`tilth resume --forgotten`) brings those back. The
broker is not marked as remembering for that reason; this machine marks only its own pass, once
for the broker's life (a broker that forgets again forgets the mark too)."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

from tilth.core.errors import BadInput
from tilth.core.processes import proc_stat
from tilth.dispatch.broker import Broker
from tilth.dispatch.recorded import forgotten, recover
from tilth.git.carry import clone_dir, last_sent
from tilth.git.gitcli import GitFailed
from tilth.git.records import remote_record
from tilth.store.home import SESSION_ID_PATTERN, session_paths
from tilth.store.session import SessionState, load_session


def machine_mark(broker: Broker, home: Path) -> str:
    machine = hashlib.sha256(f"{socket.gethostname()}:{home.resolve()}".encode()).hexdigest()[:16]
    return broker.key("vouched", machine)


def bring_back_own(broker: Broker, home: Path) -> list[str]:
    """Once the broker came back empty: the sessions this machine pushed last, made known again (the
    unfinished ones queued); one line each. Nothing while the broker remembers, or once this machine
    did its pass for the broker's life; a remote that cannot be read is tried again next time."""
    mark = machine_mark(broker, home)
    if broker.remembers() or broker.redis.exists(mark):
        return []
    clone = clone_dir(home / "clones", broker.dispatch.remote)
    own: list[str] = []
    if (clone / ".git").exists():
        try:
            on_remote = remote_record(home, broker.dispatch.remote)
        except GitFailed:
            return []
        own = sorted(i for i, there in on_remote.items()
                     if SESSION_ID_PATTERN.match(i) and last_sent(clone, i) == (there.files, there.branch)
                     and not running_here(home, i))
    lines = recover(broker, forgotten(broker, home, only=own), whole=False) if own else []
    broker.redis.set(mark, b"1")
    return lines


def running_here(home: Path, session_id: str) -> bool:
    """A session a job on this machine runs now: its lease, gone with the broker's memory, is taken
    again at its next renewal, and queuing it meanwhile would only start a job that waits for nothing."""
    try:
        record = load_session(session_paths(session_id, home))
    except BadInput:
        return False
    stat = proc_stat(record.pid) if record.state == SessionState.running and record.pid else None
    return stat is not None and stat[0] != "Z"
