"""A cluster for the dispatch tests: a real redis-server with a password, a bare remote, and
`tilth worker` processes each with its own TILTH_HOME. A test whose worker side or broker content is
hostile runs `@AS_ROOT_AND_UNPRIVILEGED`: its cluster's tilth processes run as root, then as an
unprivileged user (tests/users.py), with HOME and every TILTH_HOME outside /tmp, owned by that user."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import git, make_repo, task
from redis_server import RedisServer, redis_bin
from supervised import wait_until
from users import USERS, User, outside_tmp

HELD = "touch {gates}/reached-$TILTH_SESSION_TAG-$TILTH_TASK; " \
       "while [ ! -e {gates}/go-$TILTH_SESSION_TAG-$TILTH_TASK ]; do sleep 0.05; done"


def required() -> str:
    binary = redis_bin()
    if binary is None:
        reason = "redis-server is not installed (`make redis` installs it)"
        if os.environ.get("TILTH_REQUIRE_REDIS") == "1" or os.environ.get("CI") == "true":
            pytest.fail(f"TILTH_REQUIRE_REDIS=1 or CI=true, but {reason}", pytrace=False)
        pytest.skip(reason)
    return binary


class Cluster:
    def __init__(self, root: Path, persistent: bool = True, tls: bool = False, user: User | None = None):
        self.root = root
        self.user = user or User("root")
        """Who runs its tilth processes; the test itself (the broker writer, the remote's pusher) is root."""
        self.redis = RedisServer(root / "redis", required(), persistent=persistent, tls=tls).start()
        self.remote = root / "remote.git"
        source = make_repo(root / "source")
        subprocess.run(["git", "init", "-q", "--bare", str(self.remote)], check=True)
        git(source, "push", "-q", str(self.remote), "HEAD:refs/heads/main")
        subprocess.run(["git", "--git-dir", str(self.remote), "symbolic-ref", "HEAD", "refs/heads/main"], check=True)
        self.gates = root / "gates"
        self.gates.mkdir()
        self.workers: dict[str, subprocess.Popen] = {}
        self.extra: dict[str, str] = {}
        """More config.toml lines for a home (before its first use), `[dispatch]` keys first."""
        self.environ: dict[str, dict[str, str]] = {}
        """More environment for a home's processes (TILTH_TEST_PAUSE_AT for a worker)."""
        self.confined: set[str] = set()
        """Homes whose processes keep the sandbox of their config (the others run with it off)."""
        self.user_home: Path | None = None
        if user is not None:  # a machine as its users have it: a HOME of their own, everything theirs
            self.user_home = root / "user-home"
            self.user_home.mkdir()
            self.user.own(root)

    def home(self, name: str) -> Path:
        home = self.root / name
        if not home.exists():
            home.mkdir()
            dispatch, _, top = self.extra.get(name, "").partition("\n\n")
            given = {line.split("=", 1)[0].strip() for line in dispatch.splitlines() if "=" in line}
            defaults = "".join(f"{key} = {value}\n" for key, value in
                               (("lease_s", 4), ("heartbeat_s", 1), ("maintenance_s", 1)) if key not in given)
            (home / "config.toml").write_text(
                top + f'\n[dispatch]\nbroker_url = "{self.redis.url}"\nremote = "{self.remote}"\n'
                + defaults + dispatch)
            self.user.own(home)
        return home

    def env(self, name: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TILTH_", "GIT_CONFIG_"))}
        if self.user_home is not None:
            env["HOME"] = str(self.user_home)
        confinement = {} if name in self.confined else {"TILTH_SANDBOX": "off"}
        return {**env, "TILTH_HOME": str(self.home(name)), **confinement, "PYTHONUNBUFFERED": "1",
                **self.environ.get(name, {})}

    def tilth(self, name: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """One command, in a process group of its own: past `timeout` the whole group is killed (a `tilth worker`
        that should have refused to start leaves no RQ worker behind), then TimeoutExpired as `subprocess.run`."""
        argv = [*self.user.prefix, self.user.python, "-m", "tilth", *args]
        with subprocess.Popen(argv, env=self.env(name), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=self.root, start_new_session=True) as proc:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def worker(self, name: str) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "ab")
        proc = subprocess.Popen([*self.user.prefix, self.user.python, "-m", "tilth", "worker"], env=self.env(name), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root)
        self.workers[name] = proc
        return proc

    def kill(self, name: str) -> None:
        """The machine dies: the worker, its RQ worker, the job's process and the agent, all at once."""
        proc = self.workers.pop(name)
        family, look = [], [proc.pid]
        while look:  # every descendant: each RQ worker and the agents run in sessions of their own
            pid = look.pop()
            family.append(pid)
            look += [int(c) for c in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True,
                                                    text=True).stdout.split()]
        for pid in family:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()

    def start(self, sid: str, tasks: int = 3, held: str | None = None, home: str = "h0",
              before: list[dict] = ()) -> None:
        plan = self.root / f"{sid}-prd.json"
        plan.write_text(json.dumps([task(f"T-{n}") for n in range(1, tasks + 1)]))
        args = ["start", "--dispatch", "--prd", str(plan), "--id", sid, "--backend", "scripted"]
        if held:
            command = HELD.format(gates=self.gates).replace("$TILTH_SESSION_TAG", sid)
            scenario = self.root / f"{sid}-scenario.json"
            steps = [*before, {"write": {"{task}.txt": "{task}\n"}, "run": [command]}]
            scenario.write_text(json.dumps({"tasks": {held: steps}}))
            args += ["--scenario", str(scenario)]
        result = self.tilth(home, *args)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"session {sid} dispatched" in result.stdout

    def reached(self, sid: str, task_id: str, timeout: float = 60) -> None:
        wait_until(self.gates, (self.gates / f"reached-{sid}-{task_id}").exists, f"{sid} to reach {task_id}",
                   timeout)

    def release(self, sid: str, task_id: str) -> None:
        (self.gates / f"go-{sid}-{task_id}").touch()

    def commits(self, sid: str) -> list[tuple[str, str]]:
        out = git(self.remote, "log", "--reverse", "--format=%(trailers:key=Tilth-Task,valueonly,separator=)%x1f"
                  "%(trailers:key=Tilth-Outcome,valueonly,separator=)", f"main..session/{sid}")
        return [tuple(part.strip() for part in line.split("\x1f")) for line in out.splitlines() if line.strip()]

    def file(self, sid: str, path: str) -> str:
        return git(self.remote, "show", f"refs/tilth/sessions/{sid}:{path}")

    def wait(self, sid: str, timeout: float = 120, home: str = "h9") -> subprocess.CompletedProcess:
        return self.tilth(home, "wait", sid, "--timeout", str(timeout), timeout=timeout + 30)

    def ran_on(self, sid: str) -> list[str]:
        return sorted(name for name in self.workers_seen() if (self.root / name / "sessions" / sid).is_dir())

    def workers_seen(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.name.startswith("w") and p.is_dir())

    def cleanup(self) -> None:
        for name in list(self.workers):
            self.kill(name)
        self.redis.stop()


AS_ROOT_AND_UNPRIVILEGED = pytest.mark.parametrize("cluster", USERS, indirect=True)
"""The test's cluster runs as root, then as an unprivileged user: confinement and trust hold for both."""


@pytest.fixture
def cluster(request, tmp_path, monkeypatch):
    if not hasattr(request, "param"):
        c = Cluster(tmp_path)
    else:
        c = Cluster(outside_tmp("tilth-cluster-"), user=User(request.param))
        # the test's own git (root) reads the user's remote; its tilth processes never see this (`env`)
        for key, value in {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
                           "GIT_CONFIG_VALUE_0": "*"}.items():
            monkeypatch.setenv(key, value)
    try:
        yield c
        ran = {p.stat().st_uid for p in c.root.glob("w*/sessions/*")}
        assert ran <= {c.user.uid}, f"the workers ran as uid {ran}, not as {c.user.name} ({c.user.uid})"
    finally:
        c.cleanup()
        if hasattr(request, "param"):
            shutil.rmtree(c.root, ignore_errors=True)
