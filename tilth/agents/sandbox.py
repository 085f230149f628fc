"""Confinement for commands an agent runs (the worker's bash, check commands).

Under bubblewrap: the whole filesystem read-only, the worktree writable, the main
repository's git dir writable only where a worktree's own git commands write (its index
and HEAD under `.git/worktrees/<name>`, and the object store), `$TILTH_HOME/sessions`
hidden behind an empty tmpfs, `$TILTH_HOME/config.toml` hidden, and a private /tmp. The
network is left alone so a model endpoint on loopback stays reachable.

Modes: `bwrap` (required), `auto` (bwrap when it works here, else unconfined, said loudly),
`off` (unconfined).
"""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from tilth.core.errors import BadInput

MODES = ("auto", "bwrap", "off")


@lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """bwrap exists and can create its namespaces here (containers may forbid it)."""
    binary = shutil.which("bwrap")
    if not binary:
        return False
    probe = subprocess.run([binary, "--ro-bind", "/", "/", "--dev", "/dev", "true"], capture_output=True)
    return probe.returncode == 0


def resolve_mode(setting: str) -> str:
    """The mode in force: `bwrap` or `off`."""
    if setting not in MODES:
        raise BadInput(f"sandbox = {setting!r}: use one of {', '.join(MODES)}")
    if setting == "off":
        return "off"
    if bwrap_works():
        return "bwrap"
    if setting == "bwrap":
        raise BadInput("sandbox = bwrap but bubblewrap is not installed or cannot run here; "
                       "install it (apt-get install bubblewrap) or set TILTH_SANDBOX=auto")
    return "off"


def git_dirs(worktree: Path) -> tuple[Path, Path] | None:
    """(the worktree's own git dir, the common git dir), from the `.git` file of a linked worktree."""
    marker = worktree / ".git"
    if not marker.is_file():
        return None
    text = marker.read_text().strip()
    if not text.startswith("gitdir:"):
        return None
    own = (worktree / text.split(":", 1)[1].strip()).resolve()
    common = (own / (own / "commondir").read_text().strip()).resolve() if (own / "commondir").is_file() else own
    return own, common


def wrap(mode: str, worktree: Path, home: Path) -> list[str]:
    """The argv prefix that runs a command confined (empty when unconfined)."""
    if mode != "bwrap":
        return []
    worktree = worktree.resolve()
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--bind", str(worktree), str(worktree)]
    dirs = git_dirs(worktree)
    if dirs:
        own, common = dirs
        # Visible even if the repository lives under /tmp; writable only where the worktree's
        # own git commands write. Refs stay read-only: commits are tilth's.
        argv += ["--ro-bind", str(common), str(common), "--bind", str(own), str(own),
                 "--bind", str(common / "objects"), str(common / "objects")]
    sessions = home.resolve() / "sessions"
    if sessions.is_dir():
        argv += ["--tmpfs", str(sessions)]
    config = home.resolve() / "config.toml"
    if config.is_file():
        argv += ["--ro-bind", "/dev/null", str(config)]
    return argv + ["--die-with-parent", "--chdir", str(worktree)]
