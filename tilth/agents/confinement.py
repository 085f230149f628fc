"""What an agent's commands are given: the sandbox argv, an allowlisted environment, the session's
private home (with its own copy of each CLI agent's config directory), and the worktree's git dir;
`session_confinement` builds it for one run from the recorded repository and session id, never
from what the worktree says.

Environment: built from an allowlist (`BASE_ENV`, `LC_*`, and the names in `agent_pass_env`),
never from a denylist, so a token the user keeps in their shell (GITHUB_TOKEN, AWS_*, ...)
never reaches the agent unless they name it. A CLI agent also gets its own endpoint and key
variables (`agents/backends/presets.py`).

Private home: `$TILTH_HOME/agent-homes/<id>`, kept across attempts; a lane of parallel tasks has
its own, `<id>+<task>`, removed with the lane. Under bubblewrap it is what
the agent sees at the user's HOME path. A CLI agent's config directory (`~/.claude`, `~/.codex`,
`~/.aider`) is a copy inside it, seeded at every run from the user's real one with only the files
that carry credentials and settings (`SEEDED`): whatever the agent writes there (a hook in
settings.json, a `notify` in config.toml) stays in the copy and never reaches the user's own
directory, confined or not.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from tilth.agents.backends.endpoints import endpoint_ports
from tilth.agents.bounds import DEFAULT_MAX_PROCESSES
from tilth.agents.netbox import netbox
from tilth.agents.sandbox import real_home, visible, wrap
from tilth.core.config import Settings
from tilth.core.errors import BadInput
from tilth.git.worktree_git import common_git_dir, session_git_dir
from tilth.store.home import SessionPaths
from tilth.store.session import SessionRecord

BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "COLORTERM",
            "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
"""What every agent command sees of tilth's environment, besides `LC_*` and `agent_pass_env`."""
SEEDED = {
    ".claude": (".credentials.json", "settings.json"),
    ".codex": ("auth.json", "config.toml"),
    ".aider": (),
    ".copilot": ("config.json", "settings.json"),
    ".gemini": ("settings.json", "oauth_creds.json", "google_accounts.json"),
    ".qwen": (),  # its key comes in OPENAI_API_KEY; tilth writes its settings.json (qwen_cli.py)
    ".opencode": (),  # its provider file is tilth's (opencode_cli.py)
}
"""Per agent config directory: the files copied in from the user's real one at each run."""
TOOLCHAIN_LEAVES = ("bin", "shims", "sbin", ".bin")
SECRET_FILES = (".cargo/credentials", ".cargo/credentials.toml")
"""Credential files inside a toolchain directory that is re-exposed: kept hidden all the same."""


def agent_env(passed: Iterable[str] = (), base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment an agent's commands see: the allowlist only."""
    source = os.environ if base is None else base
    wanted = set(BASE_ENV) | set(passed)
    return {k: v for k, v in source.items() if k in wanted or k.startswith("LC_")}


@dataclass(frozen=True)
class Confinement:
    """How one session's agent commands run."""

    wrapper: tuple[str, ...] = ()
    """The argv prefix that confines a command (empty when unconfined)."""
    env: dict[str, str] = field(default_factory=agent_env)
    agent_home: Path | None = None
    """The session's private home (`$TILTH_HOME/agent-homes/<id>`)."""
    git_dir: Path | None = None
    """The worktree's admin dir in the user's repository: what tilth's own git names (`git/worktree_git.py`)."""
    max_processes: int = DEFAULT_MAX_PROCESSES
    """`agent_max_processes`: processes each of the agent's commands may have at once (`agents/bounds.py`)."""

    @property
    def confined(self) -> bool:
        return bool(self.wrapper)


UNCONFINED = Confinement()
"""Commands run as tilth's own user, with only the environment allowlist: a named choice, never a
default. Where it is used it says why (`tilth prep`'s read-only file tools run no command; a calibration
runs the evaluator on fixture files in a scratch directory)."""


def toolchain_dirs(path_value: str, roots: Iterable[Path]) -> list[Path]:
    """The directories on PATH the sandbox's system view does not show (under the user's home, in a
    virtualenv, ...), each widened to its install prefix (`~/.pyenv/shims` -> `~/.pyenv`) but never to
    one of `roots` (the user's home, TILTH_HOME, the repository's checkout) or `/`, so that the agent's
    commands find the same python, node and cargo as the user's shell."""
    roots = [Path(r).resolve() for r in roots] + [Path("/")]
    found: list[Path] = []
    for entry in path_value.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        path = Path(entry).resolve()
        if visible(path) or path in roots or not os.path.isdir(path):
            continue
        if path.name in TOOLCHAIN_LEAVES and path.parent not in roots:
            path = path.parent
        if path not in found and not any(path.is_relative_to(f) for f in found):
            found = [f for f in found if not f.is_relative_to(path)] + [path]
    return found


def binary_prefix(binary: str) -> list[Path]:
    """Where an agent's binary and what it runs live: its directory (widened like a toolchain), the
    same for the file it links to and for a script's interpreter (`#!/.../venv/bin/python`)."""
    found: list[Path] = []
    for path in (Path(binary), Path(binary).resolve()):
        directory = path.parent
        found.append(directory.parent if directory.name in TOOLCHAIN_LEAVES else directory)
    try:
        with open(binary, "rb") as f:
            first = f.readline(256)
        if first.startswith(b"#!"):
            interpreter = first[2:].strip().split(b" ")[0].decode(errors="replace")
            if os.path.isabs(interpreter) and not interpreter.startswith(("/usr/", "/bin/")):
                found += binary_prefix(interpreter)
    except OSError:
        pass
    return found


def secret_masks(exposed: Iterable[Path], home: Path | None) -> list[Path]:
    """Known credential files inside the re-exposed directories, to be hidden again."""
    if home is None:
        return []
    masks = [home / name for name in SECRET_FILES]
    return [m for m in masks if m.exists() and any(m.is_relative_to(e) for e in exposed)]


HOST_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock", "/run/containerd/containerd.sock",
                "/run/podman/podman.sock", "/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket",
                "/run/user")
"""Sockets that would let a command act as the user or as root outside the sandbox (read-only
mounts do not stop a connect), and the per-user runtime dirs holding the D-Bus session bus."""
SOCKET_VARIABLES = ("SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "DOCKER_HOST", "GPG_AGENT_INFO")


def host_sockets(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The host's sockets (and socket dirs) present here, the ones the user's variables name included."""
    environ = os.environ if environ is None else environ
    named = []
    for variable in SOCKET_VARIABLES:
        for part in environ.get(variable, "").replace(";", ",").split(","):
            part = part.split("path=", 1)[-1].removeprefix("unix://").split(":")[0]
            if os.path.isabs(part):
                named.append(part)
    found = []
    for raw in (*HOST_SOCKETS, *named):
        path = Path(raw)
        if path.exists() and path.resolve() not in found:
            found.append(path.resolve())
    return found


def agent_config_dir(agent_home: Path, name: str, real: Path) -> Path:
    """The agent's config directory for this session: `<agent_home>/<name>`, with the credential and
    settings files of the user's real one (`real`) copied in afresh; never the real one itself.
    The private home is the agent's to write, so nothing in it is followed: a `<name>` it made a
    symlink (to the user's own `~/.claude`, to anywhere) is replaced by a real directory, and each
    seeded file is written anew by descriptor, never through a link or into a planted directory."""
    try:
        agent_home.mkdir(mode=0o700, parents=True, exist_ok=True)
        home_fd = os.open(agent_home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise BadInput(f"the private home {agent_home} cannot be used ({exc.strerror}): it must be a directory, "
                       "not a symlink") from None
    try:
        copy_fd = _own_directory(home_fd, name)
        try:
            if _same_file(real, os.fstat(copy_fd)):
                return agent_home / name  # the user's config dir is this copy already
            for file in SEEDED.get(name, ()):
                _seed(real / file, copy_fd, file)
        finally:
            os.close(copy_fd)
    finally:
        os.close(home_fd)
    return agent_home / name


def _own_directory(parent_fd: int, name: str) -> int:
    """`name` in `parent_fd` as a real directory of ours (whatever else was there removed), opened."""
    try:
        info = os.lstat(name, dir_fd=parent_fd)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=parent_fd)  # a planted symlink or file: the link itself, never its target
    if info is None or not stat.S_ISDIR(info.st_mode):
        os.mkdir(name, 0o700, dir_fd=parent_fd)
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)


def _fresh_file(directory_fd: int, name: str) -> int:
    """`name` in the directory made anew, 0600, for writing: whatever stood there (a link the agent
    planted, a directory) removed first, never followed."""
    try:
        os.unlink(name, dir_fd=directory_fd)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        shutil.rmtree(name, dir_fd=directory_fd)
    return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=directory_fd)


def _same_file(path: Path, info: os.stat_result) -> bool:
    try:
        other = os.stat(path)
    except OSError:
        return False
    return (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino)


def _seed(source: Path, directory_fd: int, name: str) -> None:
    """The user's `source` (a regular file, not a link) copied to `name` in the directory, 0600."""
    try:
        source_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    with os.fdopen(source_fd, "rb") as src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode):
            return
        with os.fdopen(_fresh_file(directory_fd, name), "wb") as dst:
            shutil.copyfileobj(src, dst)
            os.utime(dst.fileno(), ns=(info.st_atime_ns, info.st_mtime_ns))


def write_private(directory: Path, name: str, data: bytes) -> Path:
    """`name` in an agent's private config directory (`agent_config_dir`'s), written anew by
    descriptor: whatever the agent left at that name (a symlink, a directory) is removed, never followed."""
    directory_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        with os.fdopen(_fresh_file(directory_fd, name), "wb") as target:
            target.write(data)
    finally:
        os.close(directory_fd)
    return directory / name


def private_subdir(directory: Path, name: str) -> Path:
    """`name` in an agent's private config directory as a real directory of tilth's: a symlink or file
    the agent left there is removed, never followed."""
    directory_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.close(_own_directory(directory_fd, name))
    finally:
        os.close(directory_fd)
    return directory / name


CLI_AGENTS = ("claude", "codex", "aider", "copilot", "gemini", "qwen", "opencode")


def session_confinement(mode: str, paths: SessionPaths, record: SessionRecord, settings: Settings,
                        agent_home: Path | None = None) -> Confinement:
    """`agent_home`: a lane's own private home (`SessionPaths.lane_home`), else the session's."""
    agent_home = agent_home or paths.agent_home
    agent_home.mkdir(parents=True, exist_ok=True)
    os.chmod(agent_home, 0o700)
    home = real_home()
    roots = [p for p in (home, paths.home, Path(record.repo)) if p is not None]
    expose = toolchain_dirs(os.environ.get("PATH", ""), roots)
    expose += [p for p in agent_binaries(settings) if not visible(p.resolve())]
    expose += [Path(p).expanduser().resolve() for p in settings.sandbox_expose]
    exposed = tuple(dict.fromkeys(expose))
    enter_net: tuple[str, ...] = ()
    if mode == "bwrap" and settings.agent_network == "on":
        enter_net = tuple(netbox(host_ports(settings)).prefix)
    wrapper = wrap(mode, Path(record.worktree), paths.home, settings.agent_network, agent_home, exposed,
                   common_git_dir(record.repo), hide=(*secret_masks(exposed, home), *host_sockets()),
                   enter_net=enter_net)
    env = agent_env(settings.agent_pass_env)
    if wrapper:
        env["HOME"] = str(agent_home)  # the user's home is not in the box; the agent's own is its HOME
    return Confinement(tuple(wrapper), env, agent_home, session_git_dir(record.repo, record.id),
                       settings.agent_max_processes)


def host_ports(settings: Settings) -> tuple[int, ...]:
    """The host's loopback ports the agent's commands may reach: `agent_host_ports`, and the port of a
    loopback model endpoint a CLI agent is given (its base URL variable or its arguments)."""
    return tuple(sorted({*settings.agent_host_ports, *endpoint_ports(settings)}))


def agent_binaries(settings: Settings) -> list[Path]:
    """The install prefixes of the CLI agents this machine has (a hidden home must not hide them)."""
    found = []
    for name in CLI_AGENTS:
        binary = shutil.which(getattr(settings, f"{name}_bin"))
        if binary:
            found += binary_prefix(binary)
    return found
