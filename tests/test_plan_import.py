"""Plans written for other tools (tests/plans/: a Ralph prd.json, a directory of markdown task
files, a markdown checklist, a `gh issue list` export) read into tilth's prd.json by `tilth
import` and run directly by `tilth start --prd`; `tilth plan check` errors and warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import task
from tilth.cli.plan_check import vague
from tilth.cli.plan_import import read_plan
from tilth.core.errors import BadInput
from tilth.store.prd import parse_plan

PLANS = Path(__file__).parent / "plans"

EXPECTED = {
    "ralph-prd.json": (
        "ralph", "read a Ralph prd.json (4 user stories)",
        [("US-001", "done"), ("US-002", "pending"), ("US-003", "pending"), ("US-004", "pending")],
    ),
    "feature": (
        "feature-dir", "read a directory of markdown task files (2 files)",
        [("F-1", "pending"), ("F-2", "pending")],
    ),
    "checklist.md": (
        "checklist", "read a markdown checklist (3 items)",
        [("T-1", "done"), ("T-2", "pending"), ("T-9", "pending")],
    ),
    "gh-issues.json": (
        "gh", "read a GitHub issue export (2 issues)",
        [("GH-17", "pending"), ("GH-42", "pending")],
    ),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_format_reads_into_a_valid_plan(name):
    fmt, said, order = EXPECTED[name]
    plan = read_plan(PLANS / name)
    assert (plan.fmt, plan.said, plan.count) == (fmt, said, len(order))
    tasks = parse_plan(plan.data, name)  # exactly what `tilth start` accepts
    assert [(t.id, t.status.value) for t in tasks] == order


def test_the_ralph_stories_keep_their_criteria_and_notes():
    tasks = {t.id: t for t in parse_plan(read_plan(PLANS / "ralph-prd.json").data, "ralph")}
    assert tasks["US-003"].acceptance_criteria == ["Priority dropdown in task edit modal",
                                                   "Shows current priority as selected",
                                                   "Saves immediately on selection change", "Typecheck passes"]
    assert tasks["US-003"].description.endswith("\n\nNotes: Reuse the badge colours from US-002.")
    assert tasks["US-001"].description == \
        "As a developer, I need to store task priority so it persists across sessions."


def test_the_markdown_formats_keep_description_criteria_and_dependencies():
    feature = parse_plan(read_plan(PLANS / "feature").data, "feature")
    assert feature[0].title == "Parse the config file"
    assert feature[0].description.startswith("Read `config.toml` from the project root")
    assert feature[0].acceptance_criteria[1] == "An unknown key raises `ConfigError` whose message names the key"
    assert feature[1].depends_on == ["F-1"] and feature[0].depends_on == []

    checklist = parse_plan(read_plan(PLANS / "checklist.md").data, "checklist")
    assert checklist[1].description == "The entry goes at the top of CHANGELOG.md."
    assert checklist[1].acceptance_criteria == [
        "CHANGELOG.md has a `## 1.2.0` section listing the new --config flag",
        "Each line names the issue it fixes (`#123`)"]
    assert checklist[2].title == "Tag the release"

    issues = parse_plan(read_plan(PLANS / "gh-issues.json").data, "gh")
    assert issues[0].title == "Debounce the search box"
    assert issues[0].acceptance_criteria == ["Requests are debounced by 300 ms",
                                             "The search box shows a spinner while a request is in flight"]
    assert issues[1].description == "The export page times out on large projects."
    assert issues[1].acceptance_criteria[0] == "Exporting a project with 10,000 rows finishes in under 5 seconds"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPECTED))
def test_start_runs_each_format_directly_and_says_which_it_read(sandbox, name):
    _, said, order = EXPECTED[name]
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(PLANS / name), "--id", "s1",
                           "--backend", "scripted", "--foreground")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == f"plan: {said}"
    pending = [tid for tid, status in order if status == "pending"]
    assert [c["task"] for c in sandbox.commits("s1")] == pending
    assert sandbox.statuses("s1") == {tid: "done" for tid, _ in order}
    converted = json.loads(read_plan(PLANS / name).data)
    assert sandbox.plan("s1") == [{**t, "status": "done"} for t in converted], "only the statuses changed"


@pytest.mark.slow
def test_import_writes_the_plan_or_prints_it(sandbox):
    printed = sandbox.tilth("import", str(PLANS / "ralph-prd.json"))
    assert printed.returncode == 0, printed.stderr
    assert printed.stderr == "plan: read a Ralph prd.json (4 user stories)\n"
    assert [t["id"] for t in json.loads(printed.stdout)] == ["US-001", "US-002", "US-003", "US-004"]

    out = sandbox.root / "prd.json"
    written = sandbox.tilth("import", str(PLANS / "checklist.md"), "--out", str(out))
    assert written.returncode == 0, written.stderr
    assert json.loads(out.read_text()) == json.loads(read_plan(PLANS / "checklist.md").data)
    again = sandbox.tilth("import", str(PLANS / "gh-issues.json"), "--out", str(out))
    assert again.returncode == 2 and again.stderr.splitlines()[-1] == f"tilth: --out {out} exists; pass --force to " \
                                                                        "replace it"
    assert sandbox.tilth("import", str(PLANS / "gh-issues.json"), "--out", str(out), "--force").returncode == 0
    assert [t["id"] for t in json.loads(out.read_text())] == ["GH-17", "GH-42"]


def bad(tmp_path: Path, name: str, content: object) -> Path:
    path = tmp_path / name
    if not path.suffix:  # a directory of task files
        path.mkdir()
        for file, text in content.items():
            (path / file).write_text(text)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


STORY = {"id": "US-1", "title": "A story", "description": "d", "acceptanceCriteria": ["`x` prints 1"],
         "priority": 1, "passes": False, "notes": ""}


@pytest.mark.parametrize("name, content, expected", [
    ("prd.json", {"userStories": [{**STORY, "priority": "high"}]},
     "prd.json: user story #1 (US-1): priority must be a number, got 'high'"),
    ("prd.json", {"userStories": [{**STORY, "title": " "}]},
     "prd.json (read as a Ralph prd.json): task 'US-1' (#1), field title: String should have at least 1 character"),
    ("prd.json", {"userStories": []}, "prd.json: a Ralph prd.json (0 user stories) with no tasks in it"),
    ("issues.json", [{"number": 3, "title": "t", "body": "no criteria here"}],
     "issues.json: issue #3 has no acceptance criteria"),
    ("plan.md", "- [ ] Do it\n", "plan.md:1: `Do it` has no acceptance criteria"),
    ("plan.md", "# nothing\n", "plan.md: no checklist items found"),
    ("feature", {"a.md": "---\nid: F-1\ntitle: A\n---\n## Description\nx\n"},
     "a.md: no acceptance criteria"),
    ("feature", {"a.md": "---\nid: F-1\ntitle: A\n## Acceptance criteria\n- y\n"},
     "a.md: front matter opened with `---` is never closed"),
    ("feature", {"notes.txt": "x"},
     "feature: a directory with neither a prd.json nor markdown task files (*.md) in it"),
    ("feature", {"a.md": "---\nid: F-1\ntitle: A\ndepends_on: [F-9]\n---\n## Acceptance criteria\n- `a` exits 0\n"},
     "field depends_on: depends on 'F-9', which is not a task of this plan"),
])
def test_a_bad_plan_is_one_line_naming_the_file_and_the_problem(tmp_path, name, content, expected):
    path = bad(tmp_path, name, content)
    with pytest.raises(BadInput) as caught:
        read_plan(path)
    assert "\n" not in str(caught.value)
    assert expected in str(caught.value)
    assert str(path) in str(caught.value) or str(path / "a.md") in str(caught.value)


@pytest.mark.slow
def test_a_directory_holding_a_prd_json_runs_that_file(sandbox):
    folder = sandbox.root / "plan"
    folder.mkdir()
    (folder / "prd.json").write_text(json.dumps([task("T-1")]))
    (folder / "interview.md").write_text("# not a task\n")
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(folder), "--id", "s1",
                           "--backend", "scripted", "--foreground")
    assert result.returncode == 0, result.stderr
    assert f"plan: read {folder / 'prd.json'}" in result.stderr
    assert sandbox.statuses("s1") == {"T-1": "done"}


def test_start_with_a_bad_import_creates_nothing(sandbox):
    path = sandbox.root / "plan.md"
    path.write_text("- [ ] A task with no criteria\n")
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(path), "--id", "s1",
                           "--backend", "scripted", "--foreground")
    assert result.returncode == 2
    assert result.stderr == f"tilth: {path}:1: `A task with no criteria` has no acceptance criteria; indent " \
                            "`- criterion` bullets under it\n"
    assert not sandbox.session_dir("s1").exists()


# --- tilth plan check ------------------------------------------------------------------------

@pytest.mark.slow
def test_plan_check_passes_a_clean_plan_and_reads_other_formats(sandbox):
    clean = sandbox.write_json("clean.json", [task("T-1", acceptance_criteria=["`make test` exits 0"])])
    checked = sandbox.tilth("plan", "check", str(clean))
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, f"{clean}: valid, 1 task, no warnings\n", "")

    ralph = sandbox.tilth("plan", "check", str(PLANS / "ralph-prd.json"))
    assert ralph.returncode == 0
    assert ralph.stderr == "plan: read a Ralph prd.json (4 user stories)\n"
    assert ralph.stdout == f"{PLANS / 'ralph-prd.json'}: valid, 4 tasks, no warnings\n"


def test_plan_check_warns_and_exits_0(sandbox):
    plan = sandbox.write_json("prd.json", [
        task("T-1", "Add login", acceptance_criteria=["It works", "Login is correct", "POST /login returns 200"]),
        task("T-2", "add  LOGIN", acceptance_criteria=[f"`step {n}` prints {n}" for n in range(9)]),
        task("T-3", description="x" * 2001, depends_on=["T-4"]),
        task("T-4"),
    ])
    checked = sandbox.tilth("plan", "check", str(plan))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines() == [
        "warning: T-1: criterion 1 is vague ('It works'): say what a reviewer can observe (a command and its "
        "output, a file, a value)",
        "warning: T-1: criterion 2 is vague ('Login is correct'): say what a reviewer can observe (a command and its "
        "output, a file, a value)",
        "warning: T-2: same title as T-1 ('add  LOGIN')",
        "warning: T-2: 9 criteria, more than 8: too large for one task; split it",
        "warning: T-3: description of 2,001 characters, more than 2,000: too large for one task; split it",
        "warning: T-3: depends on T-4, which comes later in the plan: it waits for them",
        f"{plan}: valid, 4 tasks, 6 warnings",
    ]


@pytest.mark.parametrize("tasks, expected", [
    ([task("T-1", depends_on=["T-1"])], "task 'T-1' (#1), field depends_on: the task depends on itself"),
    ([task("T-1", depends_on=["T-7"])],
     "task 'T-1' (#1), field depends_on: depends on 'T-7', which is not a task of this plan"),
    ([task("T-1", depends_on=["T-3"]), task("T-2", depends_on=["T-1"]), task("T-3", depends_on=["T-2"])],
     "task 'T-1' (#1), field depends_on: dependency cycle T-1 -> T-3 -> T-2 -> T-1"),
    ([task("T-1", depends_on="T-2"), task("T-2")], "task 'T-1' (#1), field depends_on: Input should be a valid list"),
    ([task("T-1"), task("T-1")], "task 'T-1' (#2), field id: duplicate id"),
    ([task("T-1", acceptance_criteria=[])],
     "task 'T-1' (#1), field acceptance_criteria: List should have at least 1 item"),
])
@pytest.mark.slow
def test_plan_check_errors_exit_2_as_start_refuses(sandbox, tasks, expected):
    plan = sandbox.write_json("prd.json", tasks)
    checked = sandbox.tilth("plan", "check", str(plan))
    assert checked.returncode == 2 and checked.stdout == ""
    assert checked.stderr.startswith(f"tilth: {plan}: {expected}") and checked.stderr.count("\n") == 1
    started = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1",
                            "--backend", "scripted", "--foreground")
    assert started.returncode == 2 and started.stderr == checked.stderr


@pytest.mark.parametrize("criterion, is_vague", [
    ("It works", True), ("Done", True), ("The code is clean and correct", True), ("Handles errors properly", True),
    ("It's done", True), ("Tests", True),
    ("Typecheck passes", False), ("`pytest -q` exits 0", False), ("GET /health returns 200", False),
    ("README.md documents the --config flag", False), ("The page shows the user's name", False),
    ("Priority visible without hovering or clicking", False),
])
def test_the_vague_rule(criterion, is_vague):
    assert vague(criterion) is is_vague
