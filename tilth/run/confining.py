"""A session's confinement for one run: the sandbox argv built from the recorded repository and
session (never from what the worktree says), the agent's allowlisted environment, its private home,
and the git dir tilth's own git names."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tilth.agents.confinement import (Confinement, agent_env, binary_prefix, host_sockets, secret_masks,
                                     toolchain_dirs)
from tilth.agents.sandbox import real_home, wrap
from tilth.core.config import Settings
from tilth.git.worktree_git import common_git_dir, session_git_dir
from tilth.store.home import SessionPaths
from tilth.store.session import SessionRecord

CLI_AGENTS = ("claude", "codex", "aider")


def session_confinement(mode: str, paths: SessionPaths, record: SessionRecord, settings: Settings) -> Confinement:
    agent_home = paths.agent_home
    agent_home.mkdir(parents=True, exist_ok=True)
    os.chmod(agent_home, 0o700)
    home = real_home()
    hidden = [p for p in (home, paths.home) if p is not None]
    expose = toolchain_dirs(os.environ.get("PATH", ""), hidden)
    expose += [p for p in agent_binaries(settings) if any(p.resolve().is_relative_to(h.resolve()) for h in hidden)]
    expose += [Path(p).expanduser().resolve() for p in settings.sandbox_expose]
    exposed = tuple(dict.fromkeys(expose))
    wrapper = wrap(mode, Path(record.worktree), paths.home, settings.agent_network, agent_home, exposed,
                   common_git_dir(record.repo), hide=(*secret_masks(exposed, home), *host_sockets()))
    return Confinement(tuple(wrapper), agent_env(settings.agent_pass_env), agent_home,
                       session_git_dir(record.repo, record.id))


def agent_binaries(settings: Settings) -> list[Path]:
    """The install prefixes of the CLI agents this machine has (a hidden home must not hide them)."""
    found = []
    for name in CLI_AGENTS:
        binary = shutil.which(getattr(settings, f"{name}_bin"))
        if binary:
            found += binary_prefix(binary)
    return found
