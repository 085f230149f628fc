"""The guard counts tests: the test ids the task's starting point collects and the staged tree does
not, and the tests a skip marker added in the diff covers, refuse an attempt (`tests_weakened`) with
each id named, unless the task's `may_change` allows the file. Real git, real pytest and unittest
listed inside the sandbox, the scripted backend (whose evaluator accepts everything)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import git, task
from test_confinement_home import machine, require_bwrap  # noqa: F401 (the fixture)

ONE_TRY = {"TILTH_MAX_ITERATIONS_PER_TASK": "1"}
THIS_PYTHON = {"TILTH_SANDBOX_EXPOSE": ",".join(dict.fromkeys(
    [sys.prefix, str(Path(os.path.realpath(sys.executable)).parent.parent)]))}
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
UNITTEST = f"{sys.executable} -m unittest discover -s tests -t ."
CORE = ("import pytest\n\n\ndef test_one():\n    assert 1 + 1 == 2\n\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\ndef test_two(n):\n    assert n > 0\n\n\n"
        "class TestThree:\n    def test_three(self):\n        assert True\n")
CASES = ("import unittest\n\n\nclass TestCore(unittest.TestCase):\n    def test_one(self):\n        self.assertTrue(True)\n\n"
         "    def test_two(self):\n        self.assertEqual(2, 2)\n")


def commit_files(repo: Path, files: dict[str, str]) -> None:
    for name, text in {".gitignore": "__pycache__/\n", **files}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tests")


def counted(sandbox, session_id: str) -> list[dict]:
    return [e["data"] for e in sandbox.events(session_id) if e["type"] == "tests_counted"]


@pytest.mark.slow
@pytest.mark.parametrize("changed, said", [
    (CORE.replace("def test_one():\n    assert 1 + 1 == 2\n\n\n", ""),
     "tests/test_core.py (no longer collects tests/test_core.py::test_one)"),
    (CORE.replace("@pytest.mark.parametrize('n', [1, 2])", "@pytest.mark.parametrize('n', [1])"),
     "tests/test_core.py (no longer collects tests/test_core.py::test_two[2])"),
    (CORE.replace("    def test_three", "    @pytest.mark.skip(reason='later')\n    def test_three"),
     "tests/test_core.py (newly skips tests/test_core.py::TestThree::test_three)"),
    (CORE.replace("    assert n > 0", "    pytest.skip('flaky')\n    assert n > 0"),
     "tests/test_core.py (newly skips tests/test_core.py::test_two[1], tests/test_core.py::test_two[2])"),
])
def test_a_test_removed_or_newly_skipped_is_refused_with_its_id_named(sandbox, changed, said):
    commit_files(sandbox.repo, {"tests/test_core.py": CORE})
    scenario = {"tasks": {"T-1": [{"write": {"tests/test_core.py": changed, "src.txt": "x\n"}}]}}
    result = sandbox.start("s1", [task("T-1")], scenario, "--check", PYTEST, env={**ONE_TRY, **THIS_PYTHON})
    assert result.returncode == 1, result.stdout + result.stderr
    verdict = sandbox.ledger("s1", "T-1")[0]["verdict"]
    assert verdict["category"] == "tests_weakened" and said in verdict["evidence"], verdict
    assert said in verdict["concern"]
    listed = counted(sandbox, "s1")
    assert len(listed) == 1 and listed[0]["before"] == 4, listed


@pytest.mark.slow
def test_a_test_added_and_none_lost_passes_and_the_task_may_allow_a_removal(sandbox):
    commit_files(sandbox.repo, {"tests/test_core.py": CORE})
    grown = CORE + "\n\ndef test_four():\n    assert True\n"
    shrunk = CORE.replace("def test_one():\n    assert 1 + 1 == 2\n\n\n", "")
    plan = [task("T-1"), task("T-2", may_change=["tests/test_core.py"])]
    scenario = {"tasks": {"T-1": [{"write": {"tests/test_core.py": grown}}],
                          "T-2": [{"write": {"tests/test_core.py": shrunk}}]}}
    result = sandbox.start("s1", plan, scenario, "--check", PYTEST, env={**ONE_TRY, **THIS_PYTHON})
    assert result.returncode == 0, result.stdout + result.stderr
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done"}
    assert [(c["before"], c["after"], c["lost"]) for c in counted(sandbox, "s1")] == [(4, 5, 0)]  # T-2: allowed, not listed
    message = git(sandbox.repo, "log", "-1", "--format=%B", sandbox.commits("s1")[0]["sha"])
    assert "4 test ids listed on the task's starting point still collected" in message, message


def test_unittest_discovery_is_listed_and_a_removed_method_named(sandbox):
    commit_files(sandbox.repo, {"tests/__init__.py": "", "tests/test_core.py": CASES})
    shrunk = CASES.replace("\n    def test_two(self):\n        self.assertEqual(2, 2)\n", "")
    scenario = {"tasks": {"T-1": [{"write": {"tests/test_core.py": shrunk}}]}}
    result = sandbox.start("s1", [task("T-1")], scenario, "--check", UNITTEST, env={**ONE_TRY, **THIS_PYTHON})
    assert result.returncode == 1, result.stdout + result.stderr
    verdict = sandbox.ledger("s1", "T-1")[0]["verdict"]
    assert verdict["evidence"] == ["tests/test_core.py (no longer collects tests.test_core.TestCore.test_two)"], verdict


def test_runners_are_found_in_check_commands_and_a_listing_read_only_whole():
    from tilth.agents.test_census import read_pytest, runners, skipped_tests

    found = runners(["cd sub && uv run pytest -q -x --lf tests > out.txt", "python3 -m pytest -vv -k fast",
                     "make test", "python -m unittest discover -s tests", "ruff check ."])
    assert [(r.kind, r.cd) for r in found] == [("pytest", "sub"), ("pytest", ""), ("unittest", "")]
    assert found[0].collect == "cd sub && uv run pytest tests --collect-only --verbosity=-1"
    assert found[1].collect == "python3 -m pytest -k fast --collect-only --verbosity=-1"
    listing = "t.py::a\nt.py::b[x y]\n\n2 tests collected in 0.01s\n"
    assert read_pytest(listing, 0) == ({"t.py::a": "t.py", "t.py::b[x y]": "t.py"}, [])
    assert read_pytest(listing.replace("2 tests", "3 tests"), 0) is None  # cut short: no census
    assert read_pytest(listing, 4) is None                                # a usage error
    source = ("import pytest\npytestmark = pytest.mark.skip\n\nclass TestA:\n    @pytest.mark.xfail\n"
              "    def test_b(self):\n        def inner():\n            pytest.skip('x')\n")
    assert skipped_tests("t.py", source, [2, 5, 8]) == ["t.py", "t.py::TestA::test_b"]
    assert skipped_tests("t.py", "def (:", [1]) is None


def test_the_evaluator_reads_the_test_files_diff_first(sandbox):
    """An assertion loosened in place is the evaluator's to judge: its prompt shows the test files first."""
    commit_files(sandbox.repo, {"lib.py": "X = 1\n", "tests/test_lib.py": "def test_x():\n    assert X == 1\n"})
    step = {"write": {"lib.py": "X = 2\n", "tests/test_lib.py": "def test_x():\n    assert X > 0\n"}}
    result = sandbox.start("s1", [task("T-1")], {"tasks": {"T-1": [step]}}, env=ONE_TRY)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [json.loads(line) for line in (sandbox.session_dir("s1") / "prompts.jsonl").read_text().splitlines()]
    prompt = next(r["prompt"] for r in rows if r["role"] == "evaluator")
    assert "test files first" in prompt
    assert -1 < prompt.index("diff --git a/tests/test_lib.py") < prompt.index("diff --git a/lib.py"), prompt


@pytest.mark.slow
@pytest.mark.bwrap
def test_the_listing_runs_confined_as_root_and_as_an_unprivileged_user(machine):  # noqa: F811 (the fixture)
    """A conftest.py that writes into TILTH_HOME when it can: the listings of both trees run in the
    sandbox (as the checks do), so it never can, and the removed test is named all the same."""
    require_bwrap()
    leak = machine.tilth_home / "leak.txt"
    files = {"tests/conftest.py": f"try:\n    open({str(leak)!r}, 'w').write('listed unconfined')\nexcept OSError:\n    pass\n",
             "tests/test_core.py": "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
             ".gitignore": "__pycache__/\n"}
    for name, text in files.items():
        (machine.repo / name).parent.mkdir(parents=True, exist_ok=True)
        (machine.repo / name).write_text(text)
    machine.git("add", "-A")
    machine.git("commit", "-q", "-m", "tests")
    machine.own(machine.repo)
    scenario = {"tasks": {"T-1": [{"write": {"tests/test_core.py": "def test_one():\n    pass\n"}}]}}
    python = machine.user.python  # a home closed to others (pyenv's in /root) has a stand-in under /var/tmp
    expose = ",".join(dict.fromkeys([str(Path(python).parent.parent), *THIS_PYTHON["TILTH_SANDBOX_EXPOSE"].split(",")]))
    result = machine.start("s1", [task("T-1")], scenario, env={
        **ONE_TRY, "TILTH_SANDBOX_EXPOSE": expose, "TILTH_SANDBOX": "bwrap", "TILTH_CHECKS": f"{python} -m pytest -q tests"})
    assert result.returncode == 1, result.stdout + result.stderr
    verdict = json.loads((machine.tilth_home / "sessions/s1/ledger/T-1.jsonl").read_text().splitlines()[0])["verdict"]
    assert verdict["evidence"] == ["tests/test_core.py (no longer collects tests/test_core.py::test_two)"], verdict
    assert [e["data"]["before"] for e in machine.events("s1") if e["type"] == "tests_counted"] == [2]
    assert not leak.exists()
    assert not list((machine.tilth_home / "sessions/s1/census").iterdir())  # the trees' copies are removed
