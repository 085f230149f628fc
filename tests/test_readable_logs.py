"""What a person reads about a session: `tilth logs` (one line per step, bookkeeping folded
unless --all), the foreground run's lines, the verdict labels, and the end report's
per-task table and running time."""

from __future__ import annotations

import re
import signal
from datetime import datetime

import pytest

from conftest import task, wait_for_pause
from fake_openai import ACCEPT, SUBMIT, FakeOpenAI, call, reply
from tilth.cli.review import pr_body
from tilth.store.home import session_paths
from tilth.views.tally import duration, tally


@pytest.fixture
def model(sandbox):
    with FakeOpenAI() as server:
        server.set_handler(lambda body: reply(content="NONE"))
        env = {"TILTH_BASE_URL": server.base_url, "TILTH_WORKER_MODEL": "worker",
               "TILTH_EVALUATOR_MODEL": "evaluator", "TILTH_RETRY_BASE_DELAY": "0"}
        yield server, env


def body(log: str) -> list[str]:
    """The lines without their `HH:MM:SS ` stamps."""
    return [line[9:] for line in log.splitlines()]


@pytest.mark.slow
def test_logs_show_each_step_readably_and_fold_bookkeeping(sandbox, model):
    server, env = model
    server.enqueue("worker", reply(tool_calls=[call("bash", command="git commit -qam x")]),
                   reply(tool_calls=[call("write_file", path="hello.py", content="print('hello')\n")]),
                   reply(tool_calls=[call("read_file", path="hello.py")]),
                   reply(tool_calls=[call("bash", command="echo TOKEN-314159")]),  # printed: a file would be refused
                   reply(tool_calls=[call("bash", command="exit 7")]),
                   reply(tool_calls=[SUBMIT]))
    server.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    env.update({"TILTH_SANDBOX": "off", "TILTH_MAX_ITERATIONS_PER_TASK": "1",
                "TILTH_SECRET_PATTERNS": "TOKEN-[0-9]{6}"})
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd",
                           str(sandbox.write_json("p.json", [task("T-1")])), "--id", "s1", "--foreground",
                           "--check", "true", "--check", "test ! -f hello.py || exit 3", env=env)
    assert result.returncode == 1, result.stdout + result.stderr

    logs = sandbox.tilth("logs", "s1")
    assert logs.returncode == 0, logs.stderr
    lines = body(logs.stdout)
    blocked = ("[T-1 #1] bash: git commit -qam x -> blocked by pre_tool: "
               "tilth makes the commit for this task; leave your changes uncommitted.")
    assert blocked in lines
    assert "[T-1 #1] write_file hello.py" in lines and "[T-1 #1] read_file hello.py" in lines
    assert "[T-1 #1] bash: echo [redacted] -> exit 0" in lines and "[T-1 #1] bash: exit 7 -> exit 7" in lines
    assert "[T-1 #1] check true: pass" in lines and "[T-1 #1] check test ! -f hello.py || exit 3: FAIL (exit 3)" in lines
    verdict = next(line for line in lines if "verdict:" in line)
    assert verdict.startswith("[T-1 #1] verdict: reject (check_failed): The evaluator accepted, but required checks")
    assert any(re.fullmatch(r"\[T-1\] FAILED placeholder [0-9a-f]{7}: .+", line) for line in lines)
    assert any(re.fullmatch(r"\[T-1 #1\] worker prompt: \d+ channels, [\d,]+ chars", line) for line in lines)
    for noise in ("memory_load", "prompt_assembled", "model_attempt", "model_call", "hook_run", "tool_call"):
        assert noise not in logs.stdout, noise
    assert "accept (" not in logs.stdout

    assert "[T-1 #1] bash: git commit -qam x -> blocked by pre_tool:" in result.stdout, "the foreground says the same"
    assert "[T-1 #1] check test ! -f hello.py || exit 3: FAIL (exit 3)" in result.stdout and "memory_load" not in result.stdout

    everything = sandbox.tilth("logs", "s1", "--all").stdout
    loads = [e for e in sandbox.events("s1") if e["type"] == "memory_load"]
    assert everything.count(" memory_load: ") == len(loads) > 0
    assert everything.count(" model_call: ") == len([e for e in sandbox.events("s1") if e["type"] == "model_call"])
    assert blocked in body(everything) and "[T-1 #1] blocked by pre_tool: tilth makes the commit" in everything

    tail = sandbox.tilth("logs", "s1", "-n", "3")
    assert tail.returncode == 0, tail.stderr
    assert tail.stdout.splitlines() == logs.stdout.splitlines()[-3:]
    assert len(tail.stdout.splitlines()) == 3 < len(logs.stdout.splitlines())


def test_logs_show_the_verify_commands_the_baseline_and_the_final_review_in_one_line_each(sandbox):
    hello = {"text": "hello.txt says hello", "verify": "grep -q hello hello.txt"}
    review = {"verdict": {"verdict": "reject", "concern": "one finding",
                          "evidence": ["a.txt duplicates hello.txt: keep one"]}}
    scenario = {"tasks": {"T-1": [{"write": {"hello.txt": "hello\n"}}], "final-review": [review]}}
    result = sandbox.start("s1", [task("T-1", acceptance_criteria=[hello])], scenario, "--check", "test -f README.md")
    assert result.returncode == 0, result.stdout + result.stderr
    head = next(e["data"]["head"] for e in sandbox.events("s1") if e["type"] == "final_review")
    lines = body(sandbox.tilth("logs", "s1").stdout)
    base = next(line for line in lines if line.startswith("baseline on the base commit "))
    assert re.fullmatch(r"baseline on the base commit [0-9a-f]{7}: 1 check, 1 verify command; "
                        r"already failing: grep -q hello hello.txt", base), base
    assert "[T-1 #1] verify grep -q hello hello.txt: pass (hello.txt says hello)" in lines
    at = lines.index(f"final review of {head[:7]}: 1 finding")
    assert lines[at + 1] == "  - a.txt duplicates hello.txt: keep one"
    for kind in ("verifies_run", "baseline_recorded", "final_review"):
        assert f"{kind}:" not in "\n".join(lines), kind


def test_a_skipped_baseline_and_a_failed_final_review_read_as_one_line_each():
    from tilth.views.readable import Readable

    def event(kind: str, **data) -> dict:
        return {"ts": "2026-01-01T00:00:00.000Z", "type": kind, "task": None, "iter": None, "data": data}

    readable = Readable()
    assert readable.lines(event("baseline_skipped", reason="the worktree has uncommitted changes")) == [
        "no baseline on the base commit (the worktree has uncommitted changes): every failing check blocks"]
    assert readable.lines(event("final_review", head="0123456789", backend="openai", verdict=None, concern="",
                                findings=[], error="the evaluator endpoint refused", tasks_added=[])) == [
        "final review of 0123456 not done: the evaluator endpoint refused"]
    assert readable.lines(event("final_review", head="0123456789", backend="scripted", verdict="accept",
                                concern="scripted backend: no model", findings=[], error=None, tasks_added=[])) == [
        "final review of 0123456: no findings (scripted backend: no model)"]


def test_each_command_shows_its_exit_status():
    from tilth.views.readable import Readable

    def bash(command: str, **data) -> dict:
        return {"ts": "2026-01-01T00:00:00.000Z", "type": "tool_call", "task": "T-1", "iter": 1,
                "data": {"role": "worker", "name": "bash", "ok": True, "args": f'{{"command": "{command}"}}', **data}}

    readable = Readable()
    assert readable.lines(bash("true", exit_code=0, stopped=None)) == ["[T-1 #1] bash: true -> exit 0"]
    assert readable.lines(bash("false", exit_code=1, stopped=None)) == ["[T-1 #1] bash: false -> exit 1"]
    assert readable.lines(bash("sleep 9", exit_code=-9, stopped="timeout")) == [
        "[T-1 #1] bash: sleep 9 -> stopped (timeout)"]
    assert readable.lines(bash("make", result="boom\n[exit code 2]")) == ["[T-1 #1] bash: make -> exit 2"], \
        "a journal from before exit_code was recorded"


REJECT = {"verdict": "reject", "category": "weak_test", "concern": "no test covers it", "next_step": "add a test"}
ACCEPTED = {"verdict": "accept", "category": "none"}
SCENARIO = {"tasks": {
    "T-1": [{"write": {"a.py": "a = 1\n"}, "verdict": REJECT}, {"write": {"a.py": "a = 2\n"}, "verdict": ACCEPTED}],
    "T-2": [{"write": {"b.py": "b = 1\n"}, "verdict": ACCEPTED}],
}}


def running_time(events: list[dict]) -> tuple[float, float]:
    """The sum of each run's session_started -> session_end, and first start to last end."""
    when = [(e["type"], datetime.fromisoformat(e["ts"].replace("Z", "+00:00"))) for e in events]
    starts = [ts for kind, ts in when if kind == "session_started"]
    ends = [ts for kind, ts in when if kind == "session_end"]
    assert len(starts) == len(ends) == 2 and starts[0] < ends[0] < starts[1] < ends[1]
    return sum((e - s).total_seconds() for s, e in zip(starts, ends)), (ends[-1] - starts[0]).total_seconds()


@pytest.mark.slow
def test_report_has_a_task_table_honest_labels_and_counts_only_running_time(sandbox):
    plan, scenario = sandbox.write_json("p.json", [task("T-1"), task("T-2")]), sandbox.write_json("sc.json", SCENARIO)
    runner = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                           "scripted", "--scenario", str(scenario), "--foreground", "--check", "true",
                           env={"TILTH_TEST_PAUSE_AT": "worker@T-1"})
    try:
        wait_for_pause(runner, "worker")
        runner.send_signal(signal.SIGTERM)  # T-1's first attempt finishes (rejected), then the run stops
        assert runner.wait(timeout=60) == 3
    finally:
        runner.kill()
    stopped = sandbox.tilth("status", "s1")  # time passes while the session is stopped
    assert "stopped" in stopped.stdout
    assert '(attempt 1: rejected: the evaluator found the tests too weak: "no test covers it")' in stopped.stdout
    resumed = sandbox.tilth("resume", "s1", "--foreground")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "[T-1 #2] verdict: accept\n" in resumed.stdout and "[T-2 #1] verdict: accept\n" in resumed.stdout

    shas = {c["task"]: c["sha"][:7] for c in sandbox.commits("s1")}
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    lines = [line for line in report.splitlines() if line.startswith(("  task ", "  T-"))]
    receipt_at = lines[0].index("tokens in/cached/out")  # then each task's receipt: tokens, cost, time
    table = [line[:receipt_at].split() for line in lines]
    assert table == [
        ["task", "outcome", "attempts", "rejections", "checks", "(last", "attempt)", "commit"],
        ["T-1", "done", "2", "1", "(weak_test)", "1", "passed", shas["T-1"]],
        ["T-2", "done", "1", "0", "1", "passed", shas["T-2"]],
    ]
    assert lines[1][receipt_at:].split()[:2] == ["0/0/0", "$0.0000"]

    paths = session_paths("s1", sandbox.home)
    running, span = running_time(sandbox.events("s1"))
    facts = tally(paths)
    assert facts.wall_seconds == pytest.approx(running, abs=1e-3)
    assert facts.wall_seconds < span, "the time spent stopped is not counted"
    assert f"Wall time:  {duration(running)} over 2 runs (time stopped not counted)\n" in report

    pr = pr_body(facts)
    assert "| T-1 | Task T-1 | done | 2 | accepted |" in pr and "| T-2 | Task T-2 | done | 1 | accepted |" in pr
    status = sandbox.tilth("status", "s1").stdout
    assert "T-1: Task T-1  (attempt 2: accepted)" in status and "T-2: Task T-2  (attempt 1: accepted)" in status
    for shown in (report, pr, status, resumed.stdout, sandbox.tilth("logs", "s1").stdout):
        assert "accept (" not in shown and "(none)" not in shown and "| none |" not in shown
