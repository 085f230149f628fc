"""A dispatched session's branch and files, to and from the shared remote.

Every machine keeps one clone of the remote per remote URL (`$TILTH_HOME/clones/<key>`), all
changes to it made under that clone's flock. A session travels as two refs pushed together
(`git push --atomic`):

    refs/heads/session/<id>     the branch, one commit per task as always
    refs/tilth/sessions/<id>    a commit whose tree is the session's files (prd.json, ledger/,
                                progress.txt, events.jsonl, ...), its parent the previous one

Both only move forward, so a push by a worker that lost the session is refused by the remote,
and a machine taking the session over fetches the state of the last task boundary.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pygit2

from tilth.core.errors import TilthError
from tilth.git.gitcli import GitFailed, run
from tilth.git.gitops import readd_worktree, signature, worktree_admin_dir

FILES_REF = "refs/tilth/sessions/{}"
BRANCH_REF = "refs/heads/session/{}"


class PushRefused(TilthError):
    """The remote has moved on: another worker holds the session now."""


def clone_dir(clones: Path, remote: str) -> Path:
    return clones / hashlib.sha256(remote.encode()).hexdigest()[:16]


@contextmanager
def clone_lock(clone: Path) -> Iterator[None]:
    clone.parent.mkdir(parents=True, exist_ok=True)
    with open(clone.parent / f"{clone.name}.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def ensure_clone(clones: Path, remote: str) -> Path:
    """This machine's clone of `remote` (made once, without a checkout); call under clone_lock."""
    clone = clone_dir(clones, remote)
    clones.mkdir(parents=True, exist_ok=True)
    if not (clone / ".git").exists():
        partial = clone.with_name(clone.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        run(clones, "clone", "--quiet", "--no-checkout", remote, str(partial))
        partial.rename(clone)
    return clone


def remote_refs(clone: Path, remote: str, session_id: str) -> dict[str, str]:
    listed = run(clone, "ls-remote", remote, BRANCH_REF.format(session_id), FILES_REF.format(session_id)).stdout
    return {ref: sha for sha, ref in (line.split("\t", 1) for line in listed.splitlines() if "\t" in line)}


def fetch_session(clone: Path, remote: str, session_id: str) -> dict[str, str]:
    """The session's two refs fetched over the clone's own (a local branch ahead of the remote,
    from a run that died before its push, is discarded: that work is lost, never duplicated)."""
    found = remote_refs(clone, remote, session_id)
    if found:
        run(clone, "fetch", "--quiet", "--force", remote, *(f"+{ref}:{ref}" for ref in found))
    return found


def default_head(clone: Path, remote: str) -> str:
    listed = run(clone, "ls-remote", remote, "HEAD").stdout.split()
    if not listed:
        raise GitFailed(f"the remote {remote} has no HEAD; push a default branch to it first")
    run(clone, "fetch", "--quiet", remote, listed[0])
    return listed[0]


def check_out(clone: Path, session_id: str, worktree: Path) -> None:
    """A fresh worktree of the session branch at `worktree` (anything a dead run left there is
    discarded: the branch as pushed is the truth)."""
    remove_checkout(clone, session_id, worktree)
    readd_worktree(pygit2.Repository(str(clone)), f"tilth-{session_id}", worktree, f"session/{session_id}")


def remove_checkout(clone: Path, session_id: str, worktree: Path) -> None:
    repo = pygit2.Repository(str(clone))
    name = f"tilth-{session_id}"
    shutil.rmtree(worktree, ignore_errors=True)
    if name in repo.list_worktrees():
        repo.lookup_worktree(name).prune(True)
    shutil.rmtree(worktree_admin_dir(repo, name), ignore_errors=True)


def snapshot(clone: Path, session_id: str, files: dict[str, bytes], message: str) -> str:
    """Commit the session's files as a tree on top of the last snapshot; the ref moves to it."""
    repo = pygit2.Repository(str(clone))
    root: dict = {}
    for relative, data in files.items():
        node = root
        *dirs, leaf = relative.split("/")
        for part in dirs:
            node = node.setdefault(part, {})
        node[leaf] = repo.create_blob(data)
    ref_name = FILES_REF.format(session_id)
    parent = repo.references.get(ref_name)
    parents = [parent.target] if parent is not None else []
    tree = _tree(repo, root)
    sig = signature(repo)
    oid = repo.create_commit(None, sig, sig, message, tree, parents)
    repo.references.create(ref_name, oid, force=True)
    return str(oid)


def _tree(repo: pygit2.Repository, node: dict) -> pygit2.Oid:
    builder = repo.TreeBuilder()
    for name, value in sorted(node.items()):
        if isinstance(value, dict):
            builder.insert(name, _tree(repo, value), pygit2.GIT_FILEMODE_TREE)
        else:
            builder.insert(name, value, pygit2.GIT_FILEMODE_BLOB)
    return builder.write()


def snapshot_files(clone: Path, session_id: str) -> dict[str, bytes]:
    repo = pygit2.Repository(str(clone))
    ref = repo.references.get(FILES_REF.format(session_id))
    if ref is None:
        return {}
    found: dict[str, bytes] = {}

    def walk(tree: pygit2.Tree, prefix: str) -> None:
        for entry in tree:
            obj = repo[entry.id]
            if isinstance(obj, pygit2.Tree):
                walk(obj, f"{prefix}{entry.name}/")
            else:
                found[f"{prefix}{entry.name}"] = obj.data

    walk(repo[ref.target].peel(pygit2.Commit).tree, "")
    return found


def push_session(clone: Path, remote: str, session_id: str) -> None:
    """Both refs, atomically; a refusal (the remote moved on) is PushRefused."""
    refs = [f"{ref}:{ref}" for ref in (BRANCH_REF.format(session_id), FILES_REF.format(session_id))]
    proc = run(clone, "push", "--quiet", "--atomic", "--porcelain", remote, *refs, check=False)
    if proc.returncode != 0:
        said = (proc.stdout + proc.stderr).lower()
        if "rejected" in said or "non-fast-forward" in said or "fetch first" in said:
            raise PushRefused(f"the remote {remote} refused session {session_id}'s push: another worker moved it on")
        raise GitFailed(f"git push to {remote} failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")


def staged_patch(worktree: Path) -> bytes:
    """The worktree's staged changes against its HEAD (the loop stages everything before each
    evaluation), as a binary patch: an attempt's edits, carried with the session's files."""
    return run(worktree, "diff", "--cached", "--binary").stdout.encode()


def apply_patch(worktree: Path, patch: bytes) -> None:
    """Put a carried attempt's edits back into a fresh worktree (staged, as they were)."""
    if not patch.strip():
        return
    target = worktree.parent / f".{worktree.name}.carried.patch"
    target.write_bytes(patch)
    try:
        run(worktree, "apply", "--index", "--binary", str(target))
    finally:
        target.unlink(missing_ok=True)
