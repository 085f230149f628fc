"""The supervisor: a real `tilth` supervisor process per test, TILTH_HOME in a tmp dir,
the scripted backend. Sessions are held inside their worker step by a scenario command
that waits for a gate file, so the test decides when an iteration may finish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import MODEL_KEY, git, task
from supervised import alive, start_supervisor, wait_until
from tilth.store.lock import is_locked, read_holder, wait_released


@pytest.mark.slow
def test_start_returns_at_once_and_the_session_completes(sandbox, daemon):
    result = daemon.start("s1", [task("T-1"), task("T-2")])
    out = result.stdout
    assert "session s1 queued" in out
    assert "tilth logs s1 -f" in out and "tilth wait s1" in out and "tilth status" in out
    assert "supervisor pid" in out and "(started)" in out

    waited = sandbox.tilth("wait", "s1", "--timeout", "30")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]

    logs = sandbox.tilth("logs", "s1").stdout
    assert "[T-1] done: commit" in logs and "session done" in logs
    assert "session_launched" in logs, "events without a readable line get a compact one"
    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert summary["state"] == "done" and summary["progress"] == "2/2"
    assert summary["tokens"] == 0 and summary["cost_usd"] == 0 and summary["elapsed_s"] >= 0
    assert {"id", "state", "branch", "worktree", "tasks"} <= set(summary)

    # A done session whose plan gains a pending task goes back to the queue.
    prd = sandbox.session_dir("s1") / "prd.json"
    grown = sandbox.plan("s1") + [task("T-3")]
    tmp = prd.with_name("prd.json.new")
    tmp.write_text(json.dumps(grown))
    tmp.rename(prd)
    daemon.wait_state("s1", "queued", "running")
    assert daemon.events("s1", "session_queued")[-1]["data"]["reason"] == "plan_grew"
    assert daemon.settled("s1") == "done"
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2", "T-3"]


@pytest.mark.slow
def test_at_most_max_parallel_sessions_run_and_the_rest_wait_in_order(sandbox, daemon):
    start_supervisor(sandbox, env={"TILTH_MAX_PARALLEL_SESSIONS": "2"})
    daemon.start_together(*[(sid, [task("T-1"), task("T-2")], daemon.held(sid, "T-1")) for sid in ("a", "b")])
    daemon.start("c", [task("T-1"), task("T-2")], daemon.held("c", "T-1"))
    daemon.reached("a", "T-1")
    daemon.reached("b", "T-1")
    assert (daemon.state("a"), daemon.state("b"), daemon.state("c")) == ("running", "running", "queued")
    follow = subprocess.Popen([sys.executable, "-m", "tilth", "logs", "c", "-f"], env=sandbox.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        daemon.release("a", "T-1")
        daemon.reached("c", "T-1")
        assert daemon.state("b") == "running", "c took a's slot, not a third one"
        daemon.release("b", "T-1")
        daemon.release("c", "T-1")
        waited = sandbox.tilth("wait", "a", "b", "c", "--timeout", "30")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        out, _ = follow.communicate(timeout=15)
    finally:
        follow.kill()
    assert follow.returncode == 0
    assert "[T-1] started" in out and "session done" in out, "logs -f followed the session to its end"
    for sid in ("a", "b", "c"):
        assert [c["task"] for c in sandbox.commits(sid)] == ["T-1", "T-2"]
    a_end = daemon.events("a", "session_end")[0]["ts"]
    assert daemon.events("c", "session_started")[0]["ts"] >= a_end


@pytest.mark.slow
def test_the_watcher_alone_picks_up_a_new_session_and_a_grown_plan(sandbox, daemon):
    start_supervisor(sandbox, "--rescan", "3600")
    main_before = git(sandbox.repo, "rev-parse", "main")
    status_before = git(sandbox.repo, "status", "--porcelain")
    daemon.start("s1", [task("T-1")])
    assert daemon.settled("s1") == "done"
    prd = sandbox.session_dir("s1") / "prd.json"
    prd.with_name("prd.json.new").write_text(json.dumps(sandbox.plan("s1") + [task("T-2")]))
    prd.with_name("prd.json.new").rename(prd)
    daemon.wait_state("s1", "queued", "running")
    assert daemon.settled("s1") == "done"
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]
    assert git(sandbox.repo, "rev-parse", "main") == main_before, "the user's branch never moves"
    assert git(sandbox.repo, "status", "--porcelain") == status_before


@pytest.mark.slow
def test_scheduled_and_dropped_in_sessions_are_picked_up(sandbox, daemon):
    # A rescan once an hour: only the watcher and the scheduled-start job can wake the tick.
    start_supervisor(sandbox, "--rescan", "3600")
    daemon.start("later", [task("T-1")], None, "--at", "2099-01-01T00:00:00Z")
    soon = (datetime.now(timezone.utc) + timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    daemon.start("soon", [task("T-1")], None, "--at", soon)
    assert daemon.record("later")["start_at"] == "2099-01-01T00:00:00Z"

    assert daemon.settled("soon") == "done"
    assert daemon.events("soon", "session_started")[0]["ts"] >= soon.replace("Z", ".000Z")
    assert daemon.state("later") == "queued"

    # Edit the scheduled session in place, as a person or a script would: the watcher sees it.
    record = daemon.record("later")
    record["start_at"] = "2000-01-01T00:00:00Z"
    path = sandbox.session_dir("later") / "session.json"
    path.with_name("session.json.new").write_text(json.dumps(record))
    path.with_name("session.json.new").rename(path)
    assert daemon.settled("later") == "done"


@pytest.mark.slow
def test_kill_9_of_supervisor_and_child_then_resume_makes_one_commit_per_task(sandbox, daemon):
    start_supervisor(sandbox)
    daemon.start("s1", [task("T-1"), task("T-2"), task("T-3")], daemon.held("s1", "T-2", "T-3"))
    daemon.reached("s1", "T-2")
    child = read_holder(sandbox.session_dir("s1") / "session.lock")["pid"]
    supervisor = daemon.pid()
    os.killpg(child, signal.SIGKILL)
    os.kill(supervisor, signal.SIGKILL)
    assert wait_released(sandbox.home / "daemon.lock", 10)
    assert wait_released(sandbox.session_dir("s1") / "session.lock", 10)

    daemon.release("s1", "T-2")
    resumed = sandbox.tilth("resume", "s1")
    assert resumed.returncode == 0, resumed.stderr
    assert "supervisor pid" in resumed.stdout and "(started)" in resumed.stdout
    daemon.reached("s1", "T-3")
    second = sandbox.tilth("resume", "s1")
    assert second.returncode == 2 and "already running" in second.stderr
    daemon.release("s1", "T-3")
    assert daemon.settled("s1") == "done"

    assert daemon.events("s1", "session_started")[-1]["data"]["resume"] is True
    trailers = [c["task"] for c in sandbox.commits("s1")]
    assert trailers == ["T-1", "T-2", "T-3"], "each Tilth-Task exactly once"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done"}


@pytest.mark.slow
def test_stop_lets_the_iteration_finish_and_stop_now_kills(sandbox, daemon):
    start_supervisor(sandbox, env={"TILTH_MAX_PARALLEL_SESSIONS": "3"})
    daemon.start_together(("s1", [task("T-1"), task("T-2")], daemon.held("s1", "T-1")),
                          ("n", [task("T-1")], daemon.held("n", "T-1")),
                          ("k", [task("T-1")], daemon.held("k", "T-1")),
                          ("q", [task("T-1")], None, "--at", "2099-01-01T00:00:00Z"))
    for sid in ("s1", "n", "k"):
        daemon.reached(sid, "T-1")

    # A runner that dies abnormally: its session is marked crashed, the others run on.
    os.killpg(read_holder(sandbox.session_dir("k") / "session.lock")["pid"], signal.SIGKILL)
    daemon.wait_state("k", "crashed")
    assert "SIGKILL" in daemon.events("k", "session_crashed")[0]["data"]["reason"]
    assert daemon.state("s1") == "running" and daemon.state("n") == "running"

    stopped = sandbox.tilth("stop", "s1")
    assert stopped.returncode == 0 and "after the current iteration" in stopped.stdout
    daemon.release("s1", "T-1")
    assert sandbox.tilth("wait", "s1", "--timeout", "30").returncode == 3
    assert daemon.state("s1") == "stopped"
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1"], "the iteration finished and was committed"
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "pending"}

    runner = read_holder(sandbox.session_dir("n") / "session.lock")["pid"]
    now = sandbox.tilth("stop", "n", "--now")
    assert now.returncode == 0 and "killed" in now.stdout, now.stderr
    assert daemon.state("n") == "stopped" and not alive(runner)
    assert sandbox.commits("n") == []
    report = (sandbox.session_dir("n") / "report.md").read_text()  # the killed runner could not write it
    assert f"report: {sandbox.session_dir('n') / 'report.md'}" in now.stdout
    assert report.startswith("Session n: stopped (runner killed by `tilth stop --now`)") and "T-1   stopped" in report

    timed_out = sandbox.tilth("wait", "q", "--timeout", "0.5")
    assert timed_out.returncode == 4 and "timed out" in timed_out.stdout
    queued = sandbox.tilth("stop", "q")
    assert queued.returncode == 0 and "was queued" in queued.stdout
    assert daemon.state("q") == "stopped"

    assert sandbox.tilth("resume", "s1").returncode == 0
    assert daemon.settled("s1") == "done"
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]


@pytest.mark.slow
def test_daemon_stop_lets_iterations_finish_and_queued_sessions_survive(sandbox, daemon):
    pid = start_supervisor(sandbox, env={"TILTH_MAX_PARALLEL_SESSIONS": "1"})
    again = sandbox.tilth("daemon")
    assert again.returncode == 2 and "already running" in again.stderr and str(pid) in again.stderr
    foreground = sandbox.tilth("daemon", "--foreground")
    assert foreground.returncode == 2 and str(pid) in foreground.stderr
    status = sandbox.tilth("daemon", "status")
    assert status.returncode == 0 and f"pid {pid}" in status.stdout

    daemon.start("r", [task("T-1"), task("T-2")], daemon.held("r", "T-1"))
    daemon.start("q", [task("T-1")])  # after r: r is older, so r takes the one slot
    daemon.reached("r", "T-1")
    assert daemon.state("q") == "queued"

    stopper = subprocess.Popen([sys.executable, "-m", "tilth", "daemon", "stop", "--timeout", "30"], env=sandbox.env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = sandbox.home / "daemon.log"
    wait_until(sandbox.home, lambda: "stop requested" in log.read_text(), "the supervisor to take the stop")
    daemon.release("r", "T-1")
    out, err = stopper.communicate(timeout=30)
    assert stopper.returncode == 0 and f"supervisor pid {pid} stopped" in out, err
    assert not (sandbox.home / "daemon.pid").exists()
    assert not is_locked(sandbox.home / "daemon.lock")
    assert daemon.state("r") == "stopped" and [c["task"] for c in sandbox.commits("r")] == ["T-1"]
    assert daemon.state("q") == "queued", "a queued session survives the supervisor"

    start_supervisor(sandbox)
    assert daemon.settled("q") == "done"

    unit = sandbox.tilth("daemon", "unit").stdout
    assert f"ExecStart={Path(sys.executable).absolute()} -m tilth daemon --foreground" in unit
    assert f"Environment=TILTH_HOME={sandbox.home}" in unit and "Restart=on-failure" in unit


@pytest.mark.slow
def test_daemon_stop_is_not_held_up_by_a_session_that_will_not_finish_its_iteration(sandbox, daemon):
    start_supervisor(sandbox, env={"TILTH_STOP_GRACE_S": "1"})
    daemon.start("g", [task("T-1"), task("T-2")], daemon.held("g", "T-1"))
    daemon.reached("g", "T-1")
    runner = read_holder(sandbox.session_dir("g") / "session.lock")["pid"]

    stopped = sandbox.tilth("daemon", "stop", "--timeout", "50")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stdout + stopped.stderr
    assert not alive(runner), "the runner was killed once the grace period ran out"
    assert daemon.state("g") == "stopped", "killed on purpose: resumable, not crashed"
    assert sandbox.commits("g") == []
    assert "still running after 1.0s" in (sandbox.home / "daemon.log").read_text()

    daemon.release("g", "T-1")
    resumed = sandbox.tilth("resume", "g", "--foreground")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [c["task"] for c in sandbox.commits("g")] == ["T-1", "T-2"]


@pytest.mark.slow
def test_settings_travel_with_the_session_not_with_the_supervisor(sandbox, daemon, fake, model_env):
    """A supervisor started from a shell with a dead endpoint and another model runs a session
    started from this shell with this shell's settings; keys stay in the environment."""
    from fake_openai import ACCEPT, SUBMIT, call, reply

    stale = {**model_env, "TILTH_BASE_URL": "http://127.0.0.1:9/v1", "TILTH_WORKER_MODEL": "old-model",
             "TILTH_PREFLIGHT": "false"}
    start_supervisor(sandbox, env=stale)
    fake.enqueue("worker", reply(tool_calls=[call("write_file", path="a.txt", content="a\n")]), reply(tool_calls=[SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))

    config = sandbox.tilth("config", env=model_env)
    # the session's recorded value wins, so this is no warning: a note in `tilth config`, nothing at start
    assert f"note: the supervisor (pid {daemon.pid()}) has TILTH_BASE_URL=http://127.0.0.1:9/v1, this shell " \
           f"TILTH_BASE_URL={fake.base_url}: a session runs with the settings recorded" in config.stdout, config.stdout
    assert "WARNING" not in config.stdout
    assert "TILTH_API_KEY" not in config.stdout.split("supervisor (pid")[-1], "equal keys are no difference"

    started = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd",
                            str(sandbox.write_json("p.json", [task("T-1")])), "--id", "s1", env=model_env)
    assert started.returncode == 0, started.stderr
    assert "supervisor" not in started.stderr and "WARNING" not in started.stderr, "the shell's value is applied"
    assert daemon.settled("s1") == "done"
    assert {r["body"]["model"] for r in fake.requests if r.get("body")} == {"worker", "evaluator"}
    recorded = daemon.record("s1")
    assert recorded["settings"]["base_url"] == fake.base_url and recorded["settings"]["worker_model"] == "worker"
    assert recorded["keys"] == ["api_key"] and MODEL_KEY not in (sandbox.session_dir("s1") / "session.json").read_text()


@pytest.mark.slow
def test_a_key_the_supervisor_lacks_is_refused_at_start_and_a_runner_without_it_stops(sandbox, daemon, model_env):
    keyless = {k: v for k, v in model_env.items() if k != "TILTH_API_KEY"}
    start_supervisor(sandbox, env=keyless)
    plan = str(sandbox.write_json("p.json", [task("T-1")]))
    refused = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", plan, "--id", "s1",
                            env={**model_env, "TILTH_PREFLIGHT": "false"})
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"supervisor (pid {daemon.pid()}) was started without TILTH_API_KEY" in refused.stderr
    assert not sandbox.session_dir("s1").exists()

    sandbox.tilth("daemon", "stop", "--timeout", "20")
    made = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", plan, "--id", "s2", "--at",
                         "2099-01-01T00:00:00Z", env={**model_env, "TILTH_PREFLIGHT": "false"})
    assert made.returncode == 0, made.stderr
    sandbox.tilth("daemon", "stop", "--timeout", "20")
    ran = sandbox.tilth("run", "s2", env=keyless)
    assert ran.returncode == 2 and "session s2 was started with TILTH_API_KEY, which this process does not have" \
        in ran.stderr, ran.stderr
    assert daemon.state("s2") == "stopped" and "TILTH_API_KEY" in daemon.record("s2")["reason"]
