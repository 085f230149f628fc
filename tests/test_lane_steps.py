"""The lane scheduler's decisions, one `Scheduler.step(now)` at a time, inline: a real session (real git,
the scripted backend) whose lanes' work runs in the test's thread when the test says, so the merge
queue's landings, conflicts, redos, caps and stops are seen step by step without threads."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pygit2
import pytest

from conftest import git, make_repo, task
from tilth.core.config import Settings
from tilth.core.errors import StopRequested
from tilth.run.create import create_session
from tilth.run.lane_limits import machine_cores
from tilth.run.lanes import REDO_LIMIT, Scheduler, to_start
from tilth.run.session_run import prepare
from tilth.run.step import Run
from tilth.run.stopflag import StopFlag
from tilth.store.events import EventLog
from tilth.store.ledger import read_entries
from tilth.store.lock import SessionLock
from tilth.store.rollup import load_rollup
from tilth.store.prd import Task, load_current_plan
from tilth.store.session import BackendChoice
from tilth.views.parallel_figures import parallel_lines


class Held(Executor):
    """Runs what is submitted only when the test says, in the test's thread."""

    def __init__(self) -> None:
        self.held: list[tuple[Future[Any], Callable[[], Any]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.held.append((future, lambda: fn(*args, **kwargs)))
        return future

    def run_all(self) -> None:
        while self.held:
            future, call = self.held.pop(0)
            try:
                future.set_result(call())
            except BaseException as exc:  # noqa: BLE001 - handed to the scheduler, as a thread's future would
                future.set_exception(exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.run_all()


class Session:
    def __init__(self, root: Path, plan: list[dict], scenario: dict, checks: list[str], **settings: Any):
        self.repo = make_repo(root / "repo")
        prd, script = root / "prd.json", root / "scenario.json"
        prd.write_text(json.dumps(plan))
        script.write_text(json.dumps(scenario))
        self.settings = Settings(**{"sandbox": "off", "final_review": False, "self_improvement": False,
                                    "parallel_tasks": 2, **settings})
        self.paths = create_session(self.repo, prd, "s1", None, BackendChoice(name="scripted", scenario=str(script)),
                                    self.settings, checks, home=root / "home")
        self.lock = SessionLock(self.paths.lock, self.paths.id).__enter__()
        self.run: Run = prepare(self.paths, self.settings, StopFlag(), False, EventLog(self.paths.events))
        self.pool = Held()
        self.at = 0.0
        """The time the test steps at: the scheduler reads it again after a landing (a landing takes no time here)."""
        self.scheduler = Scheduler(self.run, self.lock, self.pool, self.pool, clock=lambda: self.at)
        stepped = self.scheduler.step

        def step(now: float) -> bool:
            self.at = now
            return stepped(now)

        self.scheduler.step = step  # type: ignore[method-assign]

    def lanes(self) -> dict[str, int]:
        """The running lanes: task -> redo."""
        return {t: lane.redo for t, lane in self.scheduler.lanes.items()}

    def statuses(self) -> dict[str, str]:
        return {t.id: t.status.value for t in load_current_plan(self.paths.prd)}

    def events(self, kind: str) -> list[dict]:
        return [e for e in self.run.ws.events.read() if e["type"] == kind]

    def commits(self) -> list[tuple[str, str]]:
        """(task, outcome) of each commit on the session branch, oldest first."""
        out = git(self.repo, "log", "--reverse", "--format=%(trailers:key=Tilth-Task,valueonly,separator=)%x1f"
                  "%(trailers:key=Tilth-Outcome,valueonly,separator=)", "main..session/s1")
        return [tuple(part.strip() for part in line.split("\x1f")) for line in out.splitlines() if line]  # type: ignore[misc]

    def lane_dirs(self) -> list[str]:
        root = self.paths.home / "lanes" / "s1"
        return sorted(p.name for p in root.iterdir()) if root.is_dir() else []

    def close(self) -> None:
        self.lock.__exit__(None, None, None)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Callable[..., Session]]:
    made: list[Session] = []

    def make(plan: list[dict], scenario: dict, checks: list[str] = (), **settings: Any) -> Session:
        made.append(Session(tmp_path, plan, scenario, list(checks), **settings))
        return made[-1]

    yield make
    for s in made:
        s.close()


def plain(task_id: str, files: list[str] = ()) -> Task:
    return Task(id=task_id, title=task_id, description=task_id, acceptance_criteria=["done"], files=list(files))


def test_which_ready_tasks_start_a_lane():
    src, app, docs, lib = plain("F1", ["src/*.py"]), plain("F2", ["src/app.py"]), plain("F3", ["docs/*.md"]), \
        plain("F4", ["src/lib/**"])
    assert to_start([src, app, docs, lib], [], {}, 4) == [src, docs], "overlapping `files` never run at once"
    assert to_start([src, docs], [], {}, 1) == [src], "never more lanes than the width"
    assert to_start([docs], [(src, 0)], {}, 2) == [docs]
    assert to_start([docs], [(src, REDO_LIMIT)], {}, 2) == [], "nothing beside a task that runs alone"
    assert to_start([src, docs], [(app, 0)], {"docs": 0, "F3": REDO_LIMIT}, 3) == [], \
        "a task at its redo limit waits until no lane runs (and overlaps wait too)"
    assert to_start([docs, lib], [], {"F3": REDO_LIMIT}, 3) == [docs], "then it runs alone"


def test_lanes_land_one_commit_each_and_a_conflict_runs_again_on_the_new_head(session):
    s = session([task("C1"), task("C2"), task("C3", depends_on=["C1"])],
                {"default": [{"write": {"shared.txt": "from {task}\n"}}], "tasks": {"C3": [{"write": {"c3.txt": "x\n"}}]}})
    assert s.scheduler.step(0.0)
    assert s.lanes() == {"C1": 0, "C2": 0}, "the two ready tasks start; C3 waits for C1"
    s.pool.run_all()
    assert s.commits() == [], "a lane commits on its own branch only"
    assert s.scheduler.step(1.0)
    assert s.commits() == [("C1", "")], "one landing; the other conflicts and the branch does not move"
    [conflict] = s.events("merge_conflict")
    assert conflict["task"] == "C2" and conflict["data"]["paths"] == ["shared.txt"]
    head = git(s.repo, "rev-parse", "session/s1").strip()
    assert s.lanes() == {"C2": 1, "C3": 0}, "C2 runs again; C3's dependency landed"
    redo = [e["data"] for e in s.events("lane_started") if e["task"] == "C2"][-1]
    assert (redo["start"], redo["redo"]) == (head, 1), "the redo starts from the new head"
    ledger = (s.paths.ledger_dir / "C2.jsonl").read_text()
    assert "merge_conflict" in ledger and "shared.txt" in ledger, "the redo's context says what conflicted"
    s.pool.run_all()
    assert s.scheduler.step(2.0) is False, "both land, nothing is left"
    assert s.commits() == [("C1", ""), ("C2", ""), ("C3", "")]
    assert git(s.repo, "show", "session/s1:shared.txt") == "from C2\n"
    assert git(s.repo, "rev-list", "--merges", "main..session/s1") == ""
    assert s.statuses() == {"C1": "done", "C2": "done", "C3": "done"}
    assert s.lane_dirs() == [] and git(s.repo, "branch", "--list", "tilth-lane/*") == ""
    assert git(Path(s.run.ws.record.worktree), "status", "--porcelain") == ""
    s.scheduler.summarize()
    summary = s.events("parallel_summary")[-1]["data"]
    assert (summary["conflicts"], summary["redos"], summary["redo_s"], summary["wall_s"], summary["task_s"]) == \
        (1, 1, 1.0, 2.0, 3.0), "lane time at the steps' `now`: the refused lane's second apart"


# Fails only in the session's worktree (a merged tree), never in a lane's, once P's file is there.
ONLY_MERGED = 'case "$PWD" in */worktrees/*) test ! -f p.txt ;; esac'


def test_checks_run_once_per_tree_and_a_refused_landing_is_no_attempt(session):
    s = session([task("P"), task("Q1"), task("Q2")],
                {"default": [{"write": {"{task}.txt": "x\n"}}], "tasks": {"P": [{"write": {"p.txt": "p\n"}}]}},
                [ONLY_MERGED])
    s.scheduler.step(0.0)
    assert s.lanes() == {"P": 0, "Q1": 0}
    s.pool.run_all()
    s.scheduler.step(1.0)
    assert [(e["task"], e["data"]["by"]) for e in s.events("merge_checks_stand")] == [("P", "lane")], \
        "P lands onto the head it started from: the tree its own checks passed on, not checked again"
    assert [e["task"] for e in s.events("merge_checks_failed")] == ["Q1"], "Q1's merged tree is new: checked, refused"
    assert s.lanes() == {"Q1": 1, "Q2": 0}
    assert [e.iter for e in read_entries(s.paths.ledger_dir, "Q1")] == [1], "a refused landing is no attempt"
    s.pool.run_all()
    [*_, prompt] = [p for p in map(json.loads, (s.paths.dir / "prompts.jsonl").read_text().splitlines())
                    if p["task"] == "Q1" and p["role"] == "worker"]
    assert "clean checkout of the current session head" in prompt["prompt"], "the retry is told what is true"
    assert "still in the working tree" not in prompt["prompt"] and "these checks failed" in prompt["prompt"]
    assert prompt["iter"] == 2
    s.scheduler.step(2.0)
    assert [e["task"] for e in s.events("merge_checks_stand")] == ["P", "Q1"]
    s.pool.run_all()
    assert s.scheduler.step(3.0) is False
    assert s.statuses() == {"P": "done", "Q1": "done", "Q2": "done"}
    rolled = load_rollup(s.paths.events)
    assert (rolled.lanes.conflicts, rolled.lanes.redos) == (0, 2), "the redos, from the journal"
    [line] = parallel_lines(s.paths)  # no `parallel_summary`: the run was killed before its end
    assert "0 conflicts, 2 redos" in line, line


def test_lanes_ready_together_are_checked_once_merged_together(session, tmp_path):
    ran = tmp_path / "ran.log"
    s = session([task("A"), task("B"), task("C")], {"default": [{"write": {"{task}.txt": "x\n"}}]},
                [f"echo run >> {ran}"], parallel_tasks=3)
    s.scheduler.step(0.0)
    assert s.lanes() == {"A": 0, "B": 0, "C": 0}
    ran.write_text("")  # the baseline's run is not counted
    jobs = dict(zip("ABC", s.pool.held))
    s.pool.held = [jobs["A"], jobs["B"]]
    s.pool.run_all()
    checking = s.scheduler.run.cores.held("C")
    checking.__enter__()  # C is in its checks: B waits for it
    s.scheduler.step(1.0)
    assert s.commits() == [("A", "")] and set(s.lanes()) == {"B", "C"}, "A lands on its own checks; B is held back"
    checking.__exit__(None, None, None)
    s.pool.held = [jobs["C"]]
    s.pool.run_all()
    assert s.scheduler.step(2.0) is False
    assert [c[0] for c in s.commits()] == ["A", "B", "C"]
    [together] = s.events("merge_checked_together")
    assert together["data"]["tasks"] == ["B", "C"] and together["data"]["passed"] is True
    assert [(e["task"], e["data"]["by"]) for e in s.events("merge_checks_stand")] == \
        [("A", "lane"), ("B", "together"), ("C", "together")]
    assert ran.read_text().count("run") == 4, "three lanes' checks and one for B and C together"


def test_the_lane_ceiling_holds_lanes_back(session):
    s = session([task("L1"), task("L2"), task("L3")], {"default": [{"write": {"{task}.txt": "x\n"}}]},
                parallel_tasks=3, max_agent_lanes=2)
    assert s.scheduler.step(0.0)
    assert s.lanes() == {"L1": 0, "L2": 0}, "two slots in this TILTH_HOME"
    assert [(e["task"], e["data"]["why"]) for e in s.events("lane_waiting")] == [("L3", "ceiling")]
    s.pool.run_all()
    s.scheduler.step(1.0)
    assert s.lanes() == {"L3": 0}, "a slot given back is taken"
    assert s.scheduler.step(1.5)  # nothing more while it runs
    assert len(s.events("lane_waiting")) == 1, "a wait is told once"


def test_a_stop_and_a_crash_requeue_their_lanes_with_their_work_kept(session):
    s = session([task("A"), task("B"), task("C")], {"default": [{"write": {"{task}.txt": "x\n"}}]})
    s.scheduler.step(0.0)
    assert s.lanes() == {"A": 0, "B": 0}
    lanes = s.scheduler.lanes
    (Path(lanes["A"].run.ws.record.worktree) / "a-work.txt").write_text("half of A\n")
    (Path(lanes["B"].run.ws.record.worktree) / "b-work.txt").write_text("half of B\n")
    s.pool.held.clear()  # their threads end without landing: a stop between attempts, a crash
    lanes["A"].future.set_exception(StopRequested("stop requested"))
    lanes["B"].future.set_exception(RuntimeError("boom"))
    assert s.scheduler.step(1.0) is False, "nothing starts once the run halts"
    assert isinstance(s.scheduler.halt, StopRequested) and s.run.stop.requested
    assert s.statuses() == {"A": "pending", "B": "pending", "C": "pending"}
    assert [(e["task"], e["data"]["why"]) for e in s.events("lane_requeued")] == \
        [("A", "stop requested"), ("B", "crashed: RuntimeError")]
    assert s.commits() == [] and s.lane_dirs() == []
    common = pygit2.Repository(str(s.repo))
    for name, text in (("A", "half of A\n"), ("B", "half of B\n")):
        kept = common.references[f"refs/tilth/partial/s1/{name}"].peel(pygit2.Commit)
        assert kept.tree[f"{name.lower()}-work.txt"].data.decode() == text
    s.run.stop = StopFlag()  # the next run: each task's lane starts from its kept work
    again = Scheduler(s.run, s.lock, s.pool, s.pool)
    again.step(2.0)
    assert set(again.lanes) == {"A", "B"}
    assert (Path(again.lanes["A"].run.ws.record.worktree) / "a-work.txt").read_text() == "half of A\n"
    assert {e["task"] for e in s.events("partial_restored")} == {"A", "B"}


PROBE = """import os, sys, time
d = sys.argv[1]
mine = os.path.join(d, str(os.getpid()))
open(mine, "w").close()
with open(d + ".log", "a") as log:
    log.write(f"{len(os.listdir(d))}\\n")
time.sleep(0.3)
os.unlink(mine)
"""


def test_checks_hold_a_core_each_and_never_run_more_at_once(session, tmp_path):
    probe, at = tmp_path / "probe.py", tmp_path / "running"
    probe.write_text(PROBE)
    at.mkdir()
    s = session([task("A"), task("B"), task("C")], {"default": [{"write": {"{task}.txt": "x\n"}}]},
                [f"python3 {probe} {at}"], parallel_tasks=3, check_slots=1)
    (tmp_path / "running.log").write_text("")  # the baseline's run is not counted
    with ThreadPoolExecutor(3) as agents, ThreadPoolExecutor(3) as learning:
        scheduler = Scheduler(s.run, s.lock, agents, learning)
        assert scheduler.drive()
    assert s.statuses() == {"A": "done", "B": "done", "C": "done"}
    counts = [int(n) for n in (tmp_path / "running.log").read_text().split()]
    assert len(counts) >= 4 and max(counts) == 1 and scheduler.run.cores.most == 1, counts


def test_the_cores_a_process_may_use(tmp_path):
    root, own = tmp_path / "cgroup", tmp_path / "self-cgroup"
    (root / "user" / "job").mkdir(parents=True)
    own.write_text("0::/user/job\n")
    affinity = len(os.sched_getaffinity(0))
    assert machine_cores(root, own) == affinity, "no cpu.max: the affinity"
    (root / "user" / "job" / "cpu.max").write_text("max 100000\n")
    (root / "user" / "cpu.max").write_text("50000 100000\n")
    assert machine_cores(root, own) == 1, "a parent's quota of half a core: one"
    (root / "user" / "cpu.max").write_text("150000 100000\n")
    assert machine_cores(root, own) == min(affinity, 2), "1.5 cores round up"


def test_a_commit_lands_only_on_the_tip_it_expects(tmp_path):
    """docs/parallel.md: a landing commits with the head it merged onto as parent, a compare-and-swap: a branch
    that moved meanwhile refuses the commit and keeps its tip."""
    from tilth.git.gitops import commit_staged

    repo_path = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    base = git(repo_path, "rev-parse", "HEAD").strip()
    git(repo_path, "branch", "work")
    (repo_path / "b.txt").write_text("b\n")
    git(repo_path, "add", "b.txt")
    git(repo_path, "commit", "-qm", "moved meanwhile")
    moved = git(repo_path, "rev-parse", "HEAD").strip()
    git(repo_path, "branch", "-f", "work", moved)
    repo = pygit2.Repository(str(repo_path))
    (repo_path / "c.txt").write_text("c\n")
    repo.index.add("c.txt")
    repo.index.write()
    with pytest.raises(pygit2.GitError):
        commit_staged(repo, "work", "lands on base", base)
    assert git(repo_path, "rev-parse", "work").strip() == moved, "the moved branch keeps its tip"
    landed = commit_staged(repo, "work", "lands on the tip", moved)
    assert git(repo_path, "rev-parse", "work").strip() == landed
