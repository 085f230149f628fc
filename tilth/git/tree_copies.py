"""Trees of a session worktree's repository written out as plain files: the task's starting point
(HEAD) and the staged tree, each in a directory of its own, where the guard's test census collects
the test ids of both (`run/test_count.py`); and one blob of a tree read as text."""

from __future__ import annotations

from pathlib import Path

import pygit2

_WRITE_OUT = (pygit2.enums.CheckoutStrategy.FORCE | pygit2.enums.CheckoutStrategy.DONT_UPDATE_INDEX
              | pygit2.enums.CheckoutStrategy.RECREATE_MISSING)


def head_tree(repo: pygit2.Repository) -> str:
    return str(repo.head.peel(pygit2.Commit).tree.id)


def staged_tree(repo: pygit2.Repository) -> str:
    """The index as a tree (its objects written to the object database, nothing else changes)."""
    index: pygit2.Index = repo.index
    return str(index.write_tree())


def write_out(repo: pygit2.Repository, tree_id: str, directory: Path) -> None:
    """Every file of the tree under `directory` (made empty beforehand by the caller); the index,
    HEAD and the worktree stay as they are."""
    tree = repo.get(tree_id)
    assert isinstance(tree, pygit2.Tree), tree_id
    repo.checkout_tree(tree, directory=str(directory), strategy=_WRITE_OUT)


def text_at(repo: pygit2.Repository, tree_id: str, path: str) -> str | None:
    """The file's text in the tree; None when it is absent or not a plain file."""
    tree = repo.get(tree_id)
    assert isinstance(tree, pygit2.Tree), tree_id
    try:
        entry = tree[path]
    except KeyError:
        return None
    blob = repo.get(entry.id)
    return blob.data.decode("utf-8", errors="replace") if isinstance(blob, pygit2.Blob) else None

