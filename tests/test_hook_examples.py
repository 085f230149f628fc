"""The example hooks in `hooks/`, each installed into a session's `$TILTH_HOME/hooks/` and run by a real session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import git, task
from fake_openai import ACCEPT, SUBMIT, call, reply

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parent.parent / "hooks"


def install(sandbox, name: str) -> Path:
    """What hooks/README.md tells a person to do: copy the example into $TILTH_HOME/hooks/."""
    (sandbox.home / "hooks").mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(EXAMPLES / name, sandbox.home / "hooks" / name))


def hook_runs(sandbox, session_id: str, point: str) -> list[dict]:
    return [e["data"] for e in sandbox.events(session_id)
            if e["type"] == "hook_run" and e["data"]["point"] == point]


def test_every_hook_point_has_an_example_that_is_executable_and_documented():
    readme, guide = (EXAMPLES / "README.md").read_text(), (EXAMPLES.parent / "docs" / "hooks.md").read_text()
    for point in ("pre_tool", "post_task", "session_end"):
        examples = sorted(p for p in EXAMPLES.iterdir() if p.name.startswith(point + "."))
        assert examples, f"no example for {point}"
        for example in examples:
            assert example.stat().st_mode & 0o111, f"{example.name} is not executable"
            assert f"`{example.name}`" in readme, f"hooks/README.md does not list {example.name}"
            assert f"### `{example.name}`" in guide, f"docs/hooks.md does not document {example.name}"


def test_pre_tool_protect_paths_blocks_ci_files_and_secrets_with_its_message(sandbox, fake, model_env):
    hook = install(sandbox, "pre_tool.protect-paths")
    (sandbox.repo / ".github" / "workflows").mkdir(parents=True)
    (sandbox.repo / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    git(sandbox.repo, "add", "-A")
    git(sandbox.repo, "commit", "-qm", "ci")
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    fake.set_handler(lambda body: reply(content="NONE"))
    fake.enqueue("worker", reply(tool_calls=[call("write_file", path=".github/workflows/ci.yml", content="on: {}\n")]),
                 reply(tool_calls=[call("bash", command="cat .env.production")]),
                 reply(tool_calls=[call("write_file", path="src/app.py", content="print('hi')\n")]),
                 reply(tool_calls=[SUBMIT]))
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd",
                           str(sandbox.write_json("p.json", [task("T-1")])), "--id", "s1", "--foreground",
                           env={**model_env, "TILTH_SANDBOX": "off"})
    assert result.returncode == 0, result.stdout + result.stderr

    worker = [r["body"] for r in fake.requests if r["body"] and r["body"]["model"] == "worker" and r["body"].get("tools")]
    results = [m["content"] for m in worker[-1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("error: protect-paths: .github/workflows/ci.yml matches .github/*, which a person maintains")
    assert results[1].startswith("error: protect-paths: .env.production matches .env.*, which holds secrets")
    assert "protect-paths" not in results[2], "an ordinary write passes silently"
    runs = [r for r in hook_runs(sandbox, "s1", "pre_tool") if r["hook"] == str(hook)]
    assert [r["outcome"] for r in runs] == ["blocked", "blocked", "ok"]
    worktree = sandbox.worktree("s1")
    assert (worktree / ".github" / "workflows" / "ci.yml").read_text() == "on: push\n"
    assert (worktree / "src" / "app.py").exists()
    logs = sandbox.tilth("logs", "s1").stdout
    assert "write_file .github/workflows/ci.yml -> blocked by pre_tool.protect-paths: protect-paths:" in logs


def test_post_task_lint_reports_what_is_wrong_in_a_done_task_and_changes_nothing(sandbox):
    install(sandbox, "post_task.lint")
    scenario = {"tasks": {
        "T-1": [{"write": {"clean.py": "x = 1\n", "clean.json": "{\"a\": 1}\n"}}],
        "T-2": [{"write": {"broken.py": "x = 1\ndef f(:\n    pass\n", "config.json": "{\"a\": }\n",
                           "run.sh": "echo hi   \nif then\n", "ok.py": "y = 2\n"},
                 "run": ["ln -s config.json leak.json"]}],  # a link to broken JSON, inside the worktree
    }}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario)
    assert result.returncode == 0, result.stdout + result.stderr

    clean, dirty = hook_runs(sandbox, "s1", "post_task")
    assert clean["outcome"] == "ok" and clean["output"] == "", clean
    assert dirty["outcome"] == "failed" and dirty["exit_code"] == 1
    found = dirty["output"]
    assert "broken.py:2: invalid syntax" in found
    assert "config.json: Expecting value" in found
    assert "run.sh:1: trailing whitespace." in found and "syntax error near unexpected token `then'" in found
    assert "ok.py" not in found and "leak.json" not in found, "clean files are not named; a symlink is never read"
    assert git(sandbox.worktree("s1"), "status", "--porcelain") == "", "the linter leaves the worktree as committed"
    logs = sandbox.tilth("logs", "s1").stdout
    assert "[T-2 #1] hook post_task.lint failed (exit 1): run.sh:1: trailing whitespace." in logs


def test_post_task_lint_runs_the_linter_lint_command_names(sandbox):
    install(sandbox, "post_task.lint")
    scenario = {"tasks": {"T-1": [{"write": {"a.txt": "one\n", "b.txt": "two\n"}}]}}
    result = sandbox.start("s1", [task("T-1")], scenario, env={"LINT_COMMAND": "grep -H two"})
    assert result.returncode == 0, result.stdout + result.stderr
    [run] = hook_runs(sandbox, "s1", "post_task")
    assert run["outcome"] == "ok" and run["output"] == "b.txt:two", run


def test_session_end_notify_writes_the_ending_to_the_file_notify_file_names(sandbox):
    install(sandbox, "session_end.notify")
    inbox = sandbox.root / "notifications.txt"
    notify = {"NOTIFY_FILE": str(inbox)}
    assert sandbox.start("s1", [task("T-1")], None, env=notify).returncode == 0
    failing = {"tasks": {"T-1": [{"verdict": {"verdict": "reject", "category": "wrong", "concern": "no"}}]}}
    assert sandbox.start("s2", [task("T-1")], failing, env={**notify, "TILTH_MAX_ITERATIONS_PER_TASK": "1"}).returncode == 1

    lines = inbox.read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("tilth: session s1 ended done (branch session/s1, ")
    assert lines[1].startswith("tilth: session s2 ended failed (branch session/s2, ")
    [run] = hook_runs(sandbox, "s2", "session_end")
    assert run["outcome"] == "ok" and run["output"] == lines[1]
