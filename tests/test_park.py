"""Park and answer: a task that needs a person's decision waits (a PARKED placeholder holds its
partial work) while the independent tasks go on; `tilth answer` puts it back, the answer reaches
its next prompts, and the task ends as one commit holding the parked work."""

from __future__ import annotations

import json
import signal

import pytest

from conftest import git, task, wait_for_pause

QUESTION = "Keep the v1 API or move every caller to v2?"
ASKS = {"write": {"partial.py": "# half done\n"},
        "needs_human": {"question": QUESTION, "context": "v1 has 3 callers; v2 breaks the CLI"}}
FINISHES = {"write": {"finished.py": "done = True\n"}}
T2_ASKS = {"tasks": {"T-002": [ASKS, FINISHES]}}


def plan3() -> list[dict]:
    return [task("T-001"), task("T-002", "API choice"), task("T-003", "Docs"),
            task("T-004", "Callers", depends_on=["T-002"])]


def prompts(sandbox, sid: str) -> list[dict]:
    path = sandbox.session_dir(sid) / "prompts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def record(sandbox, sid: str) -> dict:
    return json.loads((sandbox.session_dir(sid) / "session.json").read_text())


def tree(sandbox, ref: str) -> set[str]:
    return set(git(sandbox.repo, "ls-tree", "-r", "--name-only", ref).split())


@pytest.mark.slow
def test_a_parked_task_waits_while_independent_tasks_go_on_and_the_session_ends_waiting(sandbox):
    result = sandbox.start("s1", plan3(), T2_ASKS)
    assert result.returncode == 5, result.stderr

    commits = sandbox.commits("s1")
    assert [(c["task"], c["outcome"]) for c in commits] == [("T-001", ""), ("T-003", ""), ("T-002", "parked")], \
        "the placeholder waits above the task commits"
    assert "partial.py" not in tree(sandbox, commits[1]["sha"]), "T-003 never saw T-002's partial work"
    parked = commits[2]
    assert parked["subject"] == "PARKED (T-002): API choice"
    body = git(sandbox.repo, "log", "-1", "--format=%B", parked["sha"])
    assert f"Question: {QUESTION}" in body and "v2 breaks the CLI" in body
    assert "partial.py" in tree(sandbox, parked["sha"]), "the partial work is kept in the placeholder"
    assert sandbox.statuses("s1") == {"T-001": "done", "T-002": "parked", "T-003": "done", "T-004": "pending"}

    rec = record(sandbox, "s1")
    assert rec["state"] == "waiting"
    assert rec["reason"] == "waiting for an answer: T-002; blocked: T-004 (T-002 parked)"
    assert [line[2] for line in sandbox.progress("s1")] == ["done", "parked", "done"]
    [entry] = sandbox.ledger("s1", "T-002")
    assert entry["verdict"]["verdict"] == "needs_human" and entry["verdict"]["question"] == QUESTION
    assert entry["verdict"]["category"] == "worker_question" and entry["case"] is None
    [parked_event] = [e for e in sandbox.events("s1") if e["type"] == "task_parked"]
    assert parked_event["task"] == "T-002" and parked_event["data"]["question"] == QUESTION
    asked = [json.loads(line) for line in (sandbox.session_dir("s1") / "answers" / "T-002.jsonl").read_text()
             .splitlines()]
    assert asked == [{**asked[0], "kind": "question", "iter": 1, "asked_by": "worker", "question": QUESTION}]

    shown = sandbox.tilth("status", "s1").stdout
    assert "session s1: waiting" in shown
    assert "blocked (T-002 parked) T-004: Callers" in shown
    assert f"question T-002 (worker asked) {QUESTION}" in shown
    assert 'answer:  tilth answer s1 T-002 "<your answer>"' in shown
    summary = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert summary["questions"][0]["task"] == "T-002" and summary["questions"][0]["answered"] is False
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    assert "2/4 done, 0 failed, 1 parked, 1 blocked" in report
    assert f"  PARKED T-002 (asked by the worker) {QUESTION}" in report
    assert 'Next: tilth answer s1 T-002 "<your answer>"' in report
    waited = sandbox.tilth("wait", "s1")
    assert waited.returncode == 5, waited.stdout + waited.stderr


@pytest.mark.slow
def test_an_answer_requeues_the_session_under_the_supervisor_and_reaches_the_next_prompts(sandbox, daemon):
    result = sandbox.start("s1", plan3(), T2_ASKS)
    assert result.returncode == 5, result.stderr

    answered = sandbox.tilth("answer", "s1", "T-002", "Move to v2; keep a v1 shim for the CLI.")
    assert answered.returncode == 0, answered.stderr
    assert "it is pending again" in answered.stdout and "session s1 queued" in answered.stdout
    record_after = daemon.wait_for("s1", lambda r: r["state"] == "done", "s1 to end done")
    assert record_after["supervised"] is True

    commits = sandbox.commits("s1")
    assert [(c["task"], c["outcome"]) for c in commits] == [("T-001", ""), ("T-003", ""), ("T-002", ""), ("T-004", "")]
    done_t2 = [c for c in commits if c["task"] == "T-002" and c["outcome"] == ""]
    assert len(done_t2) == 1, "the retry ends as one commit"
    assert {"partial.py", "finished.py"} <= tree(sandbox, done_t2[0]["sha"]), "the parked work is in it"
    assert sandbox.statuses("s1") == dict.fromkeys(["T-001", "T-002", "T-003", "T-004"], "done")

    seen = {(p["task"], p["role"], p["iter"]): p["prompt"] for p in prompts(sandbox, "s1")}
    for role in ("worker", "evaluator"):
        text = seen[("T-002", role, 2)]
        assert f"Question (attempt 1, asked by the worker): {QUESTION}" in text
        assert "Answer: Move to v2; keep a v1 shim for the CLI." in text
    assert "Move to v2" not in seen[("T-004", "worker", 1)], "the answer is the parked task's channel"
    types = [e["type"] for e in sandbox.events("s1")]
    assert "task_answered" in types and types.count("session_queued") >= 1


@pytest.mark.slow
def test_an_answered_placeholder_leaves_the_branch_so_the_task_is_one_commit(sandbox, daemon):
    result = sandbox.start("s1", [task("T-001"), task("T-002")], T2_ASKS)
    assert result.returncode == 5
    assert sandbox.tilth("answer", "s1", "T-002", "v2").returncode == 0
    daemon.done("s1")
    commits = sandbox.commits("s1")
    assert [(c["task"], c["outcome"]) for c in commits] == [("T-001", ""), ("T-002", "")], \
        "the PARKED placeholder left the branch; its work is in the retry's commit"
    assert {"partial.py", "finished.py"} <= tree(sandbox, commits[1]["sha"])
    assert any(e["type"] == "placeholder_taken" and e["task"] == "T-002" for e in sandbox.events("s1"))


@pytest.mark.slow
def test_answered_attempts_start_over_and_the_evaluator_cannot_park_twice_on_one_question(sandbox, daemon):
    ask = {"verdict": "needs_human", "question": "Is a 2 s timeout acceptable?", "concern": "the spec says 'fast'"}
    reject = {"verdict": "reject", "category": "weak_test", "concern": "no test"}
    scenario = {"tasks": {"T-001": [{"write": {f"a{n}.py": f"n = {n}\n"}, "verdict": verdict}
                                    for n, verdict in enumerate([reject, ask, ask, {"verdict": "accept"}], 1)]}}
    env = {"TILTH_MAX_ITERATIONS_PER_TASK": "2"}
    result = sandbox.start("s1", [task("T-001")], scenario, env=env)
    assert result.returncode == 5, "two attempts, the second parked: not failed"
    assert [c["outcome"] for c in sandbox.commits("s1")] == ["parked"]
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["questions"][0]["asked_by"] == "evaluator"

    daemon.sb.env.update(env)
    assert sandbox.tilth("answer", "s1", "T-001", "yes, 2 s is fine").returncode == 0
    daemon.done("s1")
    verdicts = [(e["iter"], e["verdict"]["verdict"], e["verdict"].get("category")) for e in sandbox.ledger("s1", "T-001")]
    assert verdicts == [(1, "reject", "weak_test"), (2, "needs_human", "evaluator_question"),
                        (3, "reject", "asked_before"), (4, "accept", "")], \
        "attempts 3 and 4 fit a cap of 2: they started over; the same question became a rejection"
    assert "yes, 2 s is fine" in sandbox.ledger("s1", "T-001")[2]["verdict"]["concern"]
    assert [c["outcome"] for c in sandbox.commits("s1")] == [""], "unwound at HEAD, then one commit"
    assert any(e["type"] == "question_repeated" for e in sandbox.events("s1"))


@pytest.mark.slow
def test_a_kill_between_the_park_commit_and_the_status_flip_leaves_one_placeholder(sandbox):
    path = sandbox.write_json("p.json", plan3())
    scenario = sandbox.write_json("sc.json", T2_ASKS)
    for number, point in enumerate(("before_parked_commit", "after_parked_commit", "after_parked_status")):
        sid = f"k-{number}"
        child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(path), "--id", sid, "--backend",
                              "scripted", "--scenario", str(scenario), "--foreground",
                              env={"TILTH_TEST_PAUSE_AT": f"{point}@T-002"})
        wait_for_pause(child, point)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert sandbox.statuses(sid)["T-002"] == ("parked" if point.endswith("status") else "in_progress")

        resumed = sandbox.tilth("resume", sid, "--foreground")
        assert resumed.returncode == 5, resumed.stdout + resumed.stderr
        commits = sandbox.commits(sid)
        assert [(c["task"], c["outcome"]) for c in commits] == [("T-001", ""), ("T-003", ""), ("T-002", "parked")], \
            point
        assert sandbox.statuses(sid)["T-002"] == "parked"
        assert [line[2] for line in sandbox.progress(sid)].count("parked") == 1
        asked = (sandbox.session_dir(sid) / "answers" / "T-002.jsonl").read_text().splitlines()
        assert len(asked) == 1, "one question line, however often recovery parks"
        assert len(sandbox.ledger(sid, "T-002")) == 1, "recovery parks on the recorded question, no new attempt"


@pytest.mark.slow
def test_a_bad_answer_is_refused_in_one_line_and_nothing_is_written(sandbox):
    assert sandbox.start("s1", plan3(), T2_ASKS).returncode == 5
    answers = sandbox.session_dir("s1") / "answers" / "T-002.jsonl"
    before = answers.read_bytes()
    (sandbox.root / "empty.txt").write_text("  \n")
    for args, said in ((["s1", "T-009", "x"], "has no task 'T-009'"),
                       (["s1", "T-001", "x"], "T-001 of session s1 is not waiting for an answer (it is done)"),
                       (["s1", "T-002", "   "], "the answer is empty"),
                       (["s1", "T-002", "x", "--file", "empty.txt"], "as text or with --file"),
                       (["s1", "T-002", "--file", "nope.txt"], "cannot read the answer file nope.txt"),
                       (["s1", "T-002", "--file", "empty.txt"], "the answer is empty"),
                       (["s1", "T-002"], "as text or with --file"),
                       (["nope", "T-002", "x"], "no session 'nope'")):
        result = sandbox.tilth("answer", *args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
    assert answers.read_bytes() == before
    assert sandbox.statuses("s1")["T-002"] == "parked" and record(sandbox, "s1")["state"] == "waiting"


@pytest.mark.slow
def test_the_openai_worker_and_evaluator_park_through_their_tools(sandbox, fake, model_env):
    from fake_openai import SUBMIT, call, reply

    fake.enqueue("worker", reply(tool_calls=[call("write_file", path="half.txt", content="half\n")]),
                 reply(tool_calls=[call("needs_human", question=QUESTION, context="two callers")]),
                 reply(tool_calls=[call("write_file", path="b.txt", content="b\n")]), reply(tool_calls=[SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[call("submit_verdict", verdict="needs_human", category="none",
                                                     concern="the criteria say 'fast'", evidence=[], next_step="",
                                                     question="Is 2 s fast enough?")]))
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2")])
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "m", "--foreground",
                           env={**model_env, "TILTH_SELF_IMPROVEMENT": "false", "TILTH_PREFLIGHT": "false"})
    assert result.returncode == 5, result.stdout + result.stderr
    assert [(c["task"], c["outcome"]) for c in sandbox.commits("m")] == [("T-2", "parked"), ("T-1", "parked")]
    assert "half.txt" in tree(sandbox, sandbox.commits("m")[1]["sha"])
    summary = json.loads(sandbox.tilth("status", "m", "--json").stdout)
    assert [(q["task"], q["asked_by"], q["question"]) for q in summary["questions"]] == [
        ("T-1", "worker", QUESTION), ("T-2", "evaluator", "Is 2 s fast enough?")]
    transcript = (sandbox.session_dir("m") / "transcript.md").read_text()
    assert "PARKED placeholder" in transcript and "question for a person: Is 2 s fast enough?" in transcript


def test_a_cli_agent_asks_with_the_documented_json_form():
    from tilth.agents.backends.final_answer import parse_verdict, parse_worker_answer
    from tilth.store.ledger import Case, Question

    asked = parse_worker_answer('I stopped here.\n```json\n{"needs_human": {"question": "v1 or v2?", '
                                '"context": "both used"}}\n```')
    assert asked == Question(question="v1 or v2?", context="both used")
    both = parse_worker_answer('{"needs_human": {"question": "v1 or v2?"}}\n```json\n{"summary": "done"}\n```')
    assert isinstance(both, Case), "a worker that made a case is judged, not parked"
    assert parse_worker_answer('{"needs_human": {"question": ""}}') is None, "an empty question is no question"
    verdict = parse_verdict('```json\n{"verdict": "needs_human", "question": "2 s?", "concern": "vague"}\n```')
    assert verdict is not None and verdict.parks and verdict.question == "2 s?"
    assert parse_verdict('{"verdict": "needs_human", "concern": "no question"}') is None


def test_an_answer_that_met_a_running_session_is_taken_by_the_supervisor_once(sandbox):
    """`tilth answer` while a runner holds the session only records the answer; the session ends
    `waiting`, and the supervisor queues it again and puts the task back to pending itself
    (`store/unparking.py`, the flip `tilth answer` and the runner make too), saying who answered."""
    from tilth.daemon.transitions import requeue_answered
    from tilth.store.home import session_paths
    from tilth.store.lock import SessionLock

    assert sandbox.start("s1", [task("T-001", "API choice")], {"tasks": {"T-001": [ASKS, FINISHES]}}).returncode == 5
    paths = session_paths("s1", sandbox.home)
    runner = SessionLock(paths.lock, "s1", role="runner")
    assert runner.try_acquire()
    try:
        answered = sandbox.tilth("answer", "s1", "T-001", "Move to v2.")
    finally:
        runner.release()
    assert "is running and takes it at its next task boundary" in answered.stdout, answered.stdout + answered.stderr
    assert sandbox.statuses("s1") == {"T-001": "parked"} and record(sandbox, "s1")["state"] == "waiting"
    assert requeue_answered(paths)
    assert sandbox.statuses("s1") == {"T-001": "pending"} and record(sandbox, "s1")["state"] == "queued"
    queued, flipped = sandbox.events("s1")[-2:]
    assert (queued["type"], queued["data"]["reason"]) == ("session_queued", "answered")
    assert (flipped["type"], flipped["task"], flipped["data"]) == ("task_answered", "T-001",
                                                                   {"question": QUESTION, "by": "cli"})
    assert not requeue_answered(paths), "queued once"
