"""Retiring a session: `cleanse_session` once its branch is safe elsewhere (merged or pushed),
`reset_session` to throw the session away entirely.

Both hold the session lock while they work, so a run cannot start underneath them.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from tilth.actions.acted import Acted, changeable, check_by, record_act
from tilth.core.errors import BadInput, SessionBusy, TilthError
from tilth.git import gitcli
from tilth.git.lane_worktrees import common_repo
from tilth.git.partial_refs import drop_partials, partial_tasks
from tilth.git.worktrees import open_source_repo, remove_worktree
from tilth.git.worktree_git import has_uncommitted, session_git_dir, worktree_name
from tilth.store.home import SessionPaths
from tilth.store.jsonio import fsync_dir
from tilth.store.lock import SessionLock
from tilth.store.session import SessionRecord, SessionState, load_session, set_state


class Aborted(TilthError):
    """The user answered no; nothing was changed."""

    exit_code = 1


@contextmanager
def exclusive(paths: SessionPaths, verb: str) -> Iterator[None]:
    lock = SessionLock(paths.lock, paths.id, role="cli")
    try:
        lock.acquire()
    except SessionBusy:
        raise BadInput(f"session {paths.id} is running; stop it or let it finish, then `tilth {verb} {paths.id}`") from None
    try:
        yield
    finally:
        lock.release()


def safe_elsewhere(record: SessionRecord, tip: str) -> list[str]:
    """Refs other than the session branches that hold `tip`: where the work survives the branch.
    Other local `session/*` branches do not count: they can be reset just as this one."""
    return [ref for ref in gitcli.refs_containing(record.repo, tip) if not ref.startswith("refs/heads/session/")]


def _remove_git(record: SessionRecord, session_id: str) -> None:
    """Worktree dir, its registration (pruned even when the dir was deleted by hand), the branch,
    the interrupted parallel tasks' work (`refs/tilth/partial/<id>/*`)."""
    remove_worktree(open_source_repo(Path(record.repo)), record.branch, worktree_name(session_id),
                    Path(record.worktree))
    drop_partials(common_repo(record.repo), session_id)


def cleanse_session(home: Path, session_id: str, *, by: str = "cli") -> Acted:
    """Archive the session: its worktree and branch removed, its record kept (`acted` names `by`)."""
    check_by(by)
    paths, _ = changeable(home, session_id, archived_ok=True)
    return Acted(paths.id, *cleanse(paths, by))


def cleanse(paths: SessionPaths, by: str) -> tuple[str, tuple[str, ...]]:
    record = load_session(paths)
    gitcli.require_repo(record.repo)
    worktree = Path(record.worktree)
    with exclusive(paths, "cleanse"):
        tip = gitcli.branch_tip(record.repo, record.branch)
        if record.state == SessionState.archived and tip is None and not worktree.exists():
            return f"session {paths.id} is already archived; its record is in {paths.dir}", ()
        holders = safe_elsewhere(record, tip) if tip else []
        if tip and not holders:
            raise BadInput(f"{record.branch} ({tip[:7]}) is neither merged nor pushed (no other branch or "
                           f"remote-tracking ref has it); run `tilth push {paths.id}` first, then cleanse")
        if worktree.exists() and has_uncommitted(session_git_dir(record.repo, paths.id), worktree):
            raise BadInput(f"the worktree {worktree} has uncommitted changes (an interrupted task's partial work); "
                           f"`tilth resume {paths.id}` to finish it or `tilth reset {paths.id}` to discard it")
        if kept := partial_tasks(common_repo(record.repo), paths.id):
            raise BadInput(f"the interrupted work of {', '.join(kept)} is kept under refs/tilth/partial/{paths.id}/; "
                           f"`tilth resume {paths.id}` to finish it or `tilth reset {paths.id}` to discard it")
        where = f"{tip[:7]} is on {holders[0]}" if tip else "the branch was already gone"
        _remove_git(record, paths.id)
        set_state(paths, SessionState.archived, reason=f"removed by cleanse; {where}")  # `tilth status` shows it
        paths.reserve.unlink(missing_ok=True)  # an archived session never runs again
        event = record_act(paths, "cleanse", by)
    return (f"archived session {paths.id}: removed its worktree and {record.branch} ({where}); record kept in "
            f"{paths.dir}", (event,))


def reset_question(session_id: str) -> str:
    return f"Remove session {session_id}, its branch and worktree? [y/N] "


def reset_session(home: Path, session_id: str, *, confirm: Callable[[str], bool], by: str = "cli") -> Acted:
    """Remove the session entirely, once `confirm(question)` says so (else `Aborted`); its journal goes
    with it, so no event says who did it."""
    check_by(by)
    paths, _ = changeable(home, session_id, archived_ok=True)
    return Acted(paths.id, reset(paths, confirm))


def reset(paths: SessionPaths, confirm: Callable[[str], bool]) -> str:
    record = load_session(paths)
    with exclusive(paths, "reset"):
        if not confirm(reset_question(paths.id)):
            raise Aborted(f"kept session {paths.id}; nothing was removed")
        if Path(record.repo).is_dir():
            _remove_git(record, paths.id)
            note = ""
        else:
            shutil.rmtree(record.worktree, ignore_errors=True)
            note = f" (its repository {record.repo} is gone, so only the worktree dir went)"
        # Renamed first so a crash mid-delete leaves a hidden dir, never a half-session.
        trash = paths.dir.with_name(f".removing-{paths.id}")
        shutil.rmtree(trash, ignore_errors=True)
        paths.dir.rename(trash)
        fsync_dir(trash.parent)
        shutil.rmtree(trash, ignore_errors=True)
    return f"removed session {paths.id}: {record.branch}, worktree {record.worktree} and {paths.dir}{note}"
