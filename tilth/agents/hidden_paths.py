"""Why a confined command did not find something: a path, or a command on PATH, that exists on this
machine but is not in the sandbox's view (`agents/sandbox.py` shows system directories, toolchains,
the worktree and what `sandbox_expose` names). Its result then says so and names the setting,
instead of leaving a bare "No such file or directory" or exit 127 to puzzle over."""

from __future__ import annotations

import os
import re
import shutil

MISSING = ("No such file or directory", "not found", "can't open file", "cannot access", "does not exist")
PATH_TOKEN = re.compile(r"(?<![\w.~-])(/[\w.@+,%=~/-]+)")
NOT_FOUND_COMMAND = re.compile(r"(?:^|\s)([\w.+-]+): (?:command )?not found")
PRIVATE = ("/proc", "/dev")
"""The sandbox's own: a host path there is not the one the command meant."""


def hidden_paths(output: str, exit_code: int | None, path_value: str | None) -> list[str]:
    """The paths (and commands) an output says are missing that this machine has."""
    found: list[str] = []
    for line in output.splitlines():
        if not any(word in line for word in MISSING):
            continue
        for token in PATH_TOKEN.findall(line):
            token = token.rstrip(".,")
            if any(token == p or token.startswith(p + "/") for p in PRIVATE):
                continue
            if os.path.lexists(token) and token not in found:
                found.append(token)
        if exit_code == 127:
            for name in NOT_FOUND_COMMAND.findall(line):
                where = shutil.which(name, path=path_value)
                if where and where not in found:
                    found.append(where)
    return found


def hint(paths: list[str]) -> str:
    return (f"[sandbox] {', '.join(paths)}: on this machine but not in the agent's sandbox; name "
            f"{'it' if len(paths) == 1 else 'them'} in sandbox_expose (TILTH_SANDBOX_EXPOSE) to show "
            f"{'it' if len(paths) == 1 else 'them'} read-only")
