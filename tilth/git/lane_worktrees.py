"""The git side of parallel tasks: each lane's worktree and branch (made and removed through
`worktrees.create_worktree`/`remove_worktree`, opened by their admin dir like the session's), a
lane's one commit picked onto the session head as a three-way merge of trees (a cherry-pick, never
a merge commit), and the session worktree set to exactly a tree while the merge queue checks it.

Names: the lane of task T in session S is the branch `tilth-lane/S/T` and the git worktree
`tilth-S+T` at `$TILTH_HOME/lanes/S/T`; `+` is in no session or task id, so a lane's name never
collides with a session's `tilth-<id>`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2
from pygit2.enums import CheckoutStrategy, ResetMode

from tilth.core.errors import BadInput
from tilth.git.gitops import open_worktree
from tilth.git.worktrees import create_worktree, remove_worktree
from tilth.git.worktree_git import admin_dir, common_git_dir

BRANCH_PREFIX = "tilth-lane"


def lane_branch(session_id: str, task_id: str) -> str:
    return f"{BRANCH_PREFIX}/{session_id}/{task_id}"


def lane_name(session_id: str, task_id: str) -> str:
    return f"tilth-{session_id}+{task_id}"


def lanes_root(home: Path, session_id: str) -> Path:
    """Where a session's lane worktrees live (inside `$TILTH_HOME`, hidden from every sandbox but its own)."""
    return home / "lanes" / session_id


def lane_git_dir(repo: str | Path, session_id: str, task_id: str) -> Path:
    return admin_dir(common_git_dir(repo), lane_name(session_id, task_id))


def common_repo(repo: str | Path) -> pygit2.Repository:
    """The user's repository opened by its git dir (never through a worktree's `.git` file)."""
    return pygit2.Repository(str(common_git_dir(repo)))


def make_lane(repo: str | Path, home: Path, session_id: str, task_id: str, start: str) -> tuple[Path, pygit2.Repository]:
    """A fresh worktree on a fresh lane branch at `start`; a leftover of the same lane is removed first."""
    drop_lane(repo, home, session_id, task_id)
    common = common_repo(repo)
    path = lanes_root(home, session_id) / task_id
    create_worktree(common, lane_branch(session_id, task_id), common[start].peel(pygit2.Commit),
                    lane_name(session_id, task_id), path)
    return path, open_worktree(path, lane_git_dir(repo, session_id, task_id))


def open_lane(repo: str | Path, home: Path, session_id: str, task_id: str) -> pygit2.Repository | None:
    """A lane's worktree as it is (a run that ended or was killed left it), opened by its admin dir;
    None when it is gone or no longer a worktree git knows."""
    path = lanes_root(home, session_id) / task_id
    try:
        return open_worktree(path, lane_git_dir(repo, session_id, task_id))
    except (BadInput, pygit2.GitError):
        return None


def drop_lane(repo: str | Path, home: Path, session_id: str, task_id: str) -> None:
    """The lane's worktree, its registration and its branch, gone (whatever of them exists)."""
    stale = common_git_dir(repo) / "refs" / "heads" / f"{lane_branch(session_id, task_id)}.lock"
    stale.unlink(missing_ok=True)  # a kill during the lane's last commit; we hold the session lock
    remove_worktree(common_repo(repo), lane_branch(session_id, task_id), lane_name(session_id, task_id),
                    lanes_root(home, session_id) / task_id)


def leftover_lanes(repo: str | Path, home: Path, session_id: str) -> list[str]:
    """The task ids of this session's lanes that exist in any form: a directory, a registered
    worktree or a branch."""
    common = common_repo(repo)
    found = {p.name for p in lanes_root(home, session_id).glob("*") if p.is_dir()}
    prefix = f"tilth-{session_id}+"
    found |= {name[len(prefix):] for name in common.list_worktrees() if name.startswith(prefix)}
    found |= {name[len(prefix):] for name in _admin_names(common_git_dir(repo)) if name.startswith(prefix)}
    branch_prefix = f"{BRANCH_PREFIX}/{session_id}/"
    found |= {b[len(branch_prefix):] for b in common.branches.local if b.startswith(branch_prefix)}
    return sorted(found)


def _admin_names(git_dir: Path) -> list[str]:
    worktrees = git_dir / "worktrees"
    return [p.name for p in worktrees.iterdir()] if worktrees.is_dir() else []


def remove_lanes_root(home: Path, session_id: str) -> None:
    root = lanes_root(home, session_id)
    shutil.rmtree(root, ignore_errors=True)
    if root.parent.is_dir() and not any(root.parent.iterdir()):
        root.parent.rmdir()


def lane_commit(repo: pygit2.Repository, branch: str) -> str | None:
    ref = repo.references.get(f"refs/heads/{branch}")
    return str(ref.target) if ref is not None else None


def pick_onto(repo: pygit2.Repository, commit: str, onto: str) -> tuple[pygit2.Oid | None, list[str]]:
    """`commit`'s change (against its parent) applied to `onto`'s tree: the merged tree, or None
    and the paths that conflict. Only trees are merged; no ref, index or file is touched."""
    picked = repo[commit].peel(pygit2.Commit)
    base = picked.parents[0].tree if picked.parents else repo[onto].peel(pygit2.Commit).tree
    merged = repo.merge_trees(base, repo[onto].peel(pygit2.Commit).tree, picked.tree)
    if merged.conflicts is not None:
        paths = sorted({entry.path for trio in merged.conflicts for entry in trio if entry is not None})
        return None, paths
    return merged.write_tree(repo), []


def pick_onto_tree(repo: pygit2.Repository, commit: str, onto: pygit2.Oid) -> pygit2.Oid | None:
    """`pick_onto` onto a tree: `commit`'s change applied to the tree `onto`; None when it conflicts."""
    picked = repo[commit].peel(pygit2.Commit)
    base = picked.parents[0].tree if picked.parents else repo[onto].peel(pygit2.Tree)
    merged = repo.merge_trees(base, repo[onto].peel(pygit2.Tree), picked.tree)
    return None if merged.conflicts is not None else merged.write_tree(repo)


def staged_tree(repo: pygit2.Repository) -> str:
    """The tree the worktree's index holds (what an attempt staged, and its commit will hold)."""
    return str(repo.index.write_tree())


def tree_of(repo: pygit2.Repository, commit: str) -> pygit2.Oid:
    return repo[commit].peel(pygit2.Commit).tree_id


def show_tree(repo: pygit2.Repository, tree: pygit2.Oid) -> None:
    """The worktree's index and files become exactly `tree` (HEAD is left where it is)."""
    repo.checkout_tree(repo[tree], strategy=CheckoutStrategy.FORCE | CheckoutStrategy.REMOVE_UNTRACKED)
    index = repo.index
    index.read_tree(repo[tree])
    index.write()


def reset_to(repo: pygit2.Repository, commit: str) -> None:
    """Index and files back to `commit` (the branch HEAD names already is there)."""
    repo.reset(pygit2.Oid(hex=commit), ResetMode.HARD)
