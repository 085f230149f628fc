"""How each CLI agent is started: its command line per role, the environment it is given, the
config directory it may write, and the reader for its output. Flags are those of Claude Code
2.1.330, Codex CLI 0.169.0 and aider 0.86.2, checked against their `--help` and real runs
(docs/cli-agents.md).

Roles: the `worker` edits the worktree; the `evaluator` and the `learner` only read it (the
sandbox mounts the worktree read-only for them; unconfined, the agent's own read-only mode).

Environment: the agent environment (`agents/confinement.py`: an allowlist, no tilth settings, no
provider keys), plus the agent's own endpoint and key variables by its own conventions, plus
`agent_pass_env`. Its config directory is the session's own copy (`confinement.agent_config_dir`). The values of those
named like a secret (`*KEY*`, `*TOKEN*`, ...) and of every `agent_pass_env` variable are
registered for redaction, so a key an agent echoes never reaches a session file.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path
from tilth.agents.backends.aider_cli import AIDER_DEFAULT_ENV
from tilth.agents.backends.endpoints import PASSED
from tilth.agents.backends.launch_spec import Launch
from tilth.agents.backends.launch_spec import flag as _flag
from tilth.agents.confinement import Confinement, agent_config_dir
from tilth.core.config import Settings
from tilth.core.errors import BadInput
from tilth.store.redaction import register_secret

QUIET = {
    "claude": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
               "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1"},
    "aider": AIDER_DEFAULT_ENV,
}
"""Defaults that stop an agent phoning home or updating itself mid-run; the user's own values win."""
PERMISSION_FLAGS = ("--dangerously-skip-permissions", "--permission-mode", "--allow-dangerously-skip-permissions")


def binary(name: str, settings: Settings) -> str:
    """The agent's binary, found now; a one-line BadInput naming the setting when it is not."""
    configured: str = getattr(settings, f"{name}_bin")
    found = shutil.which(configured)
    if found is None:
        install = {"claude": "npm install -g @anthropic-ai/claude-code", "codex": "npm install -g @openai/codex",
                   "aider": "pip install aider-chat", "copilot": "npm install -g @github/copilot",
                   "gemini": "npm install -g @google/gemini-cli", "qwen": "npm install -g @qwen-code/qwen-code",
                   "opencode": "npm install -g opencode-ai"}[name]
        raise BadInput(f"the {name} agent binary {configured!r} is not found (not on PATH, or not executable): "
                       f"install it ({install}) or set TILTH_{name.upper()}_BIN to its path")
    return found


def launch(name: str, role: str, settings: Settings, prompt_file: Path, confinement: Confinement,
           budget_usd: float | None = None) -> Launch:
    """`budget_usd`: what is left under the spend cap, passed to an agent that has its own budget flag."""
    sandboxed = confinement.confined
    env = _environment(name, settings, confinement)
    home = confinement.agent_home
    if name == "claude":
        launched = _claude(role, settings, env, sandboxed, home)
        if budget_usd is not None and "--max-budget-usd" not in launched.argv:
            launched.argv[1:1] = ["--max-budget-usd", f"{max(budget_usd, 0.0):.6f}"]
        return launched
    if name == "codex":
        return _codex(role, settings, env, sandboxed, home)
    if name == "aider":
        return _aider(role, settings, env, prompt_file, home)
    if name == "copilot":
        from tilth.agents.backends.copilot_cli import copilot_launch

        directory = _config_dir(env, "COPILOT_HOME", ".copilot", home)
        return copilot_launch(binary(name, settings), role, settings, env, sandboxed, directory)
    if name == "gemini":
        from tilth.agents.backends.gemini_cli import gemini_launch

        return gemini_launch(binary(name, settings), role, settings, env, sandboxed, home)
    if name == "qwen":
        from tilth.agents.backends.qwen_cli import qwen_argv
        from tilth.agents.backends.qwen_stream import QwenStream

        private = private_config_dir(home, ".qwen", prompt_file)
        argv, model = qwen_argv(binary("qwen", settings), role, settings, env, sandboxed, private)
        return Launch(argv, env, QwenStream(), [private], model=model)
    if name == "opencode":
        from tilth.agents.backends.opencode_cli import opencode_argv
        from tilth.agents.backends.opencode_stream import OpenCodeStream

        private = private_config_dir(home, ".opencode", prompt_file)
        argv, model = opencode_argv(binary("opencode", settings), role, settings, env, sandboxed, private)
        return Launch(argv, env, OpenCodeStream(), [private], model=model)
    return _command(role, settings, env, prompt_file)


def _environment(name: str, settings: Settings, confinement: Confinement) -> dict[str, str]:
    env = dict(confinement.env)
    wanted = PASSED[name]
    for key, value in os.environ.items():
        if key.startswith(wanted) or key in wanted or key in settings.agent_pass_env:
            env[key] = value
            if _secret_name(key) or key in settings.agent_pass_env:
                register_secret(value)
    for key, value in QUIET.get(name, {}).items():
        env.setdefault(key, value)
    if name == "claude" and confinement.confined:
        env["IS_SANDBOX"] = "1"  # Claude Code as root bypasses permissions only when told it is sandboxed
    return env


def _secret_name(key: str) -> bool:
    return any(word in key for word in ("KEY", "TOKEN", "SECRET", "PASSWORD"))


def _config_dir(env: dict[str, str], variable: str, default: str, home: Path | None) -> Path:
    """The agent's config directory: the session's copy of the user's (its own variable, else its
    default under HOME). Without a session home (no session), the user's own, made to exist."""
    real = Path(env.get(variable) or Path.home() / default)
    directory = agent_config_dir(home, default, real) if home is not None else real
    directory.mkdir(parents=True, exist_ok=True)
    env[variable] = str(directory)
    return directory


def private_config_dir(home: Path | None, name: str, prompt_file: Path) -> Path:
    """A Chat Completions CLI's (qwen, opencode) whole config dir, tilth's to write: the session's copy
    (`agent_config_dir`, nothing of the user's seeded), or without a session the run's scratch dir,
    never the user's own."""
    directory = agent_config_dir(home, name, Path.home() / name) if home is not None else prompt_file.parent / name
    directory.mkdir(mode=0o700, exist_ok=True)
    return directory


def _claude(role: str, settings: Settings, env: dict[str, str], sandboxed: bool, home: Path | None) -> Launch:
    from tilth.agents.backends.claude_stream import ClaudeStream

    argv = [binary("claude", settings), "-p", "--output-format", "stream-json", "--verbose",
            "--no-session-persistence"]
    user = shlex.split(settings.claude_args)
    if not any(flag in user for flag in PERMISSION_FLAGS):
        if sandboxed:
            argv.append("--dangerously-skip-permissions")
        elif role == "worker":
            argv += ["--permission-mode", "acceptEdits"]
    if role != "worker" and "--tools" not in user:
        argv += ["--tools", "Bash,Read" if sandboxed else "Read"]
    directory = _config_dir(env, "CLAUDE_CONFIG_DIR", ".claude", home)
    return Launch(argv + user, env, ClaudeStream(), [directory], model=_flag(user, "--model"))


def _codex(role: str, settings: Settings, env: dict[str, str], sandboxed: bool, home: Path | None) -> Launch:
    from tilth.agents.backends.codex_stream import CodexStream

    argv = [binary("codex", settings), "exec", "--json", "--ephemeral", "--skip-git-repo-check",
            "-c", "analytics.enabled=false"]
    if sandboxed:
        argv.append("--dangerously-bypass-approvals-and-sandbox")  # tilth's sandbox is the confinement
    else:
        argv += ["--sandbox", "workspace-write" if role == "worker" else "read-only"]
    user = shlex.split(settings.codex_args)
    directory = _config_dir(env, "CODEX_HOME", ".codex", home)
    return Launch(argv + user + ["-"], env, CodexStream(), [directory], model=codex_model(settings))


def codex_model(settings: Settings) -> str | None:
    """The model TILTH_CODEX_ARGS names (`-m`/`--model`): Codex reports tokens but no cost, so it is priced by name."""
    user = shlex.split(settings.codex_args)
    return _flag(user, "-m") or _flag(user, "--model")


def _aider(role: str, settings: Settings, env: dict[str, str], prompt_file: Path, home: Path | None) -> Launch:
    from tilth.agents.backends.aider_cli import AiderUsage, aider_argv, read_aider_output

    user = shlex.split(settings.aider_args)
    argv = aider_argv(binary("aider", settings), str(prompt_file), user, read_only=role != "worker")
    state = agent_config_dir(home, ".aider", Path.home() / ".aider") if home is not None else Path.home() / ".aider"
    state.mkdir(exist_ok=True)  # its analytics id and caches, written at every start
    return Launch(argv, env, AiderUsage(), [state], finish=read_aider_output, model=_flag(user, "--model"),
                  prompt_argument=True, stdin_is_prompt=False, plain_output=True)


def _command(role: str, settings: Settings, env: dict[str, str], prompt_file: Path) -> Launch:
    line = settings.evaluator_command if role == "evaluator" else settings.worker_command
    from tilth.agents.backends.command_usage import CommandUsage

    argv = [part.replace("{prompt_file}", str(prompt_file)) for part in shlex.split(line or "")]
    usage = CommandUsage()
    return Launch(argv, env, reader=usage, finish=usage.finish, prompt_argument=True)


def check_command(role: str, settings: Settings) -> None:
    """A `command` agent needs its command line."""
    line = settings.worker_command if role == "worker" else settings.evaluator_command
    if not line or not shlex.split(line):
        variable = "TILTH_WORKER_COMMAND" if role == "worker" else "TILTH_EVALUATOR_COMMAND"
        raise BadInput(f"{role} backend = command needs the agent's command line: set {variable} "
                       "(for example 'my-agent --prompt-file {prompt_file}')")
