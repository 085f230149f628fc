"""What one CLI agent run is started with (`Launch`), as `presets.launch` and each CLI's own launcher
(`copilot_cli`, `gemini_cli`) build it, and `flag`, the value of a flag in its arguments."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tilth.agents.backends.agent_stream import AgentReport, StreamReader


@dataclass
class Launch:
    """Everything needed to start one run."""

    argv: list[str]
    env: dict[str, str]
    reader: StreamReader
    """Reads its stdout live (its steps and the usage so far)."""
    writable: list[Path] = field(default_factory=list)
    """The agent's own config/auth directories, bound writable inside the sandbox."""
    plain_output: bool = False
    """Every stdout line goes to `reader` as `{"text": line}` (aider); else only its JSON lines, parsed."""
    finish: Callable[[str, str, int], AgentReport] | None = None
    """Reads the whole output at the end, when set (aider, `command`); else the reader's report is the end."""
    model: str | None = None
    """The model named on its command line, for the price table when the agent reports no cost."""
    prompt_argument: bool = False
    """The prompt goes in a file named on the command line (bound read-only in the sandbox)."""
    stdin_is_prompt: bool = True
    """The prompt also arrives on stdin; else stdin is /dev/null (aider would read it as a chat)."""
    readable: list[Path] = field(default_factory=list)
    """Directories outside the sandbox's view it reads (Copilot's unpacked package), bound read-only."""


def flag(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None
