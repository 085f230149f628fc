"""Helpers for tests with a real supervisor (`tests/test_daemon.py`, `tests/test_self_healing.py`):
one sandbox whose sessions the supervisor runs, held inside their worker step by a scenario
command that waits for a gate file, so a test decides when an iteration may finish. The
`daemon` fixture (conftest.py) cleans up so that no process outlives a test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import watchfiles

from tilth.store.lock import is_locked, read_holder, wait_released


def wait_until(directory: Path, predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Wake on changes under `directory` (re-checking every half second) until `predicate`."""
    if predicate():
        return
    deadline = time.monotonic() + timeout
    for _ in watchfiles.watch(directory, debounce=50, step=10, rust_timeout=500, yield_on_timeout=True):
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")


class Daemon:
    """Helpers around one sandbox whose sessions the supervisor runs."""

    def __init__(self, sandbox):
        self.sb = sandbox
        # The gates are files outside the worktree that the held steps poll: unconfined on purpose.
        sandbox.env["TILTH_SANDBOX"] = "off"
        self.gates = sandbox.root / "gates"
        self.gates.mkdir()

    def held(self, sid: str, *task_ids: str) -> dict:
        """A scenario whose listed tasks wait in their worker step until released."""
        def step(t: str) -> list[dict]:
            hold = (f"touch {self.gates}/reached-{sid}-{t}; "
                    f"while [ ! -e {self.gates}/go-{sid}-{t} ] && [ ! -e {self.gates}/go-all ]; do sleep 0.05; done")
            return [{"write": {"scripted/{task}.md": "held {task}\n"}, "run": [hold]}]
        return {"tasks": {t: step(t) for t in task_ids}}

    def reached(self, sid: str, task_id: str) -> None:
        wait_until(self.gates, (self.gates / f"reached-{sid}-{task_id}").exists, f"{sid} to reach {task_id}")

    def release(self, sid: str, task_id: str) -> None:
        (self.gates / f"go-{sid}-{task_id}").touch()

    def kill_runner(self, sid: str, task_id: str) -> int:
        """kill -9 the process group of the runner holding the session (an OOM kill, say),
        first forgetting that it reached the step so a resumed runner's arrival shows."""
        (self.gates / f"reached-{sid}-{task_id}").unlink()
        lock = self.sb.session_dir(sid) / "session.lock"
        holder = read_holder(lock)
        assert holder and holder.get("role", "run") == "run", holder
        os.killpg(holder["pid"], signal.SIGKILL)
        assert wait_released(lock, 10)
        return holder["pid"]

    def wait_for(self, sid: str, predicate: Callable[[dict], bool], what: str) -> dict:
        """Wait until the session's record satisfies `predicate` while nobody holds the session."""
        lock = self.sb.session_dir(sid) / "session.lock"
        wait_until(self.sb.session_dir(sid), lambda: predicate(self.record(sid)) and not is_locked(lock), what)
        return self.record(sid)

    def done(self, sid: str) -> None:
        self.wait_for(sid, lambda r: r["state"] == "done", f"{sid} to end done")

    def start_args(self, sid: str, plan: list[dict], scenario: dict | None, *extra: str) -> list[str]:
        args = ["start", "--repo", str(self.sb.repo), "--prd", str(self.sb.write_json(f"{sid}-prd.json", plan)),
                "--id", sid, "--backend", "scripted", *extra]
        if scenario is not None:
            args += ["--scenario", str(self.sb.write_json(f"{sid}-scenario.json", scenario))]
        return args

    def start(self, sid: str, plan: list[dict], scenario: dict | None = None, *extra: str) -> subprocess.CompletedProcess:
        result = self.sb.tilth(*self.start_args(sid, plan, scenario, *extra))
        assert result.returncode == 0, result.stderr
        return result

    def start_together(self, *specs: tuple) -> None:
        """`tilth start` for several sessions at once (their queue order is then unspecified)."""
        procs = [subprocess.Popen([sys.executable, "-m", "tilth", *self.start_args(*spec)], env=self.sb.env,
                                  cwd=self.sb.root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for spec in specs]
        for proc in procs:
            assert proc.wait(timeout=60) == 0, proc.stderr.read()

    def record(self, sid: str) -> dict:
        return json.loads((self.sb.session_dir(sid) / "session.json").read_text())

    def state(self, sid: str) -> str:
        return self.record(sid)["state"]

    def wait_state(self, sid: str, *states: str) -> None:
        wait_until(self.sb.session_dir(sid), lambda: self.state(sid) in states, f"{sid} to become {states}")

    def settled(self, sid: str) -> str:
        """What `tilth wait` waits for (tested on its own): an end state, and nobody holding the session."""
        ends = ("done", "failed", "stopped", "crashed")
        lock = self.sb.session_dir(sid) / "session.lock"
        wait_until(self.sb.session_dir(sid), lambda: self.state(sid) in ends and not is_locked(lock), f"{sid} to end")
        return self.state(sid)

    def events(self, sid: str, kind: str) -> list[dict]:
        return [e for e in self.sb.events(sid) if e["type"] == kind]

    def pid(self) -> int:
        return int((self.sb.home / "daemon.pid").read_text())

    def cleanup(self) -> None:
        """No process may outlive the test: stop the supervisor, then kill whatever still
        holds a lock under TILTH_HOME."""
        (self.gates / "go-all").touch()
        self.sb.tilth("daemon", "stop", "--timeout", "20")
        for lock in [self.sb.home / "daemon.lock", *self.sb.home.glob("sessions/*/session.lock")]:
            if is_locked(lock):
                pid = (read_holder(lock) or {}).get("pid")
                if isinstance(pid, int):
                    kill_tree(pid)
        # Last resort, e.g. a supervisor `tilth start` launched that was still coming up
        # when `daemon stop` looked: every process of this test carries its TILTH_HOME.
        for pid in processes_with_env(f"TILTH_HOME={self.sb.home}"):
            kill_tree(pid)


def processes_with_env(entry: str) -> list[int]:
    wanted, pids = entry.encode(), []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if wanted in (proc / "environ").read_bytes().split(b"\0"):
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def kill_tree(pid: int) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def alive(pid: int) -> bool:
    """A zombie is dead: pid 1 here does not reap orphans promptly."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def start_supervisor(sandbox, *args: str, env: dict | None = None) -> int:
    result = sandbox.tilth("daemon", *args, env=env)
    assert result.returncode == 0, result.stderr
    return int(result.stdout.split("pid ")[1].split(")")[0])
