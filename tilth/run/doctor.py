"""`tilth doctor`: a session's files cross-checked against its branch, read-only.

Git is the truth for what is done, so every check compares a file with the branch: prd.json
statuses and progress.txt lines with the task commits' trailers, the ledger with their
iteration counts; the journal must parse; the worktree must exist, be registered with the
repository and stand on `session/<id>`; session.json must agree with the session lock. This
module holds the findings, the session's own files (lock, state, journal) and `diagnose`; the
checks against the branch are `run/doctor_branch.py`'s. Each finding is one line; those `--fix`
can derive from git carry the name of their repair (`run/doctor_fix.py`), the rest say what a
person should run.

A branch that is not where tilth left it (gone, without its base, or without tilth's last task
commit) is never a thing to repair: statuses derived from it would record the move as the truth.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tilth.core.errors import BadInput
from tilth.git.commits import TaskCommit
from tilth.git.gitops import GitError, open_repo
from tilth.store.baseline import load_baseline
from tilth.store.events import is_event
from tilth.store.home import SessionPaths
from tilth.store.jsonio import parse_object
from tilth.store.lock import live_holder, read_holder
from tilth.store.rollup import fingerprint, read_saved
from tilth.store.session import SessionRecord, SessionState, load_session

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
    holder: dict | None = None
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


def diagnose(paths: SessionPaths, locked_by_us: bool = False) -> Diagnosis:
    """Every check, reading only. `locked_by_us`: the caller holds session.lock (so no runner does)."""
    d = Diagnosis(paths)
    try:
        d.record = load_session(paths)
    except BadInput as exc:
        d.add(PERSON, f"{exc}")
        return d
    if d.record.state == SessionState.archived:
        d.add(OK, "archived: its branch and worktree were retired; nothing to check")
        return d
    check_runner(d, locked_by_us)
    check_journal(d)
    check_baseline(d)
    repo = open_repo(d.record.repo)
    if repo is None:
        d.add(PERSON, f"the session's repository {d.record.repo} is gone or is not a git repository: restore it "
                      f"there, then run tilth doctor {paths.id}")
        return d
    from tilth.run.doctor_branch import (check_branch, check_git_locks, check_ledger, check_progress, check_statuses,
                                         check_worktree)  # they build on the Diagnosis defined here

    try:
        check_branch(d, repo)
        check_worktree(d, repo)
        check_git_locks(d, repo)
        if d.branch_ok:
            check_statuses(d)
            check_progress(d)
            check_ledger(d)
        elif d.tip is not None:
            d.add(PERSON, "prd.json, progress.txt and the ledger are not checked against a branch tilth did not "
                          f"leave there: put it back, then run tilth doctor {paths.id} --fix")
    except GitError as exc:
        d.add(PERSON, f"git cannot read {d.record.branch} in {d.record.repo}: {str(exc).splitlines()[0]}")
    return d


def process_state(pid: object) -> str:
    """How /proc sees a pid (a zombie holds no flock, and kill(pid, 0) would call it alive)."""
    if type(pid) is not int:
        return "unknown"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
    return "a zombie" if state == "Z" else "alive"


def check_runner(d: Diagnosis, locked_by_us: bool) -> None:
    record, sid = d.record, d.paths.id
    holder = None if locked_by_us else live_holder(d.paths.lock)
    if holder is not None:
        d.add(RUNNING, f"running: pid {holder.get('pid', '?')} ({holder.get('role', '?')}) holds session.lock; only "
                       f"checked, fixes need it stopped: tilth stop {sid}")
        d.holder = holder
        if (state := process_state(holder.get("pid"))) != "alive":
            d.add(PERSON, f"session.lock is held, but the pid it names is {state}: another process has it open; find "
                          f"it with fuser -v {d.paths.lock}")
        return
    if record.state == SessionState.running:
        last = (read_holder(d.paths.lock) or {}).get("pid", record.pid)
        d.add(PROBLEM, f"session.json says running but no process holds session.lock (pid {last}: "
                       f"{process_state(last)}): its runner died: --fix records it crashed",
              "state", f"session.json said running with no live runner (pid {last}) -> crashed; "
                       f"tilth resume {sid} continues it")
        return
    waiting = record.supervised and (record.state in (SessionState.queued, SessionState.paused)
                                     or (record.state == SessionState.crashed and record.auto_resume_at))
    if waiting and live_holder(d.paths.home / "daemon.lock") is None:
        d.add(PERSON, f"{record.state.value} for the supervisor, but no supervisor runs under {d.paths.home}: "
                      "start one with tilth daemon")
        return
    d.add(OK, f"{record.state.value}: no runner holds session.lock, as session.json says")


def torn_lines(raw: bytes, live: bool) -> list[int]:
    """Indexes (in raw.split(b"\\n")) of the lines no reader takes as an event. A live runner's
    unended last line is an append in progress, not damage."""
    lines = raw.split(b"\n")
    torn = []
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        if not line.strip() or (last and live):
            continue
        row = parse_object(line)
        if row is None or not is_event(row):
            torn.append(i)
    return torn


def check_baseline(d: Diagnosis) -> None:
    """baseline.json (the checks and verify commands on the base commit) reads back, when there is one."""
    try:
        baseline = load_baseline(d.paths.dir)
    except BadInput as exc:
        d.add(PERSON, f"{exc}")
        return
    if baseline is not None:
        failing = len(baseline.failing_before)
        d.add(OK, f"baseline.json: {len(baseline.checks)} check(s) on the base commit {baseline.commit[:7]}, "
                  f"{failing} failing before the session" + (" (not blamed on any task)" if failing else ""))


def check_journal(d: Diagnosis) -> None:
    paths = d.paths
    try:
        raw = paths.events.read_bytes()
    except FileNotFoundError:
        raw = b""
    torn = torn_lines(raw, d.holder is not None)
    if torn:
        d.add(PROBLEM, f"events.jsonl has {len(torn)} torn line(s) (line {', '.join(str(i + 1) for i in torn[:5])}"
                       f"{', ...' if len(torn) > 5 else ''}): --fix moves them to events.jsonl{TORN_SUFFIX} and "
                       "rebuilds summary.json",
              "events", f"events.jsonl: {len(torn)} torn line(s) moved to events.jsonl{TORN_SUFFIX} (kept byte for "
                        "byte); summary.json rebuilt from the journal")
        return
    saved = read_saved(paths.rollup)
    if saved is None and paths.rollup.exists():
        d.add(PROBLEM, "summary.json does not parse: --fix rebuilds it from events.jsonl", "summary",
              "summary.json rebuilt from events.jsonl")
        return
    if saved is not None and saved.log_offset:
        try:
            with open(paths.events, "rb") as f:
                fits = saved.log_offset <= os.fstat(f.fileno()).st_size \
                    and fingerprint(f, saved.log_offset) == saved.log_fingerprint
        except FileNotFoundError:
            fits = False
        if not fits:
            d.add(PROBLEM, "summary.json was folded from another events.jsonl (replaced or truncated): --fix "
                           "rebuilds it", "summary", "summary.json rebuilt from events.jsonl")
            return
    d.add(OK, "events.jsonl and summary.json parse")
