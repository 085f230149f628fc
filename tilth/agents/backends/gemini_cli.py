"""How the Gemini CLI (`@google/gemini-cli` 0.61.0) is started for a role: `gemini -o stream-json
--skip-trust` with the prompt on stdin and its home (`GEMINI_CLI_HOME`, holding `.gemini/`) the
session's private one, `.gemini` a copy of yours.

Quiet: a system settings file of tilth's (`GEMINI_CLI_SYSTEM_SETTINGS_PATH`, which overrides your
settings and the repository's) turns usage statistics, telemetry and auto-update off; an API key
in the environment with no sign-in chosen in your settings selects `gemini-api-key` (without it
a headless run exits 41). Gemini CLI reads a system settings file only when it and every directory
above it are root's and writable by no one else, so for an ordinary user (and, unconfined, under
/tmp) it skips it: the same settings go into the session's copy of your `settings.json` as well, and
`GEMINI_TELEMETRY_ENABLED=false` into its environment (which no settings file overrides); there a
repository's `.gemini/settings.json` could turn statistics or updates back on. `--skip-trust` trusts
the worktree for the run (else a headless run refuses it): its `.gemini/` settings load, under the
same sandbox as everything the agent runs.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from tilth.agents.backends.launch_spec import Launch, flag
from tilth.agents.confinement import agent_config_dir, write_private
from tilth.core.config import Settings
from tilth.store.jsonio import write_atomic

FORCED: dict[str, Any] = {"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                          "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}}
APPROVAL_FLAGS = ("--approval-mode", "-y", "--yolo")
SYSTEM_SETTINGS = "tilth-system-settings.json"


def gemini_launch(command: str, role: str, settings: Settings, env: dict[str, str], sandboxed: bool,
                  home: Path | None) -> Launch:
    """`home`: the session's private home, which becomes its GEMINI_CLI_HOME."""
    from tilth.agents.backends.gemini_stream import GeminiStream

    user = shlex.split(settings.gemini_args)
    real = Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini"
    directory = agent_config_dir(home, ".gemini", real) if home is not None else real
    directory.mkdir(parents=True, exist_ok=True)
    env["GEMINI_CLI_HOME"] = str(directory.parent)
    system = dict(FORCED)
    if not _chosen_auth(directory / "settings.json") and (env.get("GEMINI_API_KEY") or env.get("GOOGLE_API_KEY")):
        system["security"] = {"auth": {"selectedType": "gemini-api-key"}}
    write_atomic(directory / SYSTEM_SETTINGS, json.dumps(system).encode())
    env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] = str(directory / SYSTEM_SETTINGS)
    env["GEMINI_TELEMETRY_ENABLED"] = "false"
    if home is not None:  # the session's copy, never your own ~/.gemini
        write_private(directory, "settings.json", json.dumps(merged(_read(directory / "settings.json"), system),
                                                             indent=2).encode())
    argv = [command, "-o", "stream-json", "--skip-trust"]
    if not any(flag.split("=")[0] in APPROVAL_FLAGS for flag in user):
        # unconfined, an evaluator plans only (Gemini's read-only mode); in the sandbox the worktree is read-only
        argv += ["--approval-mode", "yolo" if role == "worker" or sandboxed else "plan"]
    reader = GeminiStream(directory / "tmp")
    return Launch(argv + user, env, reader, [directory], finish=reader.finish, model=gemini_model(settings))


def gemini_model(settings: Settings) -> str | None:
    """The model it is told to use (`-m`, else GEMINI_MODEL): it reports no cost, so it is priced by name."""
    user = shlex.split(settings.gemini_args)
    return flag(user, "-m") or flag(user, "--model") or os.environ.get("GEMINI_MODEL")


def _chosen_auth(path: Path) -> bool:
    """Your settings choose how to sign in (`security.auth.selectedType`)."""
    security = _read(path).get("security")
    auth = security.get("auth") if isinstance(security, dict) else None
    return isinstance(auth, dict) and bool(auth.get("selectedType"))


def _read(path: Path) -> dict[str, Any]:
    """A settings file's object; {} when it is missing or not a JSON object."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def merged(settings: dict[str, Any], forced: dict[str, Any]) -> dict[str, Any]:
    """`settings` with each of `forced`'s values in place, section by section."""
    out = dict(settings)
    for key, value in forced.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
