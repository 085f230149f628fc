"""What of tilth's environment each CLI agent is given by name (`PASSED`), and the loopback ports of
the model endpoints it is pointed at (`endpoint_ports`): the agent's network namespace forwards
those to the host's loopback (`agents/netbox.py`), so a CLI agent reaches a local endpoint or proxy
while the rest of the host's loopback stays out of reach."""

from __future__ import annotations

import os
import re

from tilth.agents.backends.aider_cli import AIDER_ENV
from tilth.core.config import Settings

PASSED = {
    "claude": ("ANTHROPIC_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR", "API_TIMEOUT_MS", "DISABLE_", "MAX_THINKING_TOKENS"),
    "codex": ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_"),
    "aider": AIDER_ENV,
    "command": (),
    "copilot": ("COPILOT_", "GH_HOST"),
    "gemini": ("GEMINI_", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_API_KEY"),
    # the Chat Completions CLIs: the endpoint, its key and the model, nothing else of tilth's environment
    "qwen": ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"),
    "opencode": ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"),
}
"""Variables (or prefixes, ending in `_`) each agent gets from tilth's environment."""
LOOPBACK_URL = re.compile(r"\bhttps?://(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::(\d{1,5}))?", re.I)


def endpoint_ports(settings: Settings) -> set[int]:
    """The ports of the loopback endpoints a CLI agent is pointed at (its variables, its arguments, a
    `command` agent's command line): its own network namespace forwards them to the host's loopback."""
    texts = [settings.claude_args, settings.codex_args, settings.aider_args, settings.worker_command or "",
             settings.evaluator_command or "", settings.qwen_args, settings.opencode_args]
    texts += [settings.copilot_args, settings.gemini_args]
    wanted = tuple(prefix for names in PASSED.values() for prefix in names) + tuple(settings.agent_pass_env)
    texts += [value for key, value in os.environ.items() if key.startswith(wanted)]
    ports = set()
    for text in texts:
        for match in LOOPBACK_URL.finditer(text):
            port = int(match.group(1)) if match.group(1) else (443 if match.group(0).lower().startswith("https") else 80)
            if 0 < port < 65536:
                ports.add(port)
    return ports
