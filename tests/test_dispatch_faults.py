"""Dispatch as an operator meets it: after each fault every dispatched session has an owner or an
end state with a reason, every task is committed once, and it finishes without a person's help.
Real redis-server (with a password), a bare remote, real `tilth worker` processes."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time

import pytest
import redis

from conftest import git, task
from dispatch_cluster import AS_ROOT_AND_UNPRIVILEGED, Cluster, cluster  # noqa: F401 (the fixture)
from supervised import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]

THREE = [("T-1", ""), ("T-2", ""), ("T-3", "")]


def job_pid(cluster, sid: str) -> int:
    return int(redis.Redis.from_url(cluster.redis.url).hget(f"tilth:session:{sid}", "pid"))


def log_of(cluster, name: str) -> str:
    path = cluster.root / f"{name}.log"
    return path.read_text(errors="replace") if path.exists() else ""


@AS_ROOT_AND_UNPRIVILEGED
@pytest.mark.timeout(240)
def test_a_lease_that_lapses_under_sigstop_moves_the_session_on_within_the_lease(cluster):
    cluster.worker("w1")
    cluster.start("z", held="T-2")
    cluster.reached("z", "T-2")
    frozen = job_pid(cluster, "z")
    cluster.worker("w2")
    os.kill(frozen, signal.SIGSTOP)
    try:
        began = time.monotonic()
        wait_until(cluster.root, lambda: (cluster.home("w2") / "sessions" / "z").is_dir(),
                   "w2 to take the frozen worker's session over", 40)
        took = time.monotonic() - began
    finally:
        os.kill(frozen, signal.SIGCONT)
    assert took < 30, f"takeover took {took:.0f}s: RQ's heartbeat threshold, not the 4 s lease"
    cluster.release("z", "T-2")
    waited = cluster.wait("z")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert cluster.commits("z") == THREE, "every task committed once"
    wait_until(cluster.root, lambda: "lease lost" in log_of(cluster, "w1"), "the frozen worker to see it", 30)


@pytest.mark.timeout(240)
def test_a_frozen_worker_whose_session_was_taken_over_and_finished_names_the_taker_and_does_nothing_more(cluster):
    cluster.worker("w1")
    cluster.start("fz", held="T-2")
    cluster.reached("fz", "T-2")
    frozen = job_pid(cluster, "fz")
    os.kill(frozen, signal.SIGSTOP)
    try:
        cluster.worker("w2")
        wait_until(cluster.root, lambda: job_pid(cluster, "fz") != frozen, "w2 to take the session over", 60)
        taker = job_pid(cluster, "fz")
        cluster.release("fz", "T-2")
        waited = cluster.wait("fz")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        finished = git(cluster.remote, "show-ref").strip()
    finally:
        os.kill(frozen, signal.SIGCONT)  # its lease lapsed long ago, and nobody holds one now
    wait_until(cluster.root, lambda: "Job OK" in log_of(cluster, "w1"), "the frozen worker's job to end", 60)
    said = log_of(cluster, "w1")
    assert re.search(rf"fz: lease lost to worker [^ ]+:{taker}:\w+, which took it while this worker's lease had "
                     r"lapsed; stopping without pushing", said), said[-3000:]
    assert "nobody took it" not in said and "refused session fz's push" not in said, "it never tried to push"
    assert git(cluster.remote, "show-ref").strip() == finished, "the remote as the taker left it"
    assert redis.Redis.from_url(cluster.redis.url).hget("tilth:session:fz", "state") == b"done"
    journal = [json.loads(line) for line in (cluster.home("w1") / "sessions" / "fz" / "events.jsonl").read_text()
               .splitlines()]
    lost = next(i for i, e in enumerate(journal) if e["type"] == "lease_lost")
    assert f":{taker}:" in journal[lost]["data"]["to"] and journal[lost]["data"]["how"] == "took"
    after = [e["type"] for e in journal[lost + 1:]]
    assert not {"task_started", "agent_started", "session_started"} & set(after), after
    ended = [e["data"] for e in journal[lost:] if e["type"] == "session_end"]
    assert ended and ended[0]["state"] == "stopped" and f":{taker}:" in ended[0]["reason"], ended


@pytest.mark.timeout(240)
def test_a_worker_whose_lease_is_taken_mid_attempt_stops_it_at_once_and_the_new_holder_finishes_it(cluster):
    cluster.environ["w1"] = {"TILTH_TEST_PAUSE_AT": "worker@T-1", "TILTH_TEST_FAULTS": "1"}
    cluster.worker("w1")
    cluster.start("cut", tasks=2)
    wait_until(cluster.root, lambda: re.search(r"paused at worker pid=(\d+)", log_of(cluster, "w1")),
               "w1's worker to finish its turn on T-1", 60)
    pid = int(re.findall(r"paused at worker pid=(\d+)", log_of(cluster, "w1"))[0])
    client = redis.Redis.from_url(cluster.redis.url)
    client.set("tilth:lease:cut", "the-new-holder:1:beef", px=120_000)  # a partition: another worker took it
    wait_until(cluster.root, lambda: "lease lost" in log_of(cluster, "w1"), "w1's renewal to find it gone", 30)
    os.kill(pid, signal.SIGUSR1)  # the attempt goes on from the end of the worker's turn
    wait_until(cluster.root, lambda: "Job OK" in log_of(cluster, "w1"), "w1's job to end", 60)
    journal = [json.loads(line) for line in (cluster.home("w1") / "sessions" / "cut" / "events.jsonl").read_text()
               .splitlines()]
    lost = next(i for i, e in enumerate(journal) if e["type"] == "lease_lost")
    after = [e["type"] for e in journal[lost + 1:]]
    assert not {"verdict", "commit", "task_done", "scripted_step", "agent_started", "model_call", "task_started",
                "prompt_assembled", "learnings_proposed"} & set(after), \
        f"the attempt went on after the loss: {after}"
    cut = [e for e in journal[lost:] if e["type"] == "attempt_cut"]
    assert len(cut) == 1 and cut[0]["task"] == "T-1" and "the-new-holder:1:beef" in cut[0]["data"]["reason"], after
    ended = [e["data"] for e in journal[lost:] if e["type"] == "session_end"]
    assert ended and ended[0]["state"] == "stopped", ended
    assert cluster.commits("cut") == [], "nothing of the cut attempt reached the remote"

    cluster.kill("w1")
    client.delete("tilth:lease:cut")  # the new holder's machine died: the sweep hands the session on
    cluster.worker("w2")
    waited = cluster.wait("cut")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert cluster.commits("cut") == THREE[:2], "one commit per task"
    ledger = [json.loads(line) for line in cluster.file("cut", "ledger/T-1.jsonl").splitlines()]
    assert [(e["iter"], e["verdict"]["verdict"]) for e in ledger] == [(1, "accept")], ledger


@pytest.mark.timeout(240)
def test_tilth_own_loop_on_a_worker_that_lost_its_lease_makes_no_model_call_after_the_one_in_flight(cluster, fake):
    from conftest import MODEL_KEY
    from fake_openai import reply, SUBMIT

    in_call, go = threading.Event(), threading.Event()

    def model(body: dict):
        if body.get("model") == "evaluator":
            raise AssertionError("the evaluator was called for an attempt the worker no longer holds")
        if not in_call.is_set():
            in_call.set()
            go.wait(60)
            return reply(tool_calls=[("write_file", json.dumps({"path": "a.txt", "content": "a\n"}))])
        return reply(tool_calls=[SUBMIT])

    fake.set_handler(model)
    models = {"TILTH_API_KEY": MODEL_KEY, "TILTH_WORKER_MODEL": "worker", "TILTH_EVALUATOR_MODEL": "evaluator",
              "TILTH_RETRY_BASE_DELAY": "0", "TILTH_SELF_IMPROVEMENT": "false", "TILTH_FINAL_REVIEW": "false"}
    cluster.environ["h0"] = {**models, "TILTH_BASE_URL": fake.base_url, "TILTH_PREFLIGHT": "false"}
    cluster.environ["w1"] = models
    cluster.extra["w1"] = f'\n\nbase_url = "{fake.base_url}"\npreflight = false\n'
    cluster.worker("w1")
    plan = cluster.root / "own-prd.json"
    plan.write_text(json.dumps([task("T-1")]))
    started = cluster.tilth("h0", "start", "--dispatch", "--prd", str(plan), "--id", "own")
    assert started.returncode == 0, started.stdout + started.stderr
    assert in_call.wait(60), "the worker's first model call never came: " + log_of(cluster, "w1")[-3000:]
    client = redis.Redis.from_url(cluster.redis.url)
    client.set("tilth:lease:own", "the-new-holder:1:beef", px=120_000)
    wait_until(cluster.root, lambda: "lease lost" in log_of(cluster, "w1"), "w1's renewal to find it gone", 30)
    go.set()  # the call in flight answers, asking for more work
    wait_until(cluster.root, lambda: "Job OK" in log_of(cluster, "w1"), "w1's job to end", 60)
    asked = [r["body"]["model"] for r in fake.requests if r["path"].endswith("/chat/completions")]
    assert asked == ["worker"], f"model calls after the loss: {asked}"
    journal = [json.loads(line) for line in (cluster.home("w1") / "sessions" / "own" / "events.jsonl").read_text()
               .splitlines()]
    assert [e["data"]["reason"] for e in journal if e["type"] == "attempt_cut"] and \
        sum(e["type"] == "model_call" for e in journal) == 1, [e["type"] for e in journal]


HELD_AGENT = r'''
import json, os, sys, time
gates = sys.argv[1]
line = {"type": "usage", "model": "my-model", "prompt_tokens": 100, "completion_tokens": 5, "cost": 0.01}
print(json.dumps(line), flush=True)
open(os.path.join(gates, "agent-reached"), "w").close()
while not os.path.exists(os.path.join(gates, "agent-go")):
    time.sleep(0.05)
print(json.dumps(line), flush=True)  # its next model call's usage
time.sleep(60)  # a long run: only the lost lease can end it early
print("```json\n" + json.dumps({"summary": "late", "criteria": []}) + "\n```")
'''


@pytest.mark.timeout(240)
def test_a_cli_agent_on_a_worker_that_lost_its_lease_is_killed_at_its_next_streamed_line(cluster, fake):
    from conftest import MODEL_KEY

    agent = cluster.root / "agent.py"
    agent.write_text(HELD_AGENT)
    models = {"TILTH_API_KEY": MODEL_KEY, "TILTH_WORKER_MODEL": "worker", "TILTH_EVALUATOR_MODEL": "evaluator",
              "TILTH_SELF_IMPROVEMENT": "false", "TILTH_FINAL_REVIEW": "false"}
    cluster.environ["h0"] = {**models, "TILTH_BASE_URL": fake.base_url, "TILTH_PREFLIGHT": "false"}
    cluster.environ["w1"] = models
    cluster.extra["w1"] = (f'\n\nbase_url = "{fake.base_url}"\npreflight = false\nworker_backend = "command"\n'
                           f'worker_command = "{os.path.realpath(sys.executable)} {agent} {cluster.gates}"\n')
    cluster.worker("w1")
    plan = cluster.root / "cli-prd.json"
    plan.write_text(json.dumps([task("T-1")]))
    started = cluster.tilth("h0", "start", "--dispatch", "--prd", str(plan), "--id", "cli")
    assert started.returncode == 0, started.stdout + started.stderr
    wait_until(cluster.gates, (cluster.gates / "agent-reached").exists, "the agent to start", 60)
    redis.Redis.from_url(cluster.redis.url).set("tilth:lease:cli", "the-new-holder:1:beef", px=120_000)
    wait_until(cluster.root, lambda: "lease lost" in log_of(cluster, "w1"), "w1's renewal to find it gone", 30)
    (cluster.gates / "agent-go").touch()
    began = time.monotonic()
    wait_until(cluster.root, lambda: "Job OK" in log_of(cluster, "w1"), "w1's job to end", 45)
    assert time.monotonic() - began < 30, "the agent ran on to its end"
    journal = [json.loads(line) for line in (cluster.home("w1") / "sessions" / "cli" / "events.jsonl").read_text()
               .splitlines()]
    runs = [e["data"]["stopped"] for e in journal if e["type"] == "agent_run"]
    assert len(runs) == 1 and runs[0].startswith("stopped at once: lost the session to worker the-new-holder"), runs
    assert any(e["type"] == "attempt_cut" for e in journal) and not any(e["type"] == "verdict" for e in journal)
    assert not [r for r in fake.requests if r["path"].endswith("/chat/completions")], "no evaluator was asked"


def paused(cluster, name: str) -> list[int]:
    return [int(pid) for pid in re.findall(r"paused at before_push pid=(\d+)", log_of(cluster, name))]


@AS_ROOT_AND_UNPRIVILEGED
@pytest.mark.timeout(300)
def test_a_frozen_push_landing_after_a_takeover_leaves_the_session_owned_and_is_never_overwritten(cluster):
    for name in ("w1", "w2"):
        cluster.environ[name] = {"TILTH_TEST_PAUSE_AT": "before_push@T-2", "TILTH_TEST_FAULTS": "1"}
    cluster.worker("w1")
    cluster.start("lp")
    wait_until(cluster.root, lambda: paused(cluster, "w1"), "w1 to reach its T-2 push", 60)
    late = paused(cluster, "w1")[0]
    os.kill(late, signal.SIGSTOP)  # frozen between its lease check and its push
    before = git(cluster.remote, "rev-parse", "refs/tilth/sessions/lp").strip()
    cluster.worker("w2")
    wait_until(cluster.root, lambda: paused(cluster, "w2"), "w2 to take over and reach its T-2 push", 60)
    os.kill(late, signal.SIGCONT)
    os.kill(late, signal.SIGUSR1)  # the stale push lands first: a fast-forward of what w2 fetched
    try:
        wait_until(cluster.root, lambda: git(cluster.remote, "rev-parse", "refs/tilth/sessions/lp").strip() != before,
                   "the late push to land", 60)
    except AssertionError:
        raise AssertionError("the late push never landed; w1: " + log_of(cluster, "w1")[-4000:]) from None
    landed = git(cluster.remote, "rev-parse", "refs/tilth/sessions/lp").strip()

    seen = set(paused(cluster, "w1"))
    stop = threading.Event()

    def keep_going() -> None:  # every later pause (w2's refused push, the runs after it) goes on at once
        while not stop.wait(0.2):
            for name in ("w1", "w2"):
                for pid in paused(cluster, name):
                    if pid not in seen:
                        seen.add(pid)
                        try:
                            os.kill(pid, signal.SIGUSR1)
                        except ProcessLookupError:
                            pass

    helper = threading.Thread(target=keep_going, daemon=True)
    helper.start()
    try:
        waited = cluster.wait("lp", timeout=180)
    finally:
        stop.set()
        helper.join()
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert cluster.commits("lp") == THREE, "every task committed once"
    final = git(cluster.remote, "rev-parse", "refs/tilth/sessions/lp").strip()
    git(cluster.remote, "merge-base", "--is-ancestor", landed, final)  # raises unless the landed push was
    # built on, never overwritten by a forced one
    assert "another worker moved it on" in log_of(cluster, "w2"), "w2's push was refused as a fast-forward"


def away(cluster) -> None:
    cluster.remote.rename(cluster.remote.with_name("remote.away"))


def back(cluster) -> None:
    cluster.remote.with_name("remote.away").rename(cluster.remote)


@pytest.mark.timeout(240)
def test_a_remote_outage_at_the_end_is_waited_out_and_done_comes_only_after_the_last_push(cluster):
    cluster.extra["w1"] = "retry_s = 0.5\npush_wait_max_s = 1\n"

    def failed() -> int:
        return log_of(cluster, "w1").count("last push failed; trying again")

    cluster.worker("w1")
    cluster.start("ro", held="T-3")
    cluster.reached("ro", "T-3")
    away(cluster)
    try:
        cluster.release("ro", "T-3")
        wait_until(cluster.root, lambda: failed() >= 1, "the last push to fail", 60)
        early = cluster.wait("ro", timeout=2)
        assert early.returncode == 4, "not ended while the remote lacks its work: " + early.stdout + early.stderr
        shown = cluster.tilth("h9", "status", "ro").stdout
        assert "finishing (2/3 done)" in shown, "the remote's progress, not the worker's: " + shown
        assert "does not appear to be a git repository" in log_of(cluster, "w1"), "git's whole message logged"
        wait_until(cluster.root, lambda: failed() >= 6, "six tries (waits doubling from 0.5 s would reach 16 s)", 60)
    finally:
        back(cluster)
    returned = time.monotonic()
    broker = redis.Redis.from_url(cluster.redis.url)
    wait_until(cluster.root, lambda: broker.hget("tilth:session:ro", "state") == b"done", "done", 60)
    took = time.monotonic() - returned
    assert took < 1 + 4, f"done {took:.1f}s after the remote was back: the waits have a 1 s ceiling"
    waited = cluster.wait("ro")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert cluster.commits("ro") == THREE


@pytest.mark.timeout(240)
def test_a_push_refused_by_a_server_hook_is_retried_not_taken_for_a_takeover(cluster):
    flag = cluster.root / "refuse-pushes"
    hook = cluster.remote / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\nif [ -e {flag} ]; then echo 'quota exceeded for tilth' >&2; exit 1; fi\n")
    hook.chmod(0o755)
    cluster.extra["w1"] = "retry_s = 0.5\n"
    cluster.worker("w1")
    cluster.start("hk", held="T-2")
    cluster.reached("hk", "T-2")
    flag.touch()
    cluster.release("hk", "T-2")
    wait_until(cluster.root, lambda: "last push failed; trying again" in log_of(cluster, "w1"),
               "the last push to be refused", 60)
    assert "quota exceeded for tilth" in log_of(cluster, "w1"), "the hook's words are in the log"
    flag.unlink()
    waited = cluster.wait("hk")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert cluster.commits("hk") == THREE


@pytest.mark.timeout(300)
def test_a_broker_outage_longer_than_the_lease_strands_no_running_session(cluster):
    cluster.worker("w1")
    cluster.worker("w2")
    cluster.start("b1", held="T-2")
    cluster.start("b2", held="T-2")
    cluster.reached("b1", "T-2")
    cluster.reached("b2", "T-2")
    cluster.redis.stop()
    time.sleep(6)  # the outage itself: longer than the 4 s lease
    cluster.redis.start()
    for sid in ("b1", "b2"):
        cluster.release(sid, "T-2")
    for sid in ("b1", "b2"):
        waited = cluster.wait(sid, timeout=150)
        assert waited.returncode == 0, sid + waited.stdout + waited.stderr
        assert cluster.commits(sid) == THREE, sid


@pytest.mark.timeout(240)
def test_sessions_a_broker_without_persistence_forgot_are_found_on_the_remote_and_resumed(tmp_path):
    lost = Cluster(tmp_path, persistent=False)
    try:
        lost.start("np", tasks=2)
        lost.redis.restart()  # nothing kept: the queued job and the session's record are gone
        status = lost.tilth("h9", "status")
        assert "np  forgotten" in status.stdout and "tilth resume np" in status.stdout, status.stdout
        again = lost.tilth("h0", "start", "--dispatch", "--prd", str(tmp_path / "np-prd.json"), "--id", "np",
                           "--backend", "scripted")
        assert again.returncode == 2 and "tilth resume np" in again.stderr, again.stderr
        resumed = lost.tilth("h9", "resume", "np")
        assert resumed.returncode == 0 and "queued again" in resumed.stdout, resumed.stdout + resumed.stderr
        lost.worker("w1")
        waited = lost.wait("np")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert lost.commits("np") == [("T-1", ""), ("T-2", "")]
    finally:
        lost.cleanup()


@pytest.mark.timeout(120)
def test_resume_of_a_session_still_in_the_queue_adds_no_second_job(cluster):
    cluster.start("qq", tasks=1)
    resumed = cluster.tilth("h9", "resume", "qq")
    assert resumed.returncode == 0 and "already queued" in resumed.stdout, resumed.stdout + resumed.stderr
    assert redis.Redis.from_url(cluster.redis.url).llen("rq:queue:tilth") == 1
    cluster.worker("w1")
    assert cluster.wait("qq").returncode == 0


@pytest.mark.timeout(240)
def test_a_remote_missing_when_the_job_starts_is_retried_with_waits_not_burned_through(cluster):
    cluster.extra["h0"] = "retry_s = 0.5\ntakeovers = 10\n"  # the submitting machine sets the job's retries

    def tries() -> int:
        return log_of(cluster, "w1").count("exception raised while executing")

    cluster.start("rm", tasks=2)
    away(cluster)
    try:
        cluster.worker("w1")
        wait_until(cluster.root, lambda: tries() >= 2, "two tries against the missing remote", 60)
        state = redis.Redis.from_url(cluster.redis.url).hget("tilth:session:rm", "state")
        assert state == b"queued", "still waiting for its retry, not crashed"
        assert "does not exist" in log_of(cluster, "w1")
    finally:
        back(cluster)
    waited = cluster.wait("rm")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert cluster.commits("rm") == [("T-1", ""), ("T-2", "")]
    assert tries() < 8, f"{tries()} tries: the retries waited (0.5 s, doubling) instead of a burst"


@pytest.mark.timeout(120)
def test_tilth_worker_says_when_an_rq_worker_exits_and_is_started_again(cluster):
    def said() -> str:
        return log_of(cluster, "w1")

    cluster.worker("w1")
    wait_until(cluster.root, lambda: "Listening on" in said(), "the RQ worker to listen", 60)
    first = int(re.search(r"tilth worker: slot 0 pid (\d+)", said()).group(1))
    cluster.redis.stop()
    try:
        os.kill(first, signal.SIGKILL)  # the next one starts while the broker is away: RQ exits at once
        wait_until(cluster.root, lambda: re.search(r"exited: exit code [1-9]\d*; the broker does not answer", said()),
                   "the restarted RQ worker to exit", 30)
    finally:
        cluster.redis.start()
    cluster.start("rq", tasks=1)
    assert cluster.wait("rq").returncode == 0
    lines = [line for line in said().splitlines() if line.startswith("tilth worker: slot 0")]
    assert re.fullmatch(rf"tilth worker: slot 0 \(pid {first}\) exited: killed by SIGKILL; the broker does not "
                        r"answer; starting it again in 1s", lines[1]), lines
    assert re.fullmatch(r"tilth worker: slot 0 pid \d+ \(started again, 1 time\)", lines[2]), lines
    assert re.fullmatch(r"tilth worker: slot 0 \(pid \d+\) exited: exit code [1-9]\d*; the broker does not answer; "
                        r"starting it again in 2s", lines[3]), lines
    assert re.fullmatch(r"tilth worker: slot 0 pid \d+ \(started again, 2 times\)", lines[4]), lines


def started_runs(cluster, sid: str) -> int:
    """How many runs the session's journal on the remote records (each job that ran it starts one)."""
    return cluster.file(sid, "events.jsonl").count('"type":"session_started"')


@pytest.mark.timeout(240)
def test_a_broker_that_forgot_everything_costs_one_command_and_runs_nothing_twice(tmp_path):
    lost = Cluster(tmp_path, persistent=False)
    lost.extra["w1"] = "\n\nrequeue_forgotten = false\n"  # what one person's command does, the worker's own part off
    try:
        lost.worker("w1")
        lost.start("fd", tasks=1)
        assert lost.wait("fd").returncode == 0
        lost.start("mr", held="T-2")
        lost.reached("mr", "T-2")
        lost.start("qd", tasks=2)  # queued behind mr: w1 runs one session at a time
        finished = git(lost.remote, "rev-parse", "refs/tilth/sessions/fd")
        lost.redis.restart()  # nothing kept: every record, job and lease is gone
        status = lost.tilth("h9", "status").stdout
        assert "  fd  done" in status and "fd  forgotten" not in status, status
        assert "qd  forgotten  queued on the remote" in status, status
        resumed = lost.tilth("h9", "resume", "--forgotten")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "session fd: done on the remote; known to the broker again, nothing run" in resumed.stdout
        assert "session qd: queued on the remote; queued again for a worker" in resumed.stdout, resumed.stdout
        assert redis.Redis.from_url(lost.redis.url).hget("tilth:session:fd", "state") == b"done"
        lost.release("mr", "T-2")
        for sid, tasks in (("mr", THREE), ("qd", THREE[:2])):
            waited = lost.wait(sid, timeout=150)
            assert waited.returncode == 0, sid + waited.stdout + waited.stderr
            assert lost.commits(sid) == tasks, sid
        assert git(lost.remote, "rev-parse", "refs/tilth/sessions/fd") == finished, "no job ran for fd"
        assert [started_runs(lost, sid) for sid in ("fd", "mr", "qd")] == [1, 1, 1], "a session ran twice"
        again = lost.tilth("h9", "resume", "--forgotten")
        assert "no forgotten sessions" in again.stdout, again.stdout + again.stderr
    finally:
        lost.cleanup()


@pytest.mark.timeout(240)
def test_the_supervisor_alone_brings_back_what_a_broker_that_came_back_empty_forgot(tmp_path):
    lost = Cluster(tmp_path, persistent=False)
    broker = redis.Redis.from_url(lost.redis.url)
    try:
        lost.worker("w1")
        lost.start("fs", tasks=1)
        assert lost.wait("fs").returncode == 0
        lost.kill("w1")
        lost.start("qs", tasks=2)  # queued, no worker up
        finished = git(lost.remote, "rev-parse", "refs/tilth/sessions/fs")
        lost.redis.restart()
        up = lost.tilth("h9", "daemon")
        assert up.returncode == 0, up.stdout + up.stderr
        wait_until(lost.root, lambda: broker.hget("tilth:session:qs", "state") == b"queued",
                   "the supervisor to queue qs again", 60)
        assert broker.hget("tilth:session:fs", "state") == b"done"
        lost.worker("w2")
        waited = lost.wait("qs")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert lost.commits("qs") == THREE[:2]
        assert git(lost.remote, "rev-parse", "refs/tilth/sessions/fs") == finished, "no job ran for fs"
        assert [started_runs(lost, sid) for sid in ("fs", "qs")] == [1, 1]
    finally:
        lost.tilth("h9", "daemon", "stop")
        lost.cleanup()


@pytest.mark.timeout(300)
def test_a_worker_brings_back_what_it_pushed_last_when_the_broker_comes_back_empty_and_nothing_else(tmp_path):
    lost = Cluster(tmp_path, persistent=False)
    broker = redis.Redis.from_url(lost.redis.url)
    try:
        lost.worker("w1")
        lost.start("fin", tasks=1)
        assert lost.wait("fin").returncode == 0
        lost.start("back", tasks=2, held="T-2")
        lost.reached("back", "T-2")
        leaving = lost.workers.pop("w1")
        leaving.send_signal(signal.SIGTERM)  # it stops at a safe point and pushes the session back as queued
        lost.release("back", "T-2")
        assert leaving.wait(60) == 0
        lost.start("other", tasks=1)  # pushed by the machine that started it; no worker ran it
        finished = git(lost.remote, "rev-parse", "refs/tilth/sessions/fin")
        lost.redis.restart()
        lost.worker("w1")
        wait_until(lost.root, lambda: broker.hget("tilth:session:back", "state") is not None,
                   "w1 to bring back the session it pushed last", 60)
        waited = lost.wait("back")
        assert waited.returncode == 0, waited.stdout + waited.stderr + log_of(lost, "w1")[-3000:]
        assert lost.commits("back") == THREE[:2], "one commit per task"
        assert broker.hget("tilth:session:fin", "state") == b"done", "known again as it ended"
        assert git(lost.remote, "rev-parse", "refs/tilth/sessions/fin") == finished, "no job ran for fin"
        assert started_runs(lost, "fin") == 1 and started_runs(lost, "back") == 2
        assert broker.hget("tilth:session:other", "state") is None, "a session w1 never pushed is not w1's to vouch for"
        assert not broker.exists("tilth:memory"), "a supervisor's recovery of the rest still follows"
        assert "the broker came back empty: session back: queued on the remote; queued again" in log_of(lost, "w1")
        resumed = lost.tilth("h9", "resume", "--forgotten")
        assert "session other: queued on the remote; queued again" in resumed.stdout, resumed.stdout + resumed.stderr
        assert lost.wait("other").returncode == 0
    finally:
        lost.cleanup()


@pytest.mark.timeout(240)
def test_an_end_state_the_broker_missed_goes_out_when_it_answers_and_nothing_runs_again(cluster):
    cluster.worker("w1")
    cluster.start("fe", tasks=2, held="T-2")
    cluster.reached("fe", "T-2")
    cluster.redis.stop()
    cluster.release("fe", "T-2")
    wait_until(cluster.root, lambda: '"state": "done"' in cluster.file("fe", "session.json"),
               "the end pushed to the remote", 60)
    time.sleep(5)  # the outage goes on past the 4 s lease: nothing of the session's run is held any more
    cluster.redis.start()
    waited = cluster.wait("fe")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert cluster.commits("fe") == THREE[:2]
    assert started_runs(cluster, "fe") == 1, "the session was run again to mark it done"
    wait_until(cluster.root, lambda: "its end state (done) is published" in log_of(cluster, "w1"),
               "the job to say its end state went out", 30)
