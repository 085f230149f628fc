"""Where `make agents` (scripts/install-cli-agents.sh) puts the real CLI agents, for the tests
that run them against the stub servers.

A missing agent skips its test with the reason; with `TILTH_REQUIRE_CLI_AGENTS=1` or `CI=true`
(after running the install script) it fails instead.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
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


def for_others(name: str) -> tuple[Path, Path]:
    """The agent's binary and Copilot's unpacked package cache (an `XDG_CACHE_HOME`) where an unprivileged
    user can run and read them: the installs themselves when others can reach them, else (installed under a
    home closed to others, as root's /root) one copy of both made once under /var/tmp, hard links where it
    can, root's and read-only to others, named after the installs it copies (what others cannot read in the
    install they cannot read in the copy either)."""
    binary, cache = agent_bin(name), Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    if others_can_read(binary.resolve()) and others_can_read(cache / "tilth" / "copilot"):
        return binary, cache
    npm = agent_cache()
    stamp = b"".join(p.read_bytes() for p in (npm / "package-lock.json", npm / "node_modules/.package-lock.json")
                     if p.is_file())
    shared = Path("/var/tmp") / f"tilth-tests-agents-{hashlib.sha256(str(npm).encode() + stamp).hexdigest()[:12]}"
    if not (shared / "ready").exists():
        building = Path(tempfile.mkdtemp(prefix=shared.name + ".", dir="/var/tmp"))
        copies = [(npm, building / "npm")]
        if (cache / "tilth" / "copilot").is_dir():
            copies.append((cache / "tilth" / "copilot", building / "cache" / "tilth" / "copilot"))
        for source, target in copies:
            target.parent.mkdir(parents=True, exist_ok=True)
            if subprocess.run(["cp", "-al", str(source), str(target)], capture_output=True).returncode != 0:
                shutil.rmtree(target, ignore_errors=True)
                subprocess.run(["cp", "-a", str(source), str(target)], check=True, capture_output=True)
        building.chmod(0o755)  # the files keep their own modes: what others cannot read stays so
        (building / "ready").touch()
        try:
            building.rename(shared)
        except OSError:  # another test process made it first
            shutil.rmtree(building, ignore_errors=True)
    return shared / "npm" / binary.relative_to(npm), shared / "cache"


def others_can_read(path: Path) -> bool:
    """Every directory above `path` is searchable by others and `path` readable by them."""
    if not path.exists():
        return True
    mode = path.stat().st_mode
    return bool(mode & stat.S_IROTH) and all(parent.stat().st_mode & stat.S_IXOTH for parent in path.parents)
