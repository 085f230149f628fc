"""More than one machine: sessions queued in a real Redis (RQ) and run by real `tilth worker`
processes, each with its own TILTH_HOME and clone, sharing a bare git remote."""

from __future__ import annotations

import json
import signal

import pytest
import redis

from conftest import git, make_repo, task
from dispatch_cluster import AS_ROOT_AND_UNPRIVILEGED, cluster  # noqa: F401 (the fixture)
from supervised import wait_until

THREE = [("T-1", ""), ("T-2", ""), ("T-3", "")]


def start_asking(cluster, sid: str, tasks: list[str]) -> None:
    """A worker, and a dispatched session whose T-1 writes half.txt and asks a question, then
    (answered) writes whole.txt."""
    cluster.worker("w1")
    plan = cluster.root / f"{sid}-prd.json"
    plan.write_text(json.dumps([task(t) for t in tasks]))
    scenario = cluster.root / f"{sid}-scenario.json"
    scenario.write_text(json.dumps({"tasks": {"T-1": [
        {"write": {"half.txt": "half\n"}, "needs_human": {"question": "Keep v1?", "context": "two callers"}},
        {"write": {"whole.txt": "whole\n"}}]}}))
    started = cluster.tilth("h0", "start", "--dispatch", "--prd", str(plan), "--id", sid, "--backend", "scripted",
                            "--scenario", str(scenario))
    assert started.returncode == 0, started.stderr


@pytest.mark.redis
@pytest.mark.timeout(300)
def test_six_sessions_complete_across_three_workers_with_one_commit_per_task(cluster):
    for name in ("w1", "w2", "w3"):
        cluster.worker(name)
    sessions = [f"s{n}" for n in range(1, 7)]
    for sid in sessions:
        cluster.start(sid)
    for sid in sessions:
        waited = cluster.wait(sid)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert cluster.commits(sid) == THREE, sid
        assert len(cluster.ran_on(sid)) == 1, "no session ran twice"
        assert cluster.file(sid, "session.json") and json.loads(cluster.file(sid, "session.json"))["state"] == "done"
    used = {name for sid in sessions for name in cluster.ran_on(sid)}
    assert len(used) >= 2, f"the sessions ran on {used} only"
    status = cluster.tilth("h9", "status")
    assert all(f"  {sid}  done" in status.stdout for sid in sessions), status.stdout
    logs = cluster.tilth("h9", "logs", "s1")
    assert "[T-3] done: commit" in logs.stdout and "session done" in logs.stdout
    tail = cluster.tilth("h9", "logs", "s1", "-n", "2").stdout.splitlines()
    assert tail == logs.stdout.splitlines()[-2:]


@pytest.mark.redis
@pytest.mark.timeout(400)
def test_a_worker_killed_mid_task_hands_its_session_to_another_with_the_ledger_intact(cluster):
    cluster.worker("w1")
    first = {"write": {"first-attempt.txt": "kept\n"}, "verdict": {"verdict": "reject", "category": "weak_test"}}
    cluster.start("k", held="T-2", before=[first])
    cluster.reached("k", "T-2")
    assert cluster.commits("k") == [("T-1", "")], "T-1's commit was pushed at its task boundary"
    assert "first-attempt.txt" in cluster.file("k", "worktree.patch"), "attempt 1's edits went with its push"
    cluster.worker("w2")
    cluster.kill("w1")
    cluster.release("k", "T-2")
    waited = cluster.wait("k", timeout=240)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert cluster.commits("k") == THREE, "exactly one commit per task, none lost, none twice"
    for tid, verdicts in (("T-1", ["accept"]), ("T-2", ["reject", "accept"]), ("T-3", ["accept"])):
        ledger = [json.loads(line) for line in cluster.file("k", f"ledger/{tid}.jsonl").splitlines()]
        assert [e["verdict"]["verdict"] for e in ledger] == verdicts, (tid, ledger)
        assert [e["iter"] for e in ledger] == list(range(1, len(verdicts) + 1)), "only the attempt in flight redone"
    t2 = git(cluster.remote, "log", "--format=%H", "-1", "--grep=^T-2:", "session/k").strip()
    assert "first-attempt.txt" in git(cluster.remote, "show", "--name-only", "--format=", t2), \
        "the first attempt's edits were carried to the worker that took over"
    progress = [line.split("\t")[1:3] for line in cluster.file("k", "progress.txt").splitlines()]
    assert progress == [["T-1", "done"], ["T-2", "done"], ["T-3", "done"]]
    events = [json.loads(line) for line in cluster.file("k", "events.jsonl").splitlines()]
    assert sum(e["type"] == "session_started" for e in events) == 2, "two runs: the dead worker's and the takeover"
    assert cluster.ran_on("k") == ["w1", "w2"]


@pytest.mark.redis
@pytest.mark.timeout(120)
@AS_ROOT_AND_UNPRIVILEGED
def test_a_worker_never_runs_a_session_whose_lease_is_held(cluster):
    client = redis.Redis.from_url(cluster.redis.url)
    client.set("tilth:lease:l1", "another-machine:1:abcd", px=120_000)
    cluster.worker("w1")
    cluster.start("l1")
    log = cluster.root / "w1.log"
    wait_until(cluster.root, lambda: log.exists() and b"Job OK" in log.read_bytes(), "the job to end", 60)
    assert cluster.commits("l1") == [], "nothing ran"
    assert not (cluster.root / "w1" / "sessions" / "l1").exists()
    assert client.get("tilth:lease:l1") == b"another-machine:1:abcd", "the holder's lease is untouched"

    client.delete("tilth:lease:l1")
    resumed = cluster.tilth("h9", "resume", "l1")
    assert resumed.returncode == 0 and "queued again" in resumed.stdout, resumed.stderr
    assert cluster.wait("l1").returncode == 0
    assert cluster.commits("l1") == THREE


@pytest.mark.redis
@pytest.mark.timeout(120)
@AS_ROOT_AND_UNPRIVILEGED
def test_a_worker_that_lost_its_lease_pushes_nothing_more(cluster):
    cluster.extra["w1"] = "lease_s = 600\n"  # its renewals 200 s apart: only the check before each push can see it
    cluster.worker("w1")
    cluster.start("x1", held="T-1")
    cluster.reached("x1", "T-1")
    client = redis.Redis.from_url(cluster.redis.url)
    client.set("tilth:lease:x1", "the-new-holder:1:beef", px=120_000)  # a partition: another worker took it
    pushed = git(cluster.remote, "rev-parse", "refs/tilth/sessions/x1").strip()
    cluster.release("x1", "T-1")
    log = cluster.root / "w1.log"
    wait_until(cluster.root, lambda: b"Job OK" in log.read_bytes(), "the job to end", 60)
    assert cluster.commits("x1") == [], "T-1's commit never reached the remote"
    assert git(cluster.remote, "rev-parse", "refs/tilth/sessions/x1").strip() == pushed, "nor did its files"
    assert client.get("tilth:lease:x1") == b"the-new-holder:1:beef", "the new holder's lease is untouched"


@pytest.mark.redis
@pytest.mark.timeout(120)
def test_stop_from_a_third_machine_stops_the_remote_session(cluster):
    cluster.worker("w1")
    cluster.start("t1", held="T-1")
    cluster.reached("t1", "T-1")
    stopped = cluster.tilth("h9", "stop", "t1")
    assert stopped.returncode == 0 and "asked its worker" in stopped.stdout, stopped.stdout + stopped.stderr
    cluster.release("t1", "T-1")
    waited = cluster.wait("t1")
    assert waited.returncode == 3, waited.stdout + waited.stderr
    assert cluster.commits("t1") == [("T-1", "")], "the iteration under way finished; nothing after it ran"
    record = json.loads(cluster.file("t1", "session.json"))
    assert record["state"] == "stopped" and "tilth stop" in record["reason"]


@pytest.mark.redis
@pytest.mark.timeout(200)
def test_a_broker_restarted_mid_run_loses_no_session(cluster):
    cluster.worker("w1")
    cluster.start("r1", held="T-2")
    cluster.reached("r1", "T-2")
    cluster.start("r2")  # queued behind r1: only one worker slot
    cluster.redis.restart()
    cluster.release("r1", "T-2")
    for sid in ("r1", "r2"):
        waited = cluster.wait(sid, timeout=150)
        assert waited.returncode == 0, sid + waited.stdout + waited.stderr
        assert cluster.commits(sid) == THREE, sid
    logs = cluster.tilth("h9", "logs", "r1").stdout
    assert logs.count("[T-3] done: commit") == 1, "the mirror caught up after the outage, without repeats"


@pytest.mark.redis
@pytest.mark.timeout(120)
def test_a_worker_shut_down_hands_its_session_back_to_the_queue(cluster):
    cluster.worker("w1")
    cluster.start("h1", held="T-2")
    cluster.reached("h1", "T-2")
    cluster.worker("w2")
    leaving = cluster.workers.pop("w1")
    leaving.send_signal(signal.SIGTERM)
    cluster.release("h1", "T-2")
    assert leaving.wait(60) == 0
    waited = cluster.wait("h1")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert cluster.commits("h1") == THREE
    assert cluster.ran_on("h1") == ["w1", "w2"], "w1 stopped at a safe point and w2 went on"
    events = [json.loads(line) for line in cluster.file("h1", "events.jsonl").splitlines()]
    assert [e["data"]["state"] for e in events if e["type"] == "session_end"] == ["stopped", "done"]


@pytest.mark.redis
@pytest.mark.timeout(120)
def test_a_parked_dispatched_session_is_answered_and_noted_from_another_machine(cluster):
    start_asking(cluster, "q", ["T-1", "T-2"])
    assert cluster.wait("q").returncode == 5, "only the parked task is left: waiting"
    shown = cluster.tilth("h9", "status", "q")
    shown = shown.stdout + shown.stderr
    assert "question T-1 Keep v1?" in shown and 'tilth answer q T-1 "<your answer>"' in shown

    refused = cluster.tilth("h9", "answer", "q", "T-2", "x")
    assert refused.returncode == 2 and "not waiting for an answer (it is done)" in refused.stderr
    noted = cluster.tilth("h9", "note", "q", "prefer small commits")
    assert noted.returncode == 0, noted.stderr
    answered = cluster.tilth("h9", "answer", "q", "T-1", "Drop v1; migrate both callers.")
    assert answered.returncode == 0 and "queued again" in answered.stdout, answered.stdout + answered.stderr
    assert cluster.wait("q").returncode == 0
    assert cluster.commits("q") == [("T-2", ""), ("T-1", "")], "the answered task's retry replaced its placeholder"
    prompts = [json.loads(line) for line in cluster.file("q", "prompts.jsonl").splitlines()]
    retry = next(p["prompt"] for p in prompts if p["task"] == "T-1" and p["iter"] == 2 and p["role"] == "worker")
    assert "Answer: Drop v1; migrate both callers." in retry and "prefer small commits" in retry
    events = [json.loads(line) for line in cluster.file("q", "events.jsonl").splitlines()]
    assert [e["data"]["by"] for e in events if e["type"] == "task_answered"] == ["cli"], "who answered, relayed"
    assert [e["data"]["by"] for e in events if e["type"] == "notes_taken"] == [["cli"]]
    assert redis.Redis.from_url(cluster.redis.url).llen("tilth:inbox:q") == 0, "trimmed once pushed"


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.timeout(300)
def test_a_dispatched_failure_stays_above_and_its_resume_is_one_commit_per_task(cluster):
    """The worker keeps the FAILED placeholder above the task commits on the remote; `tilth resume` from
    another machine retries it from its work, and the rewritten branch reaches the remote through the
    lease (`--force-with-lease` against the tip the worker fetched): one commit per task, in order."""
    cluster.worker("w1")
    cluster.environ["h0"] = {"TILTH_MAX_ITERATIONS_PER_TASK": "1"}
    reject = {"verdict": "reject", "category": "half_finished", "concern": "not finished", "next_step": "finish"}
    plan = cluster.root / "f-prd.json"
    plan.write_text(json.dumps([task("T-1"), task("T-2"), task("T-3", depends_on=["T-1"])]))
    scenario = cluster.root / "f-scenario.json"
    scenario.write_text(json.dumps({"tasks": {"T-1": [{"write": {"half.txt": "half\n"}, "verdict": reject},
                                                      {"write": {"rest.txt": "rest\n"}}]}}))
    started = cluster.tilth("h0", "start", "--dispatch", "--prd", str(plan), "--id", "f", "--backend", "scripted",
                            "--scenario", str(scenario))
    assert started.returncode == 0, started.stdout + started.stderr
    assert cluster.wait("f").returncode == 1
    assert cluster.commits("f") == [("T-2", ""), ("T-1", "failed")], "the placeholder is above the task commits"
    assert "half.txt" not in git(cluster.remote, "ls-tree", "-r", "--name-only", "session/f~1").split(), \
        "the independent task's commit is free of the failed task's edits"

    resumed = cluster.tilth("h9", "resume", "f")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ended = cluster.wait("f", timeout=90)
    assert ended.returncode == 0, ended.stdout + ended.stderr
    assert cluster.commits("f") == [("T-2", ""), ("T-1", ""), ("T-3", "")]
    assert git(cluster.remote, "rev-list", "--merges", "main..session/f") == ""
    assert sorted(git(cluster.remote, "show", "--name-only", "--format=", "session/f~1").split()) == \
        ["half.txt", "rest.txt"], "the retry continued from its placeholder's work and is one commit"


@pytest.mark.slow
@pytest.mark.redis
def test_a_dispatched_session_runs_its_tasks_in_parallel_lanes(cluster):
    """--parallel travels with the session: the worker runs the independent tasks in lanes, lands
    one commit each on the branch it pushes (no merge commit), and leaves no lane behind."""
    cluster.worker("w1")
    plan = cluster.root / "p-prd.json"
    plan.write_text(json.dumps([task(f"T-{n}") for n in range(1, 5)]))
    started = cluster.tilth("h0", "start", "--dispatch", "--parallel", "2", "--prd", str(plan), "--id", "p",
                            "--backend", "scripted")
    assert started.returncode == 0, started.stdout + started.stderr
    waited = cluster.wait("p")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert sorted(cluster.commits("p")) == [(f"T-{n}", "") for n in range(1, 5)], "each task landed once"
    assert git(cluster.remote, "rev-list", "--merges", "main..session/p") == ""
    events = [json.loads(line) for line in cluster.file("p", "events.jsonl").splitlines()]
    assert {e["data"]["lane"] for e in events if e["type"] == "lane_started"} == {1, 2}, "two lanes ran"
    assert git(cluster.remote, "for-each-ref", "refs/heads/tilth-lane", "refs/tilth/partial") == "", \
        "lane branches and kept work stay on the worker"


@pytest.mark.slow
def test_dispatch_without_a_broker_is_refused_in_one_line(tmp_path, sandbox):
    plain = sandbox.tilth("worker")
    assert plain.returncode == 2 and "needs a [dispatch] section" in plain.stderr
    plan = sandbox.write_json("p.json", [task("T-1")])
    started = sandbox.tilth("start", "--dispatch", "--prd", str(plan), "--backend", "scripted")
    assert started.returncode == 2 and "--dispatch needs a [dispatch] section" in started.stderr
    sandbox.home.mkdir(exist_ok=True)
    (sandbox.home / "config.toml").write_text('[dispatch]\nbroker_url = "redis://127.0.0.1:1/0"\nremote = "/nowhere"\n')
    down = sandbox.tilth("worker")
    assert down.returncode == 2 and "is unreachable" in down.stderr and len(down.stderr.strip().splitlines()) == 1
    (sandbox.home / "config.toml").write_text('[dispatch]\nbroker_url = "http://x"\nremote = "/nowhere"\n')
    bad = sandbox.tilth("worker")
    assert bad.returncode == 2 and "broker_url" in bad.stderr and "Redis URL" in bad.stderr
    assert not (sandbox.home / "sessions").exists() or not any((sandbox.home / "sessions").iterdir())


def test_a_push_refused_because_the_remote_ref_moved_inside_receive_pack_is_a_refusal_and_a_held_lock_is_not(tmp_path):
    from tilth.git.carry import BRANCH_REF, GitFailed, PushRefused, ensure_clone, push_session, snapshot

    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(make_repo(tmp_path / "source"), "push", "-q", str(remote), "HEAD:refs/heads/main")
    clone = ensure_clone(tmp_path / "clones", str(remote))

    def advance(files: dict[str, bytes]) -> None:
        tip = git(clone, "rev-parse", f"{BRANCH_REF.format('x')}^{{commit}}").strip() if files else "origin/main"
        made = git(clone, "commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", f"step {len(files)}").strip()
        git(clone, "update-ref", BRANCH_REF.format("x"), made)
        snapshot(clone, "x", files, f"files {len(files)}")

    advance({})
    push_session(clone, str(remote), "x")
    advance({"a": b"1"})
    lock = remote / "refs" / "heads" / "session" / "x.lock"
    lock.write_text("")  # another receive-pack updating it now: worth trying again
    with pytest.raises(GitFailed, match="Unable to create"):
        push_session(clone, str(remote), "x")
    lock.unlink()
    hook = remote / "hooks" / "pre-receive"  # another push lands between the advertisement and the update
    hook.write_text(f"#!/bin/sh\nenv -u GIT_QUARANTINE_PATH git update-ref {BRANCH_REF.format('x')} refs/heads/main\n")
    hook.chmod(0o755)
    with pytest.raises(PushRefused, match=r"another worker moved it on \(cannot lock ref .*: is at \w+ but expected"):
        push_session(clone, str(remote), "x")
