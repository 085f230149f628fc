"""Parallel tasks against one after another, side by side in one run (issue 32).

The plan: 8 tasks in 4 independent chains of 2 (`A2` depends on `A1`, ...). The model is the local
Chat Completions server of `tests/fake_openai.py` answering every request 0.4 s late: each task's
worker writes one file and submits, the evaluator accepts, the self-improvement step answers NONE,
the final review accepts. tilth runs it through the real `openai` backend in the foreground, sandbox
off, once with `--parallel 1` and once with `--parallel 4`, each on a fresh copy of one repository.

Wall time is the session's own, from its `session_started` event to its `session_end` (process start
and worktree creation are the same for both and not counted). Targets: parallel at most 0.45x the
sequential wall time; both branches 8 commits, one per task, no merge commit, each dependent task
after the task it depends on.

    python -m bench.parallel [--latency 0.4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_openai import FakeOpenAI, call, delay, reply  # noqa: E402

GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
CHAINS = "ABCD"
TARGET = 0.45


def plan() -> list[dict]:
    return [{"id": f"{c}{n}", "title": f"Write file {c}{n}", "description": "Write one file.",
             "acceptance_criteria": ["the file exists"], **({"depends_on": [f"{c}1"]} if n == 2 else {})}
            for c in CHAINS for n in (1, 2)]


def model(latency: float):
    def answer(body: dict):
        messages = body.get("messages") or []
        if body.get("model") == "evaluator":
            return delay(latency, reply(tool_calls=[call("submit_verdict", verdict="accept", category="none",
                                                         concern="", evidence=[], next_step="")]))
        if not body.get("tools"):
            return delay(latency, reply("NONE"))
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        task = prompt.split("Task ", 1)[1].split(":", 1)[0]
        if not any(m.get("role") == "tool" for m in messages):
            return delay(latency, reply(tool_calls=[call("write_file", path=f"out/{task}.txt", content=f"{task}\n")]))
        return delay(latency, reply(tool_calls=[call("submit_case", summary="wrote the file",
                                                     criteria=[{"criterion": "file", "evidence": f"out/{task}.txt"}])]))
    return answer


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run([*GIT, "init", "-q", "-b", "main"], cwd=path, check=True)
    (path / "README.md").write_text("# bench\n")
    subprocess.run([*GIT, "add", "-A"], cwd=path, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "base"], cwd=path, check=True)
    return path


def seconds(event: dict) -> float:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def run(root: Path, server: FakeOpenAI, lanes: int) -> dict:
    """One foreground session of the plan at `--parallel lanes`: its wall time and what its branch holds."""
    name = f"p{lanes}"
    repo = make_repo(root / f"repo-{name}")
    prd = root / f"{name}.json"
    prd.write_bytes(orjson.dumps(plan()))
    home = root / "home"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TILTH_")},
           "TILTH_HOME": str(home), "TILTH_SANDBOX": "off", "TILTH_PREFLIGHT": "false",
           "TILTH_BASE_URL": server.base_url, "TILTH_API_KEY": "sk-bench", "TILTH_WORKER_MODEL": "worker",
           "TILTH_EVALUATOR_MODEL": "evaluator"}
    done = subprocess.run([sys.executable, "-m", "tilth", "start", "--repo", str(repo), "--prd", str(prd), "--id", name,
                           "--foreground", "--parallel", str(lanes)], env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"bench: session {name} failed: {done.stderr.strip()[-500:]}")
    events = [orjson.loads(line) for line in (home / "sessions" / name / "events.jsonl").read_bytes().splitlines()]
    started = next(seconds(e) for e in events if e["type"] == "session_started")
    ended = next(seconds(e) for e in events if e["type"] == "session_end")
    log = subprocess.run(["git", "log", "--reverse", "--format=%H %P%x1f%(trailers:key=Tilth-Task,valueonly,separator=)",
                          f"main..session/{name}"], cwd=repo, capture_output=True, text=True, check=True).stdout
    rows = [line.split("\x1f") for line in log.splitlines() if line.strip()]
    order = [task.strip() for _, task in rows]
    merges = sum(len(parents.split()) > 2 for parents, _ in rows)
    ordered = all(order.index(f"{c}1") < order.index(f"{c}2") for c in CHAINS if f"{c}2" in order)
    summary = next((e["data"] for e in reversed(events) if e["type"] == "parallel_summary"), None)
    return {"wall_s": ended - started, "commits": len(order), "tasks": len(set(order)), "merges": merges,
            "ordered": ordered, "summary": summary}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.parallel", description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.4, help="seconds each model request takes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tilth-bench-parallel-") as tmp, FakeOpenAI() as server:
        server.set_handler(model(args.latency))
        sequential = run(Path(tmp), server, 1)
        parallel = run(Path(tmp), server, 4)
    ratio = parallel["wall_s"] / sequential["wall_s"]
    print(f"parallel tasks: 8 tasks in 4 chains of 2, {args.latency:g} s per model request")
    print(f"{'':14} {'wall s':>7} {'commits':>8} {'merges':>7} {'in order':>9}")
    for label, row in (("--parallel 1", sequential), ("--parallel 4", parallel)):
        print(f"{label:14} {row['wall_s']:7.2f} {row['commits']:8d} {row['merges']:7d} {str(row['ordered']):>9}")
    if parallel["summary"]:
        s = parallel["summary"]
        print(f"--parallel 4 lanes: wall {s['wall_s']:.2f} s against {s['task_s']:.2f} s of task time "
              f"({s['task_s'] / max(s['wall_s'], 1e-9):.1f}x), {s['conflicts']} conflicts, {s['redos']} redos")
    ok = ratio <= TARGET and all(r["commits"] == r["tasks"] == 8 and r["merges"] == 0 and r["ordered"]
                                 for r in (sequential, parallel))
    print(f"parallel / sequential: {ratio:.2f}x (target <= {TARGET}x): {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
