"""A session branch replayed onto a pull request's moved base: commit by commit, never a merge commit.

`fetch_base` brings the PR's own base ref (a name from the forge: checked as a branch name, fetched into
`refs/tilth/base/<id>`, never used as a path). `conflicts` sizes what the branch and the base disagree on, as
GitHub does, with `git merge-tree --write-tree` (no worktree, nothing written but objects). `replay` cherry-picks
each of the branch's commits in a throwaway detached worktree (the user's hooks off, no signing prompts): each
keeps its author and message (trailers and all), one commit stays one commit; a path that conflicts takes the
base's side, so no commit carries conflict markers (the follow-up task restores the session's change there).
`move` points the session branch and its worktree at the result together (`reset --hard` of a clean worktree
that has the branch checked out), refusing anything else.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tilth.git import worktree_git
from tilth.git.gitcli import GitFailed, run

QUIET = ("-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "-c", "advice.detachedHead=false")
MEANING = ("modify/delete", "rename/delete", "rename/rename", "rename/add", "add/add", "file/directory",
           "directory/file", "distinct types", "submodule")
"""Conflict kinds about what a file is rather than its lines; binary files too."""


@dataclass(frozen=True)
class Conflicts:
    paths: tuple[str, ...]
    hunks: int
    """Conflict regions (`<<<<<<<` markers) over all the text conflicts."""
    in_meaning: tuple[str, ...]
    """The merge's own lines about conflicts that are not text (a deleted, renamed or binary file)."""


def base_ref(session_id: str) -> str:
    return f"refs/tilth/base/{session_id}"


def fetch_base(repo: str | Path, remote: str, base: str, session_id: str) -> str:
    """The sha of the PR's base branch on the remote, fetched now."""
    if run(repo, "check-ref-format", "--branch", base, check=False).returncode != 0 or base.startswith("-"):
        raise GitFailed(f"the pull request's base {base!r} is not a branch name git accepts")
    ref = base_ref(session_id)
    run(repo, "fetch", "-q", "--no-tags", "--", remote, f"+refs/heads/{base}:{ref}")
    return run(repo, "rev-parse", "--verify", f"{ref}^{{commit}}").stdout.strip()


def conflicts(repo: str | Path, head: str, base: str) -> Conflicts:
    """What merging `base` into `head` would conflict on (empty when it merges cleanly)."""
    proc = run(repo, "merge-tree", "--write-tree", "--name-only", "--messages", head, base, check=False)
    if proc.returncode not in (0, 1):
        raise GitFailed(f"git merge-tree failed in {repo}: {proc.stderr.strip()[:300]}")
    if proc.returncode == 0:
        return Conflicts((), 0, ())
    tree, _, rest = proc.stdout.partition("\n")
    names, _, messages = rest.partition("\n\n")
    paths = tuple(dict.fromkeys(line for line in names.splitlines() if line))
    told = [line for line in messages.splitlines() if line.startswith("CONFLICT")]
    in_meaning = tuple(line for line in told if "(content)" not in line or "binary" in line.lower())
    in_meaning += tuple(line for line in messages.splitlines() if "Cannot merge binary" in line)
    hunks = 0
    for path in paths:
        blob = run(repo, "cat-file", "-p", f"{tree.strip()}:{path}", check=False).stdout
        hunks += sum(1 for line in blob.splitlines() if line.startswith("<<<<<<< "))
    return Conflicts(paths, hunks, in_meaning)


def commits_since(repo: str | Path, base: str, tip: str) -> list[str]:
    """The branch's own commits, oldest first; a merge commit among them is refused."""
    merges = run(repo, "rev-list", "--merges", f"{base}..{tip}").stdout.split()
    if merges:
        raise GitFailed(f"the branch has a merge commit ({merges[0][:7]}); tilth replays only single-parent commits")
    return run(repo, "rev-list", "--reverse", f"{base}..{tip}").stdout.split()


def replay(repo: str | Path, scratch: Path, onto: str, commits: list[str]) -> tuple[str, tuple[str, ...]]:
    """The new tip with `commits` cherry-picked onto `onto` in order, and the paths that conflicted (their base
    side kept). `scratch` is a throwaway worktree, removed after."""
    drop_scratch(repo, scratch)
    run(repo, *QUIET, "worktree", "add", "-q", "--detach", str(scratch), onto)
    conflicted: dict[str, None] = {}
    try:
        for sha in commits:
            picked = run(scratch, *QUIET, "cherry-pick", "--no-commit", "--allow-empty", sha, check=False)
            if picked.returncode != 0:
                unmerged = run(scratch, "diff", "--name-only", "--diff-filter=U").stdout.splitlines()
                if not unmerged:
                    raise GitFailed(f"cherry-pick of {sha[:7]} failed: {picked.stderr.strip()[:300]}")
                for path in unmerged:
                    take_base_side(scratch, path)
                    conflicted[path] = None
            run(scratch, *QUIET, "commit", "-q", "--allow-empty", "--no-verify", "-C", sha)
        return run(scratch, "rev-parse", "HEAD").stdout.strip(), tuple(conflicted)
    finally:
        drop_scratch(repo, scratch)


def take_base_side(scratch: Path, path: str) -> None:
    if run(scratch, "cat-file", "-e", f"HEAD:{path}", check=False).returncode == 0:
        run(scratch, "checkout", "HEAD", "--", path)
    else:
        run(scratch, "rm", "-q", "-f", "--cached", "--", path)
        (scratch / path).unlink(missing_ok=True)


def drop_scratch(repo: str | Path, scratch: Path) -> None:
    run(repo, "worktree", "remove", "--force", str(scratch), check=False)
    shutil.rmtree(scratch, ignore_errors=True)
    run(repo, "worktree", "prune", check=False)


def move(git_dir: Path, worktree: str | Path, branch: str, old: str, new: str) -> None:
    """The branch (checked out, clean, at `old` or already at `new`) and its worktree at `new`, together. The
    worktree is the worker's: git runs on it through `worktree_git` (its recorded git dir, nothing in the
    worktree deciding what git runs), never through the worktree's own `.git`."""
    def git(*args: str) -> str:
        done = worktree_git.run(git_dir, Path(worktree), *args, locale="C")
        if done.returncode != 0:
            raise GitFailed(f"git {args[0]} failed in {worktree}: {done.stderr.strip()[:500]}")
        return done.stdout.strip()

    if git("symbolic-ref", "-q", "HEAD") != f"refs/heads/{branch}":
        raise GitFailed(f"{worktree} does not have {branch} checked out; the rebase leaves it alone")
    tip = git("rev-parse", "HEAD")
    if tip not in (old, new):
        raise GitFailed(f"{branch} moved to {tip[:7]} meanwhile; the rebase leaves it alone")
    if git("status", "--porcelain", "--untracked-files=no"):
        raise GitFailed(f"{worktree} has uncommitted changes; the rebase leaves it alone")
    git("reset", "-q", "--hard", new)
