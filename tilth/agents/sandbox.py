"""Confinement for commands an agent runs (the worker's bash, check commands).

Under bubblewrap: the whole filesystem read-only, the worktree writable, all of the main
repository's git metadata read-only (the agent reads history with `git log/diff/status/show`;
`git add`, `git commit`, `git stash` and any write to HEAD, refs or objects fail with
"Read-only file system", so only tilth moves `session/<id>`), `$TILTH_HOME/sessions` hidden
behind an empty tmpfs, `$TILTH_HOME/config.toml` hidden, and a private /tmp. The command
runs in its own PID, IPC and UTS namespaces with a fresh /proc (no host process, no other
session, no other process's environment is visible) and a new terminal session; when the
command ends or is killed, the namespace dies and takes every process it started with it,
`setsid` and double-forked ones included.

Network (`agent_network`): `on` leaves the host network as it is, so package installs work and
a model endpoint on loopback stays reachable from the agent's commands; a `git push` still
fails, since refs are read-only and the pre-tool hook refuses it. `off` adds a network
namespace with only its own loopback: nothing on the host, loopback included, is reachable.
tilth's own model calls are made outside the sandbox, so they work either way.

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
# Own PID/IPC/UTS namespaces, a fresh /proc and a new terminal session: what bwrap_works probes.
ISOLATION = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--proc", "/proc", "--new-session"]


@lru_cache(maxsize=1)
def bwrap_works() -> bool:
    """bwrap exists and can create its namespaces here (containers may forbid it)."""
    binary = shutil.which("bwrap")
    if not binary:
        return False
    probe = subprocess.run([binary, "--ro-bind", "/", "/", "--dev", "/dev", *ISOLATION, "true"], capture_output=True)
    return probe.returncode == 0


def resolve_mode(setting: str, network: str = "on") -> str:
    """The mode in force: `bwrap` or `off`. Cutting the network needs bubblewrap."""
    if setting not in MODES:
        raise BadInput(f"sandbox = {setting!r}: use one of {', '.join(MODES)}")
    mode = "bwrap" if setting != "off" and bwrap_works() else "off"
    if mode == "off" and setting == "bwrap":
        raise BadInput("sandbox = bwrap but bubblewrap is not installed or cannot run here; "
                       "install it (apt-get install bubblewrap) or set TILTH_SANDBOX=auto")
    if mode == "off" and network == "off":
        raise BadInput("agent_network = off needs the bubblewrap sandbox, which is not in force here; "
                       "install bubblewrap and set TILTH_SANDBOX=bwrap, or set TILTH_AGENT_NETWORK=on")
    return mode


def common_git_dir(worktree: Path) -> Path | None:
    """The main repository's git dir, from the `.git` file of a linked worktree."""
    marker = worktree / ".git"
    if not marker.is_file():
        return None
    text = marker.read_text().strip()
    if not text.startswith("gitdir:"):
        return None
    own = (worktree / text.split(":", 1)[1].strip()).resolve()
    return (own / (own / "commondir").read_text().strip()).resolve() if (own / "commondir").is_file() else own


def wrap(mode: str, worktree: Path, home: Path, network: str = "on") -> list[str]:
    """The argv prefix that runs a command confined (empty when unconfined)."""
    if mode != "bwrap":
        return []
    worktree = worktree.resolve()
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", *ISOLATION, "--unshare-cgroup-try",
            *(["--unshare-net"] if network == "off" else []),
            "--tmpfs", "/tmp", "--bind", str(worktree), str(worktree)]
    common = common_git_dir(worktree)
    if common:
        # Re-exposed read-only even when the repository lives under the private /tmp.
        argv += ["--ro-bind", str(common), str(common)]
    sessions = home.resolve() / "sessions"
    if sessions.is_dir():
        argv += ["--tmpfs", str(sessions)]
    config = home.resolve() / "config.toml"
    if config.is_file():
        argv += ["--ro-bind", "/dev/null", str(config)]
    return argv + ["--die-with-parent", "--chdir", str(worktree)]


def amend(wrapper: list[str] | tuple[str, ...], worktree: Path, read_only: bool = False,
          writable: list[Path] = (), readable: list[Path] = ()) -> list[str]:
    """The `wrap` argv for one CLI agent run: the worktree read-only (an evaluator), the agent's own
    config directories writable, single files (its prompt) read-only; unconfined stays unconfined."""
    argv = list(wrapper)
    if not argv:
        return argv
    if read_only:
        tree = str(worktree.resolve())
        at = next(i for i in range(len(argv) - 2) if argv[i:i + 3] == ["--bind", tree, tree])
        argv[at] = "--ro-bind"
    extra = [arg for path in writable for arg in ("--bind", str(path), str(path))]
    extra += [arg for path in readable for arg in ("--ro-bind", str(path), str(path))]
    at = argv.index("--die-with-parent")
    return argv[:at] + extra + argv[at:]
