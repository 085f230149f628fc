"""Work inside a session's worktree through pygit2: opened by its admin dir, staging, diffs, commits,
branch moves, soft resets, stale locks and readability checks. No git hooks run; nothing touches
the user's current branch: commits go to `refs/heads/session/<id>` by name, never to HEAD. Creating,
removing and finding worktrees is `worktrees.py`'s job."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

import pygit2
from pygit2.enums import ResetMode

from tilth.core.errors import BadInput
from tilth.git.worktrees import common_dir
from tilth.store.redaction import redact_text

FALLBACK_NAME = "tilth"
FALLBACK_EMAIL = "tilth@localhost"


def signature(repo: pygit2.Repository) -> pygit2.Signature:
    """The repo's configured identity, or a fixed fallback when none is configured."""
    try:
        return repo.default_signature
    except (KeyError, pygit2.GitError):
        return pygit2.Signature(FALLBACK_NAME, FALLBACK_EMAIL)


def open_worktree(path: Path, git_dir: Path, repair: bool = True) -> pygit2.Repository:
    """The session worktree, opened by its admin dir in the user's repository (`git_dir`), never by
    what its `.git` file says: an unconfined worker can rewrite that file to point at a repository
    of its own. A `.git` file that no longer names `git_dir` is put back (unless a read-only view asks)."""
    if not path.is_dir() or not (git_dir / "HEAD").is_file():
        raise BadInput(f"the session worktree {path} is missing; the session cannot continue")
    repo = pygit2.Repository(str(git_dir))
    if repo.workdir is None or Path(repo.workdir).resolve() != path.resolve():
        raise BadInput(f"{git_dir} is the git dir of {repo.workdir}, not of the session worktree {path}; "
                       "`tilth doctor` says how to repair it")
    if repair:
        restore_git_file(path, git_dir)
    return repo


def restore_git_file(path: Path, git_dir: Path) -> bool:
    """Make the worktree's `.git` the file git wrote (`gitdir: <git_dir>`); True when it was not."""
    marker, wanted = path / ".git", f"gitdir: {git_dir}\n"
    try:
        if marker.is_file() and not marker.is_symlink() and marker.read_text(errors="replace") == wanted:
            return False
    except OSError:
        pass
    if marker.is_dir() and not marker.is_symlink():
        import shutil

        shutil.rmtree(marker)
    else:
        marker.unlink(missing_ok=True)
    marker.write_text(wanted)
    return True


def stage_all(repo: pygit2.Repository) -> list[str]:
    """Stage every change in the worktree; return nested repositories left out.

    `add_all` refuses a nested repository, so on failure we stage path by path and skip
    the directories git reports as untracked repos (status keys ending in '/').
    The index is re-read only when its file changed since it was last read or written (an agent's
    own `git add`, another writer): re-parsing an unchanged 20,000-entry index cost ~15 ms and a
    second copy of it in memory per stage.
    """
    index = repo.index
    index.read(force=False)
    try:
        index.add_all()
        nested: list[str] = []
    except pygit2.GitError:
        index.read()
        changed = list(repo.status(untracked_files="normal"))
        nested = sorted(p for p in changed if p.endswith("/"))
        paths = [p for p in changed if not p.endswith("/")]
        if paths:
            index.add_all(paths)
    keep_tree_cache(index)
    index.write()
    return nested


def keep_tree_cache(index: pygit2.Index) -> None:
    """Compute the index's tree before it is written, so the file keeps git's tree cache: the next
    `index.read()` gets it back and `write_tree` (the guard's census, the commit) then hashes only the
    directories an attempt changed. Without it, every stage re-hashed every directory of the tree
    (~140 ms of ~230 ms of git work per task at 20,000 files). A tree that cannot be written here
    (a conflicted index) is left to whoever writes it next to refuse, as before."""
    try:
        index.write_tree()
    except pygit2.GitError:
        pass


def unstage(repo: pygit2.Repository, paths: list[str]) -> None:
    """Put these paths back in the index as HEAD has them (gone, if HEAD has none)."""
    index = repo.index
    tree = repo.head.peel(pygit2.Commit).tree
    for path in paths:
        try:
            entry = tree[path]
        except KeyError:
            index.remove(path)
        else:
            index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))
    index.write()


def staged_diff(repo: pygit2.Repository) -> pygit2.Diff:
    """HEAD tree -> index, after stage_all: far cheaper than HEAD -> workdir on big trees."""
    index: pygit2.Index = repo.index
    return index.diff_to_tree(repo.head.peel(pygit2.Commit).tree)


def changed_lines(diff: pygit2.Diff) -> Iterator[tuple[str, str, int, str]]:
    """(path, `+` or `-`, line number in the new or old file, text) of every line a diff adds or
    removes; binary files have none."""
    for patch in diff:
        if patch is None or patch.delta.is_binary:
            continue
        for hunk in patch.hunks:
            for line in hunk.lines:
                if line.origin == "+":
                    yield patch.delta.new_file.path, "+", line.new_lineno, line.content
                elif line.origin == "-":
                    yield patch.delta.new_file.path, "-", line.old_lineno, line.content


def describe_diff(diff: pygit2.Diff) -> str:
    """`3 files changed, +10 -2: a.py, b.py`: the ledger's one-line diff summary."""
    stats = diff.stats
    files = [patch.delta.new_file.path for patch in diff if patch is not None]
    shown = ", ".join(files[:10]) + (f", and {len(files) - 10} more" if len(files) > 10 else "")
    return f"{stats.files_changed} files changed, +{stats.insertions} -{stats.deletions}" + (f": {shown}" if files else "")


@dataclass(frozen=True)
class FileChange:
    """One file of a staged diff, as the harness's own inspection of an attempt reads it."""

    path: str
    """The new path (the old one for a deletion)."""
    status: str
    """added | deleted | modified | renamed | other"""
    old_path: str
    emptied: bool
    """The file existed before and is now empty or only whitespace."""
    added_lines: tuple[str, ...]


_STATUS = {pygit2.enums.DeltaStatus.ADDED: "added", pygit2.enums.DeltaStatus.DELETED: "deleted",
           pygit2.enums.DeltaStatus.MODIFIED: "modified", pygit2.enums.DeltaStatus.RENAMED: "renamed"}
MAX_INSPECTED_LINES = 20_000


def diff_changes(repo: pygit2.Repository, diff: pygit2.Diff) -> list[FileChange]:
    """Each changed file: status, whether an existing file was emptied, and its added lines (at most
    `MAX_INSPECTED_LINES` in all; binary files have none)."""
    changes, budget = [], MAX_INSPECTED_LINES
    for patch in diff:
        if patch is None:
            continue
        delta = patch.delta
        status = _STATUS.get(delta.status, "other")
        emptied = False
        if status in ("modified", "renamed"):
            blob = repo.get(delta.new_file.id)
            emptied = isinstance(blob, pygit2.Blob) and not blob.data.strip()
        added: list[str] = []
        if not delta.is_binary:
            for hunk in patch.hunks:
                for line in hunk.lines:
                    if line.origin == "+" and budget > 0:
                        added.append(line.content.rstrip("\n"))
                        budget -= 1
        path = delta.old_file.path if status == "deleted" else delta.new_file.path
        changes.append(FileChange(path, status, delta.old_file.path, emptied, tuple(added)))
    return changes


def scratch_repo(path: Path, files: Mapping[str, str]) -> pygit2.Repository:
    """A new repository at `path` whose one commit holds `files` (for `tilth calibrate`'s fixtures)."""
    repo = pygit2.init_repository(str(path), initial_head="main")
    write_files(path, files)
    stage_all(repo)
    who = pygit2.Signature(FALLBACK_NAME, FALLBACK_EMAIL)
    repo.create_commit("HEAD", who, who, "base", repo.index.write_tree(), [])
    return repo


def write_files(root: Path, files: Mapping[str, str | None]) -> None:
    """Write each file under `root` (None deletes it)."""
    for name, text in files.items():
        target = root / name
        if text is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)


def range_patch(repo: pygit2.Repository, base: str, head: str) -> str:
    """The patch from `base` to `head` (the whole of a session's work)."""
    return repo[base].peel(pygit2.Tree).diff_to_tree(repo[head].peel(pygit2.Tree)).patch or ""


def ensure_head(repo: pygit2.Repository, branch: str) -> str | None:
    """Point the worktree's HEAD back at `refs/heads/<branch>` if something moved it (an
    unconfined agent can rewrite HEAD); returns what HEAD said before a repair, else None."""
    ref = f"refs/heads/{branch}"
    try:
        raw = (Path(repo.path) / "HEAD").read_text(errors="replace").strip()
    except FileNotFoundError:
        raw = "(missing)"
    if raw == f"ref: {ref}":
        return None
    repo.set_head(ref)
    return raw


def branch_tip(repo: pygit2.Repository, branch: str) -> str | None:
    ref = repo.references.get(f"refs/heads/{branch}")
    return str(ref.target) if ref is not None else None


def descends_from(repo: pygit2.Repository, commit: str, ancestor: str) -> bool:
    """`commit` is `ancestor` or has it in its history (any commit that is not an object here: False)."""
    if commit == ancestor:
        return True
    try:
        return repo.descendant_of(pygit2.Oid(hex=commit), pygit2.Oid(hex=ancestor))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def move_branch(repo: pygit2.Repository, branch: str, target: str) -> None:
    """Set `refs/heads/<branch>` to `target`, recreating it if it was deleted."""
    repo.references.create(f"refs/heads/{branch}", pygit2.Oid(hex=target), force=True)


def commit_staged(repo: pygit2.Repository, branch: str, message: str, parent: str) -> str:
    """Commit the index onto `refs/heads/<branch>` by name, never onto whatever HEAD says.
    `parent` is the tip tilth expects; libgit2 refuses the commit if the branch is elsewhere.
    The message carries the worker's case or question, so it is redacted like a session file."""
    tree = repo.index.write_tree()
    sig = signature(repo)
    return str(repo.create_commit(f"refs/heads/{branch}", sig, sig, redact_text(message), tree,
                                  [pygit2.Oid(hex=parent)]))


def soft_reset(repo: pygit2.Repository, target: str) -> None:
    repo.reset(pygit2.Oid(hex=target), ResetMode.SOFT)


def first_parent_chain(repo: pygit2.Repository, stop_at: str) -> list[pygit2.Commit]:
    """Commits from HEAD back to (not including) `stop_at`, newest first."""
    return chain_from(repo, str(repo.head.peel(pygit2.Commit).id), stop_at)


def clear_stale_locks(repo: pygit2.Repository, branch: str) -> list[str]:
    """Remove git lock files a killed writer left behind; we hold the session lock, so no
    other tilth process can own them."""
    candidates = [Path(repo.path) / "index.lock", Path(repo.path) / "HEAD.lock"]
    common = Path(repo.path).parent.parent if "worktrees" in Path(repo.path).parts else Path(repo.path)
    candidates.append(common / "refs" / "heads" / f"{branch}.lock")
    removed = []
    for lock in candidates:
        if lock.exists():
            lock.unlink()
            removed.append(str(lock))
    return removed


GitError = pygit2.GitError
"""Re-exported so that run/ and cli/ catch libgit2 failures without importing pygit2."""


def check_readable(repo: pygit2.Repository, branch: str) -> None:
    """Read the branch's tip commit and its tree, so that a damaged object there stops a run
    with its name rather than surfacing later as a confusing answer (or, cut short, as a hang)."""
    ref = repo.references.get(f"refs/heads/{branch}")
    if ref is None:
        return
    try:
        _check_loose(repo, ref.target)
        commit = repo[ref.target].peel(pygit2.Commit)
        _check_loose(repo, commit.tree_id)
        len(commit.tree)
    except KeyError as missing:
        raise pygit2.GitError(f"{branch}: object {missing.args[0] if missing.args else ''} is missing") from None


def _check_loose(repo: pygit2.Repository, oid: pygit2.Oid | str) -> None:
    from tilth.git.integrity import inflates_whole

    sha = str(oid)
    file = common_dir(repo) / "objects" / sha[:2] / sha[2:]
    if file.is_file() and not inflates_whole(file):
        raise pygit2.GitError(f"{sha}: the loose object {file} is damaged (it does not inflate to a whole object)")


def chain_from(repo: pygit2.Repository, tip: str, stop_at: str) -> list[pygit2.Commit]:
    """Commits from `tip` back along first parents to (not including) `stop_at`, newest first:
    `first_parent_chain` for a branch that no worktree HEAD has to name."""
    chain = []
    commit = repo[tip].peel(pygit2.Commit)
    while str(commit.id) != stop_at:
        chain.append(commit)
        if not commit.parents:
            break
        commit = commit.parents[0]
    return chain


def commit_at(repo: pygit2.Repository, rev: str) -> pygit2.Commit | None:
    """The commit a full or short sha names here, or None."""
    try:
        return repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        return None


