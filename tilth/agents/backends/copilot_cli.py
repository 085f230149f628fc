"""How the Copilot CLI (`@github/copilot` 1.0.102) is started for a role: `copilot --output-format
json` with the prompt on stdin, its own config home (`COPILOT_HOME`, the session's copy), its
package cache (`XDG_CACHE_HOME`, ~235 MB it unpacks on first run) under `~/.cache/tilth/copilot`,
unpacked there once outside the sandbox and read-only inside it.

Quiet: `--no-auto-update`, `--disable-client-telemetry`, and with your own provider
(`COPILOT_PROVIDER_BASE_URL`) `COPILOT_OFFLINE=true`, which turns off GitHub sign-in, telemetry
and web tools too. Its usage reaches tilth through two files in its private home: the
OpenTelemetry file exporter (per model call, as each ends) and `--usage-output-file` (the totals
at its end); `copilot_stream.CopilotStream` reads both.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from tilth.agents.backends.launch_spec import Launch, flag
from tilth.core.config import Settings

QUIET = {"COPILOT_AUTO_UPDATE": "false"}
PERMISSION_FLAGS = ("--allow-all", "--yolo", "--allow-all-tools", "--allow-tool", "--deny-tool",
                    "--available-tools", "--excluded-tools")
UNPACK_TIMEOUT_S = 600.0


def copilot_cache() -> Path:
    """Where its package is unpacked: the caches of tilth's pinned agents live under ~/.cache/tilth."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tilth" / "copilot"


def copilot_launch(command: str, role: str, settings: Settings, env: dict[str, str], sandboxed: bool,
                   directory: Path) -> Launch:
    """`directory`: its config home (`COPILOT_HOME`), the session's copy of the user's."""
    from tilth.agents.backends.copilot_stream import CopilotStream

    user = shlex.split(settings.copilot_args)
    runs = directory / "tilth-run"  # this run's usage files; one run at a time uses a private home
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir()
    spans, usage = runs / "otel.jsonl", runs / "usage.json"
    for key, value in QUIET.items():
        env.setdefault(key, value)
    if env.get("COPILOT_PROVIDER_BASE_URL"):
        env.setdefault("COPILOT_OFFLINE", "true")
    env.update({"COPILOT_OTEL_EXPORTER_TYPE": "file", "COPILOT_OTEL_FILE_EXPORTER_PATH": str(spans)})
    cache = copilot_cache()
    env["XDG_CACHE_HOME"] = str(cache)
    unpack(command, cache, env)
    argv = [command, "--output-format", "json", "--no-auto-update", "--disable-client-telemetry", "--no-ask-user",
            "--usage-output-file", str(usage)]
    if not any(flag.split("=")[0] in PERMISSION_FLAGS for flag in user):
        if role == "worker":
            argv.append("--allow-all")
        elif sandboxed:  # the worktree is mounted read-only; its shell may run the tests
            argv += ["--allow-all", "--deny-tool=write"]
        else:
            argv += ["--allow-all-tools", "--deny-tool=write", "--deny-tool=shell"]
    return Launch(argv + user, env, CopilotStream(spans, usage), [directory], model=copilot_model(settings),
                  readable=[cache] if sandboxed else [])


def copilot_model(settings: Settings) -> str | None:
    """The model it is told to use (`--model`, else COPILOT_MODEL): it reports no cost, so it is priced by name."""
    return flag(shlex.split(settings.copilot_args), "--model") or os.environ.get("COPILOT_MODEL")


def unpack(command: str, cache: Path, env: dict[str, str]) -> None:
    """Its package unpacked into the cache before a sandboxed run, which sees the cache read-only."""
    if any((cache / "copilot" / "pkg").glob("*/*/.extraction-complete")):
        return
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run([command, "--version"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=UNPACK_TIMEOUT_S, check=False)
