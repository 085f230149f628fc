"""Memory channels: what each fresh context sees, in order, within budget, and blind to
harness mechanics."""

from __future__ import annotations

import os
import time

import pytest

from conftest import git, make_repo, task
from tilth.core.config import Settings
from tilth.store.home import SessionPaths
from tilth.store.prompts import prompt_of
from tilth.store.progress_summary import current_summary, is_fresh, summary_path

REJECT = {"verdict": "reject", "category": "weak_test", "concern": "edge case X untested",
          "next_step": "add a test for X", "evidence": ["tests/test_x.py has one case"]}
FORBIDDEN = ["prd.json", "events.jsonl", "summary.json", "session.json", "ledger", "progress.txt", "token"]


def prompts(sandbox, role, task_id=None):
    return [prompt_of(e["data"], sandbox.session_dir("s1")) for e in sandbox.events("s1")
            if e["type"] == "prompt_assembled" and e["data"]["role"] == role and (task_id is None or e["task"] == task_id)]


def loads(sandbox, role, task_id):
    return [e["data"] for e in sandbox.events("s1")
            if e["type"] == "memory_load" and e["data"]["role"] == role and e["task"] == task_id]


def conventions_repo(sandbox, files):
    sandbox.repo = make_repo(sandbox.root / "conv-repo", files)


@pytest.mark.slow
def test_worker_channels_in_order_with_memory_load_events(sandbox):
    conventions_repo(sandbox, {"AGENTS.md": "Use tabs.\n", "CLAUDE.md": "Prefer pathlib.\n"})
    scenario = {"tasks": {"T-1": [{"notes": {"layout": "Entry point is main.py\nmore detail"}, "write": {"{task}.txt": "x\n"},
                                   "learnings": ["Run tests with make check"]}]}}
    assert sandbox.start("s1", [task("T-1", "First"), task("T-2", "Second"), task("T-3", "Third")], scenario).returncode == 0
    prompt = prompts(sandbox, "worker", "T-2")[0]
    order = ["From AGENTS.md:\nUse tabs.", "From CLAUDE.md:\nPrefer pathlib.",
             "The whole plan, for context only", "   T-1: First\n-> T-2: Second\n   T-3: Third",
             "Your notes from earlier work", "- layout: Entry point is main.py",
             "Recent outcomes:", "T-1 done (1 attempt(s)): First", "Task T-2: Second"]
    positions = [prompt.index(marker) for marker in order]
    assert positions == sorted(positions) and prompt.startswith("From AGENTS.md:\n")
    assert "more detail" not in prompt, "the index shows only each note's first line"
    channels = {d["channel"]: d for d in loads(sandbox, "worker", "T-2")}
    assert list(channels) == ["conventions", "plan", "notes", "journal", "task", "verdicts", "retry"]
    assert channels["verdicts"]["present"] is False and channels["notes"]["present"] is True
    assert all(d["truncated"] is False for d in channels.values())
    assert (sandbox.session_dir("s1") / "kb" / "layout.md").exists()
    assert "layout" not in git(sandbox.repo, "ls-tree", "-r", "--name-only", "session/s1")


def test_consecutive_worker_prompts_share_the_stable_channels_as_their_prefix(sandbox):
    """Provider prefix caches serve the longest start two requests share: the conventions must
    lead, the task come after the journal, and a retry differ only from the verdicts on."""
    conventions_repo(sandbox, {"AGENTS.md": "Use tabs.\n" * 50})
    scenario = {"tasks": {"T-2": [{"verdict": REJECT}, {"write": {"{task}.txt": "x\n"}}]},
                "default": [{"write": {"{task}.txt": "x\n"}}]}
    plan = [task("T-1", "First"), task("T-2", "Second"), task("T-3", "Third")]
    assert sandbox.start("s1", plan, scenario).returncode == 0
    (second, retry), (third,) = prompts(sandbox, "worker", "T-2"), prompts(sandbox, "worker", "T-3")
    across_tasks = os.path.commonprefix([second, third])
    assert across_tasks.startswith("From AGENTS.md:\n" + "Use tabs.\n" * 49)
    assert "The whole plan, for context only" in across_tasks and "   T-1: First\n" in across_tasks
    assert "Recent outcomes:" not in across_tasks and "Task T-" not in across_tasks
    across_attempts = os.path.commonprefix([second, retry])
    assert "Recent outcomes:" in across_attempts and "Task T-2: Second" in across_attempts
    assert across_attempts.endswith("Acceptance criteria:\n- T-2 is done\n") and "edge case X" in retry


@pytest.mark.slow
def test_conventions_come_from_the_committed_tree_and_respect_the_override(sandbox):
    conventions_repo(sandbox, {"AGENTS.md": "Original rules.\n", "STYLE.md": "House style.\n"})
    scenario = {"tasks": {"T-1": [{"write": {"AGENTS.md": "Rewritten by the worker.\n"}}]}}
    env = {"TILTH_CONTEXT_FILES": "STYLE.md,missing.md,AGENTS.md"}
    assert sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env=env).returncode == 0
    evaluator_t1 = prompts(sandbox, "evaluator", "T-1")[0]
    assert "Original rules." in evaluator_t1.split("The worker's case")[0]
    assert evaluator_t1.index("From STYLE.md:") < evaluator_t1.index("From AGENTS.md:")
    assert "missing.md" not in evaluator_t1
    worker_t2 = prompts(sandbox, "worker", "T-2")[0]
    assert "Rewritten by the worker." in worker_t2, "once committed, the new rules are the branch's rules"


@pytest.mark.slow
def test_each_channel_is_capped_with_a_visible_marker(sandbox):
    conventions_repo(sandbox, {"AGENTS.md": "rule " * 5000})
    env = {"TILTH_CONVENTIONS_CHARS": "500", "TILTH_PLAN_CHARS": "200"}
    plan = [task(f"T-{i:02d}", f"A fairly descriptive task title number {i}") for i in range(1, 13)]
    assert sandbox.start("s1", plan, {"default": [{"write": {"{task}.txt": "x\n"}}]}, env=env).returncode == 0
    prompt = prompts(sandbox, "worker", "T-06")[0]
    assert "[... conventions truncated: " in prompt
    assert "earlier tasks not shown ...]" in prompt and "later tasks not shown ...]" in prompt
    assert "-> T-06:" in prompt
    conventions = [d for d in loads(sandbox, "worker", "T-06") if d["channel"] == "conventions"][0]
    assert conventions["truncated"] is True and conventions["chars"] < 600


def test_retry_prompts_carry_the_previous_verdict_to_worker_and_evaluator(sandbox):
    scenario = {"tasks": {"T-1": [{"verdict": REJECT}, {"write": {"{task}.txt": "x\n"}}]}}
    assert sandbox.start("s1", [task("T-1")], scenario).returncode == 0
    first, second = prompts(sandbox, "worker", "T-1")
    assert "edge case X untested" not in first
    assert "attempt 1: reject (weak_test). Concern: edge case X untested Next step: add a test for X" in second
    assert "continue from them" in second
    evaluator_second = prompts(sandbox, "evaluator", "T-1")[1]
    assert "edge case X untested" in evaluator_second and "tests/test_x.py has one case" in evaluator_second


@pytest.mark.slow
def test_summary_replaces_a_longer_journal_and_is_regenerated_when_stale(sandbox):
    plan = [task(f"T-{i:02d}", f"Task {i}") for i in range(1, 26)]
    env = {"TILTH_SUMMARY_RECENT_TASKS": "1", "TILTH_SUMMARY_LEARNINGS": "2", "TILTH_SUMMARY_TABLE_ROWS": "3"}
    scenario = {"default": [{"learnings": ["Keep functions small", "keep functions small!"], "write": {"{task}.txt": "x\n"}}]}
    assert sandbox.start("s1", plan, scenario, env=env).returncode == 0
    assert "Recent outcomes:" in prompts(sandbox, "worker", "T-03")[0]
    late = prompts(sandbox, "worker", "T-25")[0]
    assert "# Progress summary" in late and "Completed: 24/25 tasks" in late and "Recent outcomes:" not in late
    assert late.lower().count("keep functions small") == 1, "learnings are de-duplicated"

    paths = SessionPaths(sandbox.home, "s1")
    assert is_fresh(paths)
    with open(paths.progress, "a") as f:
        f.write("2026-01-01T00:00:00Z\tT-99\tdone\titer=1\tcommit=abcdef0\tHand-added line\n")
    earlier = time.time() - 10
    os.utime(summary_path(paths), (earlier, earlier))
    assert not is_fresh(paths)
    assert "T-99: Hand-added line" in current_summary(paths)
    assert is_fresh(paths)

    summary_path(paths).unlink()
    result = sandbox.tilth("summarize", "s1")
    assert result.returncode == 0 and "progress summary for s1: 0 -> " in result.stdout
    assert summary_path(paths).exists()


@pytest.mark.slow
def test_learnings_are_proposed_per_task_and_never_touch_agents_md(sandbox):
    conventions_repo(sandbox, {"AGENTS.md": "Rules.\n"})
    scenario = {"tasks": {"T-1": [{"learnings": ["The CLI lives in app/cli.py"], "write": {"{task}.txt": "x\n"}}],
                          "T-2": [{"write": {"{task}.txt": "x\n"}}]}}
    assert sandbox.start("s1", [task("T-1", "Add CLI"), task("T-2")], scenario).returncode == 0
    text = (sandbox.session_dir("s1") / "proposed-learnings.md").read_text()
    assert "## From T-1 — Add CLI\n- The CLI lives in app/cli.py" in text and "From T-2" not in text
    printed = sandbox.tilth("learnings", "s1").stdout
    assert "The CLI lives in app/cli.py" in printed
    assert git(sandbox.repo, "show", "session/s1:AGENTS.md") == "Rules.\n"
    assert sum(e["type"] == "learnings_proposed" for e in sandbox.events("s1")) == 2
    learning_prompt = prompts(sandbox, "self_improvement", "T-1")[0]
    assert learning_prompt.startswith("From AGENTS.md:\nRules.\n\nTask T-1: Add CLI") and "NONE" in learning_prompt


@pytest.mark.slow
def test_no_worker_prompt_mentions_harness_mechanics(sandbox):
    conventions_repo(sandbox, {"AGENTS.md": "Rules.\n"})
    scenario = {"tasks": {"T-1": [{"verdict": REJECT, "notes": {"n": "note"}}, {"learnings": ["x"], "write": {"{task}.txt": "x\n"}}]},
                "default": [{"learnings": ["y"], "write": {"{task}.txt": "x\n"}}]}
    env = {"TILTH_MAX_ITERATIONS_PER_TASK": "2", "TILTH_SUMMARY_RECENT_TASKS": "0", "TILTH_SUMMARY_LEARNINGS": "1",
           "TILTH_SUMMARY_TABLE_ROWS": "3"}
    plan = [task(f"T-{i}") for i in range(1, 26)]
    assert sandbox.start("s1", plan, scenario, env=env).returncode == 0
    texts = prompts(sandbox, "worker") + prompts(sandbox, "self_improvement")
    assert len(texts) == 51
    assert any("# Progress summary" in t for t in texts) and any("Recent outcomes:" in t for t in texts)
    assert any("attempt 1: reject" in t for t in texts) and any("- n: note" in t for t in texts)
    session_dir = str(sandbox.session_dir("s1"))
    for text in texts:
        lowered = text.lower()
        for word in FORBIDDEN + [session_dir.lower(), str(sandbox.home).lower()]:
            assert word not in lowered, (word, text)


def test_settings_have_a_docstring_per_field():
    import inspect
    source = inspect.getsource(Settings)
    for name in Settings.model_fields:
        after = source.split(f"    {name}:", 1)[1].split("\n", 2)[1].strip()
        assert after.startswith('"""'), f"Settings.{name} has no docstring"
