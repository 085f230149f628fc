"""The sandbox holds where users really run tilth: TILTH_HOME and HOME outside /tmp (which the
sandbox hides anyway), the user's secrets in their home and environment, and tilth run as root
with every capability as well as as an unprivileged user. Each test runs both ways."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import make_repo, task
from fake_openai import ACCEPT, SUBMIT, FakeOpenAI, call, reply
from tilth.agents.sandbox import bwrap_works
from users import USERS, User, outside_tmp

SENTINELS = {
    ".ssh/id_ed25519": "sentinel-ssh-private-key",
    ".aws/credentials": "sentinel-aws-credentials",
    ".config/gh/hosts.yml": "sentinel-gh-hosts",
    ".netrc": "sentinel-netrc-password",
    ".git-credentials": "sentinel-git-credentials",
    ".claude/settings.json": '{"sentinel": "the user\'s own claude settings"}',
}
SECRET_ENV = {"GITHUB_TOKEN": "sentinel-env-github", "GH_TOKEN": "sentinel-env-gh",
              "AWS_SECRET_ACCESS_KEY": "sentinel-env-aws", "HF_TOKEN": "sentinel-env-hf",
              "NPM_TOKEN": "sentinel-env-npm"}


def require_bwrap() -> None:
    if not bwrap_works():
        if os.environ.get("TILTH_REQUIRE_BWRAP") == "1":
            pytest.fail("TILTH_REQUIRE_BWRAP=1 but bubblewrap cannot run here")
        pytest.skip("bubblewrap is not installed or cannot create namespaces here (apt-get install bubblewrap)")


@dataclass
class Machine:
    """A user's machine: a home with secrets, TILTH_HOME and a repository, none under /tmp."""

    base: Path
    user_home: Path
    tilth_home: Path
    repo: Path
    env: dict[str, str]
    user: User

    @property
    def prefix(self) -> list[str]:
        return self.user.prefix

    def tilth(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*self.prefix, sys.executable, "-m", "tilth", *args], env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=120, cwd=self.base)

    def start(self, session_id: str, plan: list[dict], scenario: dict | None = None,
              env: dict[str, str] | None = None, backend: str = "scripted") -> subprocess.CompletedProcess:
        prd = self.write(f"{session_id}-prd.json", json.dumps(plan))
        args = ["start", "--repo", str(self.repo), "--prd", str(prd), "--id", session_id, "--foreground"]
        if backend == "scripted":
            args += ["--backend", "scripted", "--scenario", str(self.write(f"{session_id}-sc.json", json.dumps(scenario)))]
        return self.tilth(*args, env=env)

    def write(self, name: str, text: str) -> Path:
        path = self.base / name
        path.write_text(text)
        self.own(path)
        return path

    def own(self, path: Path) -> None:
        self.user.own(path)

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-c", "safe.directory=*", "-C", str(self.repo), *args], check=True,
                              capture_output=True, text=True).stdout

    def committed(self, session_id: str, path: str) -> str:
        return self.git("show", f"session/{session_id}:{path}")

    def events(self, session_id: str) -> list[dict]:
        text = (self.tilth_home / "sessions" / session_id / "events.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(params=USERS)
def machine(request) -> Machine:
    found = new_machine(User(request.param))
    yield found
    shutil.rmtree(found.base, ignore_errors=True)


def new_machine(user: User) -> Machine:
    """A machine of its own under /var/tmp (the caller removes `base`)."""
    base = outside_tmp("tilth-machine-")
    user_home, tilth_home = base / "home", base / "home" / ".tilth"
    for name, text in SENTINELS.items():
        (user_home / name).parent.mkdir(parents=True, exist_ok=True)
        (user_home / name).write_text(text)
    (tilth_home / "memory").mkdir(parents=True)
    (tilth_home / "memory" / "2026-01-01.md").write_text("sentinel-daily-memory of another project\n")
    (tilth_home / "worktrees" / "other").mkdir(parents=True)
    (tilth_home / "worktrees" / "other" / "notes.txt").write_text("sentinel-other-worktree\n")
    repo = make_repo(base / "repo")
    user.own(base)
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": str(user_home), "TILTH_HOME": str(tilth_home),
           "PYTHONUNBUFFERED": "1", "SSH_AUTH_SOCK": str(base / "agent.sock"), **SECRET_ENV,
           **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}}  # the checkout under test
    return Machine(base, user_home, tilth_home, repo, env, user)


@pytest.mark.slow
@pytest.mark.bwrap
def test_the_worker_sees_a_private_home_and_an_allowlisted_environment(machine):
    require_bwrap()
    tilth_home = machine.tilth_home
    leak = ("cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.config/gh/hosts.yml ~/.netrc ~/.git-credentials "
            f"~/.claude/settings.json {tilth_home}/memory/*.md {tilth_home}/worktrees/other/notes.txt "
            f"{tilth_home}/sessions/s1/prd.json > leak.txt 2>&1; ls -a ~ {tilth_home}/worktrees >> leak.txt 2>&1; true")
    first = {"run": [leak, "env > env.txt", "echo kept-across-attempts > ~/kept.txt",
                     "mkdir -p ~/.claude && echo '{\"hooks\": \"planted\"}' > ~/.claude/settings.json"],
             "verdict": {"verdict": "reject", "category": "acceptance_gap", "concern": "again", "next_step": "x"}}
    second = {"run": ["cat ~/kept.txt > kept.txt"]}
    result = machine.start("s1", [task("T-1")], {"tasks": {"T-1": [first, second]}}, env={"TILTH_SANDBOX": "bwrap"})
    assert result.returncode == 0, result.stdout + result.stderr
    leaked, env = machine.committed("s1", "leak.txt"), machine.committed("s1", "env.txt")
    assert "sentinel" not in leaked, leaked
    assert "No such file" in leaked and "other" not in leaked.split()
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "NPM_TOKEN", "SSH_AUTH_SOCK",
                 "TILTH_HOME"):
        assert f"{name}=" not in env, name
    agent_home = tilth_home / "agent-homes" / "s1"
    # TILTH_HOME is under HOME: no mount point of the worktree or the toolchains was made in the agent's home.
    made = sorted(str(p.relative_to(agent_home)) for p in agent_home.rglob("*"))
    assert made == [".claude", ".claude/settings.json", "kept.txt"], made
    assert f"HOME={agent_home}\n" in env and "PATH=" in env
    assert machine.committed("s1", "kept.txt") == "kept-across-attempts\n", "the private home lasts the session"
    assert (machine.user_home / ".claude" / "settings.json").read_text() == SENTINELS[".claude/settings.json"]
    assert not (machine.user_home / "kept.txt").exists()


@pytest.mark.slow
@pytest.mark.bwrap
def test_a_listed_variable_reaches_the_agent_and_nothing_else_does(machine):
    require_bwrap()
    result = machine.start("s1", [task("T-1")], {"tasks": {"T-1": [{"run": ["env > env.txt"]}]}},
                           env={"TILTH_SANDBOX": "bwrap", "TILTH_AGENT_PASS_ENV": "HF_TOKEN"})
    assert result.returncode == 0, result.stdout + result.stderr
    env = machine.committed("s1", "env.txt")
    assert "HF_TOKEN=" in env and "GITHUB_TOKEN=" not in env


@pytest.mark.slow
@pytest.mark.bwrap
def test_root_in_the_sandbox_cannot_remount_or_reach_the_session_or_the_repository(machine):
    require_bwrap()
    session, repo = machine.tilth_home / "sessions" / "s1", machine.repo
    attacks = [
        "mount -o remount,rw,bind / && echo REMOUNTED",
        f"umount -l {machine.tilth_home}; umount -l {machine.user_home}; cat {session}/prd.json",
        f"echo forged >> {session}/progress.txt",
        f"git -C {repo} branch planted-branch",
        f"printf '#!/bin/sh\\ntouch /var/tmp/planted\\n' > {repo}/.git/hooks/post-checkout",
        f"git -C {repo} config core.fsmonitor /bin/true",
        "printf 'gitdir: /nowhere\\n' > .git",
        "rm -f .git",
    ]
    scenario = {"tasks": {"T-1": [{"run": attacks, "write": {"a.txt": "a"}}]}}
    result = machine.start("s1", [task("T-1"), task("T-2")], scenario, env={"TILTH_SANDBOX": "bwrap"})
    assert result.returncode == 0, result.stdout + result.stderr
    step = next(e for e in machine.events("s1") if e["type"] == "scripted_step")
    assert all(code != 0 for code in step["data"]["exit_codes"]), step["data"]["exit_codes"]
    assert "forged" not in (session / "progress.txt").read_text()
    assert "planted-branch" not in machine.git("branch", "--list")
    assert not (repo / ".git" / "hooks" / "post-checkout").exists()
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()
    assert (machine.tilth_home / "worktrees" / "s1" / ".git").read_text().startswith("gitdir: ")
    assert [t["status"] for t in json.loads((session / "prd.json").read_text())] == ["done", "done"]


@pytest.mark.slow
@pytest.mark.bwrap
@pytest.mark.parametrize("mode", ["off", "bwrap"])
@pytest.mark.parametrize("lanes", ["1", "2"])
def test_a_swapped_git_file_never_makes_tilths_own_git_run_the_workers_program(machine, mode, lanes):
    """In the session's worktree, and (`lanes` 2) in a parallel task's own worktree."""
    if mode == "bwrap":
        require_bwrap()
    marker = machine.base / "fsmonitor-ran"
    swap = ("mkdir -p .evil && git init -q .evil/r && "
            "git --git-dir .evil/r/.git --work-tree . add README.md && "  # an index, which git status refreshes
            f"printf '#!/bin/sh\\ntouch {marker}\\n' > .evil/fsm.sh && chmod +x .evil/fsm.sh && "
            "git -C .evil/r config core.fsmonitor \"$PWD/.evil/fsm.sh\" && "
            "printf 'gitdir: .evil/r/.git\\n' > .git && echo swapped")
    with FakeOpenAI() as server:
        server.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
        server.enqueue("worker", reply(tool_calls=[call("bash", command=swap), call("list_files"),
                                                   call("grep", pattern="sentinel"), call("write_file", path="b.txt",
                                                                                          content="b")]),
                       reply(tool_calls=[SUBMIT]))
        server.set_handler(lambda body: reply(content="NONE"))
        env = {"TILTH_BASE_URL": server.base_url, "TILTH_WORKER_MODEL": "worker", "TILTH_EVALUATOR_MODEL": "evaluator",
               "TILTH_RETRY_BASE_DELAY": "0", "TILTH_PREFLIGHT": "false", "TILTH_SANDBOX": mode,
               "TILTH_PARALLEL_TASKS": lanes}
        result = machine.start("s1", [task("T-1")], env=env, backend="openai")
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("lane_started" in {e["type"] for e in machine.events("s1")}) == (lanes == "2")
    assert not marker.exists(), "tilth's own git ran a program the worker configured"
    assert machine.committed("s1", "b.txt") == "b"
    worker = [r["body"] for r in server.requests if r["body"] and r["body"]["model"] == "worker" and r["body"].get("tools")]
    results = [m["content"] for m in worker[-1]["messages"] if m["role"] == "tool"]
    assert not results[1].startswith("error") and not results[2].startswith("error"), results
    if mode == "bwrap":
        assert "swapped" not in results[0] and ("Read-only" in results[0] or "busy" in results[0]), results[0]
    else:
        assert "swapped" in results[0], "unconfined, the swap itself succeeds; tilth's git must not follow it"
    machine.git("branch", "kept", "session/s1")  # safe elsewhere: cleanse goes on to look at the worktree
    machine.own(machine.repo)
    machine.tilth("cleanse", "s1")  # its `git status` on the worktree: where fsmonitor would run
    assert not marker.exists(), "tilth's own git status ran a program the worker configured"


@pytest.mark.slow
@pytest.mark.bwrap
def test_hooks_come_from_the_users_configuration_never_from_the_branch(machine):
    marker = machine.base / "branch-hook-ran"
    hook = machine.repo / ".tilth" / "hooks" / "post_task"
    hook.parent.mkdir(parents=True)
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    machine.git("add", "-A")
    machine.git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "hooks in the repository")
    machine.own(machine.repo)
    mine = machine.tilth_home / "hooks" / "post_task"
    mine.parent.mkdir(parents=True)
    mine.write_text(f"#!/bin/sh\ntouch {machine.base / 'user-hook-ran'}\n")
    mine.chmod(0o755)
    machine.own(machine.tilth_home)
    scenario = {"tasks": {"T-1": [{"write": {".tilth/hooks/session_end": f"#!/bin/sh\ntouch {marker}\n"},
                                   "run": ["chmod +x .tilth/hooks/session_end"]}]}}
    result = machine.start("s1", [task("T-1")], scenario, env={"TILTH_SANDBOX": "off"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert (machine.base / "user-hook-ran").exists()
    assert not marker.exists()
    ran = [e["data"]["hook"] for e in machine.events("s1") if e["type"] == "hook_run"]
    assert ran == [str(mine)]


@pytest.mark.parametrize("agent, variable, files", [
    ("claude", "CLAUDE_CONFIG_DIR", {".credentials.json": "sentinel-oauth", "settings.json": '{"model": "mine"}'}),
    ("codex", "CODEX_HOME", {"auth.json": "sentinel-codex-auth", "config.toml": 'model = "mine"\n'}),
])
def test_a_cli_agents_config_directory_is_a_copy_nothing_flows_back_from(tmp_path, monkeypatch, agent, variable,
                                                                          files):
    from tilth.agents.backends.presets import launch
    from tilth.agents.confinement import Confinement
    from tilth.core.config import Settings

    home, agent_home = tmp_path / "home", tmp_path / "agent-home"
    real = home / f".{agent}"
    real.mkdir(parents=True)
    for name, text in files.items():
        (real / name).write_text(text)
    (real / "history.jsonl").write_text("the user's own history\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(variable, raising=False)
    settings = Settings(**{f"{agent}_bin": "/bin/true"})
    for confined in (True, False):
        prompt = tmp_path / "prompt.md"
        prompt.write_text("x")
        confinement = Confinement(wrapper=("bwrap",) if confined else (), agent_home=agent_home)
        copy = Path(launch(agent, "worker", settings, prompt, confinement).env[variable])
        assert copy == agent_home / f".{agent}" and copy.resolve() != real.resolve()
        assert {name: (copy / name).read_text() for name in files} == files, "credentials and settings seeded"
        assert not (copy / "history.jsonl").exists(), "only what it needs is copied"
        for name in files:
            (copy / name).write_text("planted by the agent")  # a SessionStart hook, a notify program
        again = Path(launch(agent, "worker", settings, prompt, confinement).env[variable])
        assert {name: (again / name).read_text() for name in files} == files, "each run starts from the user's"
        assert {name: (real / name).read_text() for name in files} == files, "the user's own never changes"


@pytest.mark.slow
@pytest.mark.bwrap
def test_the_users_ssh_agent_socket_cannot_be_reached(machine):
    require_bwrap()
    import socket

    shared = machine.base / "shared"  # a directory the agent is shown on purpose (sandbox_expose)
    shared.mkdir()
    (shared / "data.txt").write_text("exposed-on-purpose\n")
    machine.own(shared)
    path = shared / "agent.sock"  # what SSH_AUTH_SOCK names, outside the home and /tmp
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    os.chmod(path, 0o777)
    probe = (f"cat {shared}/data.txt > probe.txt; echo \"variable: ${{SSH_AUTH_SOCK:-none}}\" >> probe.txt; "
             f"python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); "
             "print('connected')\" >> probe.txt 2>&1; true")
    try:
        result = machine.start("s1", [task("T-1")], {"tasks": {"T-1": [{"run": [probe]}]}},
                               env={"TILTH_SANDBOX": "bwrap", "SSH_AUTH_SOCK": str(path),
                                    "TILTH_SANDBOX_EXPOSE": str(shared)})
    finally:
        listener.close()
    assert result.returncode == 0, result.stdout + result.stderr
    said = machine.committed("s1", "probe.txt")
    assert "exposed-on-purpose" in said and "variable: none" in said, said
    assert "connected" not in said and "Error" in said, said


@pytest.mark.slow
@pytest.mark.bwrap
def test_a_tilth_home_outside_the_users_home_and_the_hosts_tmp_are_hidden(machine):
    """TILTH_HOME where the private home does not cover it (here beside HOME, as with TILTH_HOME=/srv/tilth):
    the live plan, the memory and other worktrees stay out of reach; /tmp is a private empty one."""
    require_bwrap()
    home = machine.base / "tilth-home"
    (home / "memory").mkdir(parents=True)
    (home / "memory" / "2026-01-01.md").write_text("sentinel-daily-memory of another project\n")
    (home / "worktrees" / "other").mkdir(parents=True)
    (home / "worktrees" / "other" / "notes.txt").write_text("sentinel-other-worktree\n")
    machine.own(home)
    host_tmp = Path(tempfile.mkdtemp(prefix="tilth-host-tmp-", dir="/tmp"))
    host_tmp.chmod(0o755)
    (host_tmp / "note.txt").write_text("sentinel-host-tmp\n")
    (host_tmp / "note.txt").chmod(0o644)
    planted = host_tmp.with_name(host_tmp.name + "-planted")
    machine = Machine(machine.base, machine.user_home, home, machine.repo, {**machine.env, "TILTH_HOME": str(home)},
                      machine.user)
    leak = (f"cat {home}/sessions/s1/prd.json {home}/sessions/s1/session.json {home}/memory/*.md "
            f"{home}/worktrees/other/notes.txt {host_tmp}/note.txt > leak.txt 2>&1; "
            f"ls -a {home} /tmp >> leak.txt 2>&1; touch {planted}; true")
    try:
        result = machine.start("s1", [task("T-1")], {"tasks": {"T-1": [{"run": [leak]}]}},
                               env={"TILTH_SANDBOX": "bwrap"})
        assert result.returncode == 0, result.stdout + result.stderr
        leaked = machine.committed("s1", "leak.txt")
        assert "sentinel" not in leaked and "acceptance_criteria" not in leaked and '"worktree"' not in leaked, leaked
        assert leaked.count("No such file") == 5, leaked
        assert not planted.exists(), "what the agent writes to /tmp stays in its own"
    finally:
        shutil.rmtree(host_tmp, ignore_errors=True)
        planted.unlink(missing_ok=True)


@pytest.mark.slow
@pytest.mark.bwrap
def test_each_lane_of_parallel_tasks_has_a_private_home_of_its_own(machine):
    """Two lanes at once see different homes (each the mount of its own directory), and a later lane
    finds neither one's leftovers; the lanes' homes are gone after the run."""
    require_bwrap()
    look = ('echo mine > ~/marker-$TILTH_TASK; ls -a ~ > seen-$TILTH_TASK.txt; '
            "awk -v home=\"$HOME\" '$5 == home {print $4}' /proc/self/mountinfo > mount-$TILTH_TASK.txt")
    plan = [task("T-1"), task("T-2"), task("T-3", depends_on=["T-1", "T-2"])]
    result = machine.start("s1", plan, {"default": [{"run": [look]}]},
                           env={"TILTH_SANDBOX": "bwrap", "TILTH_PARALLEL_TASKS": "2"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert {e["data"]["lane"] for e in machine.events("s1") if e["type"] == "lane_started"} == {1, 2}
    seen = {t: machine.committed("s1", f"seen-{t}.txt").split() for t in ("T-1", "T-2", "T-3")}
    for mine in seen:
        assert [name for name in seen[mine] if name.startswith("marker-")] == [f"marker-{mine}"], seen
    mounts = {t: machine.committed("s1", f"mount-{t}.txt").strip() for t in ("T-1", "T-2")}
    assert mounts["T-1"].endswith("/agent-homes/s1+T-1") and mounts["T-2"].endswith("/agent-homes/s1+T-2"), mounts
    assert not list((machine.tilth_home / "agent-homes").glob("s1+*")), "a lane's home goes with the lane"


PLANTING_WORKER = """#!/bin/sh
cat > /dev/null
echo done > done.txt
ln -s TARGET "$HOME/.claude" || exit 3
echo '```json'
echo '{"summary": "planted", "criteria": [{"criterion": "T-1 is done", "evidence": "done.txt"}]}'
echo '```'
"""
VERDICT = {"verdict": "accept", "category": "none", "concern": "", "evidence": []}
CLAUDE_EVALUATOR = """#!/bin/sh
cat > /dev/null
echo '{"hooks": "planted by the evaluator"}' > "$CLAUDE_CONFIG_DIR/settings.json"
cat <<'EOF'
""" + json.dumps({"type": "result", "subtype": "success", "is_error": False, "total_cost_usd": 0.0, "num_turns": 1,
                  "usage": {"input_tokens": 1, "output_tokens": 1},
                  "result": f"```json\n{json.dumps(VERDICT)}\n```"}) + "\nEOF\n"


PROBE = '''import json, socket, sys
def tcp(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return "open"
    except OSError as e:
        return f"closed: {e}"
def abstract(name):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("\\0" + name)
        return "open"
    except OSError as e:
        return f"closed: {e}"
own = socket.socket()
own.bind(("127.0.0.1", 0))
own.listen()
print(json.dumps({"host": tcp(int(sys.argv[1])), "named": tcp(int(sys.argv[2])), "abstract": abstract(sys.argv[3]),
                  "own": tcp(own.getsockname()[1])}))
'''


@pytest.mark.slow
@pytest.mark.bwrap
def test_the_agent_reaches_its_own_loopback_and_named_host_ports_not_the_hosts_services(machine):
    """Outbound to the internet cannot be tried here (no network): the namespace's own address and route
    are what pasta copies from the host, the same as for any outbound connection."""
    require_bwrap()
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    dashboard, named = (ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) for _ in range(2))
    for server in (dashboard, named):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    bus = socket.socket(socket.AF_UNIX)
    bus_name = f"tilth-test-bus-{os.getpid()}-{machine.user.name}"
    bus.bind("\0" + bus_name)
    bus.listen()
    run = f"python3 probe.py {dashboard.server_port} {named.server_port} {bus_name} > net.txt 2>&1; true"
    try:
        result = machine.start("s1", [task("T-1")], {"tasks": {"T-1": [{"write": {"probe.py": PROBE}, "run": [run]}]}},
                               env={"TILTH_SANDBOX": "bwrap", "TILTH_AGENT_HOST_PORTS": str(named.server_port)})
    finally:
        for server in (dashboard, named):
            server.shutdown()
        bus.close()
    assert result.returncode == 0, result.stdout + result.stderr
    said = json.loads(machine.committed("s1", "net.txt"))
    assert said["own"] == "open" and said["named"] == "open", said
    assert said["host"].startswith("closed") and said["abstract"].startswith("closed"), said
    sandbox = next(e["data"] for e in machine.events("s1") if e["type"] == "sandbox")
    assert sandbox["network_confinement"] == "pasta" and sandbox["host_ports"] == [named.server_port], sandbox
    doctor = machine.tilth("doctor", "s1")
    assert "agent_network = on: pasta" in doctor.stderr, doctor.stderr


@pytest.mark.slow
@pytest.mark.bwrap
@pytest.mark.parametrize("target", ["outside", "the user's own"])
def test_a_config_dir_the_agent_made_a_symlink_is_never_written_through(machine, target):
    """The worker (a `command` agent) points `~/.claude` in its private home at a directory outside it,
    or at the user's own `~/.claude`; the evaluator's run (a Claude Code stand-in) seeds its config copy
    and writes a settings file into it: nothing reaches the link's target."""
    require_bwrap()
    outside = machine.base / "outside"
    outside.mkdir()
    (machine.user_home / ".claude" / ".credentials.json").write_text("sentinel-oauth")
    aimed = outside if target == "outside" else machine.user_home / ".claude"
    scripts = machine.base / "bin"
    scripts.mkdir()
    (scripts / "worker").write_text(PLANTING_WORKER.replace("TARGET", str(aimed)))
    (scripts / "claude").write_text(CLAUDE_EVALUATOR)
    for script in scripts.iterdir():
        script.chmod(0o755)
    machine.own(machine.base)
    env = {"TILTH_SANDBOX": "bwrap", "TILTH_WORKER_BACKEND": "command", "TILTH_WORKER_COMMAND": str(scripts / "worker"),
           "TILTH_EVALUATOR_BACKEND": "claude", "TILTH_CLAUDE_BIN": str(scripts / "claude"),
           "TILTH_SELF_IMPROVEMENT": "false"}
    result = machine.start("s1", [task("T-1")], env=env, backend="cli")
    assert list(outside.iterdir()) == [], "tilth wrote through the planted link"
    assert (machine.user_home / ".claude" / "settings.json").read_text() == SENTINELS[".claude/settings.json"]
    assert sorted(p.name for p in (machine.user_home / ".claude").iterdir()) == [".credentials.json", "settings.json"]
    assert result.returncode == 0, result.stdout + result.stderr
    runs = [e["data"] for e in machine.events("s1") if e["type"] == "agent_run"]
    assert [r["role"] for r in runs][:2] == ["worker", "evaluator"] and all(r["exit_code"] == 0 for r in runs), runs
    assert machine.committed("s1", "done.txt") == "done\n"
    copy = machine.tilth_home / "agent-homes" / "s1" / ".claude"
    assert not copy.is_symlink() and (copy / ".credentials.json").read_text() == "sentinel-oauth"
    assert (copy / "settings.json").read_text() == '{"hooks": "planted by the evaluator"}\n'


@pytest.mark.slow
@pytest.mark.bwrap
def test_a_toolchain_on_path_runs_read_only_and_its_credentials_stay_hidden(machine):
    """security.md: a toolchain on PATH under the home (`~/.cargo/bin`) is shown read-only, widened to
    its prefix (`~/.cargo`) but not to the home; its known credential files are shown empty."""
    require_bwrap()
    cargo = machine.user_home / ".cargo"
    (cargo / "bin").mkdir(parents=True)
    (cargo / "bin" / "mytool").write_text("#!/bin/sh\necho tool-ran\n")
    (cargo / "bin" / "mytool").chmod(0o755)
    (cargo / "credentials.toml").write_text("sentinel-cargo-registry-token\n")
    machine.own(machine.user_home)
    look = (f"mytool > tool.txt 2>&1; cat {cargo}/credentials.toml {machine.user_home}/.netrc >> tool.txt 2>&1; "
            f"touch {cargo}/bin/planted >> tool.txt 2>&1; echo done >> tool.txt")
    result = machine.start("s1", [task("T-1")], {"tasks": {"T-1": [{"run": [look]}]}},
                           env={"TILTH_SANDBOX": "bwrap", "PATH": f"{cargo / 'bin'}:{machine.env['PATH']}"})
    assert result.returncode == 0, result.stdout + result.stderr
    seen = machine.committed("s1", "tool.txt")
    assert seen.startswith("tool-ran\n") and seen.endswith("done\n"), seen
    assert "sentinel" not in seen and "No such file" in seen, "the credentials empty, the rest of the home hidden"
    assert "Read-only file system" in seen and not (cargo / "bin" / "planted").exists(), seen


def test_the_box_holds_what_the_agent_needs_not_the_users_checkout_other_homes_or_host_secrets(machine):
    require_bwrap()
    (machine.repo / ".gitignore").write_text(".env\n")
    machine.git("add", ".gitignore")
    machine.git("-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "ignore .env")
    (machine.repo / ".env").write_text("sentinel-dotenv-secret\n")
    other_tilth, shared = machine.base / "other-tilth" / "sessions", machine.base / "shared"
    other_tilth.mkdir(parents=True)
    (other_tilth / "notes.txt").write_text("sentinel-other-tilth-home\n")
    shared.mkdir()
    (shared / "data.txt").write_text("exposed-on-purpose\n")
    tool = machine.base / "tools" / "lint"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    machine.own(machine.base)
    other_home = Path(tempfile.mkdtemp(prefix="tilth-other-user-", dir="/home"))
    other_home.chmod(0o755)
    (other_home / "notes.txt").write_text("sentinel-other-users-home\n")
    (other_home / "notes.txt").chmod(0o644)
    look = (f"cat {machine.repo}/.env {other_tilth}/notes.txt {other_home}/notes.txt /etc/shadow /etc/gshadow "
            f"{shared}/data.txt > fs.txt 2>&1; ls /etc/ssh/ >> fs.txt 2>&1; cat /etc/ssh/ssh_host_*_key >> fs.txt 2>&1; "
            f"ls {machine.repo} >> fs.txt 2>&1; git log --oneline -1 >> fs.txt 2>&1; true")
    try:
        result = machine.start("s1", [task("T-1")], {"tasks": {"T-1": [{"run": [look]}]}},
                               env={"TILTH_SANDBOX": "bwrap", "TILTH_SANDBOX_EXPOSE": str(shared),
                                    "TILTH_CHECKS": str(tool)})
    finally:
        shutil.rmtree(other_home, ignore_errors=True)
    assert result.returncode == 0, result.stdout + result.stderr
    seen = machine.committed("s1", "fs.txt")
    assert "sentinel" not in seen and "root:" not in seen and "PRIVATE KEY" not in seen, seen
    assert "exposed-on-purpose" in seen and "ignore .env" in seen, "sandbox_expose and the git history are in the box"
    assert seen.count("No such file") >= 4, seen
    checks = [e["data"]["results"][0] for e in machine.events("s1") if e["type"] == "checks_run"]
    assert checks and checks[0]["exit_code"] == 127 and checks[0]["sandbox_hidden"] == [str(tool)], checks


@pytest.mark.bwrap
def test_a_token_in_a_file_name_or_encoded_never_reaches_the_branch(machine):
    """What the worker's confined commands make, as either user: a token in a file's name, base64-encoded
    and hex-encoded. The gate rejects the first attempt and the branch keeps none of the three forms; the
    retry finds the file under the redacted name it is committed with."""
    require_bwrap()
    import base64
    import random
    import string

    token = "ghp_" + "".join(random.Random(7).choices(string.ascii_letters + string.digits, k=36))
    encoded, hexed = base64.b64encode(token.encode()).decode(), token.encode().hex()
    first = {"run": [f'touch "notes-$(echo {encoded} | base64 -d).txt"', f"echo \"config = '{encoded}'\" > b64.txt",
                     f"echo 'key_hex = {hexed}' > hex.txt"]}
    second = {"run": ["ls > listed.txt"]}
    result = machine.start("s1", [task("T-1")], {"tasks": {"T-1": [first, second]}}, env={"TILTH_SANDBOX": "bwrap"})
    assert result.returncode == 0, result.stdout + result.stderr
    rejected = [e for e in machine.events("s1") if e["type"] == "verdict"][0]["data"]
    assert rejected["category"] == "secret_added", rejected
    names = machine.git("ls-tree", "-r", "--name-only", "session/s1").split("\n")
    assert "notes-[redacted].txt" in names and "notes-[redacted].txt" in machine.committed("s1", "listed.txt")
    history = machine.git("log", "-p", "--format=%B", "session/s1") + "\n".join(names)
    assert not [form for form in (token, encoded, hexed) if form in history]
    assert machine.committed("s1", "b64.txt") == "config = '[redacted]'\n"
    assert machine.committed("s1", "hex.txt") == "key_hex = [redacted]\n"


@pytest.mark.slow
@pytest.mark.bwrap
def test_a_host_path_is_in_the_box_only_when_sandbox_expose_names_it(machine):
    """A check (confined like the agent's commands) reads a file under a host directory outside the
    sandbox's view: hidden, it fails and says which path and which setting; exposed, it reads it."""
    require_bwrap()
    data = machine.base / "shared" / "fixture.txt"
    data.parent.mkdir()
    data.write_text("exposed-on-purpose\n")
    machine.own(data.parent)
    check = f"grep -q exposed-on-purpose {data}"
    plan, scenario = [task("T-1")], {"tasks": {"T-1": [{"write": {"a.txt": "a\n"}}]}}
    hidden = machine.start("s1", plan, scenario, env={"TILTH_SANDBOX": "bwrap", "TILTH_CHECKS": check})
    assert "Traceback" not in hidden.stderr, hidden.stderr
    [hidden_run] = [e["data"]["results"][0] for e in machine.events("s1") if e["type"] == "checks_run"]
    assert hidden_run["exit_code"] != 0 and hidden_run["sandbox_hidden"] == [str(data)], hidden_run
    evaluator_saw = (machine.tilth_home / "sessions" / "s1" / "prompts.jsonl").read_text()
    assert "sandbox_expose (TILTH_SANDBOX_EXPOSE)" in evaluator_saw

    shown = machine.start("s2", plan, scenario, env={"TILTH_SANDBOX": "bwrap", "TILTH_CHECKS": check,
                                                     "TILTH_SANDBOX_EXPOSE": str(data.parent)})
    assert shown.returncode == 0, shown.stdout + shown.stderr
    [shown_run] = [e["data"]["results"][0] for e in machine.events("s2") if e["type"] == "checks_run"]
    assert shown_run["exit_code"] == 0 and "sandbox_hidden" not in shown_run, shown_run
