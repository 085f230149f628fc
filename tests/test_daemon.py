"""The supervisor: a real `tilth` supervisor process per test, TILTH_HOME in a tmp dir,
the scripted backend. Sessions are held inside their worker step by a scenario command
that waits for a gate file, so the test decides when an iteration may finish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

import pytest
import watchfiles

from conftest import git, task
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


@pytest.fixture
def daemon(sandbox):
    helper = Daemon(sandbox)
    try:
        yield helper
    finally:
        helper.cleanup()


def start_supervisor(sandbox, *args: str, env: dict | None = None) -> int:
    result = sandbox.tilth("daemon", *args, env=env)
    assert result.returncode == 0, result.stderr
    return int(result.stdout.split("pid ")[1].split(")")[0])


def test_start_returns_at_once_and_the_session_completes(sandbox, daemon):
    result = daemon.start("s1", [task("T-1"), task("T-2")])
    out = result.stdout
    assert "session s1 queued" in out
    assert "tilth logs s1 -f" in out and "tilth wait s1" in out and "tilth status" in out
    assert "supervisor pid" in out and "(started)" in out

    waited = sandbox.tilth("wait", "s1", "--timeout", "30")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]

    logs = sandbox.tilth("logs", "s1").stdout
    assert "[T-1] done: commit" in logs and "session done" in logs
    assert "session_launched" in logs, "events without a readable line get a compact one"
    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert summary["state"] == "done" and summary["progress"] == "2/2"
    assert summary["tokens"] == 0 and summary["cost_usd"] == 0 and summary["elapsed_s"] >= 0
    assert {"id", "state", "branch", "worktree", "tasks"} <= set(summary)

    # A done session whose plan gains a pending task goes back to the queue.
    prd = sandbox.session_dir("s1") / "prd.json"
    grown = sandbox.plan("s1") + [task("T-3")]
    tmp = prd.with_name("prd.json.new")
    tmp.write_text(json.dumps(grown))
    tmp.rename(prd)
    daemon.wait_state("s1", "queued", "running")
    assert daemon.events("s1", "session_queued")[-1]["data"]["reason"] == "plan_grew"
    assert daemon.settled("s1") == "done"
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2", "T-3"]


def test_at_most_max_parallel_sessions_run_and_the_rest_wait_in_order(sandbox, daemon):
    start_supervisor(sandbox, env={"TILTH_MAX_PARALLEL_SESSIONS": "2"})
    daemon.start_together(*[(sid, [task("T-1"), task("T-2")], daemon.held(sid, "T-1")) for sid in ("a", "b")])
    daemon.start("c", [task("T-1"), task("T-2")], daemon.held("c", "T-1"))
    daemon.reached("a", "T-1")
    daemon.reached("b", "T-1")
    assert (daemon.state("a"), daemon.state("b"), daemon.state("c")) == ("running", "running", "queued")
    follow = subprocess.Popen([sys.executable, "-m", "tilth", "logs", "c", "-f"], env=sandbox.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        daemon.release("a", "T-1")
        daemon.reached("c", "T-1")
        assert daemon.state("b") == "running", "c took a's slot, not a third one"
        daemon.release("b", "T-1")
        daemon.release("c", "T-1")
        waited = sandbox.tilth("wait", "a", "b", "c", "--timeout", "30")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        out, _ = follow.communicate(timeout=15)
    finally:
        follow.kill()
    assert follow.returncode == 0
    assert "[T-1] started" in out and "session done" in out, "logs -f followed the session to its end"
    for sid in ("a", "b", "c"):
        assert [c["task"] for c in sandbox.commits(sid)] == ["T-1", "T-2"]
    a_end = daemon.events("a", "session_end")[0]["ts"]
    assert daemon.events("c", "session_started")[0]["ts"] >= a_end


def test_the_watcher_alone_picks_up_a_new_session_and_a_grown_plan(sandbox, daemon):
    start_supervisor(sandbox, "--rescan", "3600")
    main_before = git(sandbox.repo, "rev-parse", "main")
    status_before = git(sandbox.repo, "status", "--porcelain")
    daemon.start("s1", [task("T-1")])
    assert daemon.settled("s1") == "done"
    prd = sandbox.session_dir("s1") / "prd.json"
    prd.with_name("prd.json.new").write_text(json.dumps(sandbox.plan("s1") + [task("T-2")]))
    prd.with_name("prd.json.new").rename(prd)
    daemon.wait_state("s1", "queued", "running")
    assert daemon.settled("s1") == "done"
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]
    assert git(sandbox.repo, "rev-parse", "main") == main_before, "the user's branch never moves"
    assert git(sandbox.repo, "status", "--porcelain") == status_before


def test_scheduled_and_dropped_in_sessions_are_picked_up(sandbox, daemon):
    # A rescan once an hour: only the watcher and the scheduled-start job can wake the tick.
    start_supervisor(sandbox, "--rescan", "3600")
    daemon.start("later", [task("T-1")], None, "--at", "2099-01-01T00:00:00Z")
    soon = (datetime.now(timezone.utc) + timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    daemon.start("soon", [task("T-1")], None, "--at", soon)
    assert daemon.record("later")["start_at"] == "2099-01-01T00:00:00Z"

    assert daemon.settled("soon") == "done"
    assert daemon.events("soon", "session_started")[0]["ts"] >= soon.replace("Z", ".000Z")
    assert daemon.state("later") == "queued"

    # Edit the scheduled session in place, as a person or a script would: the watcher sees it.
    record = daemon.record("later")
    record["start_at"] = "2000-01-01T00:00:00Z"
    path = sandbox.session_dir("later") / "session.json"
    path.with_name("session.json.new").write_text(json.dumps(record))
    path.with_name("session.json.new").rename(path)
    assert daemon.settled("later") == "done"


def test_kill_9_of_supervisor_and_child_then_resume_makes_one_commit_per_task(sandbox, daemon):
    start_supervisor(sandbox)
    daemon.start("s1", [task("T-1"), task("T-2"), task("T-3")], daemon.held("s1", "T-2", "T-3"))
    daemon.reached("s1", "T-2")
    child = read_holder(sandbox.session_dir("s1") / "session.lock")["pid"]
    supervisor = daemon.pid()
    os.killpg(child, signal.SIGKILL)
    os.kill(supervisor, signal.SIGKILL)
    assert wait_released(sandbox.home / "daemon.lock", 10)
    assert wait_released(sandbox.session_dir("s1") / "session.lock", 10)

    daemon.release("s1", "T-2")
    resumed = sandbox.tilth("resume", "s1")
    assert resumed.returncode == 0, resumed.stderr
    assert "supervisor pid" in resumed.stdout and "(started)" in resumed.stdout
    daemon.reached("s1", "T-3")
    second = sandbox.tilth("resume", "s1")
    assert second.returncode == 2 and "already running" in second.stderr
    daemon.release("s1", "T-3")
    assert daemon.settled("s1") == "done"

    assert daemon.events("s1", "session_started")[-1]["data"]["resume"] is True
    trailers = [c["task"] for c in sandbox.commits("s1")]
    assert trailers == ["T-1", "T-2", "T-3"], "each Tilth-Task exactly once"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done"}


def test_stop_lets_the_iteration_finish_and_stop_now_kills(sandbox, daemon):
    start_supervisor(sandbox, env={"TILTH_MAX_PARALLEL_SESSIONS": "3"})
    daemon.start_together(("s1", [task("T-1"), task("T-2")], daemon.held("s1", "T-1")),
                          ("n", [task("T-1")], daemon.held("n", "T-1")),
                          ("k", [task("T-1")], daemon.held("k", "T-1")),
                          ("q", [task("T-1")], None, "--at", "2099-01-01T00:00:00Z"))
    for sid in ("s1", "n", "k"):
        daemon.reached(sid, "T-1")

    # A runner that dies abnormally: its session is marked crashed, the others run on.
    os.killpg(read_holder(sandbox.session_dir("k") / "session.lock")["pid"], signal.SIGKILL)
    daemon.wait_state("k", "crashed")
    assert "SIGKILL" in daemon.events("k", "session_crashed")[0]["data"]["reason"]
    assert daemon.state("s1") == "running" and daemon.state("n") == "running"

    stopped = sandbox.tilth("stop", "s1")
    assert stopped.returncode == 0 and "after the current iteration" in stopped.stdout
    daemon.release("s1", "T-1")
    assert sandbox.tilth("wait", "s1", "--timeout", "30").returncode == 3
    assert daemon.state("s1") == "stopped"
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1"], "the iteration finished and was committed"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "pending"}

    runner = read_holder(sandbox.session_dir("n") / "session.lock")["pid"]
    now = sandbox.tilth("stop", "n", "--now")
    assert now.returncode == 0 and "killed" in now.stdout, now.stderr
    assert daemon.state("n") == "stopped" and not alive(runner)
    assert sandbox.commits("n") == []

    timed_out = sandbox.tilth("wait", "q", "--timeout", "0.5")
    assert timed_out.returncode == 4 and "timed out" in timed_out.stdout
    queued = sandbox.tilth("stop", "q")
    assert queued.returncode == 0 and "was queued" in queued.stdout
    assert daemon.state("q") == "stopped"

    assert sandbox.tilth("resume", "s1").returncode == 0
    assert daemon.settled("s1") == "done"
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]


def test_daemon_stop_lets_iterations_finish_and_queued_sessions_survive(sandbox, daemon):
    pid = start_supervisor(sandbox, env={"TILTH_MAX_PARALLEL_SESSIONS": "1"})
    again = sandbox.tilth("daemon")
    assert again.returncode == 2 and "already running" in again.stderr and str(pid) in again.stderr
    foreground = sandbox.tilth("daemon", "--foreground")
    assert foreground.returncode == 2 and str(pid) in foreground.stderr
    status = sandbox.tilth("daemon", "status")
    assert status.returncode == 0 and f"pid {pid}" in status.stdout

    daemon.start("r", [task("T-1"), task("T-2")], daemon.held("r", "T-1"))
    daemon.start("q", [task("T-1")])  # after r: r is older, so r takes the one slot
    daemon.reached("r", "T-1")
    assert daemon.state("q") == "queued"

    stopper = subprocess.Popen([sys.executable, "-m", "tilth", "daemon", "stop", "--timeout", "30"], env=sandbox.env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = sandbox.home / "daemon.log"
    wait_until(sandbox.home, lambda: "stop requested" in log.read_text(), "the supervisor to take the stop")
    daemon.release("r", "T-1")
    out, err = stopper.communicate(timeout=30)
    assert stopper.returncode == 0 and f"supervisor pid {pid} stopped" in out, err
    assert not (sandbox.home / "daemon.pid").exists()
    assert not is_locked(sandbox.home / "daemon.lock")
    assert daemon.state("r") == "stopped" and [c["task"] for c in sandbox.commits("r")] == ["T-1"]
    assert daemon.state("q") == "queued", "a queued session survives the supervisor"

    start_supervisor(sandbox)
    assert daemon.settled("q") == "done"

    unit = sandbox.tilth("daemon", "unit").stdout
    assert f"ExecStart={Path(sys.executable).absolute()} -m tilth daemon --foreground" in unit
    assert f"Environment=TILTH_HOME={sandbox.home}" in unit and "Restart=on-failure" in unit
