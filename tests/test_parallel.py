"""Parallel tasks (`--parallel N`, run/lanes.py, run/merge_queue.py): lanes in worktrees of their
own, one commit per task landed by cherry-pick onto the session head (never a merge commit), each
dependent after what it depends on, conflicts and merge-broken checks sent back to run again,
overlapping `files` never together, caps shared, no lane left behind."""

from __future__ import annotations

import json
from datetime import datetime

import pytest



from conftest import git, task
from fake_openai import ACCEPT, call, delay, reply

ENV = {"TILTH_SANDBOX": "off", "TILTH_FINAL_REVIEW": "false"}


def spans(events: list[dict]) -> dict[str, tuple[float, float]]:
    """Each task's lane time: its `lane_started` to its `lane_ended` (the last of each)."""
    def ts(event: dict) -> float:
        return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()

    began = {e["task"]: ts(e) for e in events if e["type"] == "lane_started"}
    ended = {e["task"]: ts(e) for e in events if e["type"] == "lane_ended"}
    return {t: (began[t], ended[t]) for t in began}


def overlapped(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def lanes_left(sandbox) -> list[str]:
    listed = git(sandbox.repo, "worktree", "list", "--porcelain")
    branches = git(sandbox.repo, "branch", "--list", "tilth-lane/*")
    return [line for line in listed.splitlines() if line.startswith("worktree ") and "+" in line] + \
        branches.split()


@pytest.mark.slow
def test_parallel_chains_land_one_commit_each_in_dependency_order(sandbox):
    sandbox.env.update(ENV)
    plan = [task("A1"), task("A2", depends_on=["A1"]), task("B1"), task("B2", depends_on=["B1"])]
    done = sandbox.start("p1", plan, {"default": [{"write": {"{task}.txt": "{task}\n"}}]}, "--parallel", "2")
    assert done.returncode == 0, done.stderr
    commits = sandbox.commits("p1")
    order = [c["task"] for c in commits]
    assert sorted(order) == ["A1", "A2", "B1", "B2"]
    assert order.index("A1") < order.index("A2") and order.index("B1") < order.index("B2")
    assert git(sandbox.repo, "rev-list", "--merges", "main..session/p1") == ""
    assert sandbox.statuses("p1") == {t: "done" for t in ("A1", "A2", "B1", "B2")}
    events = sandbox.events("p1")
    started = {e["task"]: e["data"]["start"] for e in events if e["type"] == "lane_started"}
    by_task = {c["task"]: c["sha"] for c in commits}
    for dependent, dependency in (("A2", "A1"), ("B2", "B1")):  # its start holds what it depends on
        assert git(sandbox.repo, "merge-base", "--is-ancestor", by_task[dependency], started[dependent]) == ""
    timed = spans(events)
    assert overlapped(timed["A1"], timed["B1"]), "independent tasks ran at once"
    assert all("lane" in e["data"] for e in events if e["type"] in ("task_started", "task_done", "commit"))
    assert lanes_left(sandbox) == []
    assert not (sandbox.home / "lanes" / "p1").exists()
    summary = [e for e in events if e["type"] == "parallel_summary"][-1]["data"]
    assert summary["lanes"] == 2 and summary["conflicts"] == 0 and summary["task_s"] > 0 and summary["wall_s"] > 0
    shown = json.loads(sandbox.tilth("status", "p1", "--json").stdout)
    assert shown["parallel"]["lanes"] == 2 and shown["parallel"]["conflicts"] == 0 and shown["lanes"] == []
    assert "parallel up to 2 lanes;" in sandbox.tilth("status", "p1").stdout
    report = (sandbox.session_dir("p1") / "report.md").read_text()
    assert "Parallel:   up to 2 lanes;" in report and "0 conflicts, 0 redos" in report, report
    assert git(sandbox.worktree("p1"), "status", "--porcelain") == ""


@pytest.mark.slow
def test_a_real_conflict_is_resolved_by_running_one_task_again_on_the_new_head(sandbox):
    sandbox.env.update(ENV)
    plan = [task("C1"), task("C2")]  # both add shared.txt, each with its own line: an add/add conflict
    scenario = {"default": [{"write": {"shared.txt": "from {task}\n"}}]}
    done = sandbox.start("c1", plan, scenario, "--parallel", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    events = sandbox.events("c1")
    conflicts = [e for e in events if e["type"] == "merge_conflict"]
    assert len(conflicts) == 1 and conflicts[0]["data"]["paths"] == ["shared.txt"]
    loser = conflicts[0]["task"]
    winner = ({"C1", "C2"} - {loser}).pop()
    assert [c["task"] for c in sandbox.commits("c1")] == [winner, loser]
    assert git(sandbox.repo, "rev-list", "--merges", "main..session/c1") == ""
    ledger = sandbox.ledger("c1", loser)
    refused = [e for e in ledger if e["verdict"]["category"] == "merge_conflict"]
    assert len(refused) == 1 and "shared.txt" in refused[0]["verdict"]["concern"]
    redo = [e for e in events if e["type"] == "lane_started" and e["task"] == loser][-1]["data"]
    winner_sha = sandbox.commits("c1")[0]["sha"]
    assert redo["redo"] == 1 and redo["start"] == winner_sha, "the redo started from the new head"
    prompts = (sandbox.session_dir("c1") / "prompts.jsonl").read_text()
    assert "conflicts with it in shared.txt" in prompts, "the redo's context says what conflicted"
    assert git(sandbox.repo, "show", "session/c1:shared.txt") == f"from {loser}\n"
    summary = [e for e in events if e["type"] == "parallel_summary"][-1]["data"]
    assert summary["conflicts"] == 1 and summary["redos"] == 1 and summary["redo_s"] > 0
    report = (sandbox.session_dir("c1") / "report.md").read_text()
    assert "1 conflicts, 1 redos (" in report and "$0.0000 not landed)" in report, report
    assert sandbox.statuses("c1") == {"C1": "done", "C2": "done"}
    assert lanes_left(sandbox) == []


CHECK = "python3 -c \"import glob, sys; sys.exit(len(glob.glob('x-*.txt')) > 1)\""


@pytest.mark.slow
def test_a_clean_merge_that_breaks_a_check_is_caught_before_the_branch_moves(sandbox):
    sandbox.env.update(ENV)
    plan = [task("X1"), task("X2")]  # each alone passes the check; both together fail it
    alone = {t: {"write": {f"x-{t}.txt": "x\n"}} for t in ("X1", "X2")}
    other = {"X1": "X2", "X2": "X1"}
    scenario = {"tasks": {t: [alone[t], alone[t], {"write": {f"x-{t}.txt": "x\n"}, "delete": [f"x-{other[t]}.txt"]}]
                          for t in ("X1", "X2")}}
    done = sandbox.start("x1", plan, scenario, "--parallel", "2", "--check", CHECK)
    assert done.returncode == 0, done.stdout + done.stderr
    events = sandbox.events("x1")
    broken = [e for e in events if e["type"] == "merge_checks_failed"]
    assert len(broken) == 1, [e["type"] for e in events]
    assert broken[0]["data"]["checks"][0].startswith("python3")
    for commit in sandbox.commits("x1"):  # never on the branch, not for one commit
        files = git(sandbox.repo, "ls-tree", "--name-only", commit["sha"]).split()
        assert not {"x-X1.txt", "x-X2.txt"} <= set(files), commit
    assert sandbox.statuses("x1") == {"X1": "done", "X2": "done"}
    assert git(sandbox.worktree("x1"), "status", "--porcelain") == ""
    assert lanes_left(sandbox) == []


@pytest.mark.slow
def test_tasks_whose_files_overlap_never_run_at_the_same_time(sandbox):
    sandbox.env.update(ENV)
    plan = [task("F1", files=["src/*.py"]), task("F2", files=["src/app.py"]), task("F3", files=["docs/*.md"]),
            task("F4", files=["src/lib/**"])]
    scenario = {"default": [{"write": {"{task}.txt": "x\n"}, "run": ["sleep 0.4"]}]}
    done = sandbox.start("f1", plan, scenario, "--parallel", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    timed = spans(sandbox.events("f1"))
    assert not overlapped(timed["F1"], timed["F2"]), "src/*.py and src/app.py overlap"
    assert not overlapped(timed["F1"], timed["F4"]), "src/*.py and src/lib/** may overlap"
    assert overlapped(timed["F1"], timed["F3"]), "disjoint globs still run at once"
    assert sandbox.statuses("f1") == {t: "done" for t in ("F1", "F2", "F3", "F4")}


@pytest.mark.slow
def test_a_spend_cap_stops_every_lane_within_one_call_each(sandbox, fake, model_env):
    # $0.10 a worker call, a worker that never submits, four lanes, a $1.00 cap
    sandbox.home.mkdir(parents=True, exist_ok=True)
    (sandbox.home / "config.toml").write_text("[prices.worker]\nprompt = 10000\ncompletion = 0\n"
                                              "[prices.evaluator]\nprompt = 0\ncompletion = 0\n")
    written = iter(range(10_000))

    def model(body: dict):
        if body.get("model") == "evaluator":
            return reply(tool_calls=[ACCEPT])
        return delay(0.05, reply(tool_calls=[call("write_file", path=f"f{next(written)}.txt", content="x\n")]))

    fake.set_handler(model)
    plan = sandbox.write_json("cap.json", [task(f"T-{i}") for i in range(1, 5)])
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--foreground",
                           "--parallel", "4", env={**ENV, **model_env, "TILTH_MAX_SPEND_USD": "1.00",
                                                   "TILTH_SELF_IMPROVEMENT": "false"}, timeout=120)
    assert result.returncode == 3 and "max_spend_usd" in result.stdout, result.stdout + result.stderr
    events = sandbox.events("s1")
    costs = [e["data"]["cost_usd"] for e in events if e["type"] == "model_call"]
    crossed = next(i for i in range(len(costs)) if sum(costs[: i + 1]) >= 1.00 - 1e-9)
    assert len({e["data"]["lane"] for e in events if e["type"] == "model_call"}) == 4, "four lanes spent"
    assert len(costs) - (crossed + 1) <= 3, f"at most one call more in each other lane: {len(costs)} calls"
    assert sandbox.statuses("s1") == {f"T-{i}": "pending" for i in range(1, 5)}
    assert lanes_left(sandbox) == []


@pytest.mark.slow
def test_a_failed_task_lands_its_placeholder_and_resume_retries_it(sandbox):
    sandbox.env.update({**ENV, "TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    reject = {"verdict": "reject", "category": "half_finished", "concern": "not finished", "next_step": "finish"}
    scenario = {"tasks": {"A": [{"write": {"a.txt": "half\n"}, "verdict": reject}, {"write": {"a2.txt": "rest\n"}}]},
                "default": [{"write": {"{task}.txt": "x\n"}, "run": ["sleep 0.3"]}]}
    first = sandbox.start("r1", [task("A"), task("B"), task("C", depends_on=["A"])], scenario, "--parallel", "2")
    assert first.returncode == 1, first.stdout + first.stderr
    assert sandbox.statuses("r1") == {"A": "failed", "B": "done", "C": "pending"}
    assert [(c["task"], c["outcome"]) for c in sandbox.commits("r1")] == [("B", ""), ("A", "failed")], \
        "the placeholder is above the task commits"
    b_sha, placeholder = sandbox.commits("r1")[0]["sha"], sandbox.commits("r1")[1]["sha"]
    assert "a.txt" not in git(sandbox.repo, "ls-tree", "-r", "--name-only", b_sha).split(), \
        "the independent task's commit is free of the failed task's edits"
    assert git(sandbox.repo, "show", f"{placeholder}:a.txt") == "half\n", "the partial work is kept"
    assert lanes_left(sandbox) == []
    resumed = sandbox.tilth("resume", "r1", "--foreground", "--parallel", "3")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    recorded = json.loads((sandbox.session_dir("r1") / "session.json").read_text())["settings"]
    assert recorded["parallel_tasks"] == 3, "resume --parallel N is recorded with the session"
    assert sandbox.statuses("r1") == {"A": "done", "B": "done", "C": "done"}
    commits = sandbox.commits("r1")
    assert [(c["task"], c["outcome"]) for c in commits] == [("B", ""), ("A", ""), ("C", "")], \
        "one commit per task, dependencies in order, no placeholder"
    assert git(sandbox.repo, "rev-list", "--merges", "main..session/r1") == ""
    assert sorted(git(sandbox.repo, "show", "--name-only", "--format=", commits[1]["sha"]).split()) == \
        ["a.txt", "a2.txt"], "the retry continued from its placeholder's work and is one commit"
    assert any(e["type"] == "partial_restored" and e["task"] == "A" for e in sandbox.events("r1"))
    assert lanes_left(sandbox) == []
    assert git(sandbox.repo, "for-each-ref", "refs/tilth") == ""


@pytest.mark.slow
def test_the_lane_ceiling_and_the_free_disk_floor_hold_lanes_back(sandbox):
    sandbox.env.update(ENV)
    plan = [task("L1"), task("L2"), task("L3")]
    scenario = {"default": [{"write": {"{task}.txt": "x\n"}, "run": ["sleep 0.3"]}]}
    done = sandbox.start("m1", plan, scenario, "--parallel", "3", env={"TILTH_MAX_AGENT_LANES": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    events = sandbox.events("m1")
    timed = spans(events)
    assert not any(overlapped(timed[a], timed[b]) for a, b in (("L1", "L2"), ("L1", "L3"), ("L2", "L3")))
    assert any(e["type"] == "lane_waiting" and e["data"]["why"] == "ceiling" for e in events)

    full = sandbox.start("m2", plan, scenario, "--parallel", "3", env={"TILTH_LANE_MIN_FREE_MB": str(1 << 30)})
    assert full.returncode == 3, full.stdout + full.stderr
    assert "lane_min_free_mb" in full.stdout + full.stderr
    assert sandbox.statuses("m2") == {"L1": "pending", "L2": "pending", "L3": "pending"}
    assert sandbox.commits("m2") == [] and lanes_left(sandbox) == []


def test_parallel_takes_a_number_of_tasks_from_1_to_32(sandbox):
    plan = sandbox.write_json("bad.json", [task("T-1")])
    bad = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--parallel", "0")
    assert bad.returncode == 2 and "'0' is not a number of tasks from 1 to 32" in bad.stderr
    assert not (sandbox.home / "sessions").exists() or not any((sandbox.home / "sessions").iterdir())
