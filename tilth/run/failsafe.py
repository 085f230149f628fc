"""A full disk or a failing git met while running stops the session cleanly: state `stopped`
(resumable), a `session_end` event, and one line naming the file or object and what to do.

Recording the stop needs a little space on a disk that has none, so every run keeps a
ballast file (`sessions/<id>/.reserve`): deleted just before the stop is written, made
again when the next run starts.
"""

from __future__ import annotations

import os

from tilth.core.diskspace import is_disk_full, no_space
from tilth.core.errors import DiskFull, TilthError
from tilth.git.gitops import GitError
from tilth.git.worktrees import objects_dir
from tilth.git.integrity import git_failure
from tilth.store.home import SessionPaths
from tilth.store.jsonio import naming
from tilth.store.session import SessionState, load_session, set_state

RESERVE_BYTES = 64 * 1024


def keep_reserve(paths: SessionPaths) -> None:
    path = paths.reserve
    if path.is_file() and path.stat().st_size >= RESERVE_BYTES:
        return
    try:
        with naming(path), open(path, "wb") as f:
            f.write(bytes(RESERVE_BYTES))  # real blocks: a sparse file would free nothing
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def release_reserve(paths: SessionPaths) -> None:
    paths.reserve.unlink(missing_ok=True)


def stop_reason(exc: BaseException, paths: SessionPaths, repo: str | None = None) -> TilthError | None:
    """The one-line error that stops the session for `exc`, or None when `exc` is a crash."""
    resume = f"run `tilth resume {paths.id}`"
    if isinstance(exc, OSError) and is_disk_full(exc):
        return DiskFull(f"{no_space(exc, paths.home)} and {resume}")
    if isinstance(exc, GitError):
        where = repo or _repo_of(paths)
        return git_failure(exc, where, resume, objects_dir(where))
    return None


def _repo_of(paths: SessionPaths) -> str:
    try:
        return load_session(paths).repo
    except TilthError:
        return "the session's repository"


def not_started(paths: SessionPaths, reason: TilthError) -> None:
    """A run that failed while getting ready: a record it already marked running goes to stopped."""
    if isinstance(reason, DiskFull):
        release_reserve(paths)
    try:
        if load_session(paths).state == SessionState.running:
            set_state(paths, SessionState.stopped, pid=None, reason=str(reason))
    except (OSError, TilthError):
        pass  # still `running` with no lock held: shown as crashed, which is resumable too
