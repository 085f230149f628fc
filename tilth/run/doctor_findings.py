"""`tilth doctor`'s findings: `Finding`, the levels, the repair names, and `Diagnosis`, which
collects them (a repair under a live runner or a wrong worktree becomes a person's to do)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilth.git.commits import TaskCommit
from tilth.store.home import SessionPaths
from tilth.store.session import SessionRecord

OK, REPAIRED, PROBLEM, PERSON, RUNNING = "ok", "repaired", "problem", "needs a person", "running"
TORN_SUFFIX = ".torn"
"""events.jsonl's torn lines go to events.jsonl.torn, byte for byte: moved aside, never dropped."""
DUPLICATES_SUFFIX = ".duplicates"
RECONCILED = {"statuses", "progress", "reconcile"}
"""The repairs `recovery.reconcile` makes in the worktree: only once it is there, registered and on the branch."""


@dataclass(frozen=True)
class Finding:
    level: str
    text: str
    fix: str | None = None
    """The repair `--fix` applies (a name `doctor_fix` knows); None: nothing to do, or only a person can."""
    repaired: str = ""
    """The line once `--fix` has repaired it."""


@dataclass
class Diagnosis:
    paths: SessionPaths
    findings: list[Finding] = field(default_factory=list)
    record: SessionRecord | None = None
    holder: dict[str, Any] | None = None
    """The live runner's lock content, when one holds session.lock."""
    tip: str | None = None
    branch_ok: bool = False
    """The branch holds its base and tilth's last task commit: statuses may be derived from it."""
    worktree_ok: bool = False
    worktree_blocked: bool = False
    """The worktree is there but wrong in a way only a person puts right (reconcile would act on it)."""
    commits: list[TaskCommit] = field(default_factory=list)
    loose: list[str] = field(default_factory=list)
    """Commits without trailers on top of tilth's last one (an agent's or a person's), newest first."""

    @property
    def session(self) -> SessionRecord:
        """The session's record: every check after `doctor.diagnose` has read it runs only once it has."""
        assert self.record is not None, "session.json is read before any check"
        return self.record

    def add(self, level: str, text: str, fix: str | None = None, repaired: str = "") -> None:
        if self.holder is not None and level == PROBLEM:  # nothing is repaired under a live runner
            level, text = PERSON, f"{text.split(': --fix')[0]}: stop it first (tilth stop {self.paths.id}), " \
                                  f"then tilth doctor {self.paths.id} --fix"
            fix = None
        elif self.worktree_blocked and level == PROBLEM and fix in RECONCILED:
            level, text = PERSON, f"{text.split(': --fix')[0]}: once the worktree is right (above), tilth doctor " \
                                  f"{self.paths.id} --fix repairs it"
            fix = None
        self.findings.append(Finding(level, text, fix, repaired))
