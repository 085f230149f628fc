"""What a task may keep of its changes: one definition (`agents/guard.refusals`: no weakened test, no
protected path unless `may_change` allows it, no symlink leading outside the worktree), by which the
guard rejects an attempt (`refused`) and by which a FAILED or PARKED placeholder, and a lane's partial
work kept for a later retry, leave out what the task may not keep (`leave_out`).

What is left out is put back as the task's starting point (HEAD: the commit the placeholder goes
onto, or the head a lane began from) has it, in the index and in the worktree, so the next attempt or
`tilth resume` starts from what the placeholder holds; it is named in the ledger (`LeftOut`), the
journal (`left_out`) and the placeholder's message (`git/commits.py`).
"""

from __future__ import annotations

from typing import Callable, Iterable, Literal

import pygit2

from tilth.agents.guard import Refusal, refusals
from tilth.agents.test_census import Counted
from tilth.git.gitops import FileChange, diff_changes, staged_diff
from tilth.git.left_out import links_leaving, put_back
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths
from tilth.store.ledger import LeftOut, append_left_out

Placeholder = Literal["failed", "parked", "partial"]
"""What the left-out changes would have gone into: a FAILED or PARKED placeholder, or a lane's kept work."""

document(
    {
        "left_out": ("a FAILED or PARKED placeholder (placeholder: failed|parked), or a lane's partial work kept "
                     "for a later retry (partial), left out changes the task may not keep (weakened tests, protected "
                     "paths, symlinks leading outside the worktree): each was put back as the task's starting point "
                     "has it, in the commit and the worktree; data: placeholder, refused, in_way (other paths "
                     "removed to make room for them)", "placeholder refused in_way"),
    }
)


Counter = Callable[[pygit2.Diff, list[FileChange]], Counted]
"""The test census of a staged diff (`run/test_count.Census.count`, bound to an attempt)."""


def refused(repo: pygit2.Repository, protected: Iterable[str], may_change: Iterable[str],
            count: Counter | None = None, diff: pygit2.Diff | None = None) -> list[Refusal]:
    """The staged changes (HEAD -> index) the task may not keep; with `count`, tests the census finds
    lost or newly skipped among them (an attempt's guard; a placeholder keeps to the diff's own rules).
    `diff` is the staged diff when the caller already holds it (the index unchanged since)."""
    diff = staged_diff(repo) if diff is None else diff
    changes = diff_changes(repo, diff)
    return refusals(changes, protected, may_change, links_leaving(repo, diff),
                    count(diff, changes) if count is not None else None)


def leave_out(repo: pygit2.Repository, paths: SessionPaths, events: EventLog, protected: Iterable[str],
              may_change: Iterable[str], task_id: str, iteration: int, placeholder: Placeholder) -> list[str]:
    """After staging, before the placeholder's commit (or the kept work's): the refused changes put
    back in the index and the worktree, and recorded; the list of what was left out."""
    found = refused(repo, protected, may_change)
    if not found:
        return []
    in_way = put_back(repo, sorted({path for refusal in found for path in refusal.paths}))
    said = [refusal.said for refusal in found] + [f"{path} (in the way of a restored path)" for path in in_way]
    append_left_out(paths.ledger_dir, task_id, LeftOut(iter=iteration, placeholder=placeholder, refused=said))
    events.emit("left_out", task_id, iteration, placeholder=placeholder, refused=said, in_way=in_way)
    return said
