"""Proof of done: criteria with `verify` commands tilth runs itself, the baseline at the base commit
(failing-before checks do not block, regressions do), and the harness's own refusal of weakened
tests and protected paths. The scripted evaluator accepts everything: only the harness refuses."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import git, make_repo, task
from tilth.cli.review import pr_body
from tilth.store.home import session_paths
from tilth.views.tally import tally

ONE_TRY = {"TILTH_MAX_ITERATIONS_PER_TASK": "1"}
PYTEST = f"{sys.executable} -m pytest -q -rA -p no:cacheprovider tests"
THIS_PYTHON = {"TILTH_SANDBOX_EXPOSE": ",".join(dict.fromkeys(
    [sys.prefix, str(Path(os.path.realpath(sys.executable)).parent.parent),
     *(p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p))]))}
"""This venv, the interpreter it links to and the site-packages it reads (another venv's, under `make
mutants`): a check naming them by path sees them in the sandbox."""


def prompts(sandbox, session_id: str, role: str, task_id: str) -> list[str]:
    rows = [json.loads(line) for line in (sandbox.session_dir(session_id) / "prompts.jsonl").read_text().splitlines()]
    return [r["prompt"] for r in rows if r["role"] == role and r["task"] == task_id]


def report(sandbox, session_id: str) -> str:
    return (sandbox.session_dir(session_id) / "report.md").read_text()


# --- verify -------------------------------------------------------------------------------

HELLO = {"text": "hello.txt says hello", "verify": "grep -q hello hello.txt"}


def test_a_failing_verify_rejects_before_the_evaluator_and_the_next_prompt_names_it(sandbox):
    plan = [task("T-1", acceptance_criteria=["hello.txt exists", HELLO])]
    scenario = {"tasks": {"T-1": [{"write": {"hello.txt": "bye\n"}}, {"write": {"hello.txt": "hello\n"}}]}}
    result = sandbox.start("s1", plan, scenario)
    assert result.returncode == 0, result.stderr
    first, second = sandbox.ledger("s1", "T-1")
    assert first["verdict"]["verdict"] == "reject" and first["verdict"]["category"] == "verify_failed"
    assert "hello.txt says hello" in first["verdict"]["concern"] and "grep -q hello hello.txt" in first["verdict"]["concern"]
    assert "exit 1" in first["verdict"]["concern"]
    assert [(v["criterion"], v["command"], v["exit_code"]) for v in first["verifies"]] == \
        [("hello.txt says hello", "grep -q hello hello.txt", 1)]
    assert second["verdict"]["verdict"] == "accept" and second["verifies"][0]["exit_code"] == 0
    # the evaluator was asked only about the second attempt, and saw the verify result
    evaluator = prompts(sandbox, "s1", "evaluator", "T-1")
    assert len(evaluator) == 1 and "✓ hello.txt says hello\n$ grep -q hello hello.txt  -> exit 0" in evaluator[0]
    retry = prompts(sandbox, "s1", "worker", "T-1")[1]
    assert "verify_failed" in retry and "criterion 'hello.txt says hello': `grep -q hello hello.txt` exit 1" in retry
    runs = [e for e in sandbox.events("s1") if e["type"] == "verifies_run"]
    assert [r["data"]["results"][0]["exit_code"] for r in runs] == [1, 0]
    transcript = (sandbox.session_dir("s1") / "transcript.md").read_text()
    assert "hello.txt says hello: `grep -q hello hello.txt` exit 1" in transcript
    assert sandbox.statuses("s1") == {"T-1": "done"}


def test_a_verify_that_never_passes_keeps_the_task_from_done(sandbox):
    plan = [task("T-1", acceptance_criteria=[HELLO])]
    result = sandbox.start("s1", plan, {"tasks": {"T-1": [{"write": {"hello.txt": "bye\n"}}]}}, env=ONE_TRY)
    assert result.returncode == 1
    assert sandbox.statuses("s1") == {"T-1": "failed"}
    assert "✗ hello.txt says hello: `grep -q hello hello.txt` exit 1" in report(sandbox, "s1")


def test_report_and_pr_body_list_each_criterion_with_its_command_and_exit_status(sandbox):
    plan = [task("T-1", acceptance_criteria=["the greeting is friendly", HELLO])]
    result = sandbox.start("s1", plan, {"tasks": {"T-1": [{"write": {"hello.txt": "hello\n"}}]}})
    assert result.returncode == 0, result.stderr
    lines = ["- T-1 (done)",
             "  - · the greeting is friendly: no command: the evaluator's judgement",
             "  - ✓ hello.txt says hello: `grep -q hello hello.txt` exit 0"]
    assert "\n".join(lines) in report(sandbox, "s1")
    assert "\n".join(lines) in pr_body(tally(session_paths("s1", sandbox.home)))


def test_a_verify_that_already_passed_at_base_is_marked_as_proving_nothing_new(sandbox):
    plan = [task("T-1", acceptance_criteria=[{"text": "README.md exists", "verify": "test -f README.md"}])]
    assert sandbox.start("s1", plan, None).returncode == 0
    baseline = json.loads((sandbox.session_dir("s1") / "baseline.json").read_text())
    assert baseline["verifies"]["T-1"][0]["exit_code"] == 0
    assert ("  - ✓ README.md exists: `test -f README.md` exit 0 (it exited 0 on the base commit too: it proves "
            "nothing new)") in report(sandbox, "s1")


def test_a_verify_runs_confined_like_the_workers_commands(sandbox):
    """The verify command sees the agent's environment, not the host's: a host variable is absent."""
    plan = [task("T-1", acceptance_criteria=[{"text": "no host secret", "verify": 'test -z "$HOST_ONLY_SECRET"'}])]
    result = sandbox.start("s1", plan, None, env={**ONE_TRY, "HOST_ONLY_SECRET": "s3cret"})
    assert result.returncode == 0, result.stderr
    assert sandbox.ledger("s1", "T-1")[0]["verifies"][0]["exit_code"] == 0


@pytest.mark.slow
def test_a_verify_past_its_timeout_fails(sandbox):
    plan = [task("T-1", acceptance_criteria=[{"text": "quick", "verify": "sleep 30"}])]
    result = sandbox.start("s1", plan, None, env={**ONE_TRY, "TILTH_VERIFY_TIMEOUT_S": "1"})
    assert result.returncode == 1
    entry = sandbox.ledger("s1", "T-1")[0]
    assert entry["verifies"][0]["exit_code"] is None and "timed out" in entry["verdict"]["concern"]


# --- the plan -----------------------------------------------------------------------------

@pytest.mark.parametrize("criterion, said", [
    ({"text": "x", "verify": "  "}, "field acceptance_criteria.0.verify: String should have at least 1 character"),
    ({"text": "x", "verify": "true", "verfiy": "typo"}, "field acceptance_criteria.0.verfiy: Extra inputs are not "),
    ({"verify": "true"}, "field acceptance_criteria.0.text: Field required"),
])
def test_plan_check_refuses_a_malformed_criterion(sandbox, criterion, said):
    path = sandbox.write_json("prd.json", [task("T-1", acceptance_criteria=[criterion])])
    result = sandbox.tilth("plan", "check", str(path))
    assert result.returncode == 2 and said in result.stderr, result.stderr


def test_plan_check_accepts_a_criterion_with_a_command_and_never_calls_it_vague(sandbox):
    path = sandbox.write_json("prd.json", [task("T-1", acceptance_criteria=[{"text": "It works", "verify": "make"}])])
    result = sandbox.tilth("plan", "check", str(path))
    assert result.returncode == 0 and "no warnings" in result.stdout, result.stdout + result.stderr


def test_the_read_only_peek_reads_criteria_with_commands_without_the_model():
    from tilth.store.prd_record import Criterion, read_task

    read = read_task(task("T-1", acceptance_criteria=[HELLO, "plain"], may_change=["tests/old_*.py"]))
    assert read is not None and isinstance(read.acceptance_criteria[0], Criterion)
    assert read_task(task("T-1", acceptance_criteria=[{"text": "x", "verify": ""}])) is None
    assert read_task(task("T-1", acceptance_criteria=[{"text": "x", "other": "y"}])) is None


def test_import_maps_ralphs_verification_commands_onto_verify(sandbox):
    ralph = sandbox.write_json("ralph.json", {"userStories": [
        {"id": "US-1", "title": "Add it", "description": "d", "acceptanceCriteria": ["Typecheck passes"],
         "verificationCommands": ["npm test", "npx tsc --noEmit"], "priority": 1, "passes": False}]})
    result = sandbox.tilth("import", str(ralph))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0]["acceptance_criteria"] == [
        "Typecheck passes", {"text": "`npm test` exits 0", "verify": "npm test"},
        {"text": "`npx tsc --noEmit` exits 0", "verify": "npx tsc --noEmit"}]
    checklist = sandbox.root / "todo.md"
    checklist.write_text("- [ ] Add it\n  - it builds (verify: `make build`)\n  - it looks nice\n")
    converted = sandbox.tilth("import", str(checklist))
    assert converted.returncode == 0, converted.stderr
    assert json.loads(converted.stdout)[0]["acceptance_criteria"] == [
        {"text": "it builds", "verify": "make build"}, "it looks nice"]
    bad = sandbox.write_json("bad.json", {"userStories": [
        {"id": "US-1", "title": "t", "acceptanceCriteria": ["a"], "verificationCommands": [3]}]})
    refused = sandbox.tilth("import", str(bad))
    assert refused.returncode == 2 and "verificationCommands must be a list" in refused.stderr


# --- the baseline -------------------------------------------------------------------------

def test_a_check_failing_at_base_does_not_block_and_is_named_in_the_report(sandbox):
    (sandbox.repo / "broken").write_text("left over\n")
    git(sandbox.repo, "add", "-A")
    git(sandbox.repo, "commit", "-q", "-m", "broken")
    result = sandbox.start("s1", [task("T-1"), task("T-2")], None, "--check", "test ! -f broken",
                           "--check", "test -f README.md", env=ONE_TRY)
    assert result.returncode == 0, result.stderr
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done"}
    baseline = json.loads((sandbox.session_dir("s1") / "baseline.json").read_text())
    assert [(c["command"], c["exit_code"]) for c in baseline["checks"]] == [("test ! -f broken", 1),
                                                                            ("test -f README.md", 0)]
    text = report(sandbox, "s1")
    assert "Failing before this session" in text and "- `test ! -f broken` (exit 1 at " in text
    assert "failed the same way on the base commit" in prompts(sandbox, "s1", "evaluator", "T-1")[0]
    assert [e["type"] for e in sandbox.events("s1")].count("baseline_recorded") == 1


def test_a_check_passing_at_base_and_failing_after_a_task_still_blocks(sandbox):
    result = sandbox.start("s1", [task("T-1")], {"tasks": {"T-1": [{"delete": ["README.md"],
                                                                      "write": {"x.txt": "x\n"}}]}},
                           "--check", "test -f README.md", env=ONE_TRY)
    assert result.returncode == 1
    assert sandbox.ledger("s1", "T-1")[0]["verdict"]["category"] == "check_failed"


@pytest.mark.slow
def test_a_check_past_its_timeout_is_never_accepted(sandbox):
    """A check that passes at the base commit and hangs after the task's change has failed: killed at
    `tool_timeout` and never taken for a pass, though the (scripted) evaluator accepts."""
    hangs = "test ! -f slow.txt || sleep 60"
    result = sandbox.start("s1", [task("T-1")], {"tasks": {"T-1": [{"write": {"slow.txt": "x\n"}}]}},
                           "--check", hangs, env={**ONE_TRY, "TILTH_TOOL_TIMEOUT": "1"})
    assert result.returncode == 1, result.stdout + result.stderr
    verdict = sandbox.ledger("s1", "T-1")[0]["verdict"]
    assert verdict["category"] == "check_failed" and f"`{hangs}` (timeout)" in verdict["concern"], verdict
    ran = [e["data"]["results"] for e in sandbox.events("s1") if e["type"] == "checks_run"]
    assert ran == [[{"command": hangs, "exit_code": None, "run_id": ran[0][0]["run_id"]}]]


@pytest.fixture
def pytest_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "pyrepo", {
        "tests/test_old.py": "def test_old_bug():\n    assert 1 == 2\n\n\ndef test_fine():\n    assert True\n"})


@pytest.mark.parametrize("new_test, outcome", [
    ("def test_new():\n    assert True\n", "done"),
    ("def test_new():\n    assert False\n", "failed"),
])
@pytest.mark.slow
def test_failing_test_ids_are_compared_with_the_baseline(sandbox, pytest_repo, new_test, outcome):
    """The check failed at base for test_old_bug; the same failure does not block, a new one does."""
    shutil.rmtree(sandbox.repo)
    shutil.copytree(pytest_repo, sandbox.repo)
    scenario = {"tasks": {"T-1": [{"write": {"tests/test_new.py": new_test}}]}}
    result = sandbox.start("s1", [task("T-1")], scenario, "--check", PYTEST, env={**ONE_TRY, **THIS_PYTHON})
    assert sandbox.statuses("s1") == {"T-1": outcome}, result.stderr
    baseline = json.loads((sandbox.session_dir("s1") / "baseline.json").read_text())
    assert baseline["checks"][0]["failing_ids"] == ["tests/test_old.py::test_old_bug"]
    if outcome == "failed":
        concern = sandbox.ledger("s1", "T-1")[0]["verdict"]["concern"]
        assert "newly failing: tests/test_new.py::test_new" in concern


@pytest.mark.slow
def test_the_baseline_is_recorded_once_and_survives_resume(sandbox):
    plan = [task("T-1", acceptance_criteria=[HELLO])]
    first = sandbox.start("s1", plan, {"tasks": {"T-1": [{"write": {"hello.txt": "bye\n"}},
                                                         {"write": {"hello.txt": "hello\n"}}]}},
                          "--check", "test ! -f hello.txt", env=ONE_TRY)
    assert first.returncode == 1
    recorded = (sandbox.session_dir("s1") / "baseline.json").read_text()
    assert json.loads(recorded)["verifies"]["T-1"][0]["exit_code"] == 2  # no hello.txt at base
    resumed = sandbox.tilth("resume", "s1", "--foreground")
    assert (sandbox.session_dir("s1") / "baseline.json").read_text() == recorded
    assert [e["type"] for e in sandbox.events("s1")].count("baseline_recorded") == 1
    assert resumed.returncode in (0, 1)


# --- weakened tests and protected paths ---------------------------------------------------

@pytest.fixture
def tested_repo(sandbox) -> None:
    for name, text in {"tests/test_core.py": "def test_core():\n    assert True\n",
                       ".github/workflows/ci.yml": "on: push\n"}.items():
        (sandbox.repo / name).parent.mkdir(parents=True, exist_ok=True)
        (sandbox.repo / name).write_text(text)
    git(sandbox.repo, "add", "-A")
    git(sandbox.repo, "commit", "-q", "-m", "tests and CI")


@pytest.mark.parametrize("step, category, path", [
    ({"delete": ["tests/test_core.py"]}, "tests_weakened", "tests/test_core.py (deleted)"),
    ({"write": {"tests/test_core.py": "\n"}}, "tests_weakened", "tests/test_core.py (emptied)"),
    ({"write": {"tests/test_core.py": "import pytest\n\n@pytest.mark.skip\ndef test_core():\n    assert True\n"}},
     "tests_weakened", "tests/test_core.py (adds @pytest.mark.skip)"),
    ({"write": {".github/workflows/ci.yml": "on: never\n"}}, "protected_path", ".github/workflows/ci.yml (modified)"),
    ({"write": {"deploy/prod.tf": "x\n"}}, "protected_path", "deploy/prod.tf (added)"),
])
def test_the_harness_refuses_weakened_tests_and_protected_paths(sandbox, tested_repo, step, category, path):
    result = sandbox.start("s1", [task("T-1")], {"tasks": {"T-1": [step]}}, env={
        **ONE_TRY, "TILTH_PROTECTED_PATHS": "deploy/"})
    assert result.returncode == 1
    verdict = sandbox.ledger("s1", "T-1")[0]["verdict"]
    assert verdict["category"] == category and path in verdict["evidence"], verdict
    assert prompts(sandbox, "s1", "evaluator", "T-1") == []  # refused before the evaluator


def test_a_change_the_task_allows_passes(sandbox, tested_repo):
    plan = [task("T-1", may_change=["tests/test_c*.py", ".github/workflows/"])]
    step = {"delete": ["tests/test_core.py"], "write": {".github/workflows/ci.yml": "on: pull_request\n"}}
    result = sandbox.start("s1", plan, {"tasks": {"T-1": [step]}}, env=ONE_TRY)
    assert result.returncode == 0, result.stderr
    assert sandbox.statuses("s1") == {"T-1": "done"}


# --- doctor -------------------------------------------------------------------------------

@pytest.mark.slow
def test_doctor_reads_the_baseline_and_the_verify_results_of_the_ledger(sandbox):
    plan = [task("T-1", acceptance_criteria=[HELLO])]
    result = sandbox.start("s1", plan, {"tasks": {"T-1": [{"write": {"hello.txt": "hello\n"}}]}},
                           "--check", "false", "--check", "true")
    assert result.returncode == 0, result.stderr  # `false` failed at base too: not blamed
    assert sandbox.statuses("s1") == {"T-1": "done"}, result.stderr
    healthy = sandbox.tilth("doctor", "s1")
    assert "baseline.json: 2 check(s) on the base commit" in healthy.stdout
    assert "1 failing before the session (not blamed on any task)" in healthy.stdout
    ledger = sandbox.session_dir("s1") / "ledger" / "T-1.jsonl"
    ledger.write_text(ledger.read_text().replace('"exit_code":0', '"exit_code":1'))
    doubted = sandbox.tilth("doctor", "s1")
    assert "T-1:" in doubted.stdout and "verify `grep -q hello hello.txt` (exit 1) failed, yet its commit" \
        in doubted.stdout, doubted.stdout
    (sandbox.session_dir("s1") / "baseline.json").write_text("{")
    damaged = sandbox.tilth("doctor", "s1")
    assert "baseline.json is damaged" in damaged.stdout, damaged.stdout


# --- the final review ---------------------------------------------------------------------

REVIEW = {"verdict": {"verdict": "reject", "concern": "two findings",
                      "evidence": ["a.txt and b.txt hold the same helper: keep one", "scripted/ is a leftover"]}}


def test_the_final_reviews_findings_reach_the_report_and_the_pr_body(sandbox):
    scenario = {"tasks": {"final-review": [REVIEW]}}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario)  # on by default
    assert result.returncode == 0, result.stderr
    reviews = [e for e in sandbox.events("s1") if e["type"] == "final_review"]
    assert len(reviews) == 1 and reviews[0]["data"]["findings"] == REVIEW["verdict"]["evidence"]
    lines = "Final review of the whole diff (the evaluator, across every task):\n" \
            "- a.txt and b.txt hold the same helper: keep one\n- scripted/ is a leftover\n"
    assert lines in report(sandbox, "s1")
    assert lines in pr_body(tally(session_paths("s1", sandbox.home)))
    prompt = prompts(sandbox, "s1", "final_review", "final-review")[0]
    assert "scripted/T-1.md" in prompt and "scripted/T-2.md" in prompt and "- T-2 (done): Task T-2" in prompt
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done"}


@pytest.mark.slow
def test_the_final_review_is_off_by_setting_and_can_add_follow_up_tasks(sandbox):
    scenario = {"tasks": {"final-review": [REVIEW]}}
    off = sandbox.start("s1", [task("T-1")], scenario, env={"TILTH_FINAL_REVIEW": "false"})
    assert off.returncode == 0 and not [e for e in sandbox.events("s1") if e["type"] == "final_review"]
    assert "Final review" not in report(sandbox, "s1")
    on = sandbox.start("s2", [task("T-1")], scenario, env={"TILTH_FINAL_REVIEW_TASKS": "true"})
    assert on.returncode == 0, on.stderr
    assert sandbox.statuses("s2") == {"T-1": "done", "REVIEW-1": "done", "REVIEW-2": "done"}
    plan = {t["id"]: t for t in sandbox.plan("s2")}
    assert "a.txt and b.txt hold the same helper" in plan["REVIEW-1"]["description"]
    reviews = [e["data"] for e in sandbox.events("s2") if e["type"] == "final_review"]
    assert [r["tasks_added"] for r in reviews] == [["REVIEW-1", "REVIEW-2"], []]  # follow-ups only once


def test_an_unscripted_final_review_accepts_labelled_as_scripted_even_when_the_default_step_rejects(sandbox):
    reject = {"verdict": {"verdict": "reject", "concern": "the default step rejects"}}
    scenario = {"tasks": {"T-1": [{"write": {"a.txt": "a\n"}}]}, "default": [reject]}
    result = sandbox.start("s1", [task("T-1")], scenario)
    assert result.returncode == 0, result.stderr
    reviews = [e["data"] for e in sandbox.events("s1") if e["type"] == "final_review"]
    assert [(r["verdict"], r["backend"], r["findings"]) for r in reviews] == [("accept", "scripted", [])]
    assert reviews[0]["concern"].startswith("scripted backend: the scenario scripts no final review")
    assert "Final review of the whole diff: no findings (scripted backend: the scenario scripts no final review" \
        in report(sandbox, "s1")


def test_no_final_review_when_a_task_failed(sandbox):
    reject = {"verdict": {"verdict": "reject", "concern": "never good enough"}}
    scenario = {"tasks": {"T-2": [reject], "final-review": [REVIEW]}}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env={"TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    assert result.returncode != 0 and sandbox.statuses("s1") == {"T-1": "done", "T-2": "failed"}
    assert not [e for e in sandbox.events("s1") if e["type"] == "final_review"]


# --- the rules themselves, in process -----------------------------------------------------

def change(path, status="modified", old_path=None, emptied=False, added=()):
    from tilth.git.gitops import FileChange

    return FileChange(path, status, old_path or path, emptied, tuple(added))


def test_the_guards_rules_name_each_path_and_what_was_done_to_it():
    from tilth.agents.guard import findings, guard_rejection

    found = findings([
        change("tests/test_a.py", "deleted"),
        change("src/b_test.go", emptied=True),
        change("tests/helpers/test_c.py", "renamed", old_path="tests/test_c.py"),
        change("lib/c.py", "renamed", old_path="tests/test_e.py"),
        change("web/app.spec.ts", added=["  it.skip('works', () => {})"]),
        change("conftest.py", added=["pytest.skip('later')"]),
        change("README.md", added=["Use @pytest.mark.skip to skip a test."]),   # prose: fine
        change("src/core.py", added=["x = 1"]),
        change(".gitlab-ci.yml"), change(".ci/run"), change("infra/main.tf", "added"),
        change("docs/old.md", "deleted"),
    ], protected=["infra/*.tf"], may_change=[])
    assert found == {  # a test renamed to another test's name, prose and other code are fine
        "tests_weakened": ["tests/test_a.py (deleted)", "src/b_test.go (emptied)",
                           "tests/test_e.py (renamed to lib/c.py)", "web/app.spec.ts (adds it.skip)",
                           "conftest.py (adds pytest.skip)"],
        "protected_path": [".gitlab-ci.yml (modified)", ".ci/run (modified)", "infra/main.tf (added)"]}
    verdict = guard_rejection(found)
    assert verdict.category == "tests_weakened" and "infra/main.tf (added)" in verdict.evidence
    assert guard_rejection({"protected_path": ["x (added)"]}).category == "protected_path"
    assert guard_rejection({}) is None
    allowed = findings([change("tests/test_a.py", "deleted"), change(".ci/run")], [], ["tests/*", ".ci/"])
    assert allowed == {}


def test_failing_ids_are_read_from_pytests_summary_only():
    from tilth.agents.checks import CheckResult, failing_ids, new_failures
    from tilth.store.baseline import Baseline, BaselineCheck

    out = ("FAILED early noise\n=== short test summary info ===\nPASSED tests/t.py::ok\n"
           "FAILED tests/t.py::a - assert 1 == 2\nERROR tests/u.py::b\n=== 2 failed ===\n")
    assert failing_ids(out, 1) == ["tests/t.py::a", "tests/u.py::b"]
    assert failing_ids("FAILED tests/t.py::a\n", 1) is None  # no summary heading: not parseable
    assert failing_ids(out, 0) == []
    base = Baseline(commit="0" * 40, checks=[BaselineCheck(command="pytest", exit_code=1, failing_ids=["tests/t.py::a"]),
                                             BaselineCheck(command="lint", exit_code=0, failing_ids=[])])

    def now(command, ids, code=1):
        return CheckResult(command=command, exit_code=code, output_tail="", failing_ids=ids)

    assert new_failures(now("pytest", ["tests/t.py::a"]), base) is None
    assert new_failures(now("pytest", ["tests/t.py::a", "tests/v.py::c"]), base) == ["tests/v.py::c"]
    assert new_failures(now("pytest", None), base) is None          # failing before and after, not comparable
    assert new_failures(now("lint", None), base) == []               # passed before: blamed
    assert new_failures(now("other", ["x"]), base) == ["x"]          # no baseline for it: blamed
    assert new_failures(now("pytest", ["tests/t.py::a"]), None) == ["tests/t.py::a"]
