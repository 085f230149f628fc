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
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pygit2

from tilth.core.errors import TilthError
from tilth.git import worktree_git
from tilth.git.gitcli import GitFailed, run, telling_line
from tilth.git.gitops import signature
from tilth.git.worktrees import readd_worktree, worktree_admin_dir
from tilth.git.worktree_git import session_git_dir, worktree_name

FILES_REF = "refs/tilth/sessions/{}"
BRANCH_REF = "refs/heads/session/{}"
PUSHED_REF = "refs/tilth/pushed/{}"
"""In a worker's clone: the session branch's tip as the remote last had it (fetched or pushed), the
lease its next push is forced against."""
SENT_REF = "refs/tilth/sent/{}"
"""The files snapshot this clone itself last pushed (never one it fetched): with `PUSHED_REF`, what a
worker can vouch for when a broker forgot the session (`dispatch/vouched.py`)."""


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
        run(clones, "clone", "--quiet", "--no-checkout", "--", remote, str(partial))
        partial.rename(clone)
    return clone


def remote_refs(clone: Path, remote: str, session_id: str) -> dict[str, str]:
    listed = run(clone, "ls-remote", "--", remote, BRANCH_REF.format(session_id), FILES_REF.format(session_id)).stdout
    return {ref: sha for sha, ref in (line.split("\t", 1) for line in listed.splitlines() if "\t" in line)}


def remote_sessions(cwd: Path, remote: str) -> list[str]:
    """The ids of the sessions whose files are on `remote` (`refs/tilth/sessions/*`), as named there
    (the caller checks each before it becomes part of a path)."""
    listed = run(cwd, "ls-remote", "--", remote, FILES_REF.format("*")).stdout
    prefix = FILES_REF.format("")
    return sorted(line.split("\t", 1)[1][len(prefix):] for line in listed.splitlines()
                  if "\t" in line and line.split("\t", 1)[1].startswith(prefix))


def fetch_session(clone: Path, remote: str, session_id: str) -> dict[str, str]:
    """The session's two refs fetched over the clone's own (a local branch ahead of the remote,
    from a run that died before its push, is discarded: that work is lost, never duplicated)."""
    found = remote_refs(clone, remote, session_id)
    if found:
        run(clone, "fetch", "--quiet", "--force", "--", remote, *(f"+{ref}:{ref}" for ref in found))
    if BRANCH_REF.format(session_id) in found:
        run(clone, "update-ref", PUSHED_REF.format(session_id), found[BRANCH_REF.format(session_id)])
    return found


def default_head(clone: Path, remote: str) -> str:
    listed = run(clone, "ls-remote", "--", remote, "HEAD").stdout.split()
    if not listed:
        raise GitFailed(f"the remote {remote} has no HEAD; push a default branch to it first")
    run(clone, "fetch", "--quiet", "--", remote, listed[0])
    return listed[0]


def check_out(clone: Path, session_id: str, worktree: Path) -> None:
    """A fresh worktree of the session branch at `worktree` (anything a dead run left there is
    discarded: the branch as pushed is the truth)."""
    remove_checkout(clone, session_id, worktree)
    readd_worktree(pygit2.Repository(str(clone)), worktree_name(session_id), worktree, f"session/{session_id}")


def remove_checkout(clone: Path, session_id: str, worktree: Path) -> None:
    repo = pygit2.Repository(str(clone))
    name = worktree_name(session_id)
    shutil.rmtree(worktree, ignore_errors=True)
    if name in repo.list_worktrees():
        repo.lookup_worktree(name).prune(True)
    shutil.rmtree(worktree_admin_dir(repo, name), ignore_errors=True)


def snapshot(clone: Path, session_id: str, files: dict[str, bytes], message: str) -> str:
    """Commit the session's files as a tree on top of the last snapshot; the ref moves to it."""
    repo = pygit2.Repository(str(clone))
    root: _Node = {}
    for relative, data in files.items():
        node = root
        *dirs, leaf = relative.split("/")
        for part in dirs:
            child = node.setdefault(part, {})
            assert isinstance(child, dict), f"{relative}: a file and a directory of one name"
            node = child
        node[leaf] = repo.create_blob(data)
    ref_name = FILES_REF.format(session_id)
    parent = repo.references.get(ref_name)
    parents = [parent.target] if parent is not None else []
    tree = _tree(repo, root)
    sig = signature(repo)
    oid = repo.create_commit(None, sig, sig, message, tree, parents)
    repo.references.create(ref_name, oid, force=True)
    return str(oid)


_Node = dict[str, "_Node | pygit2.Oid"]
"""A directory of a snapshot being built: its subdirectories and its files' blobs, by name."""


def _tree(repo: pygit2.Repository, node: _Node) -> pygit2.Oid:
    builder = repo.TreeBuilder()
    for name, value in sorted(node.items()):
        if isinstance(value, dict):
            builder.insert(name, _tree(repo, value), pygit2.GIT_FILEMODE_TREE)
        else:
            builder.insert(name, value, pygit2.GIT_FILEMODE_BLOB)
    return builder.write()


class SnapshotRefused(TilthError):
    """A snapshot holds something tilth never writes: refused whole, nothing of it restored."""


@dataclass
class Snapshot:
    files: dict[str, bytes]
    message: str
    branch_tip: str | None


SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")


def snapshot_files(clone: Path, session_id: str, allowed: re.Pattern[str], max_file: int, max_total: int,
                   recorded: tuple[str, str | None] | None = None) -> Snapshot:
    """The session's files as last pushed, read as data: only regular files (mode 100644) and
    directories, each name plain (no `..`, `/`, leading dot), each path matching `allowed`, sizes
    within bounds; anything else is SnapshotRefused naming it. `recorded`: the snapshot under that
    ref instead, its branch tip the one given (a reading repository has no branches)."""
    repo = pygit2.Repository(str(clone))
    if recorded is None:
        ref = repo.references.get(FILES_REF.format(session_id))
        branch = repo.references.get(BRANCH_REF.format(session_id))
        tip = str(branch.target) if branch is not None else None
    else:
        ref, tip = repo.references.get(recorded[0]), recorded[1]
    if ref is None:
        return Snapshot({}, "", tip)
    commit = repo[ref.target].peel(pygit2.Commit)
    found: dict[str, bytes] = {}
    total = 0

    def walk(tree: pygit2.Tree, prefix: str, depth: int) -> None:
        nonlocal total
        for entry in tree:
            name = entry.name or ""
            path = f"{prefix}{name}"
            if not SAFE_NAME.match(name) or depth > 3:
                raise SnapshotRefused(f"the snapshot holds an entry named {path!r}")
            if entry.filemode == pygit2.GIT_FILEMODE_TREE:
                walk(repo[entry.id].peel(pygit2.Tree), f"{path}/", depth + 1)
                continue
            if entry.filemode != pygit2.GIT_FILEMODE_BLOB:
                raise SnapshotRefused(f"the snapshot holds {path!r} with mode {entry.filemode:o} (a symlink, an "
                                      "executable or a submodule); only plain files are carried")
            if not allowed.match(path):
                raise SnapshotRefused(f"the snapshot holds {path!r}, which is not a session file tilth writes")
            blob = repo[entry.id].peel(pygit2.Blob)
            size = blob.size
            total += size
            if size > max_file or total > max_total or len(found) >= 100_000:
                raise SnapshotRefused(f"the snapshot is too large at {path!r} ({size} bytes; at most {max_file} a "
                                      f"file, {max_total} in all)")
            found[path] = blob.data

    walk(commit.tree, "", 0)
    return Snapshot(found, commit.message, tip)


def branch_tip(clone: Path, session_id: str) -> str | None:
    ref = pygit2.Repository(str(clone)).references.get(BRANCH_REF.format(session_id))
    return str(ref.target) if ref is not None else None


FAST_FORWARD_REFUSALS = ("[rejected] (non-fast-forward)", "[rejected] (fetch first)", "[rejected] (stale info)")
"""git's words, per ref in `--porcelain` output, for "the remote has commits this push lacks"; a
`[remote rejected]` (a hook, a quota, a ref lock) or a network error is something else, except:"""
STALE_REF = re.compile(r"cannot lock ref '[^']+': (is at [0-9a-f]+ but expected [0-9a-f]+|reference already exists"
                       r"|reference is missing but expected [0-9a-f]+)")
"""The remote's own ref moved between what this push was told and its update (another push landed
first, inside receive-pack): the same refusal. A held `.lock` (`Unable to create ... File exists`) is
not: that is worth trying again."""


def push_session(clone: Path, remote: str, session_id: str) -> None:
    """Both refs, atomically, never plainly forced: the branch (which a retry or a task commit landing
    below the placeholders rewrites) with `--force-with-lease` against the exact tip this clone last
    pushed or fetched (`refs/tilth/pushed/<id>`), the files ref only as a fast-forward. Only a refusal
    because the remote moved on (another worker) is PushRefused; any other failure is GitFailed with
    git's whole message (worth trying again)."""
    branch = BRANCH_REF.format(session_id)
    refs = [f"{ref}:{ref}" for ref in (branch, FILES_REF.format(session_id))]
    last = pygit2.Repository(str(clone)).references.get(PUSHED_REF.format(session_id))
    lease = [f"--force-with-lease={branch}:{last.target}"] if last is not None else []
    proc = run(clone, "push", "--quiet", "--atomic", "--porcelain", *lease, "--", remote, *refs, check=False)
    if proc.returncode == 0:
        tip = branch_tip(clone, session_id)
        if tip is not None:
            run(clone, "update-ref", PUSHED_REF.format(session_id), tip)
        run(clone, "update-ref", SENT_REF.format(session_id), FILES_REF.format(session_id))
    else:
        said = proc.stdout + proc.stderr
        stale = STALE_REF.search(said)
        if stale or any(words in said for words in FAST_FORWARD_REFUSALS):
            raise PushRefused(f"the remote {remote} refused session {session_id}'s push: another worker moved it on"
                              + (f" ({stale.group(0)})" if stale else ""))
        whole = " | ".join(line.strip() for line in said.splitlines() if line.strip()) or f"exit {proc.returncode}"
        raise GitFailed(f"git push to {remote} failed: {whole}")


def last_sent(clone: Path, session_id: str) -> tuple[str, str | None] | None:
    """(files snapshot, branch tip) as this clone itself last pushed them (the tip as last pushed or
    fetched); None when it never pushed the session."""
    refs = pygit2.Repository(str(clone)).references
    sent, tip = refs.get(SENT_REF.format(session_id)), refs.get(PUSHED_REF.format(session_id))
    if sent is None:
        return None
    return str(sent.target), None if tip is None else str(tip.target)


def staged_patch(clone: Path, session_id: str, worktree: Path) -> bytes:
    """The worktree's staged changes against its HEAD (the loop stages everything before each
    evaluation), as a binary patch: an attempt's edits, carried with the session's files. Through
    `worktree_git`, so no external diff, textconv or fsmonitor the worktree names runs."""
    done = worktree_git.run(session_git_dir(clone, session_id), worktree, "diff", "--cached", "--binary",
                            "--no-ext-diff", "--no-textconv", "--no-color", text=False)
    if done.returncode != 0:
        raise GitFailed(f"git diff failed in {worktree}: {telling_line(done.stderr.decode(errors='replace'))}")
    return bytes(done.stdout)


def apply_patch(clone: Path, session_id: str, worktree: Path, patch: bytes) -> None:
    """Put a carried attempt's edits back into a fresh worktree (staged, as they were)."""
    if not patch.strip():
        return
    target = worktree.parent / f".{worktree.name}.carried.patch"
    target.write_bytes(patch)
    try:
        done = worktree_git.run(session_git_dir(clone, session_id), worktree, "apply", "--index", "--binary",
                                str(target))
        if done.returncode != 0:
            raise GitFailed(f"git apply of the carried edits failed in {worktree}: {telling_line(done.stderr)}")
    finally:
        target.unlink(missing_ok=True)
