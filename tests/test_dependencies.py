"""`depends_on`: a task waits for its dependencies, a failed one blocks its dependents while the
independent tasks go on, `stop_on_failure` restores the strict sequence, and the blocked state
comes out of prd.json + git alone, so a kill -9 leaves it right."""

from __future__ import annotations

import json
import os
import random
import signal
import time

import pytest

from conftest import finished_before, git, run_killing, task, wait_for_pause

REJECT = {"verdict": "reject", "category": "weak_test", "concern": "no test covers it", "next_step": "add a test"}
ONE_TRY = {"TILTH_MAX_ITERATIONS_PER_TASK": "1"}
T1_FAILS = {"tasks": {"T-1": [{"write": {"t1.py": "half = 1\n"}, "verdict": REJECT}]}}


def session(sandbox, session_id: str) -> dict:
    return json.loads((sandbox.session_dir(session_id) / "session.json").read_text())


def test_a_task_waits_for_a_dependency_later_in_the_file(sandbox):
    plan = [task("T-1", depends_on=["T-3"]), task("T-2", depends_on=["T-1"]), task("T-3")]
    result = sandbox.start("s1", plan)
    assert result.returncode == 0, result.stderr
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-3", "T-1", "T-2"]
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done"}
    assert sandbox.plan("s1")[0]["depends_on"] == ["T-3"], "the user's field is kept as written"


def test_a_failed_task_blocks_its_dependents_and_the_others_go_on(sandbox):
    plan = [task("T-1", "Schema"), task("T-2", "API", depends_on=["T-1"]), task("T-3", "Docs"),
            task("T-4", "UI", depends_on=["T-2"])]
    result = sandbox.start("s1", plan, T1_FAILS, env=ONE_TRY)
    assert result.returncode == 1, result.stderr
    assert [(c["task"], c["outcome"]) for c in sandbox.commits("s1")] == [("T-3", ""), ("T-1", "failed")]
    assert sandbox.statuses("s1") == {"T-1": "failed", "T-2": "pending", "T-3": "done", "T-4": "pending"}

    record = session(sandbox, "s1")
    assert record["state"] == "failed"
    assert record["reason"] == "task T-1 failed; blocked: T-2 (T-1 failed), T-4 (T-1 failed)"

    shown = sandbox.tilth("status", "s1").stdout
    assert "blocked (T-1 failed) T-2: API" in shown and "blocked (T-1 failed) T-4: UI" in shown
    assert "  done                 T-3: Docs" in shown, "the column is as wide as its widest state"
    tasks = [{k: v for k, v in t.items() if k not in ("attempts", "cost_usd", "cost_is_lower_bound", "tokens", "wall_s")}
             for t in json.loads(sandbox.tilth("status", "s1", "--json").stdout)["tasks"]]
    assert tasks[1] == {"id": "T-2", "title": "API", "status": "pending", "depends_on": ["T-1"], "blocked_by": ["T-1"],
                        "blocked": "blocked (T-1 failed)", "outcome": "blocked (T-1 failed)"}
    assert tasks[2] == {"id": "T-3", "title": "Docs", "status": "done", "outcome": "done"}

    report = (sandbox.session_dir("s1") / "report.md").read_text()
    assert "Tasks:      1/4 done, 1 failed, 2 blocked" in report
    assert [line.split()[:4] for line in report.splitlines() if line.startswith("  T-2 ")] == \
        [["T-2", "blocked", "(T-1", "failed)"]]
    assert "  BLOCKED T-2 API: waits on T-1, which failed" in report
    assert "  BLOCKED T-4 UI: waits on T-1, which failed" in report


def test_stop_on_failure_ends_the_session_at_the_first_failure(sandbox):
    env = {**ONE_TRY, "TILTH_STOP_ON_FAILURE": "true"}
    result = sandbox.start("s1", [task("T-1"), task("T-2"), task("T-3", depends_on=["T-1"])], T1_FAILS, env=env)
    assert result.returncode == 1
    assert "the first failed task ends the session (stop_on_failure = true)" in result.stdout
    assert [(c["task"], c["outcome"]) for c in sandbox.commits("s1")] == [("T-1", "failed")]
    assert sandbox.statuses("s1") == {"T-1": "failed", "T-2": "pending", "T-3": "pending"}
    assert session(sandbox, "s1")["reason"] == ("task T-1 failed; blocked: T-3 (T-1 failed); stopped at the first "
                                                "failure (stop_on_failure = true), 1 other task not run")


def test_an_old_session_recorded_with_continue_after_failure_keeps_its_meaning(sandbox):
    path = sandbox.write_json("p.json", [task("T-1"), task("T-2")])
    scenario = sandbox.write_json("sc.json", T1_FAILS)
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(path), "--id", "s1", "--backend",
                          "scripted", "--scenario", str(scenario), "--foreground",
                          env={**ONE_TRY, "TILTH_TEST_PAUSE_AT": "worker@T-1"})
    wait_for_pause(child, "worker")
    child.send_signal(signal.SIGKILL)
    child.wait()
    record = session(sandbox, "s1")  # as a session started before stop_on_failure existed recorded it
    del record["settings"]["stop_on_failure"]
    record["settings"]["continue_after_failure"] = False
    (sandbox.session_dir("s1") / "session.json").write_text(json.dumps(record))
    assert sandbox.tilth("run", "s1", env=ONE_TRY).returncode == 1
    assert sandbox.statuses("s1") == {"T-1": "failed", "T-2": "pending"}, "it stops at the failure, as it did"


@pytest.mark.slow
def test_blocked_state_survives_a_kill_9_and_the_run_goes_on(sandbox):
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2", depends_on=["T-1"]), task("T-3")])
    scenario = sandbox.write_json("scenario.json", T1_FAILS)
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                          "scripted", "--scenario", str(scenario), "--foreground",
                          env={**ONE_TRY, "TILTH_TEST_PAUSE_AT": "before_commit@T-3"})
    wait_for_pause(child, "before_commit")
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL

    tasks = json.loads(sandbox.tilth("status", "s1", "--json").stdout)["tasks"]
    assert [(t["id"], t["status"], t.get("blocked_by")) for t in tasks] == \
        [("T-1", "failed", None), ("T-2", "pending", ["T-1"]), ("T-3", "in_progress", None)]

    rerun = sandbox.tilth("run", "s1", env=ONE_TRY)  # recovery only: no retry of the failure
    assert rerun.returncode == 1, rerun.stderr
    assert [(c["task"], c["outcome"]) for c in sandbox.commits("s1")] == [("T-3", ""), ("T-1", "failed")]
    assert sandbox.statuses("s1") == {"T-1": "failed", "T-2": "pending", "T-3": "done"}
    assert len(sandbox.ledger("s1", "T-3")) == 1, "the accepted attempt is committed, not redone"
    assert session(sandbox, "s1")["reason"] == "task T-1 failed; blocked: T-2 (T-1 failed)"
    assert "blocked (T-1 failed) T-2" in sandbox.tilth("status", "s1").stdout


@pytest.mark.slow
def test_resume_retries_a_failed_task_from_the_top_then_its_dependents(sandbox):
    scenario = {"tasks": {"T-1": [{"write": {"t1.py": "half = 1\n"}, "verdict": REJECT},
                                  {"write": {"t1.py": "whole = 1\n"}}]}}
    plan = [task("T-1"), task("T-2", depends_on=["T-1"]), task("T-3")]
    assert sandbox.start("s1", plan, scenario, env=ONE_TRY).returncode == 1
    assert [(c["task"], c["outcome"]) for c in sandbox.commits("s1")] == [("T-3", ""), ("T-1", "failed")]

    resumed = sandbox.tilth("resume", "s1", "--foreground", env=ONE_TRY)
    assert resumed.returncode == 0, resumed.stderr
    commits = sandbox.commits("s1")
    assert [(c["task"], c["outcome"]) for c in commits] == [("T-3", ""), ("T-1", ""), ("T-2", "")]
    assert git(sandbox.repo, "show", f"{commits[1]['sha']}:t1.py") == "whole = 1\n"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done"}
    assert session(sandbox, "s1")["state"] == "done"
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    assert "Tasks:      3/3 done, 0 failed" in report and "BLOCKED" not in report


@pytest.mark.slow
def test_a_kill_during_an_independent_task_does_not_mix_it_with_the_failed_ones_edits(sandbox):
    scenario = {"tasks": {"T-1": [{"write": {"t1.py": "half = 1\n"}, "verdict": REJECT},
                                  {"write": {"t1.py": "whole = 1\n"}}],
                          "T-3": [{"write": {"t3.py": "three = 3\n"}}]}}
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2", depends_on=["T-1"]), task("T-3")])
    path = sandbox.write_json("scenario.json", scenario)
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                          "scripted", "--scenario", str(path), "--foreground",
                          env={**ONE_TRY, "TILTH_TEST_PAUSE_AT": "worker@T-3"})
    wait_for_pause(child, "worker")
    child.send_signal(signal.SIGKILL)
    child.wait()

    resumed = sandbox.tilth("resume", "s1", "--foreground", env=ONE_TRY)
    assert resumed.returncode == 0, resumed.stderr
    commits = sandbox.commits("s1")
    assert [(c["task"], c["outcome"]) for c in commits] == [("T-1", ""), ("T-2", ""), ("T-3", "")]
    t3_files = git(sandbox.repo, "show", "--name-only", "--format=", commits[2]["sha"]).split()
    assert t3_files == ["t3.py"], "T-3's commit holds only T-3's work, its interrupted edits kept for it"
    assert git(sandbox.repo, "show", f"{commits[0]['sha']}:t1.py") == "whole = 1\n"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done"}


def test_continue_after_failure_in_config_toml_is_read_as_its_opposite(tmp_path, monkeypatch):
    from tilth.core.settings_load import load_settings_with_sources
    from tilth.views.settings_shown import describe
    from tilth.core.travel import with_session_view

    for name in ("TILTH_STOP_ON_FAILURE", "TILTH_CONTINUE_AFTER_FAILURE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config.toml").write_text("continue_after_failure = false\n")
    settings, sources = load_settings_with_sources(tmp_path)
    assert settings.stop_on_failure is True
    [line] = [line for line in describe(settings, sources) if "failure" in line]
    assert line == f"stop_on_failure = True  ({tmp_path / 'config.toml'}: continue_after_failure = False, " \
                   "deprecated: use stop_on_failure)"

    (tmp_path / "config.toml").write_text("continue_after_failure = false\nstop_on_failure = false\n")
    assert load_settings_with_sources(tmp_path)[0].stop_on_failure is False, "the new name wins in the same file"
    monkeypatch.setenv("TILTH_CONTINUE_AFTER_FAILURE", "false")
    assert load_settings_with_sources(tmp_path)[0].stop_on_failure is True, "the environment wins over the file"

    monkeypatch.delenv("TILTH_CONTINUE_AFTER_FAILURE")
    settings = load_settings_with_sources(tmp_path)[0]
    assert with_session_view(settings, {"continue_after_failure": True}).stop_on_failure is False
    assert with_session_view(settings, {"continue_after_failure": False}).stop_on_failure is True
    assert with_session_view(settings, {"continue_after_failure": False, "stop_on_failure": False}).stop_on_failure \
        is False


@pytest.mark.slow
def test_kill_9_at_random_instants_with_a_failure_that_blocks_a_dependent(sandbox):
    """The default path under random kills: T-2 fails once, T-3 (after T-2) waits, T-4 goes on; resumed
    (killed again at random) until a run ends done. No task's commit holds another's work."""
    sandbox.env.update({**ONE_TRY, "TILTH_SANDBOX": "off"})
    rng = random.Random(int(os.environ.get("TILTH_KILL_SEED", "20261124")))
    plan = str(sandbox.write_json("prd.json", [task("T-1"), task("T-2"), task("T-3", depends_on=["T-2"]),
                                               task("T-4")]))
    scenario = str(sandbox.write_json("scenario.json", {
        "tasks": {"T-2": [{"write": {"t2.py": "two = 0\n"}, "verdict": REJECT}, {"write": {"t2.py": "two = 2\n"}}]},
        "default": [{"write": {"{task}.py": "done = True\n"}}]}))

    def start(sid: str) -> list[str]:
        return ["start", "--repo", str(sandbox.repo), "--prd", plan, "--id", sid, "--backend", "scripted",
                "--scenario", scenario, "--foreground"]

    began = time.monotonic()
    assert run_killing(sandbox, start("k0"), 120) == 1
    assert sandbox.statuses("k0") == {"T-1": "done", "T-2": "failed", "T-3": "pending", "T-4": "done"}
    assert run_killing(sandbox, ["resume", "k0", "--foreground"], 120) == 0
    window = time.monotonic() - began
    check(sandbox, "k0", "unkilled")
    kills = 0
    for trial in range(1, int(os.environ.get("TILTH_KILL_TRIALS", "3")) + 1):
        sid = f"k{trial}"
        for _ in range(12):
            args = ["resume", sid, "--foreground"] if sandbox.session_dir(sid).is_dir() else start(sid)
            code = run_killing(sandbox, args, rng.uniform(0, window))
            kills += code is None
            if code == 0 or finished_before(sandbox, sid, code):
                break
            assert code in (None, 1), f"trial {trial}: a run ended with exit {code}"
        else:
            codes = [run_killing(sandbox, ["resume", sid, "--foreground"], 120) for _ in range(2)]
            assert 0 in codes, f"trial {trial}: unkilled resumes ended with {codes}"
        check(sandbox, sid, f"trial {trial}")
    assert kills >= 1


def check(sandbox, sid: str, where: str) -> None:
    commits = sandbox.commits(sid)
    done = [c["task"] for c in commits if c["outcome"] == ""]
    assert sorted(done) == ["T-1", "T-2", "T-3", "T-4"], f"{where}: one commit per task: {commits}"
    assert done.index("T-2") < done.index("T-3"), f"{where}: T-3 waited for T-2"
    assert [c["task"] for c in commits if c["outcome"] == "failed"] in ([], ["T-2"]), where
    for c in commits:
        files = git(sandbox.repo, "show", "--name-only", "--format=", c["sha"]).split()
        assert files in ([f"{c['task'].lower().replace('-', '')}.py"], [f"{c['task']}.py"]) or \
            (c["task"] == "T-2" and files in (["t2.py"], [])), f"{where}: {c['task']} holds {files}"
    assert git(sandbox.repo, "show", f"session/{sid}:t2.py") == "two = 2\n", where
    assert sandbox.statuses(sid) == {"T-1": "done", "T-2": "done", "T-3": "done", "T-4": "done"}, where
    assert session(sandbox, sid)["state"] == "done", where
    assert git(sandbox.worktree(sid), "status", "--porcelain") == "", f"{where}: clean worktree"
    shas = [line[4] for line in sandbox.progress(sid) if line[2] == "done"]
    assert len(shas) == len(set(shas)) == 4, f"{where}: one progress line per outcome"
