"""Failing tests named and held against the base commit: every check and verify command's failing
tests are read from its runner's output (pytest, unittest, cargo test, TAP), compared with the same
command on the base commit (failing before and after: pre-existing, not blocking; newly failing:
blocks and is named), and named in the verdict, the next prompt, the ledger, report.md and the PR
description. The sessions run a real test suite inside bubblewrap; the scripted evaluator accepts
everything, so only the harness refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git
from tilth.cli.review import pr_body
from tilth.store.home import session_paths
from tilth.views.tally import tally

HERE = Path(__file__).parent
PYTHON = sys.executable
PYTEST = f"{PYTHON} -m pytest -q -p no:cacheprovider tests"
UNITTEST = f"{PYTHON} -m unittest discover -s tests -t ."
BOXED = {"TILTH_SANDBOX": "bwrap", "TILTH_MAX_ITERATIONS_PER_TASK": "2", "TILTH_FINAL_REVIEW": "false",
         "TILTH_SANDBOX_EXPOSE": ",".join(dict.fromkeys([sys.prefix, str(Path(os.path.realpath(PYTHON)).parents[1]),
                                                         str(Path(pytest.__file__).resolve().parents[1])]))}
"""Confined by bubblewrap, with this venv, the interpreter it links to and the packages pytest is
in visible in the box (a mutant's venv finds them in another one)."""

CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a + a  # wrong since the base commit\n"
SUITE = ("import unittest\n\nfrom calc import add, sub\n\n\nclass CalcTest(unittest.TestCase):\n"
         "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
         "    def test_sub(self):\n        self.assertEqual(sub(5, 3), 2)\n")
"""A unittest suite, which pytest runs too; `test_sub` fails on the base commit."""
OLD_BUG = "tests/test_calc.py::CalcTest::test_sub"
BROKEN = "tests/test_calc.py::CalcTest::test_add"


def task(task_id: str, **extra: object) -> dict:
    return {"id": task_id, "title": f"Task {task_id}", "description": f"Do {task_id}.",
            "acceptance_criteria": [f"{task_id} is done"], "status": "pending", **extra}


@pytest.fixture
def suite(sandbox):
    """The sandbox's repository with a real test suite, one test failing on the base commit."""
    for name, text in {"calc.py": CALC, "tests/__init__.py": "", "tests/test_calc.py": SUITE}.items():
        (sandbox.repo / name).parent.mkdir(parents=True, exist_ok=True)
        (sandbox.repo / name).write_text(text)
    git(sandbox.repo, "add", "-A")
    git(sandbox.repo, "commit", "-q", "-m", "calc and its tests")
    return sandbox


def prompts(sandbox, session_id: str, role: str) -> list[str]:
    rows = [json.loads(line) for line in (sandbox.session_dir(session_id) / "prompts.jsonl").read_text().splitlines()]
    return [r["prompt"] for r in rows if r["role"] == role]


@pytest.mark.slow
@pytest.mark.bwrap
def test_a_verify_over_the_whole_suite_with_a_test_failing_at_base_is_accepted_and_the_report_names_it(suite):
    criterion = {"text": "the whole suite passes", "verify": PYTEST}
    scenario = {"tasks": {"T-1": [{"write": {"calc.py": CALC + "\n\ndef mul(a, b):\n    return a * b\n"}}]}}
    result = suite.start("s1", [task("T-1", acceptance_criteria=[criterion])], scenario, env=BOXED)
    assert result.returncode == 0, result.stderr
    assert suite.statuses("s1") == {"T-1": "done"}
    at_base = json.loads((suite.session_dir("s1") / "baseline.json").read_text())["verifies"]["T-1"][0]
    assert (at_base["exit_code"], at_base["failing_ids"]) == (1, [OLD_BUG])
    [entry] = suite.ledger("s1", "T-1")
    ran = entry["verifies"][0]
    assert (ran["exit_code"], ran["failing_ids"], ran["failing_before"], entry["verdict"]["verdict"]) == \
        (1, [OLD_BUG], [OLD_BUG], "accept")
    line = f"`{PYTEST}` exit 1; failing before this session too (not blocking): {OLD_BUG}"
    assert line in (suite.session_dir("s1") / "report.md").read_text()
    assert line in pr_body(tally(session_paths("s1", suite.home)))
    assert f"-> {line.split('` ', 1)[1]}\n(every test it names failing failed on the base commit too" \
        in prompts(suite, "s1", "evaluator")[0]
    doctor = suite.tilth("doctor", "s1")
    assert "session/s1" in doctor.stdout and "failed, yet its commit" not in doctor.stdout, doctor.stdout


@pytest.mark.slow
@pytest.mark.bwrap
def test_a_regressions_verdict_retry_prompt_and_ledger_name_the_broken_test_for_pytest_and_unittest(suite):
    broken = {"write": {"calc.py": CALC.replace("a + b", "a - b")}}
    fixed = {"write": {"calc.py": CALC + "\n\ndef mul(a, b):\n    return a * b\n"}}
    result = suite.start("s1", [task("T-1")], {"tasks": {"T-1": [broken, fixed]}}, "--check", PYTEST,
                         "--check", UNITTEST, env=BOXED)
    assert result.returncode == 0, result.stderr
    first, second = suite.ledger("s1", "T-1")
    verdict = first["verdict"]
    as_unittest = "tests.test_calc.CalcTest.test_add"
    assert verdict["category"] == "check_failed" and verdict["failing_tests"] == sorted([BROKEN, as_unittest])
    assert f"`{PYTEST}` (exit 1; newly failing: {BROKEN}; failing before this session too (not blocking): " \
           f"{OLD_BUG})" in verdict["concern"]
    assert f"`{UNITTEST}` (exit 1; newly failing: {as_unittest}; " in verdict["concern"]
    retry = prompts(suite, "s1", "worker")[1]
    assert f"newly failing: {BROKEN}" in retry and f"newly failing: {as_unittest}" in retry
    # the quoted output is whole lines, the ones naming the broken tests among them
    assert f"\nFAILED {BROKEN} - AssertionError: -1 != 5" in retry
    assert f"\nFAIL: test_add ({as_unittest})\n" in retry
    assert second["verdict"]["verdict"] == "accept" and suite.statuses("s1") == {"T-1": "done"}
    checked = [e["data"]["results"] for e in suite.events("s1") if e["type"] == "checks_run"]
    assert [r["failing_ids"] for r in checked[0]] == [[BROKEN, OLD_BUG], [as_unittest, "tests.test_calc.CalcTest.test_sub"]]


def test_a_verify_that_failed_at_base_without_naming_tests_still_blocks_and_says_so(sandbox):
    """Nothing to compare test by test: the verify must pass (it is what the task is to make true),
    and every place it appears says it failed on the base commit too."""
    plan = [task("T-1", acceptance_criteria=[{"text": "hello.txt exists", "verify": "test -f hello.txt"}])]
    result = sandbox.start("s1", plan, {"tasks": {"T-1": [{"write": {"other.txt": "x\n"}}]}},
                           env={"TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    assert result.returncode == 1 and sandbox.statuses("s1") == {"T-1": "failed"}
    verdict = sandbox.ledger("s1", "T-1")[0]["verdict"]
    said = "`test -f hello.txt` exit 1; failing at the base commit too"
    assert verdict["category"] == "verify_failed" and said in verdict["concern"]
    assert f"✗ hello.txt exists: {said}" in (sandbox.session_dir("s1") / "report.md").read_text()


# --- reading each runner's output, in process ----------------------------------------------

def run(argv: list[str], cwd: Path) -> tuple[str, int]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr, done.returncode


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_calc.py").write_text(SUITE + (
        "\n    def test_parts(self):\n        for n in (0, 1):\n            with self.subTest(n=n):\n"
        "                self.assertEqual(n, 0)\n\n    def test_error(self):\n        raise RuntimeError('boom')\n"))
    return tmp_path


def test_failing_tests_are_read_from_real_pytest_and_unittest_output_and_recorded_cargo_output(suite_dir):
    from tilth.agents.failing_tests import failing_ids

    out, code = run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], suite_dir)
    assert failing_ids(out, code) == ["tests/test_calc.py::CalcTest::test_error", "tests/test_calc.py::CalcTest::test_parts",
                                      OLD_BUG]
    out, code = run([PYTHON, "-m", "unittest", "discover", "-s", "tests", "-t", "."], suite_dir)
    assert failing_ids(out, code) == ["tests.test_calc.CalcTest.test_error", "tests.test_calc.CalcTest.test_parts",
                                      "tests.test_calc.CalcTest.test_sub"]  # a failing subtest counts as its test
    out, code = run([PYTHON, "-m", "unittest", "-v", "tests.test_calc.CalcTest.test_sub"], suite_dir)
    assert failing_ids(out, code) == ["tests.test_calc.CalcTest.test_sub"]
    older = "=" * 70 + "\nFAIL: test_sub (tests.test_calc.CalcTest)\n" + "-" * 70 + "\nRan 2 tests in 0.001s\n"
    assert failing_ids(older, 1) == ["tests.test_calc.CalcTest.test_sub"]  # Python before 3.11
    cargo = (HERE / "runner_output" / "cargo-test.txt").read_text()  # `cargo test --no-fail-fast` stdout, recorded with rustc 1.95.0
    assert failing_ids(cargo, 101) == ["integ_fails", "src/lib.rs - add (line 1)", "tests::it_fails", "tests::it_panics"]
    tap = (HERE / "runner_output" / "node-test-tap.txt").read_text()  # `node --test`, recorded with node 20.20
    assert failing_ids(tap, 1) == ["group > inner fails", "subtracts"]  # a TODO is no failure
    assert failing_ids(out, 0) == [] and failing_ids("make: *** [all] Error 2\n", 2) is None


def test_the_output_shown_is_whole_lines_and_keeps_the_lines_naming_the_failing_tests():
    from tilth.agents.failing_tests import excerpt, head_lines

    summary = ["=" * 20 + " short test summary info " + "=" * 20] + \
        [f"FAILED tests/test_{n}.py::test_case_number_{n} - AssertionError: {n} != {n + 1}" for n in range(40)]
    output = "\n".join([f"log line {n} " + "x" * 60 for n in range(200)] + summary + ["=== 40 failed in 1.00s ==="])
    wanted = ["tests/test_3.py::test_case_number_3", "tests/test_17.py::test_case_number_17"]
    shown = excerpt(output, wanted, 2000)
    assert len(shown) <= 2000 + 200  # the gap markers aside
    kept = shown.splitlines()
    assert all(line in output.splitlines() or line.startswith("[... ") for line in kept)  # no line cut
    assert [line for line in kept if "test_case_number_3 " in line or "test_case_number_17 " in line] == \
        ["FAILED tests/test_3.py::test_case_number_3 - AssertionError: 3 != 4",
         "FAILED tests/test_17.py::test_case_number_17 - AssertionError: 17 != 18"]
    assert kept[-1] == "=== 40 failed in 1.00s ===" and kept[0].startswith("[... ")
    assert excerpt("short\n", wanted, 2000) == "short\n"
    assert head_lines("aaa\nbbb\nccc\n", 9) == "aaa\nbbb\n[... 1 more line not shown ...]"
