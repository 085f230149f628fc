"""The supervisor under load: N sessions queued at once, all allowed to run in parallel,
the scripted backend at zero model latency, a few tasks each.

Reports tasks per minute (from the supervisor's start to the last session's end), how
many sessions really ran at once (from their events), and the supervisor's peak RSS
(VmHWM in /proc/<pid>/status; the target is under 100 MB). The cost of a session here is
almost all process start-up of its `tilth run` child, since no model is called.

    python -m bench.supervisor [--sessions 50] [--tasks 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import orjson


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args], cwd=repo,
                   check=True, capture_output=True)


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# bench\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def tilth(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tilth", *args], capture_output=True, text=True, check=False)


def peak_rss_kb(pid: int) -> tuple[int, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()[0] if value.split() else "0"
    return int(fields.get("VmHWM", 0)), int(fields.get("VmRSS", 0))


def max_overlap(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    running = best = 0
    for _, step in edges:
        running += step
        best = max(best, running)
    return best


def ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def run(sessions: int, tasks: int, root: Path) -> dict:
    home = root / "home"
    os.environ["TILTH_HOME"] = str(home)
    os.environ["TILTH_MAX_PARALLEL_SESSIONS"] = str(sessions)
    # Imported after TILTH_HOME is set; library calls create the sessions quickly, so the
    # measurement is the supervisor's, not N command-line start-ups.
    from tilth.core.settings_load import load_settings
    from tilth.daemon.transitions import hand_over
    from tilth.run.create import create_session
    from tilth.store.home import session_paths
    from tilth.store.session import BackendChoice
    from tilth.views.follow import wait_for

    repo = make_repo(root / "repo")
    plan = root / "prd.json"
    plan.write_bytes(orjson.dumps([{"id": f"T-{i}", "title": f"Task {i}", "description": "Bench task.",
                                    "acceptance_criteria": ["done"]} for i in range(1, tasks + 1)]))
    settings = load_settings(home)
    ids = [f"bench-{n:03d}" for n in range(sessions)]
    for sid in ids:
        paths = create_session(repo, plan, sid, "HEAD", BackendChoice(name="scripted"), settings)
        hand_over(paths, "start", resume=False, start_at=None)

    began = time.monotonic()
    started = tilth("daemon")
    if started.returncode != 0:
        raise SystemExit(f"bench: the supervisor did not start: {started.stderr.strip()}")
    pid = int((home / "daemon.pid").read_text())
    code = wait_for([session_paths(sid, home) for sid in ids], 1800, lambda line: None)
    wall = time.monotonic() - began
    hwm_kb, rss_kb = peak_rss_kb(pid)
    tilth("daemon", "stop", "--timeout", "60")

    spans, done = [], 0
    for sid in ids:
        events = [orjson.loads(line) for line in (home / "sessions" / sid / "events.jsonl").read_bytes().splitlines()
                  if line.strip()]
        starts = [ts(e["ts"]) for e in events if e["type"] == "session_started"]
        ends = [ts(e["ts"]) for e in events if e["type"] == "session_end"]
        if starts and ends:
            spans.append((starts[0], ends[-1]))
        done += sum(1 for e in events if e["type"] == "task_done")
    return {"sessions": sessions, "tasks": done, "exit": code, "wall_s": wall, "tasks_per_min": done / wall * 60,
            "overlap": max_overlap(spans), "hwm_mb": hwm_kb / 1024, "rss_mb": rss_kb / 1024,
            "completed": len(spans)}


def table(r: dict) -> str:
    rows = [
        ("sessions (max_parallel_sessions)", f"{r['sessions']}"),
        ("tasks committed", f"{r['tasks']}"),
        ("sessions that ran to the end", f"{r['completed']}"),
        ("all sessions done (`tilth wait` exit)", f"{'yes' if r['exit'] == 0 else 'NO'} ({r['exit']})"),
        ("most sessions running at once", f"{r['overlap']}"),
        ("wall time, supervisor start -> last end", f"{r['wall_s']:.1f} s"),
        ("tasks per minute", f"{r['tasks_per_min']:.0f}"),
        ("supervisor peak RSS (VmHWM)", f"{r['hwm_mb']:.1f} MB (target < 100 MB)"),
        ("supervisor RSS at the end", f"{r['rss_mb']:.1f} MB"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"supervisor benchmark: scripted backend (no model), zero latency, {os.cpu_count()} CPUs",
             "-" * (width + 24)]
    return "\n".join(lines + [f"{k.ljust(width)}  {v}" for k, v in rows])


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.supervisor", description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=3, help="tasks per session")
    parser.add_argument("--keep", action="store_true", help="keep the temporary TILTH_HOME")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tilth-bench-"))
    try:
        result = run(args.sessions, args.tasks, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(table(result))
    return 0 if result["exit"] == 0 and result["hwm_mb"] < 100 else 1


if __name__ == "__main__":
    raise SystemExit(main())
