"""Confinement for commands an agent runs (the worker's bash, check commands).

Under bubblewrap the command sees a view of the machine built from what it needs, never `/` minus
a list: `SYSTEM` read-only (programs, libraries, /etc with the host's secrets shown empty, /opt,
/sys, where /etc/resolv.conf points), the toolchains on PATH and the agent's binary that lie
elsewhere (read-only, `agents/confinement.py`), what `sandbox_expose` names, its worktree
(writable), the session's private home (`$TILTH_HOME/agent-homes/<id>`, its HOME, kept across
attempts), and all of the main repository's git metadata read-only (the agent reads history with
`git log/diff/status/show`; `git add`, `git commit` and any write to HEAD, refs or objects fail
with "Read-only file system", so only tilth moves `session/<id>`) - without the user's checkout
around it (its ignored `.env`). The worktree's `.git` file is read-only (it cannot be pointed at
another repository). Not in the view: the user's home, other homes, /root, /run, /var (a private
/var/tmp, like /tmp), `$TILTH_HOME` (sessions, other worktrees, memory, config.toml), other
TILTH_HOMEs. Every mount point is made on bwrap's own root, a tmpfs made read-only at the end,
so nothing is created in the agent's home or anywhere on the host. Every capability is dropped
(`--cap-drop ALL`), so root inside cannot remount, unmount or change ownership. The command
runs in its own PID, IPC and UTS namespaces with a fresh /proc and a new terminal session; when
it ends or is killed, the namespace dies and takes every process it started with it, `setsid`
and double-forked ones included.

Network (`agent_network`): `on` enters the network namespace of `agents/netbox.py` first (the
internet through pasta or slirp4netns, the namespace's own loopback, not the host's loopback
services nor its abstract sockets; the ports named in `agent_host_ports` and a CLI agent's
loopback endpoint forwarded), or, where no helper works, stays on the host's network (said by
`tilth doctor` and the `sandbox` event). Landlock (TCP connect by port, abstract-socket scoping)
was weighed as the fallback and not taken: its port rules apply whatever the address, so either
the host's loopback services stay reachable on allowed ports or a project's own test servers on
ephemeral ports are refused; a namespace has neither flaw. `off` adds bwrap's own network
namespace with only its loopback. tilth's own model calls are made outside the sandbox, so they
work either way.

Modes: `bwrap` (required), `auto` (bwrap when it works here, else unconfined, said loudly),
`off` (unconfined).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Sequence

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


SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/snap", "/sys")
"""What of the host the agent sees (read-only) besides its worktree, the repository's git dir and what
is exposed: programs, libraries, toolchains and configuration. Not /home, /root, /srv, /mnt, /media,
/run, /var (/var/tmp is a private one like /tmp), nor anything else at the top."""
HOST_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd",
                "/etc/ssl/private", "/etc/krb5.keytab", "/etc/wireguard", "/etc/NetworkManager/system-connections",
                "/etc/ssh/ssh_host_*key")
"""What of /etc is a host secret: shown empty (`/etc/ssh/ssh_host_*key`: the private keys, not `.pub`)."""


def system_view() -> list[str]:
    """The bwrap arguments of the host's view: `SYSTEM` (top-level symlinks as symlinks), /etc's
    secrets masked, where /etc/resolv.conf points (under /run on systemd-resolved hosts)."""
    argv = []
    for top in SYSTEM:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for pattern in HOST_SECRETS:
        for path in sorted(glob.glob(pattern)) if "*" in pattern else [pattern]:
            if os.path.isdir(path) and not os.path.islink(path):
                argv += ["--tmpfs", path]
            elif os.path.lexists(path):
                argv += ["--ro-bind", os.devnull, path]
    resolv = Path("/etc/resolv.conf")
    if resolv.is_symlink() and resolv.exists() and not any(resolv.resolve().is_relative_to(t) for t in SYSTEM):
        argv += ["--ro-bind", str(resolv.resolve()), str(resolv.resolve())]
    return argv + ["--tmpfs", "/var", "--symlink", "../run", "/var/run", "--tmpfs", "/var/tmp"]


def visible(path: Path) -> bool:
    """Whether the system view shows `path` without exposing it."""
    return any(path.is_relative_to(top) for top in SYSTEM if os.path.isdir(top) and not os.path.islink(top)) \
        or any(path.is_relative_to(Path(top).resolve()) for top in SYSTEM if os.path.islink(top))


def wrap(mode: str, worktree: Path, home: Path, network: str = "on", agent_home: Path | None = None,
         expose: tuple[Path, ...] = (), git_common: Path | None = None, hide: tuple[Path, ...] = (),
         enter_net: tuple[str, ...] = ()) -> list[str]:
    """The argv prefix that runs a command confined (empty when unconfined). `agent_home`: the
    session's private home (the agent's HOME, at its own path); `expose`: paths outside the system
    view seen read-only all the same (the toolchains on PATH, the agent's binary, `sandbox_expose`);
    `git_common`: the user's repository's git dir, from its recorded path (never from the worktree);
    `hide`: credential files inside an exposed directory and the host's sockets, shown empty;
    `enter_net`: what puts the command in its network namespace (`agents/netbox.py`) with `network` on."""
    if mode != "bwrap":
        return []
    worktree = worktree.resolve()
    # Every mount point below is made on bwrap's own root (a tmpfs), never in a host directory.
    argv = [*enter_net, "bwrap", *system_view(), "--dev", "/dev", *ISOLATION, "--unshare-cgroup-try",
            "--cap-drop", "ALL", *(["--unshare-net"] if network == "off" else []), "--tmpfs", "/tmp"]
    for path in expose:
        if os.path.exists(path):
            argv += ["--ro-bind", str(path), str(path)]
    for path in hide:
        if visible(path) or any(path.is_relative_to(e) for e in expose):
            argv += ["--tmpfs", str(path)] if os.path.isdir(path) else ["--ro-bind", os.devnull, str(path)]
    if agent_home is not None:
        argv += ["--bind", str(agent_home), str(agent_home)]
    argv += ["--bind", str(worktree), str(worktree)]
    if git_common is not None:
        # Read-only, and without the checkout around it (its ignored files: .env, ...).
        argv += ["--ro-bind", str(git_common), str(git_common)]
    marker = worktree / ".git"
    if marker.exists() or marker.is_symlink():
        # Neither the worker nor a process it starts may point the worktree at another repository.
        argv += ["--ro-bind", str(marker), str(marker)]
    # bwrap's own root, where the mount points were made, read-only: nothing is written beside them.
    return argv + ["--remount-ro", "/", "--die-with-parent", "--chdir", str(worktree)]


def real_home() -> Path | None:
    """The user's home directory, when it is one the sandbox can hide (not `/`)."""
    raw = os.environ.get("HOME")
    if not raw:
        return None
    path = Path(raw).resolve()
    return path if path != Path("/") and path.is_dir() else None


def amend(wrapper: Sequence[str], worktree: Path, read_only: bool = False,
          writable: Sequence[Path] = (), readable: Sequence[Path] = ()) -> list[str]:
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
    at = argv.index("--remount-ro")  # their mount points are made on bwrap's root before it turns read-only
    return argv[:at] + extra + argv[at:]
