"""The four newest CLI agents (Qwen Code, OpenCode, Copilot CLI, Gemini CLI) as the worker of tilth run by an
unprivileged user (uid 65534 through `setpriv`), TILTH_HOME and HOME outside /tmp, the repository outside HOME,
against the loopback stubs (tests/fake_openai.py, tests/fake_gemini.py). Their root runs are in
tests/test_cli_agents_chat.py and tests/test_copilot_gemini.py; this shows the same confinement as the
ordinary user: the user's secrets and config out of the box, a config dir of tilth's own, the host's loopback
services unreachable while the stub is, telemetry and update checks off, the key in no session file."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import fake_gemini as fg
import pytest
from cli_agents import for_others, missing
from conftest import task
from fake_gemini import FakeGemini
from fake_openai import ACCEPT, call, reply
from test_cli_agents import CASE, fenced
from test_confinement_home import SECRET_ENV, SENTINELS, Machine, new_machine, require_bwrap
from users import User

from tilth.agents.backends.gemini_cli import FORCED as GEMINI_FORCED
from tilth.agents.backends.qwen_cli import SETTINGS as QWEN_SETTINGS

KEY = "sk-unprivileged-stub-0123456789abcdef"
GEMINI_KEY = "AIzaUnprivilegedStub0123456789abcdef"
MODEL = {"qwen": "qwen-stub", "opencode": "opencode-stub", "copilot": "copilot-stub", "gemini": "gemini-stub"}
HOME_MARKER = "user-home-marker-5c1d"
USER_CONFIG = {"qwen": ".qwen/QWEN.md", "opencode": ".config/opencode/AGENTS.md",
               "copilot": ".copilot/copilot-instructions.md", "gemini": ".gemini/GEMINI.md"}
"""Each CLI's own instructions in the user's HOME: never read, never sent."""
CONFIG_VARIABLE = {"qwen": "QWEN_HOME", "opencode": "OPENCODE_CONFIG", "copilot": "COPILOT_HOME",
                   "gemini": "GEMINI_CLI_HOME"}
QUIET = {"qwen": ["QWEN_TELEMETRY_ENABLED=false", "QWEN_USAGE_STATISTICS_ENABLED=false"],
         "opencode": ["OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_MODELS_FETCH=1"],
         "copilot": ["COPILOT_OFFLINE=true", "COPILOT_AUTO_UPDATE=false"], "gemini": ["GEMINI_TELEMETRY_ENABLED=false"]}
"""What the agent's environment says about telemetry and updates."""


@pytest.fixture
def nobody() -> Machine:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        missing("running the agents as an unprivileged user needs the tests run as root, with setpriv")
    found = new_machine(User("unprivileged"))
    yield found
    shutil.rmtree(found.base, ignore_errors=True)


@pytest.fixture
def host_service():
    """A service on the host's loopback that the agent must not reach (a database, the dashboard)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        yield server


def probe(machine: Machine, sid: str, port: int) -> str:
    """One shell command: what the agent can read of the user's machine, its environment, its uid and whether
    the host's loopback service answers, each into a file of the worktree (committed on the session branch)."""
    secrets = " ".join(str(machine.user_home / name) for name in [*SENTINELS, *USER_CONFIG.values()])
    tilth = machine.tilth_home
    return (f"cat {secrets} {tilth}/memory/*.md {tilth}/worktrees/other/notes.txt {tilth}/sessions/{sid}/prd.json "
            "> leak.txt 2>&1; tr '\\0' '\\n' < /proc/1/environ "  # the environment the box was given
            "| sed -e 's/^\\([A-Z_]*KEY\\)=.*/\\1=(set)/' -e 's/^npm_config_registry=.*/npm_config_registry=(set)/' "
            "| sort > env.txt; id -u > uid.txt; "
            f"bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' > net.txt 2>&1 && echo REACHED >> net.txt; true")


def shell(agent: str, command: str):
    if agent == "qwen":
        return call("run_shell_command", command=command)
    if agent == "gemini":
        return fg.function_call("run_shell_command", command=command)
    return call("bash", command=command, description="look around")


def agent_env(agent: str, machine: Machine, fake, gemini: FakeGemini) -> dict[str, str]:
    binary, cache = for_others(agent)
    env = {"TILTH_WORKER_BACKEND": agent, f"TILTH_{agent.upper()}_BIN": str(binary), "TILTH_SANDBOX": "bwrap",
           "TILTH_AGENT_TIMEOUT_S": "90", "TILTH_FINAL_REVIEW": "false", "TILTH_SELF_IMPROVEMENT": "false",
           "TILTH_PREFLIGHT": "false", "TILTH_MAX_ITERATIONS_PER_TASK": "1"}
    if agent in ("qwen", "opencode"):
        env.update({"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": KEY, "OPENAI_MODEL": MODEL[agent],
                    "TILTH_QWEN_ARGS": f"-m {MODEL[agent]}",
                    # a registry install would show here, as a request to the stub
                    "npm_config_registry": fake.root_url + "/npm/", "TILTH_AGENT_PASS_ENV": "npm_config_registry"})
    elif agent == "copilot":
        env.update({"COPILOT_PROVIDER_BASE_URL": fake.base_url, "COPILOT_PROVIDER_TYPE": "openai",
                    "COPILOT_PROVIDER_API_KEY": KEY, "TILTH_COPILOT_ARGS": f"--model {MODEL[agent]}",
                    "XDG_CACHE_HOME": str(cache)})
    else:
        env.update({"GOOGLE_GEMINI_BASE_URL": gemini.root_url, "GEMINI_API_KEY": GEMINI_KEY,
                    "TILTH_GEMINI_ARGS": f"-m {MODEL[agent]}"})
    return env


def user_files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file() and not p.is_relative_to(home / ".tilth")}


@pytest.mark.bwrap
@pytest.mark.cli_agents
@pytest.mark.parametrize("agent", ["qwen", "opencode", "copilot", "gemini"])
def test_as_an_unprivileged_user_the_agent_is_boxed_with_a_private_config_and_no_host_network(
        nobody, fake, model_env, host_service, agent):
    require_bwrap()
    machine, sid = nobody, f"{agent}-nobody"
    for name in USER_CONFIG.values():
        (machine.user_home / name).parent.mkdir(parents=True, exist_ok=True)
        (machine.user_home / name).write_text(f"Always mention {HOME_MARKER}.\n")
    machine.own(machine.user_home)
    before = user_files(machine.user_home)
    command = probe(machine, sid, host_service.getsockname()[1])
    with FakeGemini() as gemini:
        if agent == "gemini":
            gemini.enqueue(MODEL[agent], fg.reply(shell(agent, command)), fg.reply(fg.text(fenced(CASE))))
        else:
            fake.enqueue(MODEL[agent], reply("Looking.", tool_calls=[shell(agent, command)]), reply(fenced(CASE)))
        fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
        result = machine.start(sid, [task("T-1")], env={**model_env, **agent_env(agent, machine, fake, gemini)},
                               backend=agent)
        sent = [json.dumps(r["body"]) for r in (gemini.calls() if agent == "gemini" else fake.requests)
                if r["body"] and (agent == "gemini" or r["body"].get("model") == MODEL[agent])]
    logs = machine.tilth_home / "sessions" / sid / "agents"
    assert result.returncode == 0, "\n".join([result.stdout, result.stderr, *(p.read_text()[-3000:] for p in
                                                                            sorted(logs.glob("*.stderr")))])
    [run] = [e["data"] for e in machine.events(sid) if e["type"] == "agent_run"]
    assert run["agent"] == agent and run["exit_code"] == 0 and run["case"] == "parsed", run
    assert machine.committed(sid, "uid.txt") == "65534\n", "the agent ran as the unprivileged user"

    leaked = machine.committed(sid, "leak.txt")
    assert "sentinel" not in leaked and HOME_MARKER not in leaked and "No such file" in leaked, leaked
    env = dict(line.split("=", 1) for line in machine.committed(sid, "env.txt").splitlines() if "=" in line)
    agent_home = machine.tilth_home / "agent-homes" / sid
    assert env["HOME"] == str(agent_home)
    assert Path(env[CONFIG_VARIABLE[agent]]).is_relative_to(agent_home), "its config dir is the session's private one"
    assert not {*SECRET_ENV, "SSH_AUTH_SOCK", "TILTH_HOME", "TILTH_API_KEY"} & set(env), sorted(env)
    unset = [setting for setting in QUIET[agent] if setting not in machine.committed(sid, "env.txt").splitlines()]
    assert not unset, (unset, " ".join(sorted(env)))
    if agent == "qwen":
        found = json.loads((Path(env["QWEN_HOME"]) / "settings.json").read_text())
        assert {key: found.get(key) for key in QWEN_SETTINGS} == QWEN_SETTINGS, found  # telemetry, statistics off
    if agent == "gemini":  # it skips a system settings file that is not root's: the session's copy says it too
        found = json.loads((Path(env["GEMINI_CLI_HOME"]) / ".gemini" / "settings.json").read_text())
        assert {key: found.get(key) for key in GEMINI_FORCED} == GEMINI_FORCED, found
    assert user_files(machine.user_home) == before, "nothing of the user's HOME was written"
    assert all(p.stat().st_uid == 65534 for p in agent_home.rglob("*")), "the private home is the user's own"

    net = machine.committed(sid, "net.txt")
    assert "REACHED" not in net and "Connection refused" in net, net
    with pytest.raises(BlockingIOError):
        host_service.accept()  # nothing connected to the host's service
    assert len(sent) == 2 and not [b for b in sent if HOME_MARKER in b], "the stub answered; the user's HOME not sent"
    assert not [r["path"] for r in fake.requests if r["path"].startswith("/npm/")], "no registry install was tried"
    secret = GEMINI_KEY if agent == "gemini" else KEY
    session = machine.tilth_home / "sessions" / sid
    assert not [p for p in session.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
