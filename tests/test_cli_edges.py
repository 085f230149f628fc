"""The command line's edges a new user meets: --version, help for every command, the most
recent session as the default (said on stderr), Ctrl-C and closed pipes without a traceback,
one-line refusals of a bad --prd / --id / `run --at`, and editing the live plan."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version

import pytest

from conftest import task, wait_for_pause
from tilth.cli.main import build_parser


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def read_stderr_until(proc: subprocess.Popen, needle: str) -> None:
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if needle in line:
            return
    proc.kill()
    raise AssertionError(f"never saw {needle!r}; stderr: {''.join(seen)!r}")


def test_version_prints_the_package_version(sandbox):
    import tilth

    try:
        expected = version("tilth")
    except PackageNotFoundError:
        expected = tilth.__version__
    shown = sandbox.tilth("--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"tilth {expected}\n"


def commands(parser: argparse.ArgumentParser) -> list[tuple[str, str | None, argparse.ArgumentParser]]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {choice.dest: choice.help for choice in action._choices_actions}
    return [(name, helps.get(name), sub) for name, sub in action.choices.items()]


@pytest.mark.slow
def test_every_command_and_every_positional_argument_has_help(sandbox):
    listed = sandbox.tilth("--help").stdout
    found = commands(build_parser())
    assert len(found) >= 18
    for name, summary, parser in found:
        assert summary, f"`tilth {name}` has no one-line description"
        assert " ".join(summary.split()[:3]) in " ".join(listed.split()), f"`tilth --help` does not describe {name}"
        own = sandbox.tilth(name, "-h")
        assert own.returncode == 0, own.stderr
        assert " ".join(summary.split()) in " ".join(own.stdout.split()), f"`tilth {name} -h` lacks its description"
        for arg in parser._actions:
            if not arg.option_strings:
                assert arg.help and arg.help != argparse.SUPPRESS, f"`tilth {name}`: positional {arg.dest} has no help"
                assert " ".join(arg.help.split()[:3]) in " ".join(own.stdout.split())


@pytest.mark.slow
def test_commands_without_an_id_use_the_most_recent_session_and_say_which(sandbox):
    for sid in ("s1", "s2"):
        assert sandbox.start(sid, [task("T-1")]).returncode == 0
    said = "tilth: using the most recent session s2\n"

    logs = sandbox.tilth("logs")
    assert logs.returncode == 0 and logs.stderr == said
    assert logs.stdout == sandbox.tilth("logs", "s2").stdout != sandbox.tilth("logs", "s1").stdout

    waited = sandbox.tilth("wait")
    assert (waited.returncode, waited.stdout, waited.stderr) == (0, "session s2: done\n", said)

    stopped = sandbox.tilth("stop")
    assert stopped.returncode == 0 and stopped.stderr == said
    assert stopped.stdout == "session s2 is not running (done); nothing to stop\n"

    for command in (["log"], ["diff"], ["learnings"]):
        shown = sandbox.tilth(*command)
        assert shown.returncode == 0 and shown.stderr == said, (command, shown.stderr)
    assert sandbox.tilth("log", "s2").stderr == ""  # a named session needs no note


@pytest.mark.slow
@pytest.mark.parametrize("command", [["wait"], ["logs", "-f"]])
def test_ctrl_c_while_following_exits_130_in_one_line(sandbox, command):
    plan = sandbox.write_json("p.json", [task("T-1")])
    runner = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                           "scripted", "--foreground", env={"TILTH_TEST_PAUSE_AT": "worker"})
    try:
        wait_for_pause(runner, "worker")
        follower = sandbox.spawn(*command)
        try:
            read_stderr_until(follower, "using the most recent session s1")  # it is in the command now
            follower.send_signal(signal.SIGINT)
            assert follower.wait(timeout=30) == 130
            rest = follower.stderr.read()
        finally:
            follower.kill()
        assert "Traceback" not in rest and "KeyboardInterrupt" not in rest
        assert one_line(rest) == "tilth: interrupted"
    finally:
        runner.kill()
        runner.wait()


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(sandbox):
    title = "A long task title so the status output outgrows a pipe buffer " * 4  # at most 300 characters
    plan = sandbox.write_json("p.json", [task(f"T-{i}", title) for i in range(300)])
    runner = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                           "scripted", "--foreground", env={"TILTH_TEST_PAUSE_AT": "worker"})
    try:
        wait_for_pause(runner, "worker")
    finally:
        runner.kill()
        runner.wait()
    status = subprocess.Popen([sys.executable, "-m", "tilth", "status", "s1"], env=sandbox.env, cwd=sandbox.root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert status.stdout.readline().startswith("session s1: ")
        status.stdout.close()  # more than a pipe's worth is still to be written: the writer meets a closed pipe
        code = status.wait(timeout=60)
        errors = status.stderr.read()
    finally:
        status.kill()
    assert "Traceback" not in errors and "BrokenPipe" not in errors, errors
    assert (code, errors) == (0, "")


@pytest.mark.slow
def test_a_directory_without_a_plan_and_an_empty_id_are_refused_in_one_line(sandbox):
    base = ["start", "--repo", str(sandbox.repo), "--backend", "scripted", "--foreground"]
    folder = sandbox.root / "plans"
    folder.mkdir()
    (folder / "plan.json").write_text(json.dumps([task("T-1")]))

    refused = sandbox.tilth(*base, "--prd", str(folder), "--id", "s1")
    assert refused.returncode == 2
    assert one_line(refused.stderr) == f"tilth: {folder}: a directory with neither a prd.json nor markdown task " \
                                      "files (*.md) in it"

    empty = sandbox.tilth(*base, "--prd", str(folder / "plan.json"), "--id", "")
    assert empty.returncode == 2
    assert "--id is empty" in one_line(empty.stderr)

    assert not (sandbox.home / "sessions").exists() or not any((sandbox.home / "sessions").iterdir())
    assert "session/" not in subprocess.run(["git", "branch", "--list"], cwd=sandbox.repo, capture_output=True,
                                            text=True).stdout


def test_run_refuses_at_and_points_to_start(sandbox):
    assert sandbox.start("s1", [task("T-1")]).returncode == 0
    refused = sandbox.tilth("run", "s1", "--at", "2030-01-01T09:00")
    assert refused.returncode == 2
    assert "`tilth start --at 2030-01-01T09:00`" in one_line(refused.stderr)
    assert json.loads((sandbox.session_dir("s1") / "session.json").read_text())["state"] == "done"


EDITOR_SCRIPT = "import os, sys\nopen(sys.argv[1], 'w').write(os.environ['NEW_PLAN'])\n"


@pytest.mark.slow
def test_start_names_the_live_plan_and_plan_edit_saves_only_a_valid_one(sandbox):
    started = sandbox.start("s1", [task("T-1")])
    assert started.returncode == 0, started.stderr
    live = sandbox.session_dir("s1") / "prd.json"
    assert (f"plan: {live} (edit it while the session runs; tilth picks up changes between tasks)\n"
            in started.stdout)

    editor = sandbox.root / "editor.py"
    editor.write_text(EDITOR_SCRIPT)
    edit_env = {"EDITOR": f"{sys.executable} {editor}", "TMPDIR": str(sandbox.root)}

    grown = sandbox.plan("s1") + [task("T-2")]
    saved = sandbox.tilth("plan", "edit", "s1", env={**edit_env, "NEW_PLAN": json.dumps(grown)})
    assert saved.returncode == 0, saved.stderr
    assert sandbox.plan("s1") == grown

    before = live.read_bytes()
    broken = sandbox.tilth("plan", "edit", env={**edit_env, "NEW_PLAN": json.dumps([{"id": "T-1"}])})
    assert broken.returncode == 2
    lines = broken.stderr.splitlines()
    assert lines[0] == "tilth: using the most recent session s1"
    assert len(lines) == 2 and "field title" in lines[1] and "the previous plan is kept" in lines[1]
    assert live.read_bytes() == before
    kept = sandbox.root / lines[1].rsplit("your edit is in ", 1)[1]
    assert json.loads(kept.read_text()) == [{"id": "T-1"}], "the rejected edit is kept for another try"

    resumed = sandbox.tilth("resume", "--foreground")
    assert resumed.returncode == 0, resumed.stderr
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done"}


@pytest.mark.slow
def test_wait_says_every_interval_what_it_still_waits_for(sandbox):
    from tilth.store.home import session_paths
    from tilth.views.follow import EXIT_TIMEOUT, wait_for

    plan = sandbox.write_json("p.json", [task("T-1")])
    runner = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                           "scripted", "--foreground", env={"TILTH_TEST_PAUSE_AT": "worker"})
    try:
        wait_for_pause(runner, "worker")  # running, and holding the session until killed
        reports, progress = [], []
        code = wait_for([session_paths("s1", sandbox.home)], 1.3, reports.append, progress.append, every=0.4)
    finally:
        runner.kill()
        runner.wait()
    assert code == EXIT_TIMEOUT and reports == ["timed out after 1.3s; still waiting for: s1 running"]
    assert len(progress) >= 2 and all(line.startswith("still waiting after ") for line in progress), progress
    assert progress[0].endswith("s: s1 running")


def test_wait_help_lists_every_exit_code(sandbox):
    import re

    from tilth.actions.remote import WAIT_EXIT
    from tilth.views.follow import EXIT_CODES, EXIT_TIMEOUT

    shown = " ".join(sandbox.tilth("wait", "--help").stdout.split())
    codes = {*EXIT_CODES.values(), *WAIT_EXIT.values(), EXIT_TIMEOUT, 2, 0}
    assert codes == {0, 1, 2, 3, 4, 5}
    for code in codes:
        assert re.search(rf"[:,] {code} [a-z]", shown), (code, shown)
