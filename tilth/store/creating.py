"""`sessions/.creating-<id>/`: a session being created, and what its creator is about to make.

Before it creates anything in git, `tilth start` takes the flock on `creating.lock` (held for
as long as it is creating) and writes `creating.json` (repository, branch, worktree, base) in a
private `.new-<id>-<random>` dir, then renames that dir to `.creating-<id>`. The finished
session dir is this dir renamed again, so a session exists whole or not at all. A
`.creating-<id>` whose lock nobody holds was left by a creator that died; the next
`tilth start` claims it (takes the lock itself), undoes what the record names, and removes it.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
from pathlib import Path
from typing import Iterator

import orjson
from pydantic import BaseModel, ValidationError

from tilth.core.clock import wall
from tilth.core.errors import BadInput
from tilth.store.jsonio import fsync_dir, write_json
from tilth.store.lock import HeldLock

PREFIX = ".creating-"
FRESH = ".new-"
FRESH_GRACE_S = 60
INTENT = "creating.json"
LOCK = "creating.lock"


class CreationIntent(BaseModel):
    id: str
    repo: str
    """The source repository's git dir."""
    branch: str
    worktree_name: str
    """The name of the worktree's admin dir under `<common git dir>/worktrees/`."""
    worktree: str
    base: str
    """Full sha the branch is created at: a branch still there is removed only while it points here."""


def staging_dir(home: Path, session_id: str) -> Path:
    return home / "sessions" / f"{PREFIX}{session_id}"


class Staging:
    """A `.creating-<id>` dir whose lock this process holds."""

    def __init__(self, directory: Path, lock: HeldLock, intent: CreationIntent | None):
        self.dir = directory
        self.lock = lock
        self.intent = intent

    @property
    def session_id(self) -> str:
        return self.intent.id if self.intent else self.dir.name.removeprefix(PREFIX)

    def complete(self, session_dir: Path) -> None:
        """Rename into place: from here on the session exists. The record goes after the rename,
        so a kill in between leaves a whole session with a stray `creating.json` in it."""
        self.dir.rename(session_dir)
        fsync_dir(session_dir.parent)
        (session_dir / INTENT).unlink(missing_ok=True)
        (session_dir / LOCK).unlink(missing_ok=True)
        self.lock.release()

    def discard(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.lock.release()


def _busy(session_id: str) -> BadInput:
    return BadInput(f"session {session_id!r} is being created by another `tilth start` right now; "
                    "wait for it or choose another --id")


def begin(home: Path, intent: CreationIntent) -> Staging:
    """Lock and record in a private dir, then rename it to `.creating-<id>`: a `.creating-*`
    dir is never seen without its record and its creator's lock, so no other start mistakes a
    creation in progress for an orphan. Only then may git be touched."""
    target = staging_dir(home, intent.id)
    fresh = target.with_name(f"{FRESH}{intent.id}-{secrets.token_hex(4)}")
    fresh.mkdir()
    lock = HeldLock(fresh / LOCK, "create")
    try:
        lock.try_acquire()
        write_json(fresh / INTENT, intent.model_dump(mode="json"))
        try:
            os.rename(fresh, target)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise _busy(intent.id) from None
            raise
        lock.path = target / LOCK
        fsync_dir(target.parent)
    except BaseException:
        lock.release()
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    return Staging(target, lock, intent)


def read_intent(directory: Path) -> CreationIntent | None:
    """None when the creator died before writing it (then it had created nothing in git)."""
    try:
        return CreationIntent.model_validate(orjson.loads((directory / INTENT).read_bytes()))
    except (OSError, orjson.JSONDecodeError, ValidationError):
        return None


def claim_orphans(home: Path) -> Iterator[Staging]:
    """Every `.creating-*` dir whose creator is gone, with its lock now held by us. A live
    creator holds its lock, so its dir is passed over."""
    root = home / "sessions"
    if not root.is_dir():
        return
    _sweep_fresh(root)
    for directory in sorted(root.glob(f"{PREFIX}*")):
        lock = _claim(directory)
        if lock is not None:
            yield Staging(directory, lock, read_intent(directory))


def _claim(directory: Path) -> HeldLock | None:
    if not directory.is_dir():
        return None
    lock = HeldLock(directory / LOCK, "reclaim")
    try:
        if not lock.try_acquire():
            return None
    except FileNotFoundError:
        return None
    if not lock.still_linked():  # another start removed it while we waited for the lock
        lock.release()
        return None
    return lock


def _sweep_fresh(root: Path) -> None:
    """Private dirs of creators killed before their rename hold nothing in git. A young one may
    belong to a creator between its mkdir and its lock, so only old ones are removed."""
    for directory in root.glob(f"{FRESH}*"):
        try:
            young = wall() - directory.stat().st_mtime < FRESH_GRACE_S
        except FileNotFoundError:
            continue
        lock = None if young else _claim(directory)
        if lock is not None:
            shutil.rmtree(directory, ignore_errors=True)
            lock.release()
