"""Lanes against one task at a time when the checks are CPU-bound (issue 42).

The plan: 4 independent tasks. The scripted backend's worker writes one file after `--agent` seconds
(a model's time, spent waiting, not computing), the evaluator accepts; the one `--check` burns about
1 s of CPU. tilth runs it in the foreground, sandbox off, final review on, pinned to 2 cores
(`taskset`), once with `--parallel 1` and once with `--parallel 4`, each on a fresh repository.

Wall time is the session's own, `session_started` to `session_end` (the baseline's check and the final
review included). Targets: `--parallel 4` at most 0.8x the one-at-a-time wall time, and the report's
`Parallel:` estimate (the session's wall time against its estimated time one task at a time) within
15 % of that measured ratio.

    python -m bench.lanes_cpu [--agent 0.5] [--cpu 1.0]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import orjson

GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
TASKS = ("T1", "T2", "T3", "T4")
TARGET, CLOSE = 0.8, 0.15
BURN = "import time\nend = time.process_time() + {cpu}\nwhile time.process_time() < end:\n    pass\n"


def plan() -> list[dict]:
    return [{"id": t, "title": f"Write {t}", "description": "Write one file.", "acceptance_criteria": ["it exists"]}
            for t in TASKS]


def make_repo(path: Path, cpu: float) -> Path:
    path.mkdir(parents=True)
    subprocess.run([*GIT, "init", "-q", "-b", "main"], cwd=path, check=True)
    (path / "burn.py").write_text(BURN.format(cpu=cpu))
    subprocess.run([*GIT, "add", "-A"], cwd=path, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "base"], cwd=path, check=True)
    return path


def seconds(event: dict) -> float:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def run(root: Path, lanes: int, agent: float, cpu: float) -> dict:
    name = f"p{lanes}"
    repo = make_repo(root / f"repo-{name}", cpu)
    prd, scenario = root / f"{name}.json", root / f"{name}-scenario.json"
    prd.write_bytes(orjson.dumps(plan()))
    scenario.write_bytes(orjson.dumps({"default": [{"write": {"{task}.txt": "{task}\n"}, "run": [f"sleep {agent}"]}]}))
    home = root / "home"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TILTH_")},
           "TILTH_HOME": str(home), "TILTH_SANDBOX": "off", "TILTH_SELF_IMPROVEMENT": "false"}
    pin = ["taskset", "-c", "0,1"] if shutil.which("taskset") and len(os.sched_getaffinity(0)) >= 2 else []
    done = subprocess.run([*pin, sys.executable, "-m", "tilth", "start", "--repo", str(repo), "--prd", str(prd),
                           "--id", name, "--backend", "scripted", "--scenario", str(scenario), "--foreground",
                           "--parallel", str(lanes), "--check", f"{sys.executable} burn.py"],
                          env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"bench: session {name} failed: {(done.stdout + done.stderr).strip()[-800:]}")
    session = home / "sessions" / name
    events = [orjson.loads(line) for line in (session / "events.jsonl").read_bytes().splitlines()]
    started = next(seconds(e) for e in events if e["type"] == "session_started")
    ended = next(seconds(e) for e in events if e["type"] == "session_end")
    report = (session / "report.md").read_text()
    line = next((x for x in report.splitlines() if x.startswith("Parallel:")), "")
    shown = re.search(r"\(([\d.]+)x the time", line)
    checks = sum(e["type"] == "checks_run" for e in events)
    return {"wall_s": ended - started, "estimate": float(shown.group(1)) if shown else None, "line": line,
            "checks": checks, "commits": sum(e["type"] == "merge_landed" for e in events) if lanes > 1 else None}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lanes_cpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", type=float, default=0.5, help="seconds each worker turn waits (a model's time)")
    parser.add_argument("--cpu", type=float, default=1.0, help="CPU seconds each check burns")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tilth-bench-lanes-cpu-") as tmp:
        one = run(Path(tmp), 1, args.agent, args.cpu)
        four = run(Path(tmp), 4, args.agent, args.cpu)
    ratio = four["wall_s"] / one["wall_s"]
    estimate = four["estimate"]
    off = abs(estimate - ratio) / ratio if estimate else float("inf")
    print(f"lanes with CPU-bound checks: 4 independent tasks, {args.cpu:g} s of CPU per check, "
          f"{args.agent:g} s per worker turn, 2 cores")
    print(f"{'':14} {'wall s':>7} {'checks run':>11}")
    for label, row in (("--parallel 1", one), ("--parallel 4", four)):
        print(f"{label:14} {row['wall_s']:7.2f} {row['checks']:11d}")
    print(f"report: {four['line']}")
    print(f"parallel / one at a time: {ratio:.2f}x (target <= {TARGET}x): {'ok' if ratio <= TARGET else 'MISSED'}")
    print(f"report's estimate: {estimate}x, {off:.0%} off the measured ratio (target <= {CLOSE:.0%}): "
          f"{'ok' if off <= CLOSE else 'MISSED'}")
    return 0 if ratio <= TARGET and off <= CLOSE else 1


if __name__ == "__main__":
    raise SystemExit(main())
