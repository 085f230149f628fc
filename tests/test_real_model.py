"""A whole one-task session against a REAL model: SmolLM2-135M behind llama.cpp's
OpenAI-compatible server. Only protocol outcomes are asserted, never model quality.

The tool choice is forced step by step (write_file, then submit_case; submit_verdict for the
evaluator) because this server's `auto` mode is unreliable (see tests/test_llama_server.py).
"""

from __future__ import annotations

import json

import pytest

from conftest import git, task
from llama_server import llama_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.llama


def test_one_task_session_against_a_real_model(sandbox, llama_server):  # noqa: F811
    env = {
        "TILTH_BASE_URL": llama_server.base_url, "TILTH_WORKER_MODEL": llama_server.model,
        "TILTH_WORKER_TOOL_CHOICE": "write_file,submit_case", "TILTH_EVALUATOR_TOOL_CHOICE": "submit_verdict",
        "TILTH_WORKER_MAX_STEPS": "2", "TILTH_EVALUATOR_MAX_STEPS": "2", "TILTH_VERDICT_RETRIES": "1",
        "TILTH_MAX_ITERATIONS_PER_TASK": "1", "TILTH_MAX_TOKENS": "200", "TILTH_REQUEST_TIMEOUT": "240",
        "TILTH_SELF_IMPROVEMENT": "false",
    }
    plan = [task("T-1", "Create hello.txt", description="Create a file named hello.txt containing the word hello.",
                 acceptance_criteria=["hello.txt exists", "it contains hello"])]
    prd = sandbox.write_json("prd.json", plan)
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1", "--foreground",
                           env=env, timeout=900)
    print(result.stdout, result.stderr)
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr

    events = sandbox.events("s1")
    tool_calls = [e["data"] for e in events if e["type"] == "tool_call"]
    assert tool_calls and tool_calls[0]["name"] == "write_file", "the forced tool call was parsed and executed"
    first = tool_calls[0]
    if first["ok"] and len(first["args"]) < 500:  # not truncated in the event: its effect must be on the branch
        written = json.loads(first["args"])
        assert git(sandbox.repo, "show", f"session/s1:{written['path']}") == written["content"]
    assert [e["data"]["role"] for e in events if e["type"] == "model_call"][:1] == ["worker"]
    entries = sandbox.ledger("s1", "T-1")
    assert len(entries) == 1 and entries[0]["verdict"]["verdict"] in ("accept", "reject")
    if entries[0]["case"] is not None:
        assert "evaluator" in [e["data"]["role"] for e in events if e["type"] == "model_call"], "an independent judge"

    commits = sandbox.commits("s1")
    assert len(commits) == 1 and commits[0]["task"] == "T-1"
    expected = {0: ("done", ""), 1: ("failed", "failed")}[result.returncode]
    assert sandbox.statuses("s1") == {"T-1": expected[0]} and commits[0]["outcome"] == expected[1]
    print(json.dumps(entries[0]["verdict"]))
