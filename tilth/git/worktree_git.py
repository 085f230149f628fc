"""Running git on a session worktree so that nothing the worktree holds decides what git runs.

The worker can write every file of the worktree, and unconfined also its `.git` file: a `.git`
that points at a repository of the worker's own, whose config names a `core.fsmonitor` program,
would run that program the next time tilth's own git looks at the worktree, on the host, with
tilth's environment. So every git command tilth runs on a worktree goes through `argv` here:
the git directory is named explicitly (the worktree's admin dir in the user's repository,
derived from the recorded repository path and session id, never read from the worktree), the
work tree too, and the settings that make git run programs are turned off on the command line,
which beats every config file: no fsmonitor, no hooks, no external diff or textconv, no pager.
`env` gives the same to a child that runs git by itself (a user's hook): GIT_DIR, GIT_WORK_TREE
and the settings as GIT_CONFIG_COUNT pairs. pygit2 (libgit2) runs none of these programs; tilth
opens a worktree with pygit2 by the same admin dir (`git/gitops.open_worktree`).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Literal, overload

from tilth.core.errors import BadInput

SAFE_CONFIG = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("core.untrackedCache", "false"),
    ("core.pager", "cat"),
    ("diff.external", ""),
)
"""Settings that would make git run a program, each turned off."""


def worktree_name(session_id: str) -> str:
    """The name a session's worktree is registered under in the user's repository."""
    return f"tilth-{session_id}"


def common_of(git_dir: Path) -> Path:
    """The git directory shared by every worktree, from one worktree's own git dir (its `commondir`
    file names the shared one) or from the shared one itself."""
    marker = git_dir / "commondir"
    return (git_dir / marker.read_text().strip()).resolve() if marker.is_file() else git_dir.resolve()


def common_git_dir(repo: str | Path) -> Path:
    """The git directory shared by every worktree of the user's repository at `repo`."""
    marker = Path(repo) / ".git"
    if marker.is_dir():
        return marker.resolve()
    if marker.is_file():  # the user's checkout is itself a linked worktree
        return common_of((marker.parent / marker.read_text().strip().removeprefix("gitdir:").strip()).resolve())
    return Path(repo).resolve()  # a bare repository: the repo path is the git dir


def admin_dir(common: Path, name: str) -> Path:
    """Where git keeps the worktree registered as `name` (its HEAD, index, `gitdir`), under the common git dir."""
    return common / "worktrees" / name


def session_git_dir(repo: str | Path, session_id: str) -> Path:
    """The admin dir of a session's worktree: where its HEAD and index live, in the user's repository."""
    return admin_dir(common_git_dir(repo), worktree_name(session_id))


def config_args() -> list[str]:
    return [arg for key, value in SAFE_CONFIG for arg in ("-c", f"{key}={value}")]


def argv(git_dir: Path | None, worktree: Path, *args: str) -> list[str]:
    """`git` with the git dir and work tree named and every program-running setting off. Without
    a git dir (a repository of the user's own, `tilth prep`), git finds it from `worktree`."""
    where = ["--git-dir", str(git_dir), "--work-tree", str(worktree)] if git_dir else ["-C", str(worktree)]
    return ["git", *where, *config_args(), "--no-pager", *args]


def env(git_dir: Path | None, worktree: Path, base: dict[str, str]) -> dict[str, str]:
    """`base` without git's own variables, plus what makes a git run by a child as safe as `argv`."""
    out = {k: v for k, v in base.items() if not k.startswith("GIT_")}
    if git_dir:
        out.update(GIT_DIR=str(git_dir), GIT_WORK_TREE=str(worktree))
    out["GIT_CONFIG_COUNT"] = str(len(SAFE_CONFIG))
    for i, (key, value) in enumerate(SAFE_CONFIG):
        out[f"GIT_CONFIG_KEY_{i}"], out[f"GIT_CONFIG_VALUE_{i}"] = key, value
    out["GIT_TERMINAL_PROMPT"] = "0"
    return out


@overload
def run(git_dir: Path | None, worktree: Path, *args: str, stdin: str | None = None,
        text: Literal[True] = True, locale: str | None = None) -> subprocess.CompletedProcess[str]: ...
@overload
def run(git_dir: Path | None, worktree: Path, *args: str, stdin: bytes | None = None,
        text: Literal[False], locale: str | None = None) -> subprocess.CompletedProcess[bytes]: ...
def run(git_dir: Path | None, worktree: Path, *args: str, stdin: str | bytes | None = None,
        text: bool = True, locale: str | None = None) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:
    """Run git on the worktree safely; output captured, never raises on git's exit status.
    `locale="C"` when the caller reads git's English messages."""
    environment = env(git_dir, worktree, dict(os.environ))
    if locale:
        environment["LC_ALL"] = locale
    try:
        return subprocess.run(argv(git_dir, worktree, *args), env=environment,
                              cwd=worktree, capture_output=True, text=text, input=stdin,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise BadInput("git is not on PATH; install git or fix PATH") from None


def command_line(git_dir: Path | None, worktree: Path, *args: str) -> str:
    """The same command as a person would type it: what `tilth doctor` advises."""
    return shlex.join(argv(git_dir, worktree, *args))


def has_uncommitted(git_dir: Path, worktree: Path) -> bool:
    """The worktree holds changes its branch does not (untracked files included)."""
    proc = run(git_dir, worktree, "--no-optional-locks", "status", "--porcelain", "--no-renames")
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        raise BadInput(f"git status failed in {worktree}: {lines[-1] if lines else 'no message'}")
    return bool(proc.stdout.strip())
