"""Every report of one recorded session says the same thing: a real session against the local Chat
Completions server (tests/fake_openai.py) with a retried task, a FAILED task and a `tilth stop`
(SIGTERM) during a task's last attempt is rendered by `tilth status`, `status --json`, the end
report, the PR body, the notifications and the digest, and each is checked against the others:
the same attempt counts, commits, spend and outcome words, reasons in words with the evaluator's
concern, no current task once it ended, plurals right. Text from the plan and the model holding
terminal escape sequences reaches no terminal raw."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import pytest

from conftest import task
from fake_openai import call, reply
from test_notify import Receiver
from tilth.cli.review import pr_body
from tilth.store.home import session_paths
from tilth.views.figures import dollars, money, plural, spend
from tilth.views.readable import Readable
from tilth.views.reasons import session_end, task_failure, verdict_words
from tilth.views.tally import tally

HOSTILE = "\x1b]0;owned\x07\x1b[2J"
"""Retitles the terminal (OSC 0 ... BEL) and clears it (CSI 2 J)."""
CONCERN = {"T-1": f"no test covers the empty input {HOSTILE}", "T-2": "the --verbose flag is not in the README",
           "T-3": "the error message names no file"}
COST = 0.001
"""Each model call's cost as the provider reports it (`usage.cost`): the spend is known to the cent."""


def write(task_id: str, attempt: int) -> tuple[str, str]:
    return call("write_file", path=f"{task_id}.txt", content=f"{task_id} attempt {attempt}\n")


def submit(task_id: str) -> tuple[str, str]:
    return call("submit_case", summary=f"did {task_id} {HOSTILE}",
                criteria=[{"criterion": f"{task_id} is done", "evidence": "see the file"}])


def verdict(task_id: str, accept: bool) -> tuple[str, str]:
    if accept:
        return call("submit_verdict", verdict="accept", category="none", concern="", evidence=[], next_step="")
    category = {"T-1": "weak_test", "T-2": "acceptance_gap", "T-3": "spec_violation"}[task_id]
    return call("submit_verdict", verdict="reject", category=category, concern=CONCERN[task_id], evidence=[],
                next_step="fix it")


def no_raw_controls(*outputs: str) -> None:
    for text in outputs:
        raw = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0]
        assert not raw, f"raw control characters reached the terminal: {raw!r} in {text[:400]!r}"


@pytest.mark.slow
def test_every_report_of_one_session_agrees(sandbox, fake, model_env):
    """T-1 is rejected then accepted; T-2 is rejected twice and fails; during T-3's second (last)
    attempt the runner gets SIGTERM, as `tilth stop` sends it: T-3 is stopped, never FAILED."""
    plan = [task("T-1", f"Greet {HOSTILE}"), task("T-2", "Add --verbose"), task("T-3", "Name the file")]
    script = [("T-1", False), ("T-1", True), ("T-2", False), ("T-2", False), ("T-3", False)]
    for n, (task_id, accept) in enumerate(script):
        fake.enqueue("worker", reply(tool_calls=[write(task_id, n), submit(task_id)], cost=COST))
        fake.enqueue("evaluator", reply(tool_calls=[verdict(task_id, accept)], cost=COST))
    fake.enqueue("evaluator", reply(tool_calls=[verdict("T-3", False)], cost=COST))
    runner: list[subprocess.Popen] = []

    def last_worker_call(body: dict):  # T-3's second attempt: the stop arrives while the model works
        runner[0].send_signal(signal.SIGTERM)
        return reply(tool_calls=[write("T-3", 9), submit("T-3")], cost=COST)

    fake.set_handler(last_worker_call)
    with Receiver() as receiver:
        env = {**sandbox.env, **model_env, "TILTH_SELF_IMPROVEMENT": "false", "TILTH_MAX_ITERATIONS_PER_TASK": "2",
               "TILTH_NOTIFY": receiver.url}
        prd = sandbox.write_json("plan.json", plan)
        runner.append(subprocess.Popen(
            [sys.executable, "-m", "tilth", "start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1",
             "--foreground"], env=env, cwd=sandbox.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        started_out, started_err = runner[0].communicate(timeout=120)
        assert runner[0].returncode == 3, started_out + started_err  # stopped before finishing
        failed_note, end_note = receiver.wait(2)

    plain = {**sandbox.env, **model_env}
    status_text = sandbox.tilth("status", "s1", env=plain).stdout
    table = sandbox.tilth("status", env=plain).stdout
    [summary] = json.loads(sandbox.tilth("status", "--json", env=plain).stdout)
    digest = sandbox.tilth("digest", env=plain).stdout
    logs = sandbox.tilth("logs", "s1", env=plain).stdout
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    facts = tally(session_paths("s1", sandbox.home))
    body = pr_body(facts)
    notes = [failed_note["title"], failed_note["message"], end_note["title"], end_note["message"]]

    # outcome words: stopped, never FAILED, for T-3 and the session, everywhere
    assert summary["state"] == "stopped" and facts.state == "stopped"
    said = "stopped on request"  # a SIGTERM without a person's `acted` stop event: nobody said who
    assert end_note["title"] == f"tilth: session s1 {said} (1/3 tasks)" and end_note["type"] != "failure"
    assert report.startswith(f"Session s1: {said}\n") and end_note["message"].startswith(f"Session s1: {said}\n")
    assert "s1 [stopped]" in digest and f"session {said} (`tilth resume s1`)" in digest
    assert "session s1: stopped" in status_text and f"reason   {said}" in status_text.splitlines()
    assert f"session {said}" in logs
    for text in (report, body, started_out, *notes, digest, logs, status_text):
        assert "FAILED T-3" not in text and "FAILED placeholder" not in text.split("[T-3")[-1]
    assert {t["id"]: t["status"] for t in summary["tasks"]} == {"T-1": "done", "T-2": "failed", "T-3": "in_progress"}
    assert [t.outcome for t in facts.tasks] == ["done", "failed", "in_progress"]
    assert re.search(r"^  T-3\s+stopped\s+2\s", report, re.M) and "| T-3 | Name the file | stopped | 2 |" in body
    assert "  stopped     T-3: Name the file  (attempt 2: rejected: " in status_text
    assert "**Not finished yet:** T-3 (stopped)." in body

    # one attempt count everywhere
    attempts = {"T-1": 2, "T-2": 2, "T-3": 2}
    assert {t["id"]: t["attempts"] for t in summary["tasks"]} == attempts
    assert {t.id: t.iterations for t in facts.tasks} == attempts
    assert {tid: v["attempts"] for tid, v in summary["verdicts"].items()} == attempts
    for task_id, n in attempts.items():
        row = next(line.split() for line in report.splitlines() if line.strip().startswith(f"{task_id} "))
        assert row[2] == str(n), row
        assert re.search(rf"\| {task_id} \|[^\n]*\| {n} \|", body)
    why = ('failed after 2 attempts: the evaluator found an acceptance criterion not met: '
           '"the --verbose flag is not in the README"')
    for text in (report, body, status_text, logs):
        assert why in text, text
    assert f"Task T-2 (Add --verbose) {why}" in failed_note["message"]
    assert f"task T-2 (Add --verbose) {why}" in digest
    assert "Attempts:   6" in report and "6 attempts" in body
    assert "iterations_exhausted" not in report + body + status_text + digest + "".join(notes)

    # commits as they are: the branch holds T-1's commit and T-2's FAILED placeholder
    shas = [c["sha"][:7] for c in sandbox.commits("s1")]
    assert len(shas) == len(facts.commits) == 2
    counted = f"2 commits: 1 task commit, 1 placeholder above them holding partial work: `{shas[1]}` FAILED (T-2)"
    assert (f"Tasks from tilth session `s1` on `session/s1` (base `{facts.base_commit[:7]}`), {counted}.") in body
    assert f"Commits:    {counted}\n" in report

    # the spend, the same in each: 12 calls (6 attempts, a worker and an evaluator call each) of $0.001
    assert summary["model_calls"] == 12 and summary["cost_usd"] == pytest.approx(12 * COST)
    assert facts.cost_usd == pytest.approx(12 * COST)
    for text in (report, end_note["message"]):
        assert "Cost: $0.0120" in text.replace("Cost:       ", "Cost: ")
    assert "$0.0120." in body and "spend $0.0120" in digest and ", $0.0120" in status_text
    assert " $0.01 " in table

    # an ended session has no current task
    assert summary["current_task"] is None and summary["iteration"] is None
    assert "current  -" in status_text.splitlines()
    assert re.search(r"^s1\s+stopped\s+1/3\s+-\s", table, re.M), table

    # plurals
    for text in (report, body, status_text, digest, *notes):
        assert not re.search(r"\b1 (attempts|model calls|commits|tasks failed|placeholders|sessions|session\(s\))\b", text), text

    # nothing from the plan or the model reached the terminal raw, and it is still there to read
    no_raw_controls(started_out, started_err, status_text, table, digest, logs)
    assert "Greet \\x1b]0;owned\\x07\\x1b[2J" in status_text and "\\x1b[2J" in logs


def event(kind: str, data: dict, task_id: str | None = None, iteration: int | None = None) -> dict:
    return {"ts": "2026-01-01T00:00:00.000Z", "type": kind, "task": task_id, "iter": iteration, "data": data}


def test_a_stop_says_who_asked_when_its_event_says():
    readable = Readable()
    assert readable.lines(event("session_end", {"state": "stopped", "exit_code": 3, "reason": "stop requested"})) \
        == ["session stopped on request"]
    readable.lines(event("acted", {"action": "stop", "by": "dashboard"}))
    assert readable.lines(event("session_end", {"state": "stopped", "exit_code": 3, "reason": "stop requested"})) \
        == ["session stopped from the dashboard"]
    assert session_end("stopped", "stop requested", "cli") == "stopped by `tilth stop`"
    assert session_end("stopped", "max_spend_usd reached (0.2 >= 0.1); raise it", "cli").startswith("max_spend_usd")


def test_a_failed_line_in_the_logs_says_why_in_words():
    readable = Readable()
    readable.lines(event("verdict", {"verdict": "reject", "category": "check_failed", "concern": "pytest: 2 failed"},
                         "T-4", 3))
    [line] = readable.lines(event("task_failed", {"sha": "0123456789", "reason": "iterations_exhausted after 3 "
                                                  "attempts; last verdict check_failed"}, "T-4", 3))
    assert line == '[T-4] FAILED placeholder 0123456: failed after 3 attempts: a check failed: "pytest: 2 failed"'


@pytest.mark.parametrize("shown, expected", [
    (lambda: money(0.00004), "< $0.0001"), (lambda: money(0.004, places=2), "< $0.01"),
    (lambda: money(0.0123), "$0.0123"), (lambda: money(0.0, True), "≥ $0.0000"),
    (lambda: dollars(0.001), "$0.001"), (lambda: dollars(5), "$5.00"), (lambda: dollars(0.0005), "$0.0005"),
    (lambda: spend(0.0, False, 3), "unknown (3 model calls without a price)"),
    (lambda: spend(0.5, False, 1), "≥ $0.5000 (1 model call without a price)"),
    (lambda: spend(0.0, False, 2, brief=True), "unknown"), (lambda: spend(0.0, True), "unknown"),
    (lambda: spend(0.0), "$0.0000"),
    (lambda: plural(1, "model call"), "1 model call"), (lambda: plural(2, "attempt"), "2 attempts"),
    (lambda: task_failure(1, "weak_test", "no\ntest"), 'failed after 1 attempt: the evaluator found the tests too '
                                                        'weak: "no test"'),
    (lambda: verdict_words("needs_human", "evaluator_question", "which one?"), 'waits for an answer: "which one?"'),
])
def test_figures_and_reasons_read_right(shown, expected):
    assert shown() == expected
