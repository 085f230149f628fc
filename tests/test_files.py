"""The durable file formats: atomic writes, torn appends, plan read-modify-write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import task
from tilth.core.errors import BadInput, PlanChanged
from tilth.store.events import EventLog
from tilth.store.jsonio import append_jsonl, read_jsonl, write_json
from tilth.store.prd import TaskStatus, load_plan, set_status
from tilth.store.progress import ProgressLine, outcome_line


def test_torn_final_jsonl_line_is_skipped_and_appends_continue(tmp_path):
    path = tmp_path / "log.jsonl"
    append_jsonl(path, {"n": 1})
    with open(path, "ab") as f:
        f.write(b'{"n": 2, "trunc')
    append_jsonl(path, {"n": 3})
    assert read_jsonl(path) == [{"n": 1}, {"n": 3}]


def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "state.json"
    write_json(path, {"v": 1})
    write_json(path, {"v": 2})
    assert json.loads(path.read_text()) == {"v": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_writes_reach_the_disk_before_they_count(tmp_path, monkeypatch):
    """A power cut keeps the old file or the new one, and every synced journal line: an atomic write
    fsyncs its temp file before the rename and the directory after it; an append fsyncs its file
    unless the caller says otherwise. os.fsync is watched, not replaced: every write is real."""
    synced: list[str] = []
    real_fsync = os.fsync

    def watched(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", watched)
    state = tmp_path / "state.json"
    write_json(state, {"v": 1})
    assert len(synced) == 2, synced
    assert Path(synced[0]).parent == tmp_path and Path(synced[0]).name.startswith(".state.json."), \
        "the temp file, fsynced while it still had its temp name (before the rename)"
    assert synced[1] == str(tmp_path), "then the directory, so the rename itself is durable"

    synced.clear()
    journal = tmp_path / "events.jsonl"
    append_jsonl(journal, {"n": 1})
    assert synced == [str(journal)]
    append_jsonl(journal, {"n": 2}, sync=False)
    assert synced == [str(journal)], "an unsynced append, as the caller asked"
    assert read_jsonl(journal) == [{"n": 1}, {"n": 2}]


def test_status_flip_keeps_user_fields_and_formatting_of_meaning(tmp_path):
    path = tmp_path / "prd.json"
    plan = [task("T-1", notes="keep me"), task("T-2")]
    path.write_text(json.dumps(plan))
    set_status(path, "T-2", TaskStatus.done)
    after = json.loads(path.read_text())
    assert after[0] == plan[0]
    assert after[1] == {**plan[1], "status": "done"}


def test_status_flip_on_a_broken_plan_raises_plan_changed(tmp_path):
    path = tmp_path / "prd.json"
    path.write_text("[{")
    with pytest.raises(PlanChanged):
        set_status(path, "T-1", TaskStatus.done)
    assert path.read_text() == "[{"


def test_progress_line_round_trips_and_flattens_titles():
    line = outcome_line("T-1", "failed:iterations_exhausted", 3, "0123456789abcdef", "A\ttitle\nwith breaks")
    text = line.render()
    assert text.split("\t")[1:] == ["T-1", "failed:iterations_exhausted", "iter=3", "commit=0123456", "A title with breaks"]
    assert ProgressLine.parse(text) == line
    assert ProgressLine.parse("garbage") is None


def test_undocumented_event_types_are_refused(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    with pytest.raises(ValueError, match="not documented"):
        log.emit("made_up_event")
    assert not (tmp_path / "events.jsonl").exists()


@pytest.mark.slow
def test_every_emitted_event_in_a_session_is_documented_with_the_right_shape(sandbox):
    import importlib
    import pkgutil

    import tilth
    from tilth.store.events import DOCUMENTED

    for module in pkgutil.walk_packages(tilth.__path__, "tilth."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)

    scenario = {"tasks": {"T-1": [{"verdict": {"verdict": "reject"}}, {"write": {"{task}.txt": "x\n"}}]}}
    assert sandbox.start("s1", [task("T-1")], scenario).returncode == 0
    events = sandbox.events("s1")
    assert {e["type"] for e in events} >= {"session_created", "session_started", "task_started", "verdict",
                                           "commit", "task_done", "session_end", "prompt_assembled"}
    for event in events:
        assert set(event) == {"ts", "type", "task", "iter", "data"}
        assert event["type"] in DOCUMENTED


@pytest.mark.slow
def test_demo_runs_end_to_end_and_says_it_is_scripted(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("TILTH_")}
    result = subprocess.run([sys.executable, "-m", "tilth.cli.demo", "--dir", str(tmp_path / "demo")],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "using the SCRIPTED backend" in result.stdout
    assert result.stdout.count("[Tilth-Session=demo") == 3
    assert "W-2.jsonl: 2 entries" in result.stdout


WRITER = """
import sys
from pathlib import Path
from tilth.store.jsonio import write_json
path = Path(sys.argv[1])
n = 0
while True:
    n += 1
    write_json(path, {"n": n, "pad": "x" * 300_000})
    if n == 1:
        print("ready", flush=True)
"""


@pytest.mark.slow
def test_kill_9_in_the_middle_of_atomic_writes_leaves_the_old_or_the_new_file(tmp_path):
    import random
    import signal

    rng = random.Random(1123)
    path = tmp_path / "state.json"
    seen = set()
    for trial in range(20):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
        assert writer.stdout.readline() == "ready\n"
        try:
            writer.wait(timeout=rng.uniform(0, 0.05))  # the kill lands at a random instant of the loop
        except subprocess.TimeoutExpired:
            writer.send_signal(signal.SIGKILL)
            writer.wait()
        state = json.loads(path.read_bytes())  # never torn, never empty
        assert len(state["pad"]) == 300_000, f"trial {trial}"
        seen.add(state["n"])
    assert len(seen) > 1, "the writes really were interrupted at different points"


def test_a_kept_plan_never_hides_an_edit_made_between_reads(tmp_path):
    path = tmp_path / "prd.json"
    path.write_text(json.dumps([task("T-1"), task("T-2")]))
    assert [t.id for t in load_plan(path)] == ["T-1", "T-2"]
    set_status(path, "T-1", TaskStatus.done)
    assert [t.status for t in load_plan(path)] == [TaskStatus.done, TaskStatus.pending], "tilth's own write is kept"
    with open(path, "r+") as f:  # the user edits in place: same inode
        plan = json.load(f)
        plan.append(task("T-3", big=2**70))
        f.seek(0)
        f.write(json.dumps(plan))
        f.truncate()
    assert [t.id for t in load_plan(path)] == ["T-1", "T-2", "T-3"]
    set_status(path, "T-2", TaskStatus.done)
    after = json.loads(path.read_text())
    assert [t["status"] for t in after] == ["done", "done", "pending"] and after[2]["big"] == 2**70
    assert [t.status for t in load_plan(path)] == [TaskStatus.done, TaskStatus.done, TaskStatus.pending]


def test_plans_above_the_size_limits_are_refused_in_one_line(tmp_path):
    from tilth.store import prd

    too_many = tmp_path / "many.json"
    too_many.write_text(json.dumps([task(f"T-{i}") for i in range(prd.MAX_TASKS + 1)]))
    with pytest.raises(BadInput, match=f"{prd.MAX_TASKS + 1:,} tasks is more than the limit of {prd.MAX_TASKS:,}"):
        load_plan(too_many)
    too_big = tmp_path / "big.json"
    too_big.write_text(json.dumps([task("T-1", description="x" * (prd.MAX_BYTES + 1))]))
    with pytest.raises(BadInput, match="MiB, more than the limit of 16 MiB; split the plan"):
        load_plan(too_big)
