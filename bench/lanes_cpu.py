"""Lanes against one task at a time when the checks are CPU-bound (issue 42).

The plan: 4 independent tasks. The scripted backend's worker writes one file after `--agent` seconds
(a model's time, spent waiting, not computing), the evaluator accepts; the one `--check` burns about
1 s of CPU. tilth runs it in the foreground, sandbox off, final review on, pinned to 2 cores
(`taskset`), once with `--parallel 1` and once with `--parallel 4`, each on a fresh repository.

Wall time is the session's own, `session_started` to `session_end` (the baseline's check and the final
review included). Both modes run side by side in each of `--rounds` rounds, their order alternated (the
machine may be shared: a ratio is only fair between runs at the same load); the medians count, the
spread is shown, with where each run's time went. Targets: `--parallel 4` at most 0.8x the one-at-a-time
wall time, and the report's `Parallel:` estimate (the session's wall time against its estimated time one
task at a time) within 15 % of that measured ratio.

    python -m bench.lanes_cpu [--agent 0.5] [--cpu 1.0] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
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


def run(root: Path, lanes: int, agent: float, cpu: float, tag: str = "") -> dict:
    name = f"p{lanes}{tag}"
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
    report = (session / "report.md").read_text()
    line = next((x for x in report.splitlines() if x.startswith("Parallel:")), "")
    shown = re.search(r"\(([\d.]+)x the time", line)
    return {"name": name, "estimate": float(shown.group(1)) if shown else None, "line": line, **phases(events)}


def phases(events: list[dict]) -> dict:
    """Where a session's wall time went, from its journal: the baseline, the tasks, the final review; each
    check's wall time (one at a time: a worker's end to its checks' end; in lanes: the time each lane's
    checks held a core, and the waits for one)."""
    at = {e["type"]: seconds(e) for e in events}  # the last of each type
    first = {}
    for e in events:
        first.setdefault(e["type"], seconds(e))
    started, ended = first["session_started"], at["session_end"]
    baseline = at.get("baseline_recorded", started)
    tasks_end = at.get("parallel_summary", at.get("task_done", baseline))
    ends = [e for e in events if e["type"] == "lane_ended"]
    if ends:
        check_s = [e["data"]["checks_s"] for e in ends if "checks_s" in e["data"]]
        wait_s = [e["data"]["core_wait_s"] for e in ends if "core_wait_s" in e["data"]]
    else:
        done_at = {e["task"]: seconds(e) for e in events if e["type"] == "worker_done"}
        check_s = [seconds(e) - done_at[e["task"]] for e in events if e["type"] == "checks_run"]
        wait_s = []
    return {"wall_s": ended - started, "baseline_s": baseline - started, "tasks_s": tasks_end - baseline,
            "review_s": ended - tasks_end, "checks": sum(e["type"] == "checks_run" for e in events),
            "check_s": check_s, "core_wait_s": wait_s,
            "summary": next((e["data"] for e in events if e["type"] == "parallel_summary"), None)}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lanes_cpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", type=float, default=0.5, help="seconds each worker turn waits (a model's time)")
    parser.add_argument("--cpu", type=float, default=1.0, help="CPU seconds each check burns")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both modes, interleaved (the machine may be "
                                                               "shared: each round's ratio is of two runs side by side)")
    args = parser.parse_args()
    rows: list[tuple[dict, dict]] = []
    with tempfile.TemporaryDirectory(prefix="tilth-bench-lanes-cpu-") as tmp:
        for k in range(args.rounds):
            order = (1, 4) if k % 2 == 0 else (4, 1)  # alternated, so a drift in the machine's load evens out
            got = {lanes: run(Path(tmp), lanes, args.agent, args.cpu, f"-{k}") for lanes in order}
            rows.append((got[1], got[4]))
    print(f"lanes with CPU-bound checks: 4 independent tasks, {args.cpu:g} s of CPU per check, "
          f"{args.agent:g} s per worker turn, 2 cores; {args.rounds} rounds, both modes side by side in each")
    print(f"{'round':6} {'p1 wall':>8} {'p4 wall':>8} {'ratio':>6} {'shown':>6} {'off':>5}   "
          f"{'p1 base/tasks/review s':>24} {'p4 base/tasks/review s':>24}  {'p1 check s':>10} {'p4 check s':>10} "
          f"{'p4 core wait s':>14}")
    ratios, offs = [], []
    for k, (one, four) in enumerate(rows):
        ratio = four["wall_s"] / one["wall_s"]
        off = abs(four["estimate"] - ratio) / ratio if four["estimate"] else float("inf")
        ratios.append(ratio)
        offs.append(off)
        parts = [f"{r['baseline_s']:.1f}/{r['tasks_s']:.1f}/{r['review_s']:.1f}" for r in (one, four)]
        print(f"{k:<6} {one['wall_s']:8.2f} {four['wall_s']:8.2f} {ratio:6.2f} {four['estimate'] or 0:6.2f} {off:5.0%}   "
              f"{parts[0]:>24} {parts[1]:>24}  {statistics.mean(one['check_s']):10.2f} "
              f"{statistics.mean(four['check_s']):10.2f} {sum(four['core_wait_s']):14.2f}")
    print(f"checks run: {rows[0][0]['checks']} one at a time, {rows[0][1]['checks']} in lanes (the baseline's apart)")
    print(f"report (last round): {rows[-1][1]['line']}")
    ratio, off = statistics.median(ratios), statistics.median(offs)
    print(f"parallel / one at a time: {spread(ratios)}x (target <= {TARGET}x): {'ok' if ratio <= TARGET else 'MISSED'}")
    print(f"report's estimate off the measured ratio: {spread([o * 100 for o in offs])} % (target <= {CLOSE:.0%}): "
          f"{'ok' if off <= CLOSE else 'MISSED'}")
    return 0 if ratio <= TARGET and off <= CLOSE else 1


if __name__ == "__main__":
    raise SystemExit(main())
