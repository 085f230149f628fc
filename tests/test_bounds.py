"""What a command may spend: output cut as it arrives (bash calls, checks, CLI agents) and a
bound on its processes at once (a fork bomb fails its forks and ends as a failed command), as
root and as an unprivileged user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import Sandbox, make_repo, task
from tilth.agents.backends.agent_process import run_agent
from tilth.agents.bounds import MAX_OUTPUT_BYTES, READ_BYTES, pids_cgroup_base
from tilth.agents.sandbox import bwrap_works
from tilth.agents.tools.shell import run_command
from tilth.store.script_runs import list_runs, load_result

pytestmark = [pytest.mark.slow, pytest.mark.bwrap]

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
"""For the command itself: one any user can run inside the sandbox."""
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
BURST = "head -c 30000000 /dev/zero | tr '\\0' x; head -c 30000000 /dev/zero | tr '\\0' y >&2"
"""60 MB in one burst, half on stdout, half on stderr: over the cap only together."""


def require_bwrap():
    if not bwrap_works():
        if os.environ.get("TILTH_REQUIRE_BWRAP") == "1":
            pytest.fail("TILTH_REQUIRE_BWRAP=1 but bubblewrap cannot run here")
        pytest.skip("bubblewrap cannot run here (apt-get install bubblewrap)")


def require_setpriv():
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run tilth as an unprivileged user")


def test_a_burst_past_the_output_cap_is_stopped_and_its_log_bounded(tmp_path):
    runs = tmp_path / "runs"
    result = run_command(BURST, tmp_path, runs=runs)
    assert result.stopped == "too much output"
    [run] = list_runs(runs)
    logged = (run / "stdout.log").stat().st_size + (run / "stderr.log").stat().st_size
    assert logged <= MAX_OUTPUT_BYTES + READ_BYTES
    assert load_result(run)["ok"] is False


def test_a_cli_agent_printing_past_the_cap_is_stopped_and_its_logs_bounded(tmp_path):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("go")
    lines = []
    done = run_agent(["bash", "-c", "echo '{\"type\":\"hello\"}'; " + BURST], tmp_path, dict(os.environ), prompt, 60,
                     tmp_path / "agents", "T-1-1-worker", lines.append)
    assert done.stopped == "too much output"
    logged = sum(path.stat().st_size for path in (tmp_path / "agents").iterdir())
    assert logged <= MAX_OUTPUT_BYTES + READ_BYTES
    assert lines == [{"type": "hello"}], "lines are still handed on as they come"


def test_a_silent_cli_agent_is_stopped_by_the_usage_it_writes_to_a_file(tmp_path):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("go")
    usage = tmp_path / "usage.jsonl"

    def over_cap() -> str | None:
        return "max_spend_usd reached" if usage.exists() else None
    done = run_agent(["bash", "-c", f"echo '{{}}' > {usage}; exec sleep 60"], tmp_path, dict(os.environ), prompt, 60,
                     tmp_path / "agents", "T-1-1-worker", lambda _: None, every_tick=over_cap)
    assert done.stopped == "max_spend_usd reached" and done.stdout_bytes == 0, done
    assert done.duration_ms < 30_000, "stopped at the next tick, not at the timeout"


FORK_LOOP = """
import os, sys, time
for n in range(200):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    except OSError as exc:
        print(f"fork {n} failed: {exc.strerror}")
        sys.exit(1)
print("200 processes started")
"""

RUN_ONE = """
import json, sys
from pathlib import Path
from tilth.agents.sandbox import wrap
from tilth.agents.tools.shell import run_command
place = Path(sys.argv[1])
result = run_command(sys.argv[2], place, timeout=60, wrapper=wrap("bwrap", place, place / "home"), max_processes=40)
print(json.dumps({"exit_code": result.exit_code, "stopped": result.stopped, "output": result.output}))
"""


def users():
    return [pytest.param(False, id="root"), pytest.param(True, id="nobody")]


@pytest.fixture
def place(request):
    """A directory outside /tmp (the sandbox's /tmp is private), owned by the user the test runs as."""
    path = Path(tempfile.mkdtemp(prefix="tilth-bounds-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def own(path: Path, nobody: bool) -> list[str]:
    """The argv prefix that runs a command as the test's user; as root, a pids cgroup must be there."""
    if not nobody:
        if pids_cgroup_base() is None:
            if os.environ.get("TILTH_REQUIRE_PIDS_CGROUP") == "1":
                pytest.fail("TILTH_REQUIRE_PIDS_CGROUP=1 but tilth cannot make a pids cgroup here")
            pytest.skip("no pids cgroup tilth can make here, and RLIMIT_NPROC never binds root")
        return []
    require_setpriv()
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(path)], check=True)
    return AS_NOBODY


def left_behind(directory: Path) -> list[int]:
    """Live processes whose working directory is in `directory`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and cwd.startswith(str(directory)):
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("nobody", users())
def test_a_command_cannot_start_more_processes_than_the_limit(place, nobody):
    require_bwrap()
    script = place / "forks.py"
    script.write_text(FORK_LOOP)
    prefix = own(place, nobody)
    out = subprocess.run([*prefix, sys.executable, "-c", RUN_ONE, str(place), f"{SYSTEM_PYTHON} {script}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["exit_code"] == 1 and "Resource temporarily unavailable" in result["output"], result
    assert not left_behind(place)


@pytest.mark.parametrize("nobody", users())
def test_a_fork_bomb_in_a_check_ends_as_a_failed_command_and_leaves_nothing(place, nobody):
    """The classic bash fork bomb as a check (once the worker's attempt exists: at the base commit it
    passes, so the baseline counts it as a regression); the worker's own commands run the bounded fork loop."""
    require_bwrap()
    repo = make_repo(place / "repo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    (place / "user").mkdir()  # the user's home: the sandbox hides it; the fork loop beside it is exposed
    env.update({"TILTH_HOME": str(place / "home"), "HOME": str(place / "user"), "PYTHONUNBUFFERED": "1",
                "TILTH_SANDBOX": "bwrap", "TILTH_TOOL_TIMEOUT": "8", "TILTH_AGENT_MAX_PROCESSES": "64",
                "TILTH_MAX_ITERATIONS_PER_TASK": "1", "TILTH_SANDBOX_EXPOSE": str(place / "forks.py")})
    sandbox = Sandbox(place, repo, place / "home", env)
    plan = sandbox.write_json("prd.json", [task("T-1")])
    (place / "forks.py").write_text(FORK_LOOP)
    scenario = sandbox.write_json("scenario.json", {"tasks": {"T-1": [
        {"run": [f"{SYSTEM_PYTHON} {place / 'forks.py'} > forks.txt 2>&1"]}]}})
    prefix = own(place, nobody)
    began = time.monotonic()
    result = subprocess.run([*prefix, sys.executable, "-m", "tilth", "start", "--repo", str(repo), "--prd", str(plan),
                             "--id", "s1", "--backend", "scripted", "--scenario", str(scenario), "--foreground",
                             "--check", "test ! -f forks.txt || { :(){ :|:& };:; sleep 600; }"],
                            env=env, capture_output=True, text=True, timeout=120, cwd=place)
    took = time.monotonic() - began
    assert "Traceback" not in result.stderr, result.stderr
    [checks] = [e["data"]["results"] for e in sandbox.events("s1") if e["type"] == "checks_run"]
    assert checks[0]["exit_code"] != 0, "a timeout (None) or a failure"
    run = sandbox.session_dir("s1") / "runs" / f"run-{checks[0]['run_id']}"
    assert "Resource temporarily unavailable" in (run / "stderr.log").read_text(), "the bomb ran into the limit"
    assert sandbox.statuses("s1") == {"T-1": "failed"}
    assert "Resource temporarily unavailable" in (sandbox.worktree("s1") / "forks.txt").read_text(), \
        "the worker's commands are bounded too"
    [confined] = [e["data"] for e in sandbox.events("s1") if e["type"] == "sandbox"]
    assert confined["processes"] == ("rlimit" if nobody else "cgroup")
    assert took < 60
    assert not left_behind(place)
