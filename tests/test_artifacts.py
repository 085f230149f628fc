"""Script artifacts (`sessions/<id>/runs/run-<runId>/`), the daily memory (`$TILTH_HOME/memory/`)
and `tilth digest`, through real `tilth` processes."""

from __future__ import annotations

import json
import multiprocessing
import re
import signal
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import MODEL_KEY, git, task, wait_for_pause
from fake_openai import call, reply

from tilth.store import daily_memory

RESULT_TYPES = {"ok": bool, "runId": str, "runDir": str, "scriptPath": str, "exitCode": int, "timedOut": bool,
                "durationMs": int, "stdout": str, "stderr": str}
RUN_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")
REJECT = {"verdict": "reject", "category": "half_finished", "concern": "not   finished\nyet", "next_step": "finish"}
LINE = re.compile(r"^- \[\d\d:\d\d:\d\d\] \[(OK|FAIL)\] \[([^\]]+)\] task: (\S+) (.*) \| result: (.*)$")


def run_dirs(sandbox, session_id: str) -> list[Path]:
    runs = sandbox.session_dir(session_id) / "runs"
    return sorted(p for p in runs.iterdir() if p.name.startswith("run-")) if runs.exists() else []


def check_run_dir(run: Path) -> dict:
    assert {p.name for p in run.iterdir()} == {"script.sh", "stdout.log", "stderr.log", "result.json"}
    result = json.loads((run / "result.json").read_text())
    assert list(result) == list(RESULT_TYPES)
    assert all(type(result[k]) is t for k, t in RESULT_TYPES.items()), result
    assert RUN_ID.match(result["runId"]) and run.name == f"run-{result['runId']}"
    assert result["runDir"] == str(run) and result["scriptPath"] == str(run / "script.sh")
    assert result["ok"] == (result["exitCode"] == 0 and not result["timedOut"])
    assert len(result["stdout"]) <= 4000 and len(result["stderr"]) <= 4000
    return result


def memory_lines(home: Path) -> tuple[list[str], list[str]]:
    """(headers, entry lines) of every day file."""
    headers, lines = [], []
    for path in sorted((home / "memory").glob("*.md")):
        text = path.read_text()
        assert text.startswith(f"# Memory {path.stem}\n\n"), text
        for line in text.splitlines():
            (headers if line.startswith("# ") else lines if line else []).append(line)
    return headers, lines


LOUD = f"echo {MODEL_KEY}; seq 1 3000; echo warn-line >&2"


def baseline_ids(events: list[dict]) -> list[str]:
    """The check runs of the baseline at the base commit (one `baseline_recorded` per session)."""
    recorded = [e for e in events if e["type"] == "baseline_recorded"]
    assert len(recorded) == 1
    return [c["run_id"] for c in recorded[0]["data"]["checks"]]


@pytest.mark.slow
def test_bash_and_check_runs_leave_whole_redacted_artifacts(sandbox, fake, model_env):
    fake.enqueue("worker", reply(tool_calls=[call("bash", command=LOUD), call("bash", command="exit 3")]),
                 reply(tool_calls=[call("submit_case", summary="first try", criteria=[])]),
                 reply(tool_calls=[call("write_file", path="hello.py", content="print(1)\n")]),
                 reply(tool_calls=[call("submit_case", summary="wrote hello.py", criteria=[])]))
    fake.enqueue("evaluator", reply(tool_calls=[call("submit_verdict", verdict="reject", category="acceptance_gap",
                                                     concern="no hello.py", evidence=[], next_step="write it")]),
                 reply(tool_calls=[call("submit_verdict", verdict="accept", category="none", concern="",
                                        evidence=[], next_step="")]))
    prd = sandbox.write_json("prd.json", [task("T-1", "Say hello")])
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1", "--foreground",
                           "--check", "test -f hello.py && echo present || { echo missing >&2; exit 1; }",
                           env=model_env)
    assert result.returncode == 0, result.stdout + result.stderr

    events = sandbox.events("s1")
    bash_ids = [e["data"]["run_id"] for e in events if e["type"] == "tool_call" and e["data"]["name"] == "bash"]
    check_ids = [r["run_id"] for e in events if e["type"] == "checks_run" for r in e["data"]["results"]]
    assert len(bash_ids) == 2 and len(check_ids) == 2
    check_ids += baseline_ids(events)  # the check ran once more, on the base commit
    assert all("run_id" not in e["data"] for e in events if e["type"] == "tool_call" and e["data"]["name"] != "bash")
    dirs = {p.name: p for p in run_dirs(sandbox, "s1")}
    assert set(dirs) == {f"run-{i}" for i in bash_ids + check_ids}
    results = {i: check_run_dir(dirs[f"run-{i}"]) for i in bash_ids + check_ids}

    loud = dirs[f"run-{bash_ids[0]}"]
    assert (loud / "script.sh").read_text() == LOUD.replace(MODEL_KEY, "[redacted]") + "\n"
    stdout = (loud / "stdout.log").read_text()
    assert stdout == "[redacted]\n" + "".join(f"{n}\n" for n in range(1, 3001))  # whole
    assert (loud / "stderr.log").read_text() == "warn-line\n"
    first = results[bash_ids[0]]
    assert first["ok"] and first["exitCode"] == 0 and first["stdout"] == stdout[-4000:] and len(stdout) > 4000
    assert first["stderr"] == "warn-line\n"
    failed = results[bash_ids[1]]
    assert not failed["ok"] and failed["exitCode"] == 3 and not failed["timedOut"]
    for path in sandbox.session_dir("s1").rglob("*"):
        assert not path.is_file() or MODEL_KEY.encode() not in path.read_bytes(), path

    missing, present = results[check_ids[0]], results[check_ids[1]]
    assert not missing["ok"] and missing["exitCode"] == 1 and missing["stderr"] == "missing\n"
    assert present["ok"] and present["stdout"] == "present\n" and present["stderr"] == ""

    # the model reads stdout, then stderr under its own line; the run id stays in the journal
    worker = [r["body"] for r in fake.requests if r["body"] and r["body"].get("model") == "worker"]
    seen = next(m["content"] for m in worker[1]["messages"] if m["role"] == "tool")
    assert seen.endswith("2999\n3000\n[stderr]\nwarn-line\n[exit code 0]") and bash_ids[0] not in seen


@pytest.mark.slow
def test_retention_keeps_the_newest_runs(sandbox):
    plan = [task("T-1"), task("T-2"), task("T-3")]
    result = sandbox.start("s1", plan, None, "--check", "echo checked",
                           env={"TILTH_SCRIPT_RUNS_KEEP": "2"})
    assert result.returncode == 0, result.stdout + result.stderr
    ids = [r["run_id"] for e in sandbox.events("s1") if e["type"] == "checks_run" for r in e["data"]["results"]]
    assert len(ids) == 3
    assert {p.name for p in run_dirs(sandbox, "s1")} == {f"run-{i}" for i in ids[1:]}  # the oldest went
    for run in run_dirs(sandbox, "s1"):
        assert check_run_dir(run)["stdout"] == "checked\n"

    off = sandbox.start("s2", [task("T-1")], None, "--check", "echo checked", env={"TILTH_SCRIPT_RUNS_KEEP": "0"})
    assert off.returncode == 0, off.stdout + off.stderr
    assert run_dirs(sandbox, "s2") == []
    assert [r["run_id"] for e in sandbox.events("s2") if e["type"] == "checks_run" for r in e["data"]["results"]] \
        == [None]


def test_daily_memory_has_one_header_and_a_line_per_outcome(sandbox):
    scenario = {"tasks": {"T-2": [{"verdict": REJECT}]}}
    result = sandbox.start("s1", [task("T-1", "First  one"), task("T-2", "Second")], scenario,
                           env={"TILTH_MAX_ITERATIONS_PER_TASK": "2"})
    assert result.returncode == 1, result.stdout + result.stderr
    today = datetime.now().date().isoformat()
    assert [p.name for p in (sandbox.home / "memory").iterdir()] == [f"{today}.md"]
    headers, lines = memory_lines(sandbox.home)
    assert headers == [f"# Memory {today}"]
    assert [LINE.match(line).groups() for line in lines] == [
        ("OK", "scripted", "s1/T-1", "First one", "Scripted change for T-1: First one"),
        ("FAIL", "scripted", "s1/T-2", "Second", "not finished yet"),
    ]


def _append_many(home: str, worker: int, start) -> None:
    start.wait()
    for n in range(25):
        daily_memory.append(Path(home), n % 2 == 0, "m", f"s{worker}", f"T-{n}", "title", "x" * 500)


def test_concurrent_appends_keep_one_header_and_whole_lines(tmp_path):
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(6)
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), w, start)) for w in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    headers, lines = memory_lines(tmp_path)
    assert len(headers) == 1 and len(lines) == 150
    assert all(LINE.match(line) and line.endswith(" | result: " + "x" * 400) for line in lines)


@pytest.mark.slow
def test_digest_names_sessions_counts_spend_heads_and_what_needs_you(sandbox):
    assert sandbox.start("ok1", [task("T-1"), task("T-2")]).returncode == 0
    failing = sandbox.start("bad1", [task("T-1")], {"tasks": {"T-1": [{"verdict": REJECT}]}},
                            env={"TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    assert failing.returncode == 1, failing.stdout + failing.stderr
    heads = {s: git(sandbox.repo, "rev-parse", "--short=7", f"session/{s}").strip() for s in ("ok1", "bad1")}

    text = sandbox.tilth("digest", "--since", "2h")
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "ok1 [done] 2 done, 0 failed in the window; overall 2/2 done, 0 failed, 0 pending" in out
    assert "bad1 [failed] 0 done, 1 failed in the window; overall 0/1 done, 1 failed, 0 pending" in out
    assert f"session/ok1 at {heads['ok1']}" in out and f"session/bad1 at {heads['bad1']}" in out
    assert "spend $0.0000" in out
    needs = out.split("needs you:")[1]
    assert "bad1: task T-1 (Task T-1) failed after 1 attempt: " in needs and '"not finished yet"' in needs
    assert "bad1: session failed: task T-1 failed (`tilth resume bad1`)" in needs and "ok1" not in needs

    data = json.loads(sandbox.tilth("digest", "--json").stdout)
    assert set(data) == {"since", "until", "sessions", "memory", "needs_you"}
    by_id = {s["id"]: s for s in data["sessions"]}
    assert set(by_id) == {"ok1", "bad1"}
    assert set(by_id["ok1"]) == {"id", "state", "reason", "touched", "branch", "head", "tasks", "done", "failed",
                                 "pending", "done_in_window", "failed_in_window", "cost_usd",
                                 "cost_is_lower_bound", "tokens", "running_s", "needs", "unpriced_calls"}
    assert by_id["ok1"]["done_in_window"] == ["T-1", "T-2"] and by_id["ok1"]["head"] == heads["ok1"]
    assert by_id["bad1"]["failed_in_window"] == ["T-1"] and by_id["bad1"]["state"] == "failed"
    assert len(data["memory"]) == 3 and data["needs_you"][0].startswith("bad1: ")

    # ok1 last touched three days ago: out of a one-day window, in a four-day one
    old = datetime.now(timezone.utc) - timedelta(days=3)
    stamp = old.strftime("%Y-%m-%dT%H:%M:%SZ")
    session_json = sandbox.session_dir("ok1") / "session.json"
    session_json.write_text(json.dumps({**json.loads(session_json.read_text()), "updated": stamp}))
    log = sandbox.session_dir("ok1") / "events.jsonl"
    log.write_text("".join(json.dumps({**e, "ts": stamp}) + "\n" for e in sandbox.events("ok1")))
    recent = json.loads(sandbox.tilth("digest", "--json", "--since", "1d").stdout)
    assert [s["id"] for s in recent["sessions"]] == ["bad1"]
    since = (old - timedelta(hours=1)).astimezone().strftime("%Y-%m-%dT%H:%M")
    wide = json.loads(sandbox.tilth("digest", "--json", "--since", since).stdout)
    assert {s["id"] for s in wide["sessions"]} == {"ok1", "bad1"}

    bad = sandbox.tilth("digest", "--since", "yesterday")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip() == ("tilth: --since 'yesterday': give a span such as 30m, 12h or 2d, or an ISO time "
                                  "such as 2026-11-24T06:00")


@pytest.mark.slow
def test_kill_9_then_resume_keeps_artifacts_and_memory_consistent(sandbox):
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2"), task("T-3")])
    env = {"TILTH_TEST_PAUSE_AT": "after_commit@T-2"}
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                          "scripted", "--foreground", "--check", "echo checked", env=env)
    wait_for_pause(child, "after_commit")
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    assert [LINE.match(line)[3] for line in memory_lines(sandbox.home)[1]] == ["s1/T-1"]

    resumed = sandbox.tilth("resume", "s1", "--foreground")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    headers, lines = memory_lines(sandbox.home)
    assert len(headers) == 1 and [LINE.match(line).groups()[:3] for line in lines] == [
        ("OK", "scripted", "s1/T-1"), ("OK", "scripted", "s1/T-2"), ("OK", "scripted", "s1/T-3")]
    restored = [e for e in sandbox.events("s1") if e["type"] == "memory_restored"]
    assert [(e["task"], e["data"]["written"]) for e in restored] == [("T-2", True)]
    ids = [r["run_id"] for e in sandbox.events("s1") if e["type"] == "checks_run" for r in e["data"]["results"]]
    ids += baseline_ids(sandbox.events("s1"))  # once, on the base commit: not again on resume
    assert [p.name for p in run_dirs(sandbox, "s1")] == sorted(f"run-{i}" for i in ids) and len(ids) == 4
    for run in run_dirs(sandbox, "s1"):
        check_run_dir(run)
    assert not list((sandbox.session_dir("s1") / "runs").glob(".run-*"))

    # a kill between T-3's line and its note: the next run finds the line and writes no second one
    noted = sandbox.session_dir("s1") / "memory.noted"
    noted.write_text("".join(line + "\n" for line in noted.read_text().split()[:-1]))
    prd = sandbox.session_dir("s1") / "prd.json"  # a done session resumes only for work added to its plan
    prd.write_text(json.dumps([*json.loads(prd.read_text()), task("T-4")]))
    again = sandbox.tilth("resume", "s1", "--foreground")
    assert again.returncode == 0, again.stdout + again.stderr
    assert [LINE.match(line)[3] for line in memory_lines(sandbox.home)[1]] == ["s1/T-1", "s1/T-2", "s1/T-3", "s1/T-4"]
    restored = [e for e in sandbox.events("s1") if e["type"] == "memory_restored"]
    assert [(e["task"], e["data"]["written"]) for e in restored] == [("T-2", True), ("T-3", False)]


def test_a_timed_out_command_is_recorded_and_a_torn_staging_dir_removed(tmp_path):
    from tilth.agents.tools.shell import run_command

    runs = tmp_path / "runs"
    (runs / ".run-20260101-000000-abcdef.tmp").mkdir(parents=True)  # a writer killed mid-record
    result = run_command("echo started; sleep 30", tmp_path, timeout=0.5, runs=runs, keep_runs=5)
    assert result.timed_out and result.run_id is not None
    assert [p.name for p in runs.iterdir()] == [f"run-{result.run_id}"]
    recorded = check_run_dir(runs / f"run-{result.run_id}")
    assert recorded["timedOut"] and not recorded["ok"] and recorded["exitCode"] == -9
    assert recorded["stdout"] == "started\n" and recorded["durationMs"] >= 500
    assert run_command("true", tmp_path).run_id is None  # no session: no artifact
