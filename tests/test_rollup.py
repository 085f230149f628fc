"""summary.json, the roll-up behind `tilth status`: always equal to folding the whole log again,
whatever happened to the runner, the log or the file itself; and `status` / `logs -n` answer
from it and from the end of the log, never from a full read."""

from __future__ import annotations

import importlib
import json
import os
import random
import signal

import pytest

from conftest import task, wait_for_pause
from fake_openai import call, reply
from tilth.agents.accounting import Meter
from tilth.store.events import EventLog, read_events
from tilth.store.jsonio import append_line
from tilth.store.prompts import append_prompt, prompt_of
from tilth.store.rollup import fingerprint, keep_rollup, load_rollup, read_saved, rebuild, save_rollup
from tilth.views.figures import verdict_label
from tilth.views.readable import Readable
from tilth.views.reasons import task_failure, verdict_words
from tilth.views.status_data import activity
from tilth.views.tally import running_seconds

for _emitter in ("tilth.run.loop", "tilth.run.session_run", "tilth.run.outcomes"):  # they document the event types emitted below
    importlib.import_module(_emitter)

REJECT = {"verdict": "reject", "category": "weak_test", "concern": "no test\n   covers   it", "next_step": "add one"}
TWO_TASKS = {"tasks": {"T-1": [{"write": {"a.txt": "1\n"}, "verdict": REJECT}, {"write": {"a.txt": "2\n"}}],
                       "T-2": [{"write": {"b.txt": "2\n"}}]}}


def full_read(log) -> dict:
    """What `tilth status` used to compute by reading every event."""
    events = read_events(log)
    current, iteration, verdicts = None, None, {}
    for e in events:
        if e["type"] == "task_started":
            current, iteration = e["task"], None
        if e["task"] == current and e["iter"]:
            iteration = e["iter"]
        if e["type"] == "verdict":
            d = e["data"]
            verdicts[e["task"]] = {"attempts": e["iter"], "last_verdict": verdict_label(
                d.get("verdict", ""), d.get("category"), d.get("concern"), limit=100),
                "why": verdict_words(d.get("verdict"), d.get("category"), d.get("concern"), limit=100),
                **({"failure": task_failure(e["iter"], d.get("category"), d.get("concern"), limit=100)}
                   if d.get("verdict") == "reject" else {})}
    meter = Meter.from_events(events)
    return {"current_task": current, "iteration": iteration, "verdicts": verdicts, "tokens": meter.tokens,
            "cost_usd": round(meter.cost_usd, 6), "model_calls": meter.model_calls,
            "unknown_usage_calls": meter.unknown_usage_calls, "cost_is_lower_bound": meter.cost_is_lower_bound,
            "elapsed_s": round(running_seconds(events) or 0.0, 1)}


def assert_rolled_up(sandbox, session_id: str, saved_is_current: bool = True) -> dict:
    """summary.json (when the runner finished) and what a reader folds both equal a rebuild,
    and `tilth status --json` says what a full read of the log says."""
    log = sandbox.session_dir(session_id) / "events.jsonl"
    again = rebuild(log)
    assert again.log_offset == log.stat().st_size
    assert again.events == len(read_events(log))
    if saved_is_current:
        assert read_saved(log.with_name("summary.json")) == again
    assert load_rollup(log) == again
    assert Meter.from_rollup(again) == Meter.from_events(read_events(log))
    status = json.loads(sandbox.tilth("status", session_id, "--json").stdout)
    expected = full_read(log)
    if status["state"] not in ("running", "paused", "crashed"):  # an ended session has no current task
        expected.update(current_task=None, iteration=None)
    assert {k: status[k] for k in expected} == expected
    return status


@pytest.mark.slow
def test_a_session_with_model_calls_rolls_up_like_a_full_read(sandbox, fake, model_env):
    sandbox.home.mkdir(parents=True)
    (sandbox.home / "config.toml").write_text("[prices.worker]\nprompt = 1000\ncompletion = 2000\n")
    case = call("submit_case", summary="Wrote it.", criteria=[{"criterion": "T-1 is done", "evidence": "a.py"}])
    reject = call("submit_verdict", verdict="reject", category="weak_test", concern="no test covers it",
                  evidence=["a.py"], next_step="add a test")
    accept = call("submit_verdict", verdict="accept", category="none", concern="", evidence=["a.py"], next_step="")
    fake.enqueue("worker", reply(tool_calls=[call("write_file", path="a.py", content="a = 1\n")]),
                 reply(tool_calls=[case], usage={"prompt_tokens": -5, "completion_tokens": 7}),
                 reply(tool_calls=[case], usage={"prompt_tokens": 11, "completion_tokens": 13, "total_tokens": 24}),
                 reply(content="NONE"), reply(tool_calls=[case]), reply(content="NONE"))
    fake.enqueue("evaluator", reply(tool_calls=[reject]), reply(tool_calls=[accept]), reply(tool_calls=[accept]))
    prd = sandbox.write_json("prd.json", [task("T-1"), task("T-2", allow_empty=True)])
    sandbox.home.mkdir(parents=True, exist_ok=True)  # a $ cap needs every model priced
    (sandbox.home / "config.toml").write_text("[prices.worker]\nprompt = 1\ncompletion = 1\n"
                                              "[prices.evaluator]\nprompt = 1\ncompletion = 1\n")
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1", "--foreground",
                           env={**model_env, "TILTH_MAX_SPEND_USD": "5", "TILTH_SANDBOX": "off"})
    assert result.returncode == 0, result.stdout + result.stderr

    status = assert_rolled_up(sandbox, "s1")
    assert status["tokens"] > 24 and status["unknown_usage_calls"] == 1 and status["cost_is_lower_bound"] is True
    assert status["verdicts"]["T-1"] == {"attempts": 2, "last_verdict": "accept", "why": "accepted"}
    assert status["caps"]["max_spend_usd"]["limit"] == 5 and status["caps"]["max_spend_usd"]["reached"] is False
    assert status["caps"]["max_spend_usd"]["value"] == status["cost_usd"] > 0
    saved = read_saved(sandbox.session_dir("s1") / "summary.json")
    assert saved.tasks["T-1"].status == "done" and saved.tasks["T-1"].sha == sandbox.commits("s1")[0]["sha"]
    assert saved.tasks["T-1"].evaluator_calls == 2 and saved.tasks["T-1"].tokens > 0
    assert "caps" in sandbox.tilth("status", "s1").stdout


@pytest.mark.slow
def test_kill_9_mid_task_a_torn_line_and_resume_keep_it_equal_to_a_rebuild(sandbox):
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2"), task("T-3")])
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                          "scripted", "--scenario", str(sandbox.write_json("sc.json", TWO_TASKS)), "--foreground",
                          env={"TILTH_TEST_PAUSE_AT": "worker@T-2"})
    wait_for_pause(child, "worker")
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL

    log = sandbox.session_dir("s1") / "events.jsonl"
    saved_at = log.with_name("summary.json")
    saved = saved_at.read_bytes()
    assert read_saved(saved_at).log_offset < log.stat().st_size, "the worker's events came after the last save"
    status = assert_rolled_up(sandbox, "s1", saved_is_current=False)
    assert status["state"] == "crashed" and status["current_task"] == "T-2" and status["iteration"] == 1
    assert status["verdicts"] == {"T-1": {"attempts": 2, "last_verdict": "accept", "why": "accepted"}}
    assert saved_at.read_bytes() == saved, "a reader never writes summary.json"

    with open(log, "ab") as f:
        f.write(b'{"ts": "2026-01-01T00:00:00.000Z", "type": "task_sta')  # a writer killed mid-append
    assert load_rollup(log) == rebuild(log)
    resumed = sandbox.tilth("resume", "s1", "--foreground")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    status = assert_rolled_up(sandbox, "s1")
    assert status["state"] == "done" and status["current_task"] is None, "an ended session has no current task"
    saved = read_saved(saved_at)
    assert [saved.tasks[t].status for t in ("T-1", "T-2", "T-3")] == ["done", "done", "done"]
    assert saved.clock.ran and saved.clock.open_since is None and saved.tasks["T-2"].wall_s > 0


@pytest.mark.slow
def test_status_and_logs_n_answer_without_reading_the_whole_log(sandbox):
    assert sandbox.start("s1", [task("T-1"), task("T-2")], TWO_TASKS).returncode == 0
    before = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    tail = sandbox.tilth("logs", "s1").stdout.splitlines()[-5:]
    log = sandbox.session_dir("s1") / "events.jsonl"
    journal = log.read_bytes()
    hole = 1 << 40  # a 1 TiB sparse prefix of NULs: one garbage line no full read could get through
    with open(log, "r+b") as f:
        f.truncate(hole)
        f.seek(hole)
        f.write(b"\n" + journal)
        saved = read_saved(log.with_name("summary.json"))
        saved.log_offset += hole + 1
        saved.log_fingerprint = fingerprint(f, saved.log_offset)
    save_rollup(log.with_name("summary.json"), saved)

    after = sandbox.tilth("status", "s1", "--json", timeout=30)
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout) == before
    logs = sandbox.tilth("logs", "s1", "-n", "5", timeout=30)
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines() == tail


@pytest.mark.slow
@pytest.mark.parametrize("everything", [False, True])
def test_logs_n_read_from_the_end_shows_the_same_lines_as_a_full_read(sandbox, everything):
    assert sandbox.start("s1", [task("T-1"), task("T-2")], TWO_TASKS).returncode == 0
    log = sandbox.session_dir("s1") / "events.jsonl"
    journal = log.read_bytes()
    with open(log, "ab") as f:
        for _ in range(max(2, (300 << 10) // len(journal))):  # past the first block read back
            f.write(journal)
    flag = ["--all"] if everything else []
    full = sandbox.tilth("logs", "s1", *flag).stdout.splitlines()
    for n in (1, 7, 60, 400):
        shown = sandbox.tilth("logs", "s1", "-n", str(n), *flag)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.splitlines() == full[-n:], n


def test_a_stale_missing_garbage_or_foreign_summary_still_gives_the_rebuild(tmp_path):
    logs = {}
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        log = EventLog(tmp_path / name / "events.jsonl")
        keep_rollup(log)
        log.emit("session_started", backend=name, pid=1, resume=False, caps={"max_spend_usd": 1.5})
        for t in ("T-1", "T-2"):
            log.emit("task_started", t)
            log.emit("verdict", t, 1, verdict="accept", category="", concern="")
        log.emit("model_call", "T-2", 1, role="worker", prompt_tokens=3, completion_tokens=4, cost_usd=0.5,
                 cost_source="provider")
        logs[name] = log.path
    a, b = logs["a"], logs["b"]
    assert read_saved(a.with_name("summary.json")).log_offset < a.stat().st_size, "no save after a model_call"
    assert load_rollup(a) == rebuild(a) and load_rollup(a).totals.tokens == 7
    assert load_rollup(a).caps == {"max_spend_usd": 1.5}

    b.with_name("summary.json").write_bytes(a.with_name("summary.json").read_bytes())
    assert load_rollup(b) == rebuild(b), "another log's summary is noticed"
    b.write_bytes(b.read_bytes()[:100])
    assert load_rollup(b) == rebuild(b), "a truncated log is folded again"
    a.with_name("summary.json").write_bytes(b"{garbage")
    assert load_rollup(a) == rebuild(a)
    a.with_name("summary.json").unlink()
    assert load_rollup(a) == rebuild(a) and rebuild(a).events == 6


@pytest.mark.slow
def test_fold_equals_meter_and_running_seconds_over_damaged_logs(tmp_path):
    """A random journal with garbage, torn lines and odd usage reports: the runner's roll-up, a
    reader's and a rebuild agree, and agree with Meter and running_seconds over read_events."""
    rng = random.Random(7)
    counts = [None, 0, 3, 12.0, -5, 1.5, "9", True, 2**62]
    log = EventLog(tmp_path / "events.jsonl")
    keep_rollup(log)
    for _ in range(600):
        roll = rng.random()
        t = rng.choice(["T-1", "T-2", "T-3"])
        if roll < 0.04:
            log.emit("session_started", backend="x", pid=1, resume=True)
        elif roll < 0.07:
            log.emit("session_end", state="stopped", exit_code=3, reason="")
        elif roll < 0.15:
            log.emit("task_started", t)
        elif roll < 0.22:
            log.emit("verdict", t, rng.randint(1, 4), verdict=rng.choice(["accept", "reject"]),
                     category=rng.choice(["none", "weak_test", None]), concern=" x " * rng.randint(0, 300))
        elif roll < 0.26:
            log.emit(rng.choice(["task_done", "task_failed"]), t, 2, sha=f"{rng.getrandbits(64):016x}", reason="r")
        elif roll < 0.29:
            with open(log.path, "ab") as f:
                f.write(b'{"ts": "2026-01-01T00:00:00.000Z", "type": "model_call", "task": "T-1", "iter": 1, "da')
        elif roll < 0.31:
            append_line(log.path, rng.choice([b"garbage", b"[1, 2]", b'{"ts": 1}', b"{}"]))
        else:
            log.emit("model_call", t, rng.randint(1, 3), role=rng.choice(["worker", "evaluator"]),
                     prompt_tokens=rng.choice(counts), completion_tokens=rng.choice(counts),
                     total_tokens=rng.choice(counts), usage_known=rng.choice([True, False, None]),
                     cost_usd=rng.choice([0.25, -1, None, float("inf"), 3]),
                     cost_source=rng.choice(["provider", "price_table", "unknown"]))
    log.emit("session_end", state="done", exit_code=0, reason="")  # a save point: the saved file is current
    events = read_events(log.path)
    again = rebuild(log.path)
    assert again.events == len(events) > 400
    assert log.keeper.rollup == again == read_saved(log.path.with_name("summary.json"))
    assert load_rollup(log.path) == again
    assert Meter.from_rollup(again) == Meter.from_events(events)
    assert again.clock.seconds() == running_seconds(events)
    shown = activity(again, live=False)
    assert {k: shown[k] for k in full_read(log.path)} == full_read(log.path)
    assert any(v["last_verdict"].startswith("reject") and v["last_verdict"].endswith("...")
               for v in shown["verdicts"].values()), "long concerns are cut as before"
    os.truncate(log.path, 0)
    assert load_rollup(log.path) == rebuild(log.path) and rebuild(log.path).events == 0


def test_a_prompt_is_found_from_its_event_after_a_torn_line_and_old_events_keep_theirs(tmp_path):
    path = tmp_path / "prompts.jsonl"
    first = append_prompt(path, "T-1", 1, "worker", "first prompt\nwith lines")
    with open(path, "ab") as f:
        f.write(b'{"ts": "2026-01-01T00:00:00.000Z", "prompt": "torn')  # a writer killed mid-append
    second = append_prompt(path, "T-1", 2, "worker", "second prompt")
    assert prompt_of({"role": "worker", "prompt_offset": first, "prompt_chars": 24}, tmp_path) == "first prompt\nwith lines"
    assert prompt_of({"role": "worker", "prompt_offset": second, "prompt_chars": 13}, tmp_path) == "second prompt"
    assert prompt_of({"role": "worker", "prompt": "inline, as before"}, tmp_path) == "inline, as before"
    assert prompt_of({"role": "worker", "prompt_offset": 5}, tmp_path) is None, "mid-line is no prompt"
    assert Readable().lines({"ts": "t", "type": "prompt_assembled", "task": None, "iter": None,
                             "data": {"role": "worker", "prompt_offset": second, "prompt_chars": 1234}}) == \
        ["worker prompt: 0 channels, 1,234 chars"]
