"""The harness's own inspection of an attempt's diff, before any evaluator: weakened tests
(`tests_weakened`: an existing test file deleted or emptied, skip/xfail markers or skip calls
added, each named with the tests it covers, and test ids the task's starting point collects and the
staged tree no longer does, by the census of `agents/test_census.py`) and protected paths
(`protected_path`: CI configuration by default, plus the `protected_paths` setting) reject the
attempt, unless the task's `may_change` globs allow the path; a symlink the change adds or retargets
that leads outside the worktree (`symlink_outside`) rejects it whatever `may_change` says. The same
rules, but the census, say what a FAILED or PARKED placeholder, or a lane's kept partial work, may
hold (`run/keeping.py`): everything else the attempt changed.

Globs are `fnmatch`-style on repository paths (`*` also matches `/`); a glob ending in `/` covers
everything under that directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Iterable

from tilth.agents.test_census import RUNNER_FILES, Counted
from tilth.store.ledger import Verdict

TESTS_WEAKENED, PROTECTED_PATH, SYMLINK_OUTSIDE = "tests_weakened", "protected_path", "symlink_outside"
DEFAULT_PROTECTED = (".github/workflows/", ".gitlab-ci.yml", ".ci/")

_TEST_FILE = re.compile(r"(^|/)(tests?|__tests__|spec)/|(^|/)test_[^/]*\.py$|_test\.(py|go|rb)$|"
                        r"(^|/)conftest\.py$|\.(test|spec)\.[jt]sx?$|Test\.java$|_spec\.rb$")
_SKIP_MARKER = re.compile(r"@pytest\.mark\.(skip|skipif|xfail)\b|\bpytest\.(skip|xfail|importorskip)\s*\(|"
                          r"@unittest\.(skip|skipIf|skipUnless|expectedFailure)\b|\bself\.skipTest\s*\(|"
                          r"\b(it|test|describe)\.(skip|todo)\s*\(|\bx(it|describe)\s*\(|\bt\.Skip(Now|f)?\s*\(|"
                          r"#\[ignore\]|@Disabled\b|@Ignore\b")


_PROSE = (".md", ".rst", ".txt", ".adoc")
SHOWN_IDS = 10
"""Test ids named per file in a refusal; the rest counted."""


def is_test_file(path: str) -> bool:
    return _TEST_FILE.search(path) is not None


def skip_marker(line: str) -> str | None:
    """The skip/xfail marker or skip call a line holds (`@pytest.mark.skip`, `self.skipTest`), or None."""
    found = _SKIP_MARKER.search(line)
    return found.group(0).rstrip("( \t") if found else None


def ids_said(ids: Iterable[str]) -> str:
    shown = list(ids)
    more = f" and {len(shown) - SHOWN_IDS} more" if len(shown) > SHOWN_IDS else ""
    return ", ".join(shown[:SHOWN_IDS]) + more


def tests_first(patch: str) -> str:
    """The patch with its test files' sections first (for the evaluator, who judges an assertion
    loosened in place), each section as it was, the rest in their order."""
    sections = re.split(r"(?m)^(?=diff --git )", patch)
    head, files = sections[0], [s for s in sections[1:] if s]

    def is_test(section: str) -> bool:
        first = section.split("\n", 1)[0]
        return any(is_test_file(p) for p in re.findall(r"(?:^| )[ab]/(\S+)", first))

    return head + "".join(sorted(files, key=lambda section: not is_test(section)))


def matches(path: str, globs: Iterable[str]) -> bool:
    for glob in globs:
        if glob.endswith("/") and path.startswith(glob):
            return True
        if fnmatchcase(path, glob):
            return True
    return False


@dataclass(frozen=True)
class Refusal:
    """One change a task may not keep: its category, the repository paths it touched (put back as the
    task's starting point has them when a placeholder is made) and how the guard names it."""

    category: str
    paths: tuple[str, ...]
    said: str


def refusals(changes: list[Any], protected: Iterable[str], may_change: Iterable[str],
             outside_links: dict[str, str] | None = None, counted: Counted | None = None) -> list[Refusal]:
    """What a task may not keep, the one definition the guard rejects an attempt by and a placeholder
    leaves out by. `changes` have `path`, `status`, `old_path`, `emptied` and `added_lines`
    (`git/gitops.FileChange`); `outside_links` maps each symlink of the change that leads outside the
    worktree to its target (`git/left_out.links_leaving`), refused whatever `may_change` says;
    `counted`, the test census of the change (`run/test_count.py`): the ids it loses, by file, and
    the tests each added skip marker covers."""
    protected, allowed = [*DEFAULT_PROTECTED, *protected], list(may_change)
    counted = counted or Counted()
    found: list[Refusal] = []
    whole: set[str] = set()
    for change in changes:
        paths = {change.path, change.old_path} - {""}
        if any(matches(p, allowed) for p in paths):
            continue
        found += [Refusal(PROTECTED_PATH, (p,), f"{p} ({change.status})") for p in sorted(paths)
                  if matches(p, protected)]
        was_test = is_test_file(change.old_path or change.path)
        if was_test and change.status == "deleted":
            found.append(Refusal(TESTS_WEAKENED, (change.path,), f"{change.path} (deleted)"))
            whole.add(change.path)
        elif was_test and change.status == "renamed" and not is_test_file(change.path):
            found.append(Refusal(TESTS_WEAKENED, (change.old_path, change.path),
                                 f"{change.old_path} (renamed to {change.path})"))
            whole.add(change.old_path)
        elif was_test and change.emptied:
            found.append(Refusal(TESTS_WEAKENED, (change.path,), f"{change.path} (emptied)"))
            whole.add(change.path)
        if change.path.endswith(_PROSE):
            continue
        markers = sorted({marker for line in change.added_lines if (marker := skip_marker(line))})
        if markers:
            found.append(Refusal(TESTS_WEAKENED, (change.path,), f"{change.path} (adds {', '.join(markers)})"))
            if covers := counted.skipped.get(change.path):
                found.append(Refusal(TESTS_WEAKENED, (change.path,), f"{change.path} (newly skips {ids_said(covers)})"))
    changed = sorted({p for change in changes for p in (change.path, change.old_path) if p})
    for path, ids in counted.lost.items():
        if path in whole or matches(path, allowed):
            continue
        runners = tuple(p for p in changed if is_test_file(p) or p.rsplit("/", 1)[-1] in RUNNER_FILES)
        culprits = (path,) if path in changed else runners or (path,)
        found.append(Refusal(TESTS_WEAKENED, culprits, f"{path} (no longer collects {ids_said(ids)})"))
    return found + [Refusal(SYMLINK_OUTSIDE, (path,), f"{path} (symlink to {target})")
                    for path, target in sorted((outside_links or {}).items())]


def grouped(found: list[Refusal]) -> dict[str, list[str]]:
    """`{category: ["path (what)", ...]}`, each category in the order first met."""
    by_category: dict[str, list[str]] = {}
    for refusal in found:
        by_category.setdefault(refusal.category, []).append(refusal.said)
    return by_category


def findings(changes: list[Any], protected: Iterable[str], may_change: Iterable[str],
             outside_links: dict[str, str] | None = None) -> dict[str, list[str]]:
    """`{category: ["path (what)", ...]}` for every problem (`refusals`, grouped)."""
    return grouped(refusals(changes, protected, may_change, outside_links))


def guard_rejection(found: dict[str, list[str]]) -> Verdict | None:
    """The rejection the harness's findings earn (the first category decides; all are named), or None."""
    if not found:
        return None
    category = next(c for c in (TESTS_WEAKENED, PROTECTED_PATH, SYMLINK_OUTSIDE) if c in found)
    said = {TESTS_WEAKENED: "weakens existing tests", PROTECTED_PATH: "touches protected paths",
            SYMLINK_OUTSIDE: "adds symlinks leading outside the worktree"}
    concern = "; ".join(f"the attempt {said[c]}: {', '.join(paths)}" for c, paths in found.items())
    return Verdict(verdict="reject", category=category,
                   concern=f"tilth inspected the diff and refused it before the evaluator: {concern}.",
                   evidence=[p for paths in found.values() for p in paths],
                   next_step="Restore the tests and protected files and make the change without weakening them (every test "
                             "the task's starting point collects still collected, none newly skipped) "
                             "(a task that must change them lists the paths in `may_change` in the plan); a symlink "
                             "must stay inside the worktree.")
