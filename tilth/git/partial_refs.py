"""A parallel task's partial work between its lanes, in git: a lane's index kept as a commit under
`refs/tilth/partial/<session>/<task>` (one parent, the session head the lane started from: never on
a branch, never a merge commit), read back, applied to a new lane's worktree as a three-way merge
of trees, and removed.

Everything goes through pygit2 on repositories opened by their git dirs (`lane_worktrees.common_repo`,
`gitops.open_worktree`): no hook, filter program, fsmonitor or config a worker wrote runs here.
"""

from __future__ import annotations

import pygit2

from tilth.git.gitops import signature, soft_reset, stage_all
from tilth.git.lane_worktrees import pick_onto, show_tree

PREFIX = "refs/tilth/partial"


def partial_ref(session_id: str, task_id: str) -> str:
    return f"{PREFIX}/{session_id}/{task_id}"


def stage_lane(lane: pygit2.Repository, start: str) -> list[str]:
    """The lane's HEAD back at `start` (commits made in the lane become staged changes) and every
    change of its worktree staged; the nested repositories left out."""
    if str(lane.head.target) != start:
        soft_reset(lane, start)
    return stage_all(lane)


def keep_partial(common: pygit2.Repository, lane: pygit2.Repository, session_id: str, task_id: str,
                 start: str) -> str | None:
    """The lane's index (staged by `stage_lane`) kept as a commit on `start` under the task's ref;
    None when it holds nothing `start` does not (a partial kept earlier is then left as it is)."""
    tree = lane.index.write_tree()
    if tree == common[start].peel(pygit2.Commit).tree_id:
        return None
    sig = signature(common)
    sha = common.create_commit(None, sig, sig, f"tilth: partial work of {task_id} (session {session_id})\n", tree,
                               [pygit2.Oid(hex=start)])
    common.references.create(partial_ref(session_id, task_id), sha, force=True)
    return str(sha)


def partial_of(common: pygit2.Repository, session_id: str, task_id: str) -> str | None:
    ref = common.references.get(partial_ref(session_id, task_id))
    return str(ref.target) if ref is not None else None


def apply_partial(common: pygit2.Repository, lane: pygit2.Repository, partial: str, onto: str) -> list[str]:
    """The partial's change (against the head its lane started from) applied to the lane's worktree,
    which is at `onto`: its files and index become the merged tree. The conflicting paths, and nothing
    touched, when it does not apply."""
    tree, conflicts = pick_onto(common, partial, onto)
    if tree is None:
        return conflicts
    show_tree(lane, tree)
    return []


def lane_start(common: pygit2.Repository, lane_head: str, session_tip: str) -> str:
    """The session head a lane was made from, found after a kill: where its branch leaves the session
    branch (the lane's own commits are never on it)."""
    base = common.merge_base(pygit2.Oid(hex=lane_head), pygit2.Oid(hex=session_tip))
    return str(base) if base is not None else session_tip


def partial_tasks(common: pygit2.Repository, session_id: str) -> list[str]:
    prefix = f"{PREFIX}/{session_id}/"
    return sorted(name[len(prefix):] for name in common.references if name.startswith(prefix))


def drop_partial(common: pygit2.Repository, session_id: str, task_id: str) -> None:
    ref = common.references.get(partial_ref(session_id, task_id))
    if ref is not None:
        ref.delete()


def drop_partials(common: pygit2.Repository, session_id: str) -> None:
    for task_id in partial_tasks(common, session_id):
        drop_partial(common, session_id, task_id)
