"""From a CI failure to its fix on the pull request: the real `gh` against tests/fake_github.py.

A session's PR is opened with CI red until `fix.txt` is pushed; `tilth follow --poll P` then re-runs the
failed job once (first poll), sees it fail again, adds the follow-up task, runs it through the scripted worker
and evaluator and pushes its commit (second poll). Reported: the seconds from the failure appearing (the PR
opened with its CI red) to the fix pushed, that time in poll intervals, and how much of it the follow-up
task's own run took. Read from `tilth follow`'s lines as they come, no polling of our own.

    python -m bench.ci_fix [--poll 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_github import FakeGitHub, Job  # noqa: E402

PLAN = [{"id": "T-1", "title": "Add greeting", "description": "Do T-1.", "acceptance_criteria": ["T-1 is done"],
         "status": "pending"}]
SCENARIO = {"tasks": {"CI-1": [{"write": {"fix.txt": "hello\n"}}]}}
TIMEOUT_S = 300.0


def tilth(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "tilth", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise SystemExit(f"tilth {args[0]} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done


def one_round(root: Path, poll_s: float) -> tuple[float, float]:
    """(failure to fix pushed, the follow-up task's run), in seconds."""
    repo, home = root / "repo", root / "home"
    repo.mkdir(parents=True)
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "initial"]):
        subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args], cwd=repo,
                       check=True)
    with FakeGitHub(root) as github:
        def ci(sha: str, _attempt: int) -> list[Job]:
            fixed = github.file_at(sha, "fix.txt") is not None
            return [Job("tests", "success" if fixed else "failure", "Run pytest", "FAILED tests/test_a.py::test_a\n")]

        github.ci = ci
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}, **github.env(root),
               "TILTH_HOME": str(home), "TILTH_FINAL_REVIEW": "0"}
        subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", github.clone_url], check=True)
        subprocess.run(["git", "-C", str(repo), "push", "-q", "origin", "main"], env=env, check=True)
        (root / "prd.json").write_text(json.dumps(PLAN))
        (root / "scenario.json").write_text(json.dumps(SCENARIO))
        tilth(env, root, "start", "--repo", str(repo), "--prd", str(root / "prd.json"), "--id", "s1", "--backend",
              "scripted", "--scenario", str(root / "scenario.json"), "--foreground")
        tilth(env, root, "pr", "s1", "--base", "main")
        failed_at = time.monotonic()  # the fake's CI ran on the push: the PR is red from here
        follow = subprocess.Popen([sys.executable, "-m", "tilth", "follow", "s1", "--poll", str(poll_s)], env=env,
                                  cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert follow.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(follow.stdout, selectors.EVENT_READ)
        pushed_at = None
        try:
            while pushed_at is None:
                if not selector.select(timeout=TIMEOUT_S):
                    raise SystemExit("tilth follow said nothing for too long")
                line = follow.stdout.readline()
                if not line:
                    raise SystemExit("tilth follow ended before the fix was pushed")
                if "(follow-up CI-1)" in line:
                    pushed_at = time.monotonic()
        finally:
            follow.terminate()
            follow.wait()
        return pushed_at - failed_at, task_run_s(home / "sessions" / "s1" / "events.jsonl")


def task_run_s(events: Path) -> float:
    """From the follow-up task made (`pr_followup`) to its commit pushed (`pr_pushed`), by their events."""
    stamps = {}
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event["type"] in ("pr_followup", "pr_pushed"):
            stamps[event["type"]] = datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()
    return stamps["pr_pushed"] - stamps["pr_followup"]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ci_fix", description=__doc__.split("\n\n")[0])
    parser.add_argument("--poll", type=float, default=2.0, help="tilth follow's poll interval, s")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("ci_fix: a CI failure on the PR to its fix pushed (real gh, fake GitHub, scripted agents)")
    if shutil.which("gh") is None:
        print("  skipped: gh is not installed (`make gh`)")
        return 0
    totals, tasks = [], []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="tilth-bench-ci-") as tmp:
            total, task = one_round(Path(tmp), args.poll)
        totals.append(total)
        tasks.append(task)
    median, task = statistics.median(totals), statistics.median(tasks)
    print(f"  poll interval          {args.poll:g} s (with jitter of 10%)")
    print(f"  failure -> fix pushed  {median:.2f} s median of {args.rounds} = {median / args.poll:.2f} poll intervals"
          f" (min {min(totals):.2f} s, max {max(totals):.2f} s)")
    print(f"  of which the follow-up {task:.2f} s: the task's worker, evaluator, checks and the push")
    print("  expected: one interval (the re-run, then the next poll) plus the follow-up task's run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
