"""The built-in pre_tool policy, checked in-process before every tool call: destructive shell
commands, and any commit or push by the agent (tilth makes the one commit per task itself).

It runs in tilth's own process so that a tool call it has nothing to say about costs
nothing; user hooks (`$TILTH_HOME/hooks/`, never the repository) still run as executables.
"""

from __future__ import annotations

import re
from typing import Any

RULES = [
    (r"\bgit\s+(?:\S+\s+)*commit\b", "tilth makes the commit for this task; leave your changes uncommitted"),
    (r"\bgit\s+(?:\S+\s+)*push\b", "pushing is the reviewer's decision, not the agent's"),
    (r"\bgit\s+(?:\S+\s+)*reset\s+(?:\S+\s+)*--hard\b", "git reset --hard would destroy work"),
    (r"\bgit\s+(?:\S+\s+)*clean\s+-[a-zA-Z]*[fdx][a-zA-Z]*", "git clean would delete untracked work"),
    (r"\bgit\s+(?:\S+\s+)*(?:checkout|switch)\s+(?:-[bBc]\s+)?\S+", "stay on the session branch"),
    (r"(?:^|[;&|(]\s*|\s)sudo\b", "sudo is not available to the agent"),
    (r"\b(?:curl|wget)\b[^|;&]*\|\s*(?:ba|z|da)?sh\b", "piping a download into a shell is not allowed"),
]
COMPILED = [(re.compile(pattern), why) for pattern, why in RULES]
RM_RF = re.compile(r"\brm\s+(?:-[a-zA-Z]*\s+)*-[a-zA-Z]*[rR][a-zA-Z]*\b(?:\s+-[a-zA-Z]+)*((?:\s+[^\s;&|]+)+)")
NAME = "builtin/pre_tool"
"""How the policy is named in `hook_run` events and in what the agent is told."""


def _outside(path: str) -> bool:
    path = path.strip("'\"")
    return path.startswith(("/", "~", "$")) or path == ".." or path.startswith("../") or "/../" in path


def command_refusal(command: str) -> str | None:
    for pattern, why in COMPILED:
        if pattern.search(command):
            return why
    for match in RM_RF.finditer(command):
        targets = [t for t in match.group(1).split() if not t.startswith("-")]
        if any(_outside(t) for t in targets) or any(t in (".", "*", "./") for t in targets):
            return "rm -rf may only remove paths inside the repository, named explicitly"
    return None


def refusal(tool: str, args: dict[str, Any]) -> str | None:
    """Why this tool call must not run, or None. Only `bash` commands are judged."""
    if tool != "bash":
        return None
    return command_refusal(str(args.get("command", "")))
