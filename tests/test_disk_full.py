"""A full disk (ENOSPC) is a one-line error and a clean state: nothing half-created at start,
a `stopped` (resumable) session mid-run. TILTH_HOME is a small tmpfs mounted by bubblewrap
in a namespace of its own; the user's repository stays outside it, so what a failure leaves
in `.git/worktrees` is visible to the test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git, make_repo, task

DRIVER = Path(__file__).with_name("fill_driver.py")
TMPFS_BYTES = 1024 * 1024


def require_sized_tmpfs(tmp_path: Path) -> None:
    """bwrap can mount a size-limited tmpfs here (`--size`, bubblewrap >= 0.5, user namespaces)."""
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    works = shutil.which("bwrap") is not None and subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", "--size", "65536", "--tmpfs", str(probe_dir), "true"],
        capture_output=True).returncode == 0
    if not works:
        if os.environ.get("TILTH_REQUIRE_BWRAP") == "1":
            pytest.fail("TILTH_REQUIRE_BWRAP=1 but bubblewrap cannot mount a sized tmpfs here")
        pytest.skip("bubblewrap (>= 0.5, with user namespaces) is needed to mount a small tmpfs")


def drive(sandbox, steps: list[dict], env: dict[str, str] | None = None) -> list[dict]:
    """Run the steps with TILTH_HOME on a TMPFS_BYTES tmpfs; the results of each `tilth` step."""
    sandbox.home.mkdir(exist_ok=True)
    spec = sandbox.write_json("fill-spec.json", {"home": str(sandbox.home), "repo": str(sandbox.repo),
                                                 "cwd": str(sandbox.root), "env": env or {}, "steps": steps})
    proc = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--size", str(TMPFS_BYTES), "--tmpfs", str(sandbox.home),
                           sys.executable, str(DRIVER), str(spec)],
                          env={**sandbox.env, "TILTH_SANDBOX": "off"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def assert_one_line_no_space(result: dict) -> None:
    stderr = result["stderr"]
    assert result["rc"] != 0
    assert "Traceback" not in stderr, stderr
    assert stderr.startswith("tilth: ") and stderr.count("\n") == 1, stderr
    assert "no space left on device" in stderr


@pytest.mark.slow
@pytest.mark.bwrap
def test_start_on_a_full_disk_leaves_nothing_and_works_once_space_is_freed(tmp_path, sandbox):
    require_sized_tmpfs(tmp_path)
    repo = make_repo(tmp_path / "big-repo", {"README.md": "# big\n"})
    (repo / "big.dat").write_bytes(os.urandom(200 * 1024))
    git(repo, "add", "big.dat")
    git(repo, "commit", "-q", "-m", "a file larger than the room left")
    sandbox.repo = repo
    plan = sandbox.write_json("prd.json", [task("T-1")])
    start = ["start", "--repo", str(repo), "--prd", str(plan), "--id", "s1", "--backend", "scripted", "--foreground"]
    # From no room at all to room for everything but the big file: each step of creation runs out once.
    leaves = [0, 4096, 8192, 12288, 16384, 100 * 1024]
    steps = [s for leave in leaves for s in ({"fill_leaving": leave}, {"tilth": start}, {"unfill": True})]
    results = drive(sandbox, [*steps, {"tilth": start}])

    *failed, done = results
    for result in failed:
        assert_one_line_no_space(result)
        assert "free space on" in result["stderr"] and "nothing was created" in result["stderr"]
        assert result["admin"] == [], f"left in {repo}/.git/worktrees: {result['admin']}"
        assert result["branches"] == [] and result["sessions"] == {} and result["worktrees"] == [], result
    assert any(f"{sandbox.home}/worktrees/s1" in r["stderr"] for r in failed), "a checkout ran out of space"
    assert any(f"{sandbox.home}/sessions/" in r["stderr"] for r in failed), "a session-file write ran out of space"

    assert done["rc"] == 0, done["stderr"]
    assert done["sessions"]["s1"]["state"] == "done" and done["admin"] == ["tilth-s1"]
    assert git(repo, "cat-file", "-s", "session/s1:big.dat").strip() == str(200 * 1024)


@pytest.mark.slow
@pytest.mark.bwrap
def test_a_disk_filling_up_mid_run_stops_the_session_and_resume_finishes_it(sandbox, tmp_path):
    require_sized_tmpfs(tmp_path)
    fill_once = "test -e filled || { touch filled; head -c 50M /dev/zero > big.bin; }"
    scenario = sandbox.write_json("scenario.json", {"tasks": {"T-1": [{"write": {"one.txt": "1\n"},
                                                                       "run": [fill_once]}]}})
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2")])
    start = ["start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend", "scripted",
             "--scenario", str(scenario), "--foreground"]
    stopped, resumed = drive(sandbox, [{"tilth": start}, {"rm": str(sandbox.worktree("s1") / "big.bin")},
                                       {"tilth": ["resume", "s1", "--foreground"]}])

    assert_one_line_no_space(stopped)
    assert stopped["rc"] == 3
    assert "tilth resume s1" in stopped["stderr"] and f"free space on {sandbox.home}" in stopped["stderr"]
    session = stopped["sessions"]["s1"]
    assert session["state"] == "stopped"
    assert [end["state"] for end in session["ends"]] == ["stopped"]
    assert "no space left on device" in session["ends"][0]["reason"]
    assert not session["reserve"], "the ballast was spent to record the stop"

    assert resumed["rc"] == 0, resumed["stderr"]
    session = resumed["sessions"]["s1"]
    assert session["state"] == "done" and session["reserve"], "the next run keeps a fresh ballast"
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2"]
    assert git(sandbox.repo, "show", "session/s1:one.txt") == "1\n"
