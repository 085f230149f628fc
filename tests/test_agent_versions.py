"""`tilth doctor --agents`: each CLI agent installed or not, the version it says, and whether it answers;
a CLI that hangs on `--version` is bounded and killed with what it started."""

from __future__ import annotations

import os
import time

from tilth.agents.agent_versions import installed
from tilth.core.config import Settings


def script(path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_doctor_says_which_agents_answer_with_which_version_and_a_hanging_one_is_bounded(sandbox, tmp_path):
    pidfile = tmp_path / "child.pid"
    bins = {"TILTH_QWEN_BIN": script(tmp_path / "qwen", 'echo "0.24.4"\n'),
            "TILTH_OPENCODE_BIN": script(tmp_path / "opencode", "echo broken >&2; exit 2\n"),
            "TILTH_CLAUDE_BIN": str(tmp_path / "missing-claude"),
            "TILTH_CODEX_BIN": script(tmp_path / "codex", f"sleep 60 & echo $! > {pidfile}; wait\n"),
            "TILTH_AIDER_BIN": script(tmp_path / "aider", "echo 'aider 0.86.2'\n")}
    result = sandbox.tilth("doctor", "--agents", env={**bins, "TILTH_CODEX_BIN": "/bin/true"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"qwen: 0.24.4 at {bins['TILTH_QWEN_BIN']}" in lines
    assert f"opencode: {bins['TILTH_OPENCODE_BIN']} does not answer (--version exited with code 2)" in lines
    assert any(line.startswith("claude: not installed (") and "TILTH_CLAUDE_BIN" in line for line in lines), lines
    settings = Settings(**{k.removeprefix("TILTH_").lower(): v for k, v in bins.items()})
    started = time.monotonic()
    codex = next(f for f in installed(settings, timeout=0.5) if f.name == "codex")
    assert time.monotonic() - started < 10 and codex.problem == "no answer to --version in 0.5 s", codex
    child = int(pidfile.read_text())
    for _ in range(100):  # the killed group's sleep is reaped by init
        if not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split(")")[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the hanging agent's child outlived the bound")
