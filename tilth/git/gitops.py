"""Every git operation tilth performs, through pygit2. No git hooks run; nothing touches
the user's current branch: commits go to `refs/heads/session/<id>` by name, never to HEAD."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pygit2
from pygit2.enums import ResetMode

from tilth.core.errors import BadInput
from tilth.store.redaction import redact_text

FALLBACK_NAME = "tilth"
FALLBACK_EMAIL = "tilth@localhost"


def open_source_repo(path: Path) -> pygit2.Repository:
    found = pygit2.discover_repository(str(path)) if path.is_dir() else None
    if not found:
        raise BadInput(f"{path} is not a git repository; pass --repo a directory inside one")
    repo = pygit2.Repository(found)
    if repo.is_bare:
        raise BadInput(f"{path} is a bare repository; tilth needs one with a working tree")
    if repo.head_is_unborn:
        raise BadInput(f"{path} has no commits yet; make a first commit, then start a session")
    return repo


def check_checkout(repo: pygit2.Repository) -> None:
    """Starting from an implicit HEAD is only unambiguous on a clean, attached checkout."""
    where = repo.workdir.rstrip("/")
    if repo.head_is_detached:
        raise BadInput(f"{where} has a detached HEAD; pass --base REV to name the commit the session starts from")
    if repo.status(untracked_files="no"):
        raise BadInput(f"{where} has uncommitted changes the session would not see; commit or stash them, "
                       "or pass --base HEAD to start from the last commit anyway")


def check_writable(repo: pygit2.Repository) -> None:
    """A session adds a branch and a worktree to the repository's git dir: a read-only mount or
    someone else's repository is refused before anything is made."""
    import os

    git_dir = Path(repo.path)
    common = git_dir
    if (git_dir / "commondir").is_file():  # a linked worktree: branches live in the main git dir
        common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
    for where in (git_dir, common, common / "refs" / "heads"):
        if where.is_dir() and not os.access(where, os.W_OK):
            raise BadInput(f"{where} is not writable (a read-only mount, or another user's repository); a session "
                           "adds a branch and a worktree there: start from a writable clone")


def resolve_commit(repo: pygit2.Repository, rev: str) -> pygit2.Commit:
    try:
        return repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        raise BadInput(f"--base {rev!r} does not name a commit in {repo.workdir}") from None


def signature(repo: pygit2.Repository) -> pygit2.Signature:
    """The repo's configured identity, or a fixed fallback when none is configured."""
    try:
        return repo.default_signature
    except (KeyError, pygit2.GitError):
        return pygit2.Signature(FALLBACK_NAME, FALLBACK_EMAIL)


def create_worktree(repo: pygit2.Repository, branch: str, base: pygit2.Commit, name: str, path: Path) -> None:
    if repo.branches.local.get(branch) is not None:
        raise BadInput(f"branch {branch!r} already exists in {repo.workdir}; choose another --id")
    if path.exists():
        raise BadInput(f"worktree path {path} already exists; choose another --id or remove it")
    admin = worktree_admin_dir(repo, name)
    if admin.exists():
        raise BadInput(f"git worktree {name!r} already exists in {repo.workdir} ({admin}); if its directory is "
                       "gone, `git worktree prune` removes it")
    ref = repo.branches.local.create(branch, base)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        repo.add_worktree(name, str(path), ref)
    except BaseException:
        remove_worktree(repo, branch, name, path)
        raise


def remove_worktree(repo: pygit2.Repository, branch: str, name: str, path: Path) -> None:
    """Undo create_worktree as far as it got; used to leave nothing half-created. libgit2 can
    stop before registering the admin dir (no `gitdir` file yet, e.g. on a full disk): then
    `list_worktrees` does not show it, but the next add under that name would fail."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    if name in repo.list_worktrees():
        repo.lookup_worktree(name).prune(True)
    shutil.rmtree(worktree_admin_dir(repo, name), ignore_errors=True)
    existing = repo.branches.local.get(branch)
    if existing is not None:
        existing.delete()


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
    """
    index = repo.index
    index.read()
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
    index.write()
    return nested


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
    return repo.index.diff_to_tree(repo.head.peel(pygit2.Commit).tree)


def changed_lines(diff: pygit2.Diff) -> Iterator[tuple[str, str, int, str]]:
    """(path, `+` or `-`, line number in the new or old file, text) of every line a diff adds or
    removes; binary files have none."""
    for patch in diff:
        if patch.delta.is_binary:
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
    files = [patch.delta.new_file.path for patch in diff]
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
        delta = patch.delta
        status = _STATUS.get(delta.status, "other")
        emptied = False
        if status in ("modified", "renamed"):
            blob = repo.get(delta.new_file.id)
            emptied = blob is not None and not blob.data.strip()
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


def scratch_repo(path: Path, files: dict[str, str]) -> pygit2.Repository:
    """A new repository at `path` whose one commit holds `files` (for `tilth calibrate`'s fixtures)."""
    repo = pygit2.init_repository(str(path), initial_head="main")
    write_files(path, files)
    stage_all(repo)
    who = pygit2.Signature(FALLBACK_NAME, FALLBACK_EMAIL)
    repo.create_commit("HEAD", who, who, "base", repo.index.write_tree(), [])
    return repo


def write_files(root: Path, files: dict[str, str | None]) -> None:
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
    return repo.diff(repo.get(base).peel(pygit2.Tree), repo.get(head).peel(pygit2.Tree)).patch or ""


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


def _check_loose(repo: pygit2.Repository, oid: pygit2.Oid) -> None:
    from tilth.git.integrity import inflates_whole

    sha = str(oid)
    file = common_dir(repo) / "objects" / sha[:2] / sha[2:]
    if file.is_file() and not inflates_whole(file):
        raise pygit2.GitError(f"{sha}: the loose object {file} is damaged (it does not inflate to a whole object)")


def common_dir(repo: pygit2.Repository) -> Path:
    own = Path(repo.path)
    marker = own / "commondir"
    return (own / marker.read_text().strip()).resolve() if marker.is_file() else own.resolve()


def worktree_admin_dir(repo: pygit2.Repository, name: str) -> Path:
    return common_dir(repo) / "worktrees" / name


def objects_dir(repo_path: str | Path) -> Path | None:
    """The object store of the repository at (or above) `repo_path`, if there is one."""
    try:
        found = pygit2.discover_repository(str(repo_path))
        return common_dir(pygit2.Repository(found)) / "objects" if found else None
    except pygit2.GitError:
        return None


def _admin_belongs_to(admin: Path, path: Path) -> bool:
    """The admin dir is unregistered (libgit2 stopped before writing `gitdir`) or points at `path`."""
    gitdir = admin / "gitdir"
    if not gitdir.is_file():
        return True
    return Path(gitdir.read_text().strip()).resolve() == (path / ".git").resolve()


def reclaim_worktree(git_dir: Path, branch: str, name: str, path: Path, base: str) -> list[str]:
    """Undo what an interrupted create_worktree made, as far as it is provably its own: the
    worktree dir; the admin dir if unregistered or registered to `path`; the branch only while it
    still points at `base` and no other worktree has it checked out. Says what it did."""
    import shutil

    done = []
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
        done.append(f"removed worktree {path}")
    try:
        repo = pygit2.Repository(str(git_dir))
    except pygit2.GitError:
        return [*done, f"its repository {git_dir} is gone"]
    admin = worktree_admin_dir(repo, name)
    if admin.is_dir() and _admin_belongs_to(admin, path):
        shutil.rmtree(admin, ignore_errors=True)
        done.append(f"removed git worktree {name}")
    ref = repo.branches.local.get(branch)
    if ref is not None:
        if str(ref.target) != base:
            done.append(f"kept branch {branch} (it has moved past {base[:7]})")
        elif ref.is_checked_out():
            done.append(f"kept branch {branch} (a worktree has it checked out)")
        else:
            ref.delete()
            done.append(f"removed branch {branch}")
    return done


def open_repo(path: str | Path) -> pygit2.Repository | None:
    """The repository at `path`, or None when there is none (gone, or not a git repository)."""
    try:
        return pygit2.Repository(str(path))
    except (pygit2.GitError, KeyError, ValueError):
        return None


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


def registered_worktree(repo: pygit2.Repository, name: str) -> str | None:
    """The path `git worktree list` gives for the worktree `name`, or None when it is not registered."""
    if name not in repo.list_worktrees():
        return None
    return repo.lookup_worktree(name).path


def worktree_head(git_dir: Path) -> str | None:
    """What the HEAD of the worktree whose admin dir is `git_dir` says (`ref: refs/heads/...` or a
    sha), or None; read from the admin dir, never through the worktree's own `.git` file."""
    try:
        return (git_dir / "HEAD").read_text(errors="replace").strip()
    except OSError:
        return None


def readd_worktree(repo: pygit2.Repository, name: str, path: Path, branch: str) -> None:
    """A session worktree whose directory was deleted, checked out again from its branch at
    the same path: the stale registration pruned, then the worktree added on the branch."""
    import shutil

    if name in repo.list_worktrees():
        repo.lookup_worktree(name).prune(True)
    shutil.rmtree(worktree_admin_dir(repo, name), ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    repo.add_worktree(name, str(path), repo.branches.local[branch])
