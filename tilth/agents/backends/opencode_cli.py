"""How OpenCode 1.18.33 (`opencode-ai`) is started: `opencode run --format json --title ...`, the prompt
on stdin, with a provider file tilth writes at every run in its private config dir.

The provider (`tilth`, `@ai-sdk/openai-compatible`) points at `OPENAI_BASE_URL` (default OpenAI's) with
the key read from `OPENAI_API_KEY` by OpenCode itself (`{env:...}`: the key is never in the file) and
the one model `OPENAI_MODEL`, which also does the small jobs (a title is passed always, so no hidden
title request is made). Its data, state, cache and global config dirs (XDG) are inside the private
dir; update checks, sharing, the models.dev fetch and LSP downloads are off. Inside tilth's sandbox
every role runs with `--auto` (the sandbox mounts the worktree read-only for an evaluator); unconfined
an evaluator or learner runs the `plan` agent with edits and shell commands denied.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from tilth.agents.confinement import write_private
from tilth.core.config import Settings
from tilth.core.errors import BadInput

DEFAULT_BASE_URL = "https://api.openai.com/v1"
QUIET = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
         "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1"}
XDG = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
READ_ONLY = {"edit": "deny", "bash": "deny", "webfetch": "deny"}


def opencode_model() -> str:
    """The model it is given (`OPENAI_MODEL`); a one-line BadInput when it is not set."""
    model = os.environ.get("OPENAI_MODEL", "").strip()
    if not model:
        raise BadInput("the opencode agent needs the model to call: set OPENAI_MODEL (and OPENAI_BASE_URL, "
                       "OPENAI_API_KEY for its Chat Completions endpoint)")
    return model


def provider_config(base_url: str, model: str, read_only: bool) -> dict[str, object]:
    config: dict[str, object] = {
        "provider": {"tilth": {"npm": "@ai-sdk/openai-compatible", "name": "tilth",
                               "options": {"baseURL": base_url, "apiKey": "{env:OPENAI_API_KEY}"},
                               "models": {model: {"name": model}}}},
        "model": f"tilth/{model}", "small_model": f"tilth/{model}",
        "autoupdate": False, "share": "disabled", "snapshot": False,
    }
    if read_only:
        config["permission"] = READ_ONLY
    return config


def opencode_argv(binary: str, role: str, settings: Settings, env: dict[str, str], sandboxed: bool,
                  home: Path) -> tuple[list[str], str]:
    """Its command line and the model it calls; `env` gets its variables. `home`: its private config
    dir (`presets.private_config_dir`)."""
    model = opencode_model()
    unconfined_reader = not sandboxed and role != "worker"
    config = provider_config(env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL, model, unconfined_reader)
    env["OPENCODE_CONFIG"] = str(write_private(home, "opencode.json", json.dumps(config, indent=2).encode()))
    for variable in XDG:
        directory = home / variable.removeprefix("XDG_").removesuffix("_HOME").lower()
        directory.mkdir(mode=0o700, exist_ok=True)
        env[variable] = str(directory)
    env.update(QUIET)
    argv = [binary, "run", "--format", "json", "--title", f"tilth {role}"]
    argv += ["--agent", "plan"] if unconfined_reader else ["--auto"] if sandboxed else []
    return argv + shlex.split(settings.opencode_args), model
