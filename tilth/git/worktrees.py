"""A session's worktree in the user's repository, through pygit2: the repository checked before a
session starts from it, the worktree created (on its new `session/<id>` branch), removed, reclaimed
after an interrupted creation and re-added when its directory is gone; and where git keeps it (the
common git dir, the admin dir, its HEAD and registration). Work inside a worktree is `gitops.py`'s."""

from __future__ import annotations

from pathlib import Path

import pygit2

from tilth.core.errors import BadInput
from tilth.git.worktree_git import admin_dir, common_of


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

def check_writable(repo: pygit2.Repository) -> None:
    """A session adds a branch and a worktree to the repository's git dir: a read-only mount or
    someone else's repository is refused before anything is made."""
    import os

    git_dir = Path(repo.path)
    common = common_of(git_dir)  # a linked worktree: branches live in the main git dir
    for where in (git_dir, common, common / "refs" / "heads"):
        if where.is_dir() and not os.access(where, os.W_OK):
            raise BadInput(f"{where} is not writable (a read-only mount, or another user's repository); a session "
                           "adds a branch and a worktree there: start from a writable clone")


def check_checkout(repo: pygit2.Repository) -> None:
    """Starting from an implicit HEAD is only unambiguous on a clean, attached checkout."""
    where = repo.workdir.rstrip("/")
    if repo.head_is_detached:
        raise BadInput(f"{where} has a detached HEAD; pass --base REV to name the commit the session starts from")
    if repo.status(untracked_files="no"):
        raise BadInput(f"{where} has uncommitted changes the session would not see; commit or stash them, "
                       "or pass --base HEAD to start from the last commit anyway")

def resolve_commit(repo: pygit2.Repository, rev: str) -> pygit2.Commit:
    try:
        return repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        raise BadInput(f"--base {rev!r} does not name a commit in {repo.workdir}") from None

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

def common_dir(repo: pygit2.Repository) -> Path:
    """The git directory shared by every worktree of the opened repository."""
    return common_of(Path(repo.path))

def worktree_admin_dir(repo: pygit2.Repository, name: str) -> Path:
    return admin_dir(common_dir(repo), name)

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
