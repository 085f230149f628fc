"""Benchmark: does the worker's prompt stay bounded however long a session runs?

Runs a 200-task scripted session (reviewer rejections, notes and learnings along the way, so
the journal, the verdicts and the knowledge base all grow) and reports the worker prompt size
at tasks 1, 50, 100 and 200. Target: at most 1.3x from task 1 to task 200, with nothing
silently dropped: every truncated channel shows its marker and the summary keeps learnings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pygit2

from tilth.store.prompts import prompt_of

TASKS = 200
SAMPLES = (1, 50, 100, 200)
TARGET = 1.3
CONVENTIONS = "\n".join(
    ["# AGENTS.md", "", "## Project", "An inventory service: REST API over a SQL store, with a CLI.", "",
     "## Language and tooling", "- Python 3.11, FastAPI, SQLAlchemy 2, pytest; run `make check` before finishing.", "",
     "## Layout", "- app/api: routes; app/db: models and migrations; app/cli: the command line; tests/ mirrors app/.", "",
     "## Style"] + [f"- Rule {i}: keep functions under 40 lines, type public functions, no bare excepts." for i in range(1, 25)]
)


def make_repo(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "AGENTS.md").write_text(CONVENTIONS + "\n")
    repo = pygit2.init_repository(str(path), initial_head="main")
    repo.index.add_all()
    repo.index.write()
    sig = pygit2.Signature("bench", "bench@localhost")
    repo.create_commit("HEAD", sig, sig, "initial\n", repo.index.write_tree(), [])


def plan_and_scenario() -> tuple[list[dict], dict]:
    plan, tasks = [], {}
    for i in range(1, TASKS + 1):
        tid = f"T-{i:03d}"
        plan.append({"id": tid, "title": f"Add inventory endpoint number {i} with validation",
                     "description": f"Add endpoint {i} to app/api, validate its input, and cover it with tests. " * 3,
                     "acceptance_criteria": [f"GET /items/{i} returns 200", "invalid input returns 422",
                                             "tests cover both paths"]})
        accept = {"write": {f"app/api/endpoint_{i}.py": f"# endpoint {i}\n"}}
        if i % 5 == 0:
            accept["learnings"] = [f"Endpoint modules need registering in app/api/__init__.py (seen in {tid})",
                                   "Run make check before finishing"]
        if i % 25 == 0:
            accept["notes"] = {f"area-{i}": f"Endpoints near {i} share validators in app/api/validate.py"}
        steps = [accept]
        if i % 7 == 0:
            steps.insert(0, {"write": {f"app/api/endpoint_{i}.py": "# draft\n"},
                             "verdict": {"verdict": "reject", "category": "weak_test",
                                         "concern": f"Endpoint {i} has no test for invalid input",
                                         "next_step": "Add a 422 test"}})
        tasks[tid] = steps
    return plan, {"tasks": tasks}


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="tilth-bench-prompt-"))
    try:
        make_repo(work / "repo")
        plan, scenario = plan_and_scenario()
        (work / "prd.json").write_text(json.dumps(plan))
        (work / "scenario.json").write_text(json.dumps(scenario))
        env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
        env["TILTH_HOME"] = str(work / "home")
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "tilth", "start", "--repo", str(work / "repo"),
                                 "--prd", str(work / "prd.json"), "--id", "bench", "--backend", "scripted",
                                 "--scenario", str(work / "scenario.json"), "--foreground"],
                                env=env, capture_output=True, text=True)
        elapsed = time.monotonic() - started
        if result.returncode != 0:
            print(result.stdout[-2000:], result.stderr[-2000:])
            return 1
        return report(work / "home" / "sessions" / "bench", elapsed)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(session: Path, elapsed: float) -> int:
    first_prompt: dict[str, str] = {}
    channels: dict[str, dict[str, dict]] = {}
    for line in (session / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        data = event["data"]
        if event["type"] == "memory_load" and data["role"] == "worker" and event["task"] not in first_prompt:
            channels.setdefault(event["task"], {})[data["channel"]] = data
        if event["type"] == "prompt_assembled" and data["role"] == "worker":
            first_prompt.setdefault(event["task"], prompt_of(data, session) or "")
    ids = [f"T-{n:03d}" for n in SAMPLES]
    base = len(first_prompt[ids[0]])
    print(f"Worker prompt size over a {TASKS}-task scripted session ({elapsed:.0f}s)\n")
    print(f"{'task':>6} {'prompt chars':>13} {'x task 1':>9} {'journal':>8} {'notes':>6}  truncated channels")
    problems = []
    for n, tid in zip(SAMPLES, ids):
        prompt, loaded = first_prompt[tid], channels[tid]
        cut = [name for name, d in loaded.items() if d["truncated"]]
        for name in cut:
            if f"[... {name} truncated" not in prompt:
                problems.append(f"{tid}: channel {name} was cut without its marker")
        print(f"{n:>6} {len(prompt):>13} {len(prompt) / base:>9.2f} {loaded['journal']['chars']:>8} "
              f"{loaded['notes']['chars']:>6}  {', '.join(cut) or '-'}")
    ratio = len(first_prompt[ids[-1]]) / base
    summary = (session / "progress-summary.md").read_text()
    kept = summary.split("## Key learnings")[1].split("\n## ")[0].count("\n- ")
    if kept == 0:
        problems.append("the progress summary lost its key learnings")
    print(f"\nratio task {SAMPLES[-1]} / task 1: {ratio:.2f} (target <= {TARGET}); "
          f"key learnings kept in the summary: {kept}")
    for problem in problems:
        print("PROBLEM:", problem)
    return 0 if ratio <= TARGET and not problems else 1


if __name__ == "__main__":
    raise SystemExit(main())
