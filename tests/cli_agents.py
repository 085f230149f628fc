"""Where `make agents` (scripts/install-cli-agents.sh) puts the real CLI agents, for the tests
that run them against the stub servers.

A missing agent skips its test with the reason; with `TILTH_REQUIRE_CLI_AGENTS=1` or `CI=true`
(after running the install script) it fails instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NPM_AGENTS = ("claude", "codex",
              "copilot", "gemini", "qwen", "opencode")


def agent_cache() -> Path:
    return Path(os.environ.get("TILTH_AGENT_CACHE") or Path.home() / ".cache/tilth/npm")


def aider_venv() -> Path:
    return Path(os.environ.get("TILTH_AIDER_VENV") or Path.home() / ".cache/tilth/aider-venv")


def agent_path(name: str) -> Path:
    """`claude` and `codex` from the npm cache, `aider` from its venv."""
    if name in NPM_AGENTS:
        return agent_cache() / "node_modules/.bin" / name
    return aider_venv() / "bin" / name


def missing(reason: str) -> None:
    """Skip with the reason; fail instead when TILTH_REQUIRE_CLI_AGENTS=1."""
    if os.environ.get("TILTH_REQUIRE_CLI_AGENTS") == "1" or os.environ.get("CI") == "true":
        pytest.fail(f"TILTH_REQUIRE_CLI_AGENTS=1 or CI=true, but {reason}", pytrace=False)
    pytest.skip(reason)


def agent_bin(name: str) -> Path:
    """The installed agent's binary; skips (or fails, on CI) the test when it is not there."""
    path = agent_path(name)
    if not (path.is_file() and os.access(path, os.X_OK)):
        missing(f"{name} is not installed at {path} (`make agents` installs it)")
    return path
