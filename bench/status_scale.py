"""`tilth status` and `tilth logs -n` at scale: one session with a 1,000,000-event journal over
1,000 tasks, plus 100 small sessions. Targets: `tilth status <id>` (and `--json`) under 200 ms
and 100 MB, `tilth status` over the 101 sessions under 300 ms, `tilth logs <id> -n 50` under
200 ms. Each is a fresh process (wall time, median of the runs; peak RSS of the slowest).

The big session is a real scripted one whose journal is then extended with synthetic events
shaped like a real run's (context channels, prompts, model calls with usage, tool calls,
checks, verdicts, commits), and whose summary.json is then built as the runner would have
left it. The small ones are copies of a real session.

    python -m bench.status_scale [--events 1000000] [--tasks 1000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson

from bench.supervisor import make_repo
from tilth.store.rollup import rebuild, save_rollup

TARGETS = {"status <id>": (0.200, 100), "status <id> --json": (0.200, 100), "status (101 sessions)": (0.300, None),
           "logs <id> -n 50": (0.200, None)}
SMALL = 100
PYDANTIC_FLOOR = "from pydantic import BaseModel\nclass A(BaseModel):\n    x: int\nA(x=1)"
"""What any command that reads a pydantic-modelled file pays before reading anything."""


def wall(argv: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


def run(env: dict[str, str], *args: str) -> tuple[float, int | None]:
    """Wall seconds and peak RSS (MB, through /usr/bin/time when there is one) of one
    `python -m tilth ...`. (The rusage of a child forked from this big process would count
    this process's pages.)"""
    timer = ["/usr/bin/time", "-f", "%M"] if os.access("/usr/bin/time", os.X_OK) else []
    began = time.perf_counter()
    done = subprocess.run([*timer, sys.executable, "-m", "tilth", *args], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"tilth {' '.join(args)} failed: {done.stderr}")
    return seconds, int(done.stderr.split()[-1]) // 1024 if timer else None


def real_session(root: Path, env: dict[str, str], session_id: str) -> Path:
    repo = make_repo(root / "repo")
    plan = [{"id": f"T-{n:04d}", "title": f"Task {n}", "description": "d", "acceptance_criteria": ["done"]}
            for n in range(1, 3)]
    (root / "prd.json").write_bytes(orjson.dumps(plan))
    scenario = {"tasks": {t["id"]: [{"write": {f"{t['id']}.txt": "x\n"}}] for t in plan}}
    (root / "scenario.json").write_bytes(orjson.dumps(scenario))
    subprocess.run([sys.executable, "-m", "tilth", "start", "--repo", str(repo), "--prd", str(root / "prd.json"),
                    "--id", session_id, "--backend", "scripted", "--scenario", str(root / "scenario.json"),
                    "--foreground"], env=env, check=True, capture_output=True)
    return Path(env["TILTH_HOME"]) / "sessions" / session_id


def task_events(task_id: str, at: datetime, per_task: int) -> list[dict]:
    """About `per_task` events of one task: two attempts, the first rejected."""
    def ev(type: str, iteration: int | None, **data) -> dict:
        nonlocal at
        at += timedelta(milliseconds=37)
        return {"ts": at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z", "type": type,
                "task": task_id, "iter": iteration, "data": data}

    out = [ev("task_started", None)]
    steps = max(1, (per_task - 27) // 8)  # 3 + 2 * (12 + 4 * steps) events in all
    for iteration in (1, 2):
        for channel in ("task", "conventions", "plan", "journal", "verdicts", "notes", "retry"):
            out.append(ev("memory_load", iteration, role="worker", channel=channel, present=True, chars=900,
                          truncated=False))
        out.append(ev("prompt_assembled", iteration, role="worker", prompt_offset=123456, prompt_chars=6300))
        for step in range(steps):
            out.append(ev("model_attempt", iteration, role="worker", model="worker", attempt=1, outcome="ok",
                          wait_s=0))
            out.append(ev("model_call", iteration, role="worker", model="worker", prompt_tokens=4000 + step,
                          completion_tokens=120, total_tokens=4120 + step, usage_known=True, usage_problem=None,
                          latency_ms=900, cost_usd=0.0021, cost_source="price_table", finish_reason="tool_calls"))
            out.append(ev("hook_run", iteration, point="pre_tool", hook="builtin/pre_tool", exit_code=0,
                          outcome="ok", output="", duration_ms=0))
            out.append(ev("tool_call", iteration, role="worker", name="bash", ok=True,
                          args='{"command": "pytest -q tests/test_app.py"}', output_chars=812, duration_ms=640))
        out.append(ev("worker_done", iteration, made_case=True))
        out.append(ev("checks_run", iteration, results=[{"command": "pytest -q", "exit_code": 0}]))
        out.append(ev("model_call", iteration, role="evaluator", model="evaluator", prompt_tokens=9000,
                      completion_tokens=300, total_tokens=9300, usage_known=True, usage_problem=None, latency_ms=2100,
                      cost_usd=0.0051, cost_source="price_table", finish_reason="tool_calls"))
        accepted = iteration == 2
        out.append(ev("verdict", iteration, verdict="accept" if accepted else "reject",
                      category="none" if accepted else "weak_test",
                      concern="" if accepted else "the new branch of parse() has no test"))
    sha = f"{abs(hash(task_id)):040x}"[:40]
    out += [ev("commit", 2, sha=sha, iterations=2), ev("task_done", 2, sha=sha)]
    return out


def grow(session: Path, events: int, tasks: int) -> None:
    """Extend the journal to `events` events over `tasks` tasks, and the plan to those tasks."""
    log = session / "events.jsonl"
    have = sum(1 for _ in open(log, "rb"))
    per_task, extra = divmod(events - have - 2, tasks)
    at = datetime.now(timezone.utc) - timedelta(days=3)
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    written = have
    with open(log, "ab") as f:
        f.write(orjson.dumps({"ts": stamp, "type": "session_started", "task": None, "iter": None,
                              "data": {"backend": "scripted", "pid": 1, "resume": True}}) + b"\n")
        written += 1
        for n in range(tasks):
            batch = task_events(f"T-{n + 3:04d}", at, per_task)
            call = next(e for e in batch if e["type"] == "model_call")  # the count made exact with more calls
            batch[10:10] = [call] * (per_task + (n < extra) - len(batch))
            at = datetime.fromisoformat(batch[-1]["ts"].replace("Z", "+00:00"))
            f.write(b"\n".join(orjson.dumps(e) for e in batch) + b"\n")
            written += len(batch)
        f.write(orjson.dumps({"ts": batch[-1]["ts"], "type": "session_end", "task": None, "iter": None,
                              "data": {"state": "done", "exit_code": 0, "reason": ""}}) + b"\n")
    plan = orjson.loads((session / "prd.json").read_bytes())
    plan += [{"id": f"T-{n + 3:04d}", "title": f"Task {n + 3}", "description": "d", "acceptance_criteria": ["done"],
              "status": "done"} for n in range(tasks)]
    (session / "prd.json").write_bytes(orjson.dumps(plan, option=orjson.OPT_INDENT_2))


def copies(session: Path, count: int) -> None:
    for n in range(count):
        target = session.parent / f"small-{n:03d}"
        shutil.copytree(session, target, ignore=shutil.ignore_patterns("session.lock"))
        record = orjson.loads((target / "session.json").read_bytes())
        record["id"] = target.name
        (target / "session.json").write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.status_scale")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("TILTH_")},
               "TILTH_HOME": str(root / "home"), "TILTH_SANDBOX": "off"}
        small = real_session(root, env, "big")
        copies(small, SMALL)
        began = time.perf_counter()
        grow(small, args.events, args.tasks)
        made = time.perf_counter() - began
        log = small / "events.jsonl"
        began = time.perf_counter()
        rollup = rebuild(log)
        rebuilt = time.perf_counter() - began
        save_rollup(log.with_name("summary.json"), rollup)
        journal_mb = log.stat().st_size / 1e6
        cases = {"status <id>": ["status", "big"], "status <id> --json": ["status", "big", "--json"],
                 "status (101 sessions)": ["status"], "logs <id> -n 50": ["logs", "big", "-n", "50"]}
        results = {}
        for name, argv in cases.items():
            runs = [run(env, *argv) for _ in range(args.runs)]
            peaks = [rss for _, rss in runs if rss is not None]
            results[name] = (statistics.median(w for w, _ in runs), max(peaks) if peaks else None)
        floors = {"python -c pass": [sys.executable, "-c", "pass"],
                  "python + one pydantic model": [sys.executable, "-c", PYDANTIC_FLOOR],
                  "tilth --version": [sys.executable, "-m", "tilth", "--version"]}
        floor = {name: statistics.median(wall(argv) for _ in range(args.runs)) for name, argv in floors.items()}
    print(f"tilth status / logs -n at scale: {rollup.events:,} events ({journal_mb:.0f} MB "
          f"journal), {len(rollup.tasks):,} tasks, {SMALL} more sessions (made in {made:.1f}s; a full "
          f"rebuild of summary.json takes {rebuilt:.1f}s)\n")
    print(f"{'command':<40} {'median s':>9} {'target':>7} {'peak MB':>8} {'target':>7}")
    for name, seconds in floor.items():
        print(f"{name + ' (floor)':<40} {seconds:>9.3f}")
    over = False
    for name, (seconds, rss) in results.items():
        target_s, target_mb = TARGETS[name]
        flags = ("  OVER (time)" if seconds >= target_s else "") + \
            ("  OVER (memory)" if target_mb and rss is not None and rss >= target_mb else "")
        over |= bool(flags)
        print(f"{'tilth ' + name:<40} {seconds:>9.3f} {target_s:>7.3f} {rss if rss is not None else '?':>8} {target_mb or '-':>7}{flags}")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
