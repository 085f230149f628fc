"""Sessions the broker forgot (restarted without persistence, or gone between a session's push and its
registration), read from their own record on the shared remote: the last files snapshot a worker
pushed says how each ended or how far it got (`forgotten`). What follows (`recover`): a finished
session (done, failed, stopped, waiting) is registered again as it ended, and no job runs for it; an
unfinished one (queued, running, paused, crashed) is queued again unless a worker holds its lease;
one whose snapshot does not verify (with `[dispatch] secret_file`) or cannot be read is left for a
person. The snapshot is data: it decides how a session is listed and whether it is finished, never
what a worker runs (the worker reads and checks the snapshot again when it takes the session)."""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilth.core.errors import TilthError
from tilth.dispatch.broker import Broker, enqueue
from tilth.dispatch.carried import restore, unseal
from tilth.dispatch.mirror import state_of
from tilth.dispatch.signing import load_secret
from tilth.git.gitcli import GitFailed
from tilth.git.records import RECORDED_REF, fetch_records, remote_record
from tilth.store.home import SESSION_ID_PATTERN, session_paths

log = logging.getLogger("tilth.dispatch")

FINISHED = ("done", "failed", "stopped", "waiting")
"""The end states a session's own record may show: registered again as they are, nothing run."""
NEXT = {"failed": " (`tilth resume {id}` retries its failed tasks)", "stopped": " (`tilth resume {id}` continues it)",
        "waiting": " (`tilth answer {id} TASK ...` queues it again)"}


@dataclass(frozen=True)
class Recorded:
    """One forgotten session as its record on the remote shows it."""

    id: str
    state: dict[str, Any] = field(default_factory=dict)
    """`mirror.state_of` the snapshot's files (state, reason, progress, tasks, questions); empty when
    the snapshot is not trusted."""
    untrusted: str = ""
    """Why the snapshot is not taken as the session's record (its signature, its files)."""

    @property
    def said(self) -> str:
        """The state the record shows (`unverified` when it is not trusted)."""
        return "unverified" if self.untrusted else str(self.state.get("state") or "?")

    @property
    def finished(self) -> bool:
        return not self.untrusted and self.said in FINISHED


def forgotten(broker: Broker, home: Path, only: list[str] | None = None) -> list[Recorded]:
    """Sessions on the remote (`refs/tilth/sessions/*`) the broker does not know (`only`: just these
    ids are asked about), each with what its snapshot says; none when the remote cannot be reached."""
    remote = broker.dispatch.remote
    try:
        on_remote = remote_record(home if home.is_dir() else Path.cwd(), remote)
    except GitFailed:
        return []
    asked = sorted(i for i in on_remote if SESSION_ID_PATTERN.match(i) and (only is None or i in only))
    known = set(broker.session_ids()) if only is None else {i for i in asked if broker.state(i) is not None}
    lost = [i for i in asked if i not in known]
    if not lost:
        return []
    try:
        records = fetch_records(home / "clones", remote, lost)
    except GitFailed as exc:
        return [Recorded(i, untrusted=f"its record on the remote could not be fetched ({exc})") for i in lost]
    secret = load_secret(broker.dispatch)
    return [read(records, i, on_remote[i].branch, secret) for i in lost]


def read(records: Path, session_id: str, branch_tip: str | None, secret: bytes | None) -> Recorded:
    """What the fetched snapshot of one session says, checked as a worker checks it (names, modes,
    sizes, the signature over its files and branch tip)."""
    try:
        files = unseal(records, session_id, secret, (RECORDED_REF.format(session_id), branch_tip)).files
        with tempfile.TemporaryDirectory(prefix="tilth-record-") as scratch:
            paths = session_paths(session_id, Path(scratch))
            restore(paths, files)
            state = state_of(paths)
    except TilthError as exc:
        return Recorded(session_id, untrusted=str(exc))
    return Recorded(session_id, {**state, "id": session_id})


def recover(broker: Broker, found: list[Recorded], whole: bool = True) -> list[str]:
    """Each forgotten session made known to the broker again from its record, and the unfinished ones
    queued: one line each saying what was done. A session another machine registered meanwhile (its
    claim, one SADD, is taken once) and one a worker holds are not queued again. `whole`: these were
    all it forgot, and the broker is marked as remembering (a worker recovering only the sessions it
    pushed last leaves the mark, so a supervisor's recovery of the rest still follows)."""
    remote = broker.dispatch.remote
    lines = []
    for record in found:
        if record.untrusted:
            lines.append(f"session {record.id}: not queued: {record.untrusted}; `tilth resume {record.id}` "
                         "queues it for a worker, which checks it again")
            continue
        if not broker.claim(record.id):
            lines.append(f"session {record.id}: the broker knows it again already; left as it is")
            continue
        fields = {**record.state, "remote": remote, "branch": f"session/{record.id}", "worker": ""}
        if record.finished:
            broker.set_state(record.id, fields)
            lines.append(f"session {record.id}: {record.said} on the remote; known to the broker again, nothing "
                         f"run{NEXT.get(record.said, '').format(id=record.id)}")
        elif holder := broker.lease_holder(record.id):
            broker.set_state(record.id, {**fields, "worker": holder})
            lines.append(f"session {record.id}: {record.said} on the remote, held by {holder}; left to it")
        else:
            broker.set_state(record.id, {**fields, "state": "queued"})
            job = enqueue(broker, record.id, remote)
            lines.append(f"session {record.id}: {record.said} on the remote; queued again for a worker (job {job})")
    if whole:
        broker.remember()
    return lines
