"""What of a dispatched session travels through the shared remote, and how it comes back: as
data. Only the session files tilth writes go out (`CARRIED`); a snapshot is restored only when
everything in it is such a file (plain, named as tilth names them, within size bounds) and, with
`[dispatch] secret_file`, carries a valid signature over its files and branch tip."""

from __future__ import annotations

import re
from pathlib import Path

from tilth.dispatch.signing import matches, signature_in, signed_message, snapshot_signature
from tilth.git.carry import Snapshot, SnapshotRefused, branch_tip, snapshot, snapshot_files
from tilth.store.home import SessionPaths, under

PATCH = "worktree.patch"
"""In the files snapshot: the worktree's uncommitted edits against the pushed branch tip."""
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
CARRIED = re.compile(rf"^(?:{_NAME}\.(?:json|jsonl|txt|md|noted|patch)"
                     rf"|(?:ledger|answers)/[A-Za-z0-9][A-Za-z0-9._-]{{0,63}}\.jsonl"
                     rf"|kb/(?:{_NAME}/){{0,2}}{_NAME})$")
"""Every file of a session that travels: its top-level records, one ledger and answers file per task,
the worker's scratch notes. Locks, ballast, `runs/` and `agents/` stay on the machine that made them."""
MAX_FILE = 256 * 2 ** 20
MAX_TOTAL = 1024 * 2 ** 20


def carried_files(paths: SessionPaths) -> dict[str, bytes]:
    files = {}
    for path in sorted(paths.dir.rglob("*")):
        relative = path.relative_to(paths.dir).as_posix()
        if path.is_file() and not path.is_symlink() and CARRIED.match(relative):
            files[relative] = path.read_bytes()
    return files


def seal(clone: Path, session_id: str, files: dict[str, bytes], why: str, secret: bytes | None) -> str:
    """A snapshot commit of `files` on top of the last one, signed when there is a secret."""
    signature = None
    if secret is not None:
        signature = snapshot_signature(secret, session_id, branch_tip(clone, session_id) or "", files)
    return snapshot(clone, session_id, files, signed_message(f"tilth session {session_id}: {why}", signature))


def unseal(clone: Path, session_id: str, secret: bytes | None,
           recorded: tuple[str, str | None] | None = None) -> Snapshot:
    """The last pushed snapshot (`recorded`: the one under that ref, with that branch tip), checked:
    SnapshotRefused says what is wrong with it."""
    found = snapshot_files(clone, session_id, CARRIED, MAX_FILE, MAX_TOTAL, recorded)
    if secret is not None:
        given = signature_in(found.message)
        if given is None:
            raise SnapshotRefused("its snapshot on the remote is not signed, and this worker requires signed "
                                  "sessions ([dispatch] secret_file)")
        if not matches(snapshot_signature(secret, session_id, found.branch_tip or "", found.files), given):
            raise SnapshotRefused("its snapshot or branch on the remote does not match its signature (changed by "
                                  "someone without the team's secret)")
    return found


def restore(paths: SessionPaths, files: dict[str, bytes]) -> None:
    """Write checked files into the (emptied) session directory, each path built by `under`."""
    for relative, data in files.items():
        target = under(paths.dir, *relative.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
