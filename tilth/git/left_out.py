"""The git side of what a task may not keep: the symlinks of a staged change that lead outside the
worktree, and paths put back as HEAD (the commit the task started from) has them, in the index and
in the worktree, never writing through a symlink. `run/keeping.py` decides which paths, with the
guard's rules (`agents/guard.refusals`)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

MAX_HOPS = 40
"""Symlinks followed while resolving one (the kernel's own limit); more is a loop, taken as leading outside."""


def _links(repo: pygit2.Repository) -> dict[str, str]:
    """Every symlink of the index and its target."""
    return {entry.path: _target(repo, entry.id) for entry in repo.index if entry.mode == FileMode.LINK}


def _target(repo: pygit2.Repository, oid: pygit2.Oid) -> str:
    return repo[oid].peel(pygit2.Blob).data.decode("utf-8", errors="surrogateescape")


def leads_outside(links: dict[str, str], path: str) -> bool:
    """The symlink at `path` resolves outside the tree: an absolute target, or `..` past the root,
    following the tree's own symlinks on the way (`a -> b/..` where `b -> ..` climbs out too)."""
    resolved = path.split("/")[:-1]
    pending = list(reversed(links[path].split("/")))
    if links[path].startswith("/"):
        return True
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return True
            resolved.pop()
            continue
        resolved.append(part)
        target = links.get("/".join(resolved))
        if target is None:
            continue
        hops += 1
        if hops > MAX_HOPS or target.startswith("/"):
            return True
        resolved.pop()
        pending.extend(reversed(target.split("/")))
    return False


def links_leaving(repo: pygit2.Repository, diff: pygit2.Diff) -> dict[str, str]:
    """The symlinks of the staged tree (`diff`: HEAD -> index) that lead outside the worktree and did
    not before: each added or changed one, and an unchanged one a changed link now sends outside."""
    deltas = list(diff.deltas)
    if not any(FileMode.LINK in (delta.old_file.mode, delta.new_file.mode) for delta in deltas):
        return {}  # where a link leads depends on links alone: none changed, none leads elsewhere now
    now = _links(repo)
    changed = {p for delta in deltas for p in (delta.old_file.path, delta.new_file.path)}
    before = {p: t for p, t in now.items() if p not in changed}
    before |= {delta.old_file.path: _target(repo, delta.old_file.id) for delta in deltas
               if delta.old_file.mode == FileMode.LINK}
    return {path: target for path, target in sorted(now.items()) if leads_outside(now, path)
            and (path in changed or not leads_outside(before, path))}


def put_back(repo: pygit2.Repository, paths: list[str]) -> list[str]:
    """Each path as HEAD has it (a directory there: each of its files), or gone when HEAD has none,
    in the index and the worktree; what is in the way goes first (a symlink or file where a directory must be, entries under a path that
    becomes a file). The other index entries that went with it (in the way), returned."""
    head = repo.head.peel(pygit2.Commit).tree
    worktree = Path(str(repo.workdir))
    index = repo.index
    indexed = {entry.path for entry in index}
    paths = sorted({*paths, *(f for path in paths for f in _files_under(head, path))})  # a directory a link replaced
    base = {path: _entry(head, path) for path in paths}
    in_way: list[str] = []
    for path in sorted(paths, key=lambda p: base[p] is not None):  # removals first: a link `tests` before tests/*
        for other in [p for p in indexed if p.startswith(path + "/") or path.startswith(p + "/")]:
            if other not in base:
                in_way.append(other)
            index.remove(other)
            indexed.discard(other)
        if path in indexed:
            index.remove(path)
            indexed.discard(path)
        _clear(worktree, path)
        if (entry := base[path]) is not None:
            _write(repo, worktree, path, entry)
            index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))
            indexed.add(path)
    index.write()
    return sorted(set(in_way))


def _files_under(tree: pygit2.Tree, path: str) -> list[str]:
    """Every file of HEAD's directory at `path` (none when it is no directory there)."""
    try:
        entry = tree[path]
    except KeyError:
        return []
    if entry.filemode != FileMode.TREE:
        return []
    found = []
    for child in entry.peel(pygit2.Tree):
        inner = f"{path}/{child.name}"
        found += _files_under(tree, inner) if child.filemode == FileMode.TREE else [inner]
    return found


def _entry(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
    try:
        entry = tree[path]
    except KeyError:
        return None
    return None if entry.filemode == FileMode.TREE else entry


def _clear(worktree: Path, path: str) -> None:
    """Nothing at `path`, and a real directory at each of its parents (a symlink or file there is
    removed, never followed)."""
    here = worktree
    for part in path.split("/")[:-1]:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            here.mkdir()
            continue
        if not stat.S_ISDIR(mode):
            here.unlink()
            here.mkdir()
    target = worktree / path
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(target)
    else:
        target.unlink()


def _write(repo: pygit2.Repository, worktree: Path, path: str, entry: pygit2.Object) -> None:
    target = worktree / path
    if entry.filemode == FileMode.COMMIT:  # a submodule: its directory only
        target.mkdir()
        return
    data = repo[entry.id].peel(pygit2.Blob).data
    if entry.filemode == FileMode.LINK:
        os.symlink(data, target)
        return
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                 0o755 if entry.filemode == FileMode.BLOB_EXECUTABLE else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
