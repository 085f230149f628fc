"""Which CLI agents this machine has (`tilth doctor --agents`): each one's binary as the settings name
it, the version it says, and whether it answers at all: one `--version` call each, in parallel, each
bounded by VERSION_TIMEOUT_S and killed with its process group after it (a CLI that hangs on start is
said to hang, never waited for)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tilth.core.config import Settings

AGENTS = ("claude", "codex", "aider", "qwen", "opencode")
"""The CLI agents with a `<name>_bin` setting, in the order they are listed."""
VERSION_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Found:
    name: str
    configured: str
    """The `<name>_bin` setting."""
    path: str | None
    """The binary it names, None when there is none."""
    version: str | None
    """The first line it printed for `--version`."""
    problem: str | None
    """Why it does not answer: not found, timed out, its exit code; None when it answered."""

    def line(self) -> str:
        if self.path is None:
            return f"{self.name}: not installed ({self.configured!r} is not found; set TILTH_{self.name.upper()}_BIN)"
        if self.problem is not None:
            return f"{self.name}: {self.path} does not answer ({self.problem})"
        return f"{self.name}: {self.version} at {self.path}"


def installed(settings: Settings, timeout: float = VERSION_TIMEOUT_S) -> list[Found]:
    with ThreadPoolExecutor(max_workers=len(AGENTS)) as pool:
        return list(pool.map(lambda name: _probe(name, getattr(settings, f"{name}_bin"), timeout), AGENTS))


def _probe(name: str, configured: str, timeout: float) -> Found:
    path = shutil.which(configured)
    if path is None:
        return Found(name, configured, None, None, "not found")
    env = {key: value for key, value in os.environ.items() if key in ("PATH", "HOME", "LANG", "TERM")}
    try:
        child = subprocess.Popen([path, "--version"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, env=env, start_new_session=True)
    except OSError as exc:
        return Found(name, configured, path, None, exc.strerror or str(exc))
    try:
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(child.pid)
        child.communicate()
        return Found(name, configured, path, None, f"no answer to --version in {timeout:g} s")
    _kill_group(child.pid)  # whatever it left behind
    said = out.decode(errors="replace").strip().splitlines()
    if child.returncode != 0:
        return Found(name, configured, path, None, f"--version exited with code {child.returncode}")
    return Found(name, configured, path, " ".join(said[0].split())[:120] if said else "(no version printed)", None)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
