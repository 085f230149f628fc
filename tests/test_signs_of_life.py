"""Signs of life: while a model call is in flight (here 20 s, after a failed first attempt),
`tilth status` and `--json` say what the session waits on, since when and which attempt, and
`tilth logs -f` prints a line within 15 s of silence. Real `tilth` processes against the local
Chat Completions server (tests/fake_openai.py)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time

import pytest

from conftest import task
from fake_openai import ACCEPT, SUBMIT, call, delay, fault, reply
from supervised import wait_until

MODEL = "gpt-4o-mini"


def waits(sandbox) -> bool:
    events = sandbox.session_dir("s1") / "events.jsonl"
    return events.exists() and any(json.loads(line)["type"] == "model_waiting" and json.loads(line)["data"]["attempt"] == 2
                                   for line in events.read_text().splitlines() if line.startswith("{"))


@pytest.mark.slow
def test_a_long_model_call_is_named_in_status_and_logs_follow_prints_through_it(sandbox, fake, model_env):
    fake.enqueue(MODEL, fault(500, "busy"),
                 delay(20, reply(tool_calls=[call("write_file", path="a.txt", content="a\n"), SUBMIT])))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    prd = sandbox.write_json("prd.json", [task("T-1", "Say hello")])
    runner = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1", "--foreground",
                           env={**model_env, "TILTH_WORKER_MODEL": MODEL, "TILTH_FINAL_REVIEW": "false"})
    try:
        wait_until(sandbox.root, lambda: waits(sandbox), "the second attempt to be sent")
        follower = subprocess.Popen([sys.executable, "-m", "tilth", "logs", "s1", "-f"], env=sandbox.env,
                                    stdout=subprocess.PIPE, text=True, cwd=sandbox.root)
        lines: queue.Queue[tuple[float, str]] = queue.Queue()
        threading.Thread(target=lambda: [lines.put((time.monotonic(), line)) for line in follower.stdout],
                         daemon=True).start()
        began = time.monotonic()
        while True:  # the backlog first, then silence until the heartbeat
            at, line = lines.get(timeout=16)
            if "waiting on" in line:
                break
        assert at - began <= 15, f"the first sign of life came {at - began:.1f} s after the follower started"
        assert f"… T-1 waiting on the worker's model {MODEL}, " in line and "(attempt 2)" in line, line

        shown = sandbox.tilth("status", "s1").stdout
        assert f"waiting  T-1: on the worker's model {MODEL}, " in shown and "so far (attempt 2)" in shown, shown
        assert f"T-1 #1 (waits on {MODEL}, " in sandbox.tilth("status").stdout
        [waiting] = json.loads(sandbox.tilth("status", "s1", "--json").stdout)["waiting"]
        assert waiting["on"] == "model" and waiting["name"] == MODEL and waiting["role"] == "worker"
        assert waiting["attempt"] == 2 and waiting["task"] == "T-1" and waiting["waited_s"] >= 5, waiting

        assert runner.wait(timeout=60) == 0, runner.stderr.read()
        assert follower.wait(timeout=30) == 0
        assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["waiting"] == []
    finally:
        for process in (runner, locals().get("follower")):
            if process is not None and process.poll() is None:
                process.kill()
