"""kill -9 at random instants, not only at named points: during creation, a task's writes,
resume's reconcile and placeholder unwind, and atomic file writes. After every kill the
session is resumed (killed again at random) until a run ends by itself; then the invariants
must hold. The seed is printed in every failure; `TILTH_KILL_SEED` / `TILTH_KILL_TRIALS` rerun
or lengthen it (`make soak`)."""

from __future__ import annotations

import json
import os
import random
import time

import pytest

from conftest import finished_before, git, run_killing, task

SEED = int(os.environ.get("TILTH_KILL_SEED", "20261123"))
TRIALS = int(os.environ.get("TILTH_KILL_TRIALS", "6"))
REJECT = {"verdict": "reject", "category": "half_finished", "concern": "not finished", "next_step": "finish"}
# T-2 fails its only attempt (a FAILED placeholder) and ends the session there (stop_on_failure); the
# resume unwinds it and the retry accepts.
SCENARIO = {"tasks": {"T-2": [{"write": {"t2.py": "two = 0\n"}, "verdict": REJECT},
                              {"write": {"t2.py": "two = 2\n"}}]},
            "default": [{"write": {"{task}.py": "done = True\n"}}]}
ENV = {"TILTH_MAX_ITERATIONS_PER_TASK": "1", "TILTH_SANDBOX": "off", "TILTH_STOP_ON_FAILURE": "true"}
MAX_RUNS = 12


def check_invariants(sandbox, sid: str, where: str) -> None:
    commits = sandbox.commits(sid)
    assert [(c["task"], c["outcome"]) for c in commits] == [("T-1", ""), ("T-2", ""), ("T-3", "")], where
    assert git(sandbox.repo, "show", f"{commits[1]['sha']}:t2.py") == "two = 2\n", where
    assert sandbox.statuses(sid) == {"T-1": "done", "T-2": "done", "T-3": "done"}, where
    shas = [line[4] for line in sandbox.progress(sid) if line[2] == "done"]
    assert len(shas) == len(set(shas)) == 3, f"{where}: one progress line per outcome"
    session_dir = sandbox.session_dir(sid)
    for path in session_dir.rglob("*.json"):
        json.loads(path.read_text())
    assert json.loads((session_dir / "session.json").read_text())["state"] == "done", where
    assert git(sandbox.worktree(sid), "status", "--porcelain") == "", f"{where}: clean worktree"
    locks = [p for p in (sandbox.repo / ".git").rglob("*.lock")]
    assert locks == [], f"{where}: git locks left: {locks}"
    status = json.loads(sandbox.tilth("status", sid, "--json").stdout)
    assert status["state"] == "done", f"{where}: nobody holds the session lock"
    listed = git(sandbox.repo, "worktree", "list", "--porcelain").count("worktree ")
    assert listed == 2 + int(sid[1:]), f"{where}: one worktree per session"


@pytest.mark.slow
def test_kill_9_at_random_instants_then_resume_until_done(sandbox):
    sandbox.env.update(ENV)
    rng = random.Random(SEED)
    plan = str(sandbox.write_json("prd.json", [task("T-1"), task("T-2"), task("T-3")]))
    scenario = str(sandbox.write_json("scenario.json", SCENARIO))
    began = time.monotonic()
    assert run_killing(sandbox, ["start", "--repo", str(sandbox.repo), "--prd", plan, "--id", "k0", "--backend",
                                 "scripted", "--scenario", scenario, "--foreground"], 120) == 1
    assert run_killing(sandbox, ["resume", "k0", "--foreground"], 120) == 0
    window = time.monotonic() - began  # one whole session, start to done, unkilled
    check_invariants(sandbox, "k0", f"seed={SEED} unkilled")
    kills = 0
    for trial in range(1, TRIALS + 1):
        sid = f"k{trial}"
        where = f"seed={SEED} trial={trial}"
        start = ["start", "--repo", str(sandbox.repo), "--prd", plan, "--id", sid, "--backend", "scripted",
                 "--scenario", scenario, "--foreground"]
        for _ in range(MAX_RUNS):
            created = sandbox.session_dir(sid).is_dir()
            code = run_killing(sandbox, ["resume", sid, "--foreground"] if created else start,
                               rng.uniform(0, window))
            kills += code is None
            if code == 0 or finished_before(sandbox, sid, code):
                break
            assert code in (None, 1), f"{where}: a run ended with exit {code}"
        else:  # unkilled now: one resume may still end failed (T-2's first attempt), the next unwinds it
            codes = [run_killing(sandbox, ["resume", sid, "--foreground"], 120) for _ in range(2)]
            assert 0 in codes, f"{where}: unkilled resumes ended with {codes}"
        check_invariants(sandbox, sid, where)
    assert kills >= TRIALS, f"seed={SEED}: the kills landed ({kills})"


PARALLEL_PLAN = [task(f"{chain}{step}", depends_on=[f"{chain}1"] if step == 2 else []) for chain in "ABCD"
                 for step in (1, 2)]
PARALLEL_KILLS = int(os.environ.get("TILTH_PARALLEL_KILLS", "20"))


def check_parallel_invariants(sandbox, sid: str, where: str) -> None:
    commits = sandbox.commits(sid)
    order = [c["task"] for c in commits]
    assert sorted(order) == sorted(t["id"] for t in PARALLEL_PLAN), f"{where}: each task once: {order}"
    assert all(c["outcome"] == "" for c in commits), where
    for chain in "ABCD":
        assert order.index(f"{chain}1") < order.index(f"{chain}2"), f"{where}: dependency order {order}"
    assert git(sandbox.repo, "rev-list", "--merges", f"main..session/{sid}") == "", f"{where}: no merge commits"
    assert set(sandbox.statuses(sid).values()) == {"done"}, where
    shas = [line[4] for line in sandbox.progress(sid) if line[2] == "done"]
    assert len(shas) == len(set(shas)) == len(PARALLEL_PLAN), f"{where}: one progress line per outcome"
    assert git(sandbox.worktree(sid), "status", "--porcelain") == "", f"{where}: clean worktree"
    locks = [p for p in (sandbox.repo / ".git").rglob("*.lock")]
    assert locks == [], f"{where}: git locks left: {locks}"
    listed = git(sandbox.repo, "worktree", "list", "--porcelain")
    assert "+" not in listed and git(sandbox.repo, "branch", "--list", "tilth-lane/*") == "", \
        f"{where}: a lane left behind: {listed}"
    kept = git(sandbox.repo, "for-each-ref", f"refs/tilth/partial/{sid}/")
    assert kept == "", f"{where}: an interrupted lane's kept work outlived its task: {kept}"
    assert not (sandbox.home / "lanes" / sid).exists(), where
    doctor = sandbox.tilth("doctor", sid)
    assert doctor.returncode == 0, f"{where}: {doctor.stdout}{doctor.stderr}"


@pytest.mark.slow
def test_kill_9_at_random_instants_with_parallel_lanes_then_resume_until_done(sandbox):
    sandbox.env.update({"TILTH_SANDBOX": "off", "TILTH_FINAL_REVIEW": "false"})
    rng = random.Random(SEED)
    plan = str(sandbox.write_json("prd.json", PARALLEL_PLAN))
    scenario = str(sandbox.write_json("scenario.json", {"default": [{"write": {"{task}.py": "done = True\n"}}]}))

    def start(sid: str) -> list[str]:
        return ["start", "--repo", str(sandbox.repo), "--prd", plan, "--id", sid, "--backend", "scripted",
                "--scenario", scenario, "--foreground", "--parallel", "4"]

    began = time.monotonic()
    assert run_killing(sandbox, start("p0"), 180) == 0
    window = time.monotonic() - began
    check_parallel_invariants(sandbox, "p0", f"seed={SEED} unkilled")
    kills, trial = 0, 0
    while kills < PARALLEL_KILLS:
        trial += 1
        sid, where = f"p{trial}", f"seed={SEED} trial={trial}"
        for _ in range(MAX_RUNS):
            created = sandbox.session_dir(sid).is_dir()
            code = run_killing(sandbox, ["resume", sid, "--foreground"] if created else start(sid),
                               rng.uniform(0, window))
            kills += code is None
            if code == 0 or finished_before(sandbox, sid, code):
                break
            assert code is None, f"{where}: a run ended with exit {code}"
        else:
            last = run_killing(sandbox, ["resume", sid, "--foreground"], 180)  # the last kill may have come after done
            assert last == 0 or finished_before(sandbox, sid, last), where
        check_parallel_invariants(sandbox, sid, where)
