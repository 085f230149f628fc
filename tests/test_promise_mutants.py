"""The list `make mutants` breaks the documented promises with (scripts/promise_mutants.toml) still fits
the tree and covers the docs: each entry's old text occurs exactly once in its file, the broken file
still compiles, and the tests it names exist; every promise marked in README.md, docs/ and AGENTS.md
(`<!-- promise: id -->`) is broken by an entry or says why not, and every entry breaks a marked one.
A change that moves the code, or a new promise written without its breakage, fails here."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import promise_mutants  # noqa: E402

OWED_CEILING = 0
"""The promises still owed a breakage: lower it with each one paid, never raise it."""


def test_every_breakage_in_the_list_applies_to_this_tree():
    breakages = promise_mutants.load()
    assert promise_mutants.problems(breakages, ROOT) == []


def test_the_list_covers_at_least_the_audits_promises_each_with_its_words():
    breakages = promise_mutants.load()
    assert len(breakages) >= 39
    assert all(len(b.promise.split()) >= 5 and b.tests for b in breakages)
    assert len({b.file for b in breakages}) >= 15, "the promises are spread over the tree, not one module"


def test_every_documented_promise_has_a_breakage_or_says_why_not():
    breakages = promise_mutants.load()
    unbreakable, owed = promise_mutants.load_exempt()
    marked = promise_mutants.documented(ROOT)
    assert promise_mutants.coverage_problems(breakages, unbreakable, owed, marked) == []
    assert len(owed) <= OWED_CEILING, f"{len(owed)} promises owed a breakage, more than {OWED_CEILING}: write the breakage"


def test_a_promise_without_a_breakage_and_a_breakage_of_no_promise_are_named(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("Nothing is lost. <!-- promise: nothing-lost -->\n")
    (tmp_path / "docs" / "x.md").write_text("| row | kept <!-- promise: kept, Bad_Id --> |\n")
    (tmp_path / "AGENTS.md").write_text("")
    marked = promise_mutants.documented(tmp_path)
    assert marked == {"nothing-lost": ["README.md:1"], "kept": ["docs/x.md:1"], "Bad_Id": ["docs/x.md:1"]}
    stray = promise_mutants.Breakage("m", "words", "f.py", "a", "b", ("t",), promises=("gone",))
    unnamed = promise_mutants.Breakage("n", "words", "f.py", "a", "b", ("t",))
    found = promise_mutants.coverage_problems([stray, unnamed], {}, {"kept": "why"}, marked)
    said = "\n".join(found)
    assert "m: names 'gone', which no README.md or docs/ line marks" in said
    assert "n: names no promise" in said
    assert "nothing-lost (README.md:1): no breakage breaks it" in said
    assert "[owed] kept: say why in a sentence" in said
    assert "'Bad_Id' (docs/x.md:1): a promise id is lower-case words joined by '-'" in said
    assert "\nkept (" not in said and not said.startswith("kept ("), "an owed promise is not a gap"


def test_a_mutants_run_leaves_no_process_behind_even_one_in_a_session_of_its_own(tmp_path):
    import subprocess

    from supervised import alive

    copy = tmp_path / "mutant-copy"
    copy.mkdir()
    detached = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", str(copy)],
                                start_new_session=True)  # as a daemon or worker leaves its parent's group
    elsewhere = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], cwd=copy,
                                 start_new_session=True)
    try:
        promise_mutants.sweep(copy)
        for proc in (detached, elsewhere):
            proc.wait(timeout=10)
            assert not alive(proc.pid)
    finally:
        for proc in (detached, elsewhere):
            proc.kill()
