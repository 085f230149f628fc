"""Behaviours a mutation run (scripts/mutate.py) showed no other test would notice losing:
each test here turns red when one line of outcomes, recovery, accounting or the sandbox is
changed. Real repos, real `tilth` processes, the fake model server."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from conftest import git, task, wait_for_pause
from fake_openai import FakeOpenAI, call, reply

AGENT = "git -c user.name=agent -c user.email=agent@example.com"
REJECT = {"verdict": "reject", "category": "half_finished", "concern": "not yet", "next_step": "finish"}


def case(summary: str) -> tuple[str, str]:
    return call("submit_case", summary=summary, criteria=[{"criterion": "T-1 is done", "evidence": "x"}])


def verdict(decision: str, concern: str = "") -> tuple[str, str]:
    return call("submit_verdict", verdict=decision, category="none" if decision == "accept" else "acceptance_gap",
                concern=concern, evidence=[], next_step="" if decision == "accept" else "fix it")


@pytest.mark.parametrize("point, scenario, code", [
    ("before_commit", {}, 0),
    ("before_failed_commit", {"T-2": [{"verdict": REJECT}]}, 1),
])
@pytest.mark.slow
def test_a_branch_moved_after_the_verdict_is_set_back_before_the_task_commit(sandbox, point, scenario, code):
    """The branch moves between staging and the commit (here while the run is paused there)."""
    plan = sandbox.write_json("p.json", [task("T-1"), task("T-2")])
    steps = {"T-1": [{"write": {"one.txt": "1\n"}}], "T-2": [{"write": {"two.txt": "2\n"}}]}
    for tid, extra in scenario.items():
        steps[tid] = [{**steps[tid][0], **extra[0]}]
    proc = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                         "scripted", "--foreground", "--scenario", str(sandbox.write_json("sc.json", {"tasks": steps})),
                         env={"TILTH_TEST_PAUSE_AT": f"{point}@T-2", "TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    wait_for_pause(proc, point)
    t1 = git(sandbox.repo, "rev-parse", "session/s1").strip()
    base = git(sandbox.repo, "rev-parse", "main").strip()
    git(sandbox.repo, "update-ref", "refs/heads/session/s1", base)
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=60) == code, proc.stderr.read()
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]
    assert git(sandbox.repo, "rev-parse", "session/s1~1").strip() == t1
    assert git(sandbox.repo, "show", "session/s1:two.txt") == "2\n"
    repaired = [e for e in sandbox.events("s1") if e["type"] == "branch_repaired"]
    assert [(e["task"], e["data"]["was"], e["data"]["restored"]) for e in repaired] == [("T-2", base, t1)]


def test_every_outcome_is_announced_with_its_commit(sandbox):
    """The printed line, the events and the post_task hook all name the commit of each outcome."""
    log = sandbox.root / "post_task.log"
    hooks = sandbox.home / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "post_task").write_text(f"#!/usr/bin/env bash\ncat >> {log}; echo >> {log}\n")
    (hooks / "post_task").chmod(0o755)
    scenario = {"tasks": {"T-1": [{"write": {"one.txt": "1\n"}}], "T-2": [{"write": {"two.txt": "2\n"},
                                                                          "verdict": REJECT}]}}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env={"TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    assert result.returncode == 1, result.stdout + result.stderr
    done, failed = (c["sha"] for c in sandbox.commits("s1"))
    assert f"[T-1] done: commit {done[:7]}" in result.stdout
    assert f"[T-2] FAILED placeholder {failed[:7]}" in result.stdout
    shas = {(e["type"], e["task"]): e["data"]["sha"] for e in sandbox.events("s1")
            if e["type"] in ("commit", "task_done", "failed_commit", "task_failed")}
    assert shas == {("commit", "T-1"): done, ("task_done", "T-1"): done,
                    ("failed_commit", "T-2"): failed, ("task_failed", "T-2"): failed}
    payloads = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert [(p["task"], p["outcome"], p["commit"]) for p in payloads] == [("T-1", "done", done),
                                                                         ("T-2", "failed", failed)]


@pytest.mark.slow
def test_agent_commits_left_by_a_killed_run_are_folded_on_resume(sandbox):
    """Unconfined, the agent commits twice; the run is killed before tilth stages, so the
    commits are still on the branch when the next run starts."""
    once = sandbox.root / "committed-once"  # the retry makes no commits of its own
    commits = f"test -e {once} || ({AGENT} add -A && {AGENT} commit -qm 'agent one' && echo 2 > b.txt && " \
              f"{AGENT} add -A && {AGENT} commit -qm 'agent two' && touch {once})"
    scenario = {"tasks": {"T-1": [{"write": {"a.txt": "1\n"}, "run": [commits]}]}}
    plan = sandbox.write_json("p.json", [task("T-1")])
    proc = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                         "scripted", "--foreground", "--scenario", str(sandbox.write_json("sc.json", scenario)),
                         env={"TILTH_TEST_PAUSE_AT": "worker@T-1", "TILTH_SANDBOX": "off"})
    wait_for_pause(proc, "worker")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    base = git(sandbox.repo, "rev-parse", "main").strip()
    left = git(sandbox.repo, "rev-list", f"{base}..session/s1").split()
    assert len(left) == 2, "the killed run left the agent's two commits on the branch"

    resumed = sandbox.tilth("resume", "s1", "--foreground", env={"TILTH_SANDBOX": "off"})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1"]
    assert git(sandbox.repo, "rev-parse", "session/s1~1").strip() == base
    assert git(sandbox.repo, "show", "session/s1:b.txt") == "2\n"
    folded = [e for e in sandbox.events("s1") if e["type"] == "worker_commits_folded"]
    assert [(e["task"], sorted(e["data"]["shas"]), e["data"]["onto"]) for e in folded] == [(None, sorted(left), base)]


@pytest.mark.slow
def test_an_accept_after_a_reject_is_committed_not_redone_after_a_kill(sandbox):
    """Killed between the second attempt's accept and its commit: recovery commits that
    attempt (the ledger's last entry), it does not retry the task."""
    scenario = {"tasks": {"T-1": [{"write": {"one.txt": "draft\n"}, "verdict": REJECT},
                                  {"write": {"one.txt": "final\n"}}]}}
    plan = sandbox.write_json("p.json", [task("T-1")])
    proc = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                         "scripted", "--foreground", "--scenario", str(sandbox.write_json("sc.json", scenario)),
                         env={"TILTH_TEST_PAUSE_AT": "before_commit@T-1"})
    wait_for_pause(proc, "before_commit")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = sandbox.tilth("resume", "s1", "--foreground")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [(c["task"], c["iterations"]) for c in sandbox.commits("s1")] == [("T-1", "2")]
    assert git(sandbox.repo, "show", "session/s1:one.txt") == "final\n"
    assert [e["verdict"]["verdict"] for e in sandbox.ledger("s1", "T-1")] == ["reject", "accept"]
    recovered = [(e["task"], e["iter"]) for e in sandbox.events("s1") if e["type"] == "accepted_committed"]
    assert recovered == [("T-1", 2)]


@pytest.mark.slow
def test_without_bubblewrap_auto_runs_unconfined_and_bwrap_is_refused(sandbox, tmp_path):
    """A PATH with git and bash but no bwrap: `auto` says it runs unconfined, `bwrap` refuses
    before anything is created."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "bash", "sh", "env"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = {"PATH": str(bin_dir)}
    assert shutil.which("bwrap", path=str(bin_dir)) is None
    refused = sandbox.start("s1", [task("T-1")], None, env={**env, "TILTH_SANDBOX": "bwrap"})
    assert refused.returncode == 2 and "bubblewrap is not installed or cannot run here" in refused.stderr
    assert not sandbox.session_dir("s1").exists()
    scenario = {"tasks": {"T-1": [{"write": {"one.txt": "1\n"}, "run": ["echo ran > ran.txt"]}]}}
    ran = sandbox.start("s2", [task("T-1")], scenario, env={**env, "TILTH_SANDBOX": "auto"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "UNCONFINED" in ran.stdout
    assert json.loads((sandbox.session_dir("s2") / "session.json").read_text())["sandbox"] == "off"
    assert git(sandbox.repo, "show", "session/s2:ran.txt") == "ran\n"


@pytest.mark.bwrap
def test_a_key_in_config_toml_is_hidden_from_confined_commands(sandbox):
    """config.toml may hold the API key; under bubblewrap the agent's commands cannot read it.
    The home is outside /tmp (as ~/.tilth is), since the sandbox's private /tmp hides it anyway."""
    if subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--proc", "/proc", "true"],
                      capture_output=True).returncode != 0:
        if os.environ.get("TILTH_REQUIRE_BWRAP") == "1":
            pytest.fail("TILTH_REQUIRE_BWRAP=1 but bubblewrap cannot run here")
        pytest.skip("bubblewrap cannot run here")
    home = Path(tempfile.mkdtemp(prefix="tilth-home-", dir="/var/tmp"))
    try:
        key = f"cfg{uuid.uuid4().hex}"
        config = home / "config.toml"
        config.write_text(f'api_key = "{key}"\n')
        scenario = {"tasks": {"T-1": [{"run": [f"cat {config} > seen.txt 2>&1; echo rc=$? >> seen.txt"]}]}}
        result = sandbox.start("s1", [task("T-1")], scenario, env={"TILTH_SANDBOX": "bwrap", "TILTH_HOME": str(home)})
        assert result.returncode == 0, result.stdout + result.stderr
        seen = git(sandbox.repo, "show", "session/s1:seen.txt")
        assert key not in seen and seen.endswith("rc=1\n"), seen
        assert key in config.read_text(), "the file itself is untouched"
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.slow
def test_the_evaluator_call_cap_counts_only_evaluator_calls(sandbox):
    """Three worker calls and one evaluator call in the first attempt: a cap of 2 evaluator
    calls per task still allows the second attempt, which is accepted."""
    with FakeOpenAI() as server:
        server.enqueue("worker", reply(tool_calls=[call("write_file", path="a.py", content="a = 1\n")]),
                       reply(tool_calls=[call("write_file", path="b.py", content="b = 1\n")]),
                       reply(tool_calls=[case("first")]), reply(tool_calls=[case("second")]))
        server.enqueue("evaluator", reply(tool_calls=[verdict("reject", "not yet")]),
                       reply(tool_calls=[verdict("accept")]))
        env = {"TILTH_BASE_URL": server.base_url, "TILTH_API_KEY": "sk-test-cap-0123456789",
               "TILTH_WORKER_MODEL": "worker", "TILTH_EVALUATOR_MODEL": "evaluator", "TILTH_RETRY_BASE_DELAY": "0",
               "TILTH_MAX_EVALUATOR_CALLS_PER_TASK": "2",
               "TILTH_FINAL_REVIEW": "false"}  # the session's final review is one more evaluator call, not the task's
        prd = sandbox.write_json("prd.json", [task("T-1")])
        result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1", "--foreground",
                               env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    calls = [e["data"]["role"] for e in sandbox.events("s1") if e["type"] == "model_call"]
    assert calls.count("worker") == 4 and calls.count("evaluator") == 2
    assert not [e for e in sandbox.events("s1") if e["type"] == "cap_reached"]
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1"]
