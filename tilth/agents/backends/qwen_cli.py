"""How Qwen Code 0.24.4 (`@qwen-code/qwen-code`) is started: its command line per role and sandbox,
and its private `QWEN_HOME` with the settings tilth writes there at every run.

It speaks Chat Completions to `OPENAI_BASE_URL` with `OPENAI_API_KEY` and `OPENAI_MODEL` (or `-m` in
`TILTH_QWEN_ARGS`); the prompt arrives on stdin. Inside tilth's sandbox every role runs `--approval-mode
yolo` (the sandbox mounts the worktree read-only for an evaluator); unconfined the worker gets
`auto-edit` and an evaluator or learner `plan` (analyse only). Its settings turn off update checks,
usage statistics (which otherwise try a telemetry host), telemetry and chat recording, and set the
endpoint retries to none: a 429 still gets Qwen Code's own few quick attempts, not ten minutes of
backoff before tilth can pause the session.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from tilth.agents.confinement import write_private
from tilth.core.config import Settings

SETTINGS = {
    "general": {"enableAutoUpdate": False, "chatRecording": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "model": {"generationConfig": {"maxRetries": 0}},
}
"""`$QWEN_HOME/settings.json`, written anew before every run."""
QUIET = {"QWEN_USAGE_STATISTICS_ENABLED": "false", "QWEN_TELEMETRY_ENABLED": "false",
         "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}
APPROVAL_FLAGS = ("--approval-mode", "--yolo", "-y")


def qwen_argv(binary: str, role: str, settings: Settings, env: dict[str, str], sandboxed: bool,
              home: Path) -> tuple[list[str], str | None]:
    """Its command line and the model it calls; `env` gets its variables. `home`: its private config
    dir (`presets.private_config_dir`)."""
    write_private(home, "settings.json", json.dumps(SETTINGS, indent=2).encode())
    env["QWEN_HOME"] = str(home)
    env.update(QUIET)
    argv = [binary, "--auth-type", "openai", "--output-format", "stream-json"]
    user = shlex.split(settings.qwen_args)
    if not any(flag in user or any(arg.startswith(flag + "=") for arg in user) for flag in APPROVAL_FLAGS):
        mode = "yolo" if sandboxed else "auto-edit" if role == "worker" else "plan"
        argv += ["--approval-mode", mode]
    return argv + user, _model(user) or env.get("OPENAI_MODEL")


def _model(args: list[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg in ("-m", "--model") and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--model="):
            return arg.split("=", 1)[1]
    return None
