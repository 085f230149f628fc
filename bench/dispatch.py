"""Distributed dispatch under load: sessions queued in a real Redis (RQ) and run by 1, 2 and 3
`tilth worker` processes, each with a TILTH_HOME of its own as if on its own machine, the
branches and session files travelling through a bare git remote in a tmp dir.

Per round, every session is queued first (`tilth start --dispatch`, one command each, from a
TILTH_HOME of its own, on a queue of the round's own), then the workers start; the wall time
runs from the workers' start to the last session's `done` in the broker, so the enqueueing
(about a second of CLI start-up each) is not measured. The scripted backend at zero latency,
no scenario (one file per task): the cost of a session here is the worker's side, its clone,
fetch, worktree, run and two pushes per task boundary, not a model.

Every session's branch on the remote must then hold exactly its tasks' commits (one
`Tilth-Task` commit per task, no FAILED/PARKED outcome) and its files ref a plan with every
task done; anything else fails the benchmark (exit 1).

    python -m bench.dispatch [--workers 1,2,3] [--sessions 30] [--tasks 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ENDED = {"done", "failed", "stopped", "waiting", "crashed"}
ROUND_TIMEOUT_S = 240


def redis_bin() -> str | None:
    return shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists()
                                            else None)


class Broker:
    """redis-server on a free loopback port, append-only as the README runs it (fsync every second)."""

    def __init__(self, directory: Path, binary: str):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.dir = directory
        self.dir.mkdir(parents=True)
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(directory), "--appendonly", "yes",
             "--appendfsync", "everysec", "--save", "", "--protected-mode", "no"],
            stdout=open(directory / "redis.log", "ab"), stderr=subprocess.STDOUT, start_new_session=True)
        import redis

        self.client = redis.Redis(port=self.port, socket_connect_timeout=1, decode_responses=True)
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.client.ping():
                    break
            except (redis.ConnectionError, redis.BusyLoadingError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"bench: redis-server did not start: {(directory / 'redis.log').read_text()[-500:]}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout


def make_remote(root: Path) -> Path:
    """A bare repository with a default branch, as a team's shared remote."""
    remote, src = root / "remote.git", root / "src"
    git(root, "init", "-q", "--bare", "-b", "main", str(remote))
    src.mkdir()
    git(src, "init", "-q", "-b", "main")
    (src / "README.md").write_text("# bench\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "initial")
    git(src, "push", "-q", str(remote), "HEAD:refs/heads/main")
    return remote


def home_with(path: Path, broker_url: str, remote: Path, queue: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.toml").write_text(f'[dispatch]\nbroker_url = "{broker_url}"\nremote = "{remote}"\n'
                                      f'queue = "{queue}"\n')
    return path


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    return {**env, "TILTH_HOME": str(home), "TILTH_SANDBOX": "off"}


def descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        ppid = int(text[text.rfind(")") + 2:].split()[1])
        parents.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop_workers(workers: list[subprocess.Popen]) -> None:
    """SIGTERM (each stops its RQ workers), then SIGKILL to the process groups of whatever is left."""
    family = {w.pid: descendants(w.pid) for w in workers}
    for w in workers:
        if w.poll() is None:
            os.killpg(w.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    for w in workers:
        try:
            w.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for w in workers:
        for pid in [w.pid, *family[w.pid]]:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if w.poll() is None:
            w.kill()
        w.wait()


def enqueue(home: Path, plan: Path, ids: list[str]) -> None:
    for sid in ids:
        done = subprocess.run([sys.executable, "-m", "tilth", "start", "--dispatch", "--prd", str(plan), "--id", sid,
                               "--backend", "scripted"], env=env_for(home), capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"bench: `tilth start --dispatch --id {sid}` exited {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()}")


def wait_all(client, ids: list[str], timeout: float) -> dict[str, str]:
    """Each session's state once every one has ended (and no worker holds its lease)."""
    deadline = time.monotonic() + timeout
    while True:
        with client.pipeline() as pipe:
            for sid in ids:
                pipe.hget(f"tilth:session:{sid}", "state")
                pipe.exists(f"tilth:lease:{sid}")
            answers = pipe.execute()
        states = {sid: answers[2 * i] or "?" for i, sid in enumerate(ids)}
        if all(states[sid] in ENDED and not answers[2 * i + 1] for i, sid in enumerate(ids)):
            return states
        if time.monotonic() > deadline:
            return {sid: state if state in ENDED else f"still {state}" for sid, state in states.items()}
        time.sleep(0.1)


def check_remote(remote: Path, sid: str, tasks: int) -> str | None:
    """None when session/<sid> on the remote holds exactly one done commit per task and the files ref's
    plan says every task is done; else what is wrong."""
    try:
        log = git(remote, "log", "--format=%(trailers:key=Tilth-Task,valueonly,separator=%x2C)%x00"
                                 "%(trailers:key=Tilth-Outcome,valueonly,separator=%x2C)",
                  f"main..refs/heads/session/{sid}")
    except subprocess.CalledProcessError as exc:
        return f"{sid}: no branch session/{sid} on the remote ({exc.stderr.strip().splitlines()[0]})"
    commits = [line.split("\0") for line in log.splitlines() if line]
    task_ids = sorted(t.strip() for t, _ in commits)
    expected = sorted(f"T-{i}" for i in range(1, tasks + 1))
    if task_ids != expected or any(o.strip() for _, o in commits):
        return f"{sid}: branch has {len(commits)} commits ({', '.join(t or '?' for t, _ in commits)}), " \
               f"want {tasks} task commits"
    try:
        plan = orjson.loads(git(remote, "show", f"refs/tilth/sessions/{sid}:prd.json"))
    except (subprocess.CalledProcessError, orjson.JSONDecodeError) as exc:
        return f"{sid}: no readable prd.json in refs/tilth/sessions/{sid} ({exc})"
    if [t.get("status") for t in plan] != ["done"] * tasks:
        return f"{sid}: files ref's plan says {[t.get('status') for t in plan]}"
    return None


def run_round(workers: int, sessions: int, tasks: int, root: Path, broker: Broker, remote: Path,
              plan: Path) -> dict:
    queue = f"bench{workers}"
    ids = [f"b{workers}-s{k:02d}" for k in range(sessions)]
    enqueue(home_with(root / "submit", broker.url, remote, queue), plan, ids)
    procs: list[subprocess.Popen] = []
    began = time.monotonic()
    try:
        for n in range(workers):
            home = home_with(root / f"round{workers}" / f"worker{n}", broker.url, remote, queue)
            procs.append(subprocess.Popen([sys.executable, "-m", "tilth", "worker", "--concurrency", "1"],
                                          env=env_for(home), stdout=open(home / "worker.log", "ab"),
                                          stderr=subprocess.STDOUT, start_new_session=True))
        states = wait_all(broker.client, ids, ROUND_TIMEOUT_S)
        wall = time.monotonic() - began
    finally:
        stop_workers(procs)
    problems = [f"{sid}: {state}" for sid, state in states.items() if state != "done"]
    problems += [p for sid in ids if states[sid] == "done" and (p := check_remote(remote, sid, tasks))]
    broker.client.flushall()
    return {"workers": workers, "sessions": sessions, "tasks": sessions * tasks, "wall_s": wall,
            "done": sum(s == "done" for s in states.values()), "problems": problems}


def table(rounds: list[dict]) -> str:
    base = rounds[0]["tasks"] / rounds[0]["wall_s"] if rounds else 0
    head = ("workers", "sessions", "tasks", "seconds", "tasks/min", "scaling vs 1 worker", "branches checked")
    rows = [head] + [(str(r["workers"]), str(r["sessions"]), str(r["tasks"]), f"{r['wall_s']:.1f}",
                      f"{r['tasks'] / r['wall_s'] * 60:.0f}", f"{r['tasks'] / r['wall_s'] / base:.2f}x",
                      "ok" if not r["problems"] else f"{len(r['problems'])} WRONG") for r in rounds]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]

    def fmt(row: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))

    lines = [f"dispatch benchmark: `tilth worker` processes (concurrency 1 each, own TILTH_HOME) on one Redis "
             f"and one bare remote, scripted backend (no model), {os.cpu_count()} CPUs",
             "seconds: from the workers' start to the last session done (all queued before)",
             fmt(head), "-" * len(fmt(head))]
    return "\n".join(lines + [fmt(row) for row in rows[1:]])


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dispatch", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,3", help="worker counts, one round each (default 1,2,3)")
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=3, help="tasks per session")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    binary = redis_bin()
    if binary is None:
        print("dispatch benchmark: no redis-server (make redis: scripts/install-redis.sh)", file=sys.stderr)
        return 1
    root = Path(tempfile.mkdtemp(prefix="tilth-bench-dispatch-"))
    rounds: list[dict] = []
    broker = None
    try:
        broker = Broker(root / "redis", binary)
        remote = make_remote(root)
        plan = root / "prd.json"
        plan.write_bytes(orjson.dumps([{"id": f"T-{i}", "title": f"Task {i}", "description": "Bench task.",
                                        "acceptance_criteria": ["done"]} for i in range(1, args.tasks + 1)]))
        for workers in (int(n) for n in args.workers.split(",")):
            rounds.append(run_round(workers, args.sessions, args.tasks, root, broker, remote, plan))
    finally:
        if broker is not None:
            broker.stop()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(table(rounds))
    problems = [p for r in rounds for p in r["problems"]]
    checked = sum(r["done"] for r in rounds)
    print(f"remote: {checked} session branches with exactly {args.tasks} task commits each checked"
          if not problems else "remote check FAILED:\n  " + "\n  ".join(problems[:20]))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
