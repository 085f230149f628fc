"""The guard's test count for one attempt (`Census.count`): when the staged diff touches test files or
a runner's own files (`test_census.RUNNER_FILES`) and the session's checks or the task's verify
commands use a runner tilth can list (`test_census.runners`), the task's starting point (HEAD) and the
staged tree are each written out to a directory of the session's (`census/`) and their test ids
listed there, confined as the checks run and within their time limit; the ids HEAD collects that the
staged tree does not are lost. Which tests an added skip marker covers is read from the staged file
itself, listed or not. A listing is kept per (tree, runner) for the run, so the starting point is
listed once per task however many attempts touch tests.

Nothing is listed for a diff that touches no test or runner file: the cost is paid only by attempts
that could weaken tests.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from threading import Lock
from typing import Iterable

import pygit2

from tilth.agents.check_bundle import CheckBundle
from tilth.agents.confinement import Confinement
from tilth.agents.guard import is_test_file, matches, skip_marker
from tilth.agents.test_census import RUNNER_FILES, Collection, Counted, Runner, collect, lost, named, runners, \
    skipped_tests
from tilth.git.gitops import FileChange, changed_lines
from tilth.git.tree_copies import head_tree, staged_tree, text_at, write_out
from tilth.store.events import EventLog, document
from tilth.store.prd import Task

document({"tests_counted": ("the guard listed the test ids of the task's starting point and of the staged tree "
                            "(the diff touched test or runner files); data: command (the check whose runner listed them), before, after "
                            "(ids listed; null: no whole listing), lost (ids listed before and not after), seconds",
                            "command before after lost seconds")})

CENSUS_DIR = "census"
KEPT_LISTINGS = 32
_listings: OrderedDict[tuple[str, str], Collection | None] = OrderedDict()
_listings_lock = Lock()


@dataclass(frozen=True)
class Census:
    """What listing an attempt's tests needs: the commands whose runners list them (the checks, the
    task's verify commands), the confinement and time limit of the checks, and where the trees go."""

    commands: tuple[str, ...]
    sandbox: Confinement
    timeout: float
    session_dir: Path

    @classmethod
    def of(cls, bundle: CheckBundle, task: Task, session_dir: Path) -> Census:
        """The census of a task's attempts: the runners of the run's checks and the task's verify commands."""
        verifies = tuple(c.verify for c in task.criteria if c.verify)
        return cls((*bundle.commands, *verifies), bundle.sandbox, bundle.timeout, session_dir)

    def count(self, repo: pygit2.Repository, diff: pygit2.Diff, changes: list[FileChange],
              may_change: Iterable[str], events: EventLog, task_id: str, iteration: int) -> Counted:
        allowed = list(may_change)
        staged = staged_tree(repo)
        touched = [c for c in changes if not any(matches(p, allowed) for p in (c.path, c.old_path) if p)]
        wanted = runners(self.commands) if any(
            is_test_file(p) or p.rsplit("/", 1)[-1] in RUNNER_FILES for c in touched for p in (c.path, c.old_path) if p
        ) else []
        found_lost: dict[str, tuple[str, ...]] = {}
        after_of: dict[str, Collection] = {}
        compared = 0
        for runner in wanted:
            began = time.monotonic()
            before = self._listing(repo, head_tree(repo), runner)
            after = self._listing(repo, staged, runner)
            gone = lost(before, after) if before is not None and after is not None else {}
            events.emit("tests_counted", task_id, iteration, command=runner.source,
                        before=len(before.ids) if before else None, after=len(after.ids) if after else None,
                        lost=sum(len(ids) for ids in gone.values()), seconds=round(time.monotonic() - began, 3))
            if before is not None and after is not None:
                compared += len(before.ids)
                for path, ids in gone.items():
                    found_lost[path] = tuple(sorted({*found_lost.get(path, ()), *ids}))
                after_of.update({where: after for where in set(after.ids.values())})
        return Counted(found_lost, self._skipped(repo, diff, staged, after_of), compared)

    def counting(self, repo: pygit2.Repository, may_change: Iterable[str], events: EventLog, task_id: str,
                 iteration: int) -> Counting:
        return Counting(self, repo, tuple(may_change), events, task_id, iteration)

    def _skipped(self, repo: pygit2.Repository, diff: pygit2.Diff, staged: str,
                 after_of: dict[str, Collection]) -> dict[str, tuple[str, ...]]:
        lines: dict[str, list[int]] = {}
        for path, sign, number, text in changed_lines(diff):
            if sign == "+" and path.endswith(".py") and skip_marker(text):
                lines.setdefault(path, []).append(number)
        found: dict[str, tuple[str, ...]] = {}
        for path, numbers in lines.items():
            source = text_at(repo, staged, path)
            qualifiers = skipped_tests(path, source, numbers) if source is not None else None
            if qualifiers:
                found[path] = tuple(named(qualifiers, path, after_of.get(path)))
        return found

    def _listing(self, repo: pygit2.Repository, tree: str, runner: Runner) -> Collection | None:
        key = (tree, runner.collect)
        with _listings_lock:
            if key in _listings:
                _listings.move_to_end(key)
                return _listings[key]
        root = self.session_dir / CENSUS_DIR
        root.mkdir(exist_ok=True)
        directory = Path(tempfile.mkdtemp(prefix=f"{tree[:12]}-", dir=root))
        try:
            write_out(repo, tree, directory)
            listing = collect(runner, directory, self.sandbox, self.timeout)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        with _listings_lock:
            _listings[key] = listing
            while len(_listings) > KEPT_LISTINGS:
                _listings.popitem(last=False)
        return listing


@dataclass
class Counting:
    """An attempt's census, called by the guard with the staged diff (`run/keeping.refused`); what it
    found stays for the attempt's ledger entry."""

    census: Census
    repo: pygit2.Repository
    may_change: tuple[str, ...]
    events: EventLog
    task_id: str
    iteration: int
    found: Counted | None = None

    def __call__(self, diff: pygit2.Diff, changes: list[FileChange]) -> Counted:
        self.found = self.census.count(self.repo, diff, changes, self.may_change, self.events, self.task_id,
                                       self.iteration)
        return self.found

    @property
    def compared(self) -> int:
        return self.found.compared if self.found is not None else 0
