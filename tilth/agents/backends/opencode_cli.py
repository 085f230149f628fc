"""How OpenCode 1.18.33 (`opencode-ai`) is started: `opencode run --format json --title ...`, the prompt
on stdin, with a provider file tilth writes at every run in its private config dir.

The provider (`tilth`, `@ai-sdk/openai-compatible`) points at `OPENAI_BASE_URL` (default OpenAI's) with
the key read from `OPENAI_API_KEY` by OpenCode itself (`{env:...}`: the key is never in the file) and
the one model `OPENAI_MODEL`, which also does the small jobs (a title is passed always, so no hidden
title request is made). Its data, state, cache and global config dirs (XDG) are inside the private
dir; update checks, sharing, the models.dev fetch and LSP downloads are off.

At every start OpenCode installs `@opencode-ai/plugin` from the npm registry into each config dir it
can write that has no `node_modules` or whose `package.json` lists a package its `package-lock.json`
does not (1.18.33 has no setting or variable that turns this off). So tilth's config dirs (its global
one under XDG, and the private dir itself, which is `~/.opencode` in the sandbox) hold, written anew
at every run, a `package.json` and `package-lock.json` naming that package and an empty `node_modules`:
it has nothing to install, and makes no request to a registry. A repository's own `.opencode/` is
OpenCode's project config and left as it is. Inside tilth's sandbox
every role runs with `--auto` (the sandbox mounts the worktree read-only for an evaluator); unconfined
an evaluator or learner runs the `plan` agent with edits and shell commands denied.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from tilth.agents.confinement import private_subdir, write_private
from tilth.core.config import Settings
from tilth.core.errors import BadInput

DEFAULT_BASE_URL = "https://api.openai.com/v1"
QUIET = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
         "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1"}
XDG = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
READ_ONLY = {"edit": "deny", "bash": "deny", "webfetch": "deny"}
PLUGIN_PACKAGE = "@opencode-ai/plugin"
"""What OpenCode adds to every config dir it can write at start (its plugins' types)."""


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


def nothing_to_install(directory: Path) -> None:
    """`directory` as a config dir OpenCode finds installed: the package it would add already in its
    manifest and lock file, `node_modules` there."""
    manifest = {"dependencies": {PLUGIN_PACKAGE: "*"}}
    lock = {"lockfileVersion": 3, "requires": True, "packages": {"": manifest}}
    write_private(directory, "package.json", json.dumps(manifest, indent=2).encode())
    write_private(directory, "package-lock.json", json.dumps(lock, indent=2).encode())
    private_subdir(directory, "node_modules")


def opencode_argv(binary: str, role: str, settings: Settings, env: dict[str, str], sandboxed: bool,
                  home: Path) -> tuple[list[str], str]:
    """Its command line and the model it calls; `env` gets its variables. `home`: its private config
    dir (`presets.private_config_dir`)."""
    model = opencode_model()
    unconfined_reader = not sandboxed and role != "worker"
    config = provider_config(env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL, model, unconfined_reader)
    env["OPENCODE_CONFIG"] = str(write_private(home, "opencode.json", json.dumps(config, indent=2).encode()))
    for variable in XDG:
        directory = private_subdir(home, variable.removeprefix("XDG_").removesuffix("_HOME").lower())
        env[variable] = str(directory)
    for directory in (home, private_subdir(home / "config", "opencode")):
        nothing_to_install(directory)
    env.update(QUIET)
    argv = [binary, "run", "--format", "json", "--title", f"tilth {role}"]
    argv += ["--agent", "plan"] if unconfined_reader else ["--auto"] if sandboxed else []
    return argv + shlex.split(settings.opencode_args), model
