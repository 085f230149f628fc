"""The git side of keeping placeholders above the task commits.

A session branch is `<task commits...>` followed by the FAILED/PARKED placeholders of the tasks not yet
done (the stack). While a task runs the branch stands on its last task commit (the floor) and the
stack waits on the shelf: one ref per placeholder, `refs/tilth/shelf/<session>/<task>`, naming the
placeholder commit as it was. After the task's ending commit each shelved placeholder is re-applied on
top (its change against its own parent merged onto the new head, like a cherry-pick; the branch
moved by a compare-and-swap commit), then its shelf ref goes. Every step leaves a state the next
step, or a run after a kill -9, finishes from: a shelf ref whose task already has a placeholder above
the floor is only removed.

Everything goes through pygit2 on the session worktree's repository (refs are shared with the user's
repository): no hook runs.
"""

from __future__ import annotations

import functools

import pygit2
from pygit2.enums import ResetMode

from tilth.git.commits import KEPT_OFF, ORIGIN, TaskCommit, read_task_commit
from tilth.git.gitops import signature
from tilth.git.lane_worktrees import pick_onto

PREFIX = "refs/tilth/shelf"


def shelf_ref(session_id: str, task_id: str) -> str:
    return f"{PREFIX}/{session_id}/{task_id}"


def stack(repo: pygit2.Repository, tip: str, base: str) -> tuple[str, list[TaskCommit]]:
    """The floor (the newest commit below `tip` that is no placeholder: a task commit or the base) and
    the placeholders above it, oldest first."""
    found: list[TaskCommit] = []
    commit = repo[tip].peel(pygit2.Commit)
    while str(commit.id) != base and commit.parents:
        made = read_task_commit(commit)
        if made is None or not made.placeholder:
            break
        found.append(made)
        commit = commit.parents[0]
    return str(commit.id), list(reversed(found))


def shelve(repo: pygit2.Repository, session_id: str, placeholders: list[TaskCommit]) -> None:
    for made in placeholders:
        repo.references.create(shelf_ref(session_id, made.task_id), pygit2.Oid(hex=made.sha), force=True)


def shelved(repo: pygit2.Repository, session_id: str) -> list[tuple[str, str]]:
    """(task id, placeholder sha) of every shelved placeholder, oldest first (they were one chain)."""
    prefix = f"{PREFIX}/{session_id}/"
    found = [(name[len(prefix):], str(repo.references[name].target)) for name in repo.references
             if name.startswith(prefix)]

    def order(a: tuple[str, str], b: tuple[str, str]) -> int:
        if a[1] == b[1]:
            return 0
        return 1 if repo.descendant_of(pygit2.Oid(hex=a[1]), pygit2.Oid(hex=b[1])) else -1

    return sorted(found, key=functools.cmp_to_key(order))


def any_shelved(repo_dir: str, session_id: str) -> bool:
    """Placeholders of the session wait on the shelf (the branch stands below them for a task)."""
    prefix = f"{PREFIX}/{session_id}/"
    return any(name.startswith(prefix) for name in pygit2.Repository(repo_dir).references)


def unshelve(repo: pygit2.Repository, session_id: str, task_id: str) -> None:
    ref = repo.references.get(shelf_ref(session_id, task_id))
    if ref is not None:
        ref.delete()


def lower(repo: pygit2.Repository, branch: str, expected: str, floor: str, keep_files: bool = False) -> None:
    """The branch (which HEAD names) moved from `expected` down to `floor`, index and files with it
    unless `keep_files` (the merge queue's merged tree stays for the commit). Under the session lock
    nothing else moves the branch; a branch found elsewhere is refused."""
    ref = repo.references.get(f"refs/heads/{branch}")
    if ref is None or str(ref.target) != expected:
        raise pygit2.GitError(f"{branch} moved while its placeholders were lowered (expected {expected[:12]})")
    if keep_files:
        ref.set_target(pygit2.Oid(hex=floor))
    else:
        repo.reset(pygit2.Oid(hex=floor), ResetMode.HARD)


def reapply(repo: pygit2.Repository, branch: str, placeholder: str, onto: str, kept_off_ref: str) -> tuple[str, list[str]]:
    """`placeholder`'s change (against its own parent) committed on `onto` with its message and author,
    the branch moved by the commit only while it is still at `onto` (libgit2 refuses otherwise). When
    the change conflicts with `onto` the commit holds `onto`'s files, says so in its message and names
    the commit that holds the work (`Tilth-Kept-Off`, under `kept_off_ref`, which the caller makes);
    the conflicting paths come back."""
    old = repo[placeholder].peel(pygit2.Commit)
    tree, conflicts = pick_onto(repo, placeholder, onto)
    message = old.message
    if tree is None:
        tree = repo[onto].peel(pygit2.Commit).tree_id
        body, _, trailers = old.message.rstrip("\n").rpartition("\n\n")
        kept = kept_off(old) or placeholder
        message = (f"{body}\n\nIts partial work conflicts with the task commits made since ({', '.join(conflicts[:10])}) "
                   f"and is kept off the branch under {kept_off_ref} ({kept[:12]}); a retry starts from it where it "
                   f"applies, else clean.\n\n{trailers}\n{KEPT_OFF}: {kept}\n")
    if not old.message_trailers.get(ORIGIN):
        message = message.rstrip("\n") + f"\n{ORIGIN}: {placeholder}\n"
    sha = repo.create_commit(f"refs/heads/{branch}", old.author, signature(repo), message, tree,
                             [pygit2.Oid(hex=onto)])
    return str(sha), conflicts


def kept_off(commit: pygit2.Commit) -> str | None:
    """The commit holding the partial work an emptied placeholder stands for."""
    return commit.message_trailers.get(KEPT_OFF) or None


def above(repo: pygit2.Repository, tip: str, base: str, task_id: str) -> bool:
    """A placeholder of `task_id` is in the branch's stack (above its last task commit)."""
    return any(made.task_id == task_id for made in stack(repo, tip, base)[1])


def show_head(repo: pygit2.Repository) -> None:
    """Index and files back to the commit HEAD names."""
    repo.reset(repo.head.target, ResetMode.HARD)
