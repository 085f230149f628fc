"""`tilth doctor --fix`: repair what `run/doctor.py` found and git can decide, under the session lock.

The rules are resume's (`recovery.reconcile` with `unwind_failed=False`, which this calls), and
nothing is ever deleted: torn journal lines and repeated progress lines are moved to sibling
files, a deleted worktree is checked out again from the branch at its recorded path. Nothing
is repaired while a runner holds the lock, nor from a branch moved by hand (`diagnose` gives
no repair for those).
"""

from __future__ import annotations

from pathlib import Path

from tilth.git.gitops import check_readable, clear_stale_locks, open_worktree
from tilth.git.worktrees import open_repo, readd_worktree
from tilth.git.worktree_git import session_git_dir, worktree_name
from tilth.run.doctor import diagnose, torn_lines
from tilth.run.doctor_findings import (DUPLICATES_SUFFIX, PERSON, PROBLEM, RECONCILED, REPAIRED, TORN_SUFFIX,
                                       Diagnosis, Finding)
from tilth.run.outcomes import Workspace
from tilth.run.lane_cleanup import clear_lanes
from tilth.run.recovery import reconcile
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths
from tilth.store.jsonio import append_line, write_atomic
from tilth.store.lock import SessionLock
from tilth.store.progress import ProgressLine, read_progress
from tilth.store.rollup import rebuild, save_rollup
from tilth.store.session import SessionState, set_state

document(
    {
        "doctor_repaired": ("`tilth doctor --fix` repaired a finding; data: check (events|summary|worktree|git_locks|"
                            "statuses|progress|progress_dups|reconcile), detail (the line it printed)", "check detail"),
        "doctor_crashed": ("`tilth doctor --fix` found session.json saying running with no live runner and recorded "
                           "it crashed (resumable); data: pid (the dead runner's), reason", "pid reason"),
    }
)

DERIVED = RECONCILED | {"git_locks"}
"""The repairs `recovery.reconcile` makes (it clears stale git locks first)."""


def repair(paths: SessionPaths) -> list[Finding] | None:
    """Every repair the diagnosis allows, then the lines to print: what was repaired and what is
    left. None when a runner holds the session (the caller only checks it then)."""
    lock = SessionLock(paths.lock, paths.id, role="doctor")
    if not lock.try_acquire():
        return None
    try:
        events = EventLog(paths.events)
        first = diagnose(paths, locked_by_us=True)
        done = _apply(first, events, {"events", "summary", "state", "worktree"})
        # The files and the worktree first: what reconcile needs is checked again once they are back.
        second = diagnose(paths, locked_by_us=True) if done else first
        done += _apply(second, events, DERIVED | {"progress_dups"})
        if any(f.fix in ("events", "summary") for f in done):
            save_rollup(paths.rollup, rebuild(paths.events))
        after = diagnose(paths, locked_by_us=True) if done else first
    finally:
        lock.release()
    return [Finding(REPAIRED, f.repaired) for f in done] + [
        Finding(PERSON, f"{f.text.split(': --fix')[0]}: still there after --fix") if f.level == PROBLEM else f
        for f in after.findings]


def _apply(d: Diagnosis, events: EventLog, allowed: set[str]) -> list[Finding]:
    todo = [f for f in d.findings if f.level == PROBLEM and f.fix in allowed
            and (f.fix not in RECONCILED or (d.branch_ok and d.worktree_ok))]
    fixes = {f.fix for f in todo}
    if "events" in fixes:
        _move_torn(d.paths)
    if "state" in fixes:
        _mark_crashed(d, events)
    if "worktree" in fixes:
        _recreate_worktree(d)
    if fixes & DERIVED:
        _reconcile(d, events)
    if "progress_dups" in fixes:
        _move_repeats(d.paths)
    for f in todo:
        if f.fix != "state":
            events.emit("doctor_repaired", check=f.fix, detail=f.repaired)
    return todo


def _move_torn(paths: SessionPaths) -> None:
    """The torn lines go to events.jsonl.torn first (appended, synced), then the journal is
    rewritten without them: a kill between the two leaves a line in both, never in neither."""
    raw = paths.events.read_bytes()
    lines = raw.split(b"\n")
    torn = set(torn_lines(raw, live=False))
    aside = paths.events.with_name(paths.events.name + TORN_SUFFIX)
    for i in sorted(torn):
        append_line(aside, lines[i])
    kept = [line for i, line in enumerate(lines) if i not in torn and line.strip()]
    write_atomic(paths.events, b"".join(line + b"\n" for line in kept))


def _move_repeats(paths: SessionPaths) -> None:
    """A progress line whose commit already has one goes to progress.txt.duplicates."""
    seen: set[str] = set()
    kept, repeats = [], []
    for raw in paths.progress.read_bytes().split(b"\n"):
        if not raw.strip():
            continue
        parsed = _commit_of(raw)
        if parsed is not None and parsed in seen:
            repeats.append(raw)
            continue
        if parsed is not None:
            seen.add(parsed)
        kept.append(raw)
    aside = paths.progress.with_name(paths.progress.name + DUPLICATES_SUFFIX)
    for raw in repeats:
        append_line(aside, raw)
    write_atomic(paths.progress, b"".join(line + b"\n" for line in kept))
    read_progress(paths.progress)  # the per-process cache sees the replaced file


def _commit_of(raw: bytes) -> str | None:
    line = ProgressLine.parse(raw.decode(errors="replace"))
    return line.commit if line is not None else None


def _mark_crashed(d: Diagnosis, events: EventLog) -> None:
    pid = d.session.pid
    reason = f"runner gone (pid {pid}): session.json still said running; recorded by tilth doctor --fix"
    set_state(d.paths, SessionState.crashed, pid=None, reason=reason)
    events.emit("doctor_crashed", pid=pid, reason=reason)


def _recreate_worktree(d: Diagnosis) -> None:
    repo = open_repo(d.session.repo)
    assert repo is not None, "diagnose found the repository"
    readd_worktree(repo, worktree_name(d.session.id), Path(d.session.worktree), d.session.branch)


def _reconcile(d: Diagnosis, events: EventLog) -> None:
    """resume's reconcile, without unwinding anything; only on a branch and a worktree that are
    where tilth left them (the diagnosis says so)."""
    if not (d.branch_ok and d.worktree_ok):  # only the git locks; the worktree's own go with it when it is gone
        if (Path(d.session.worktree) / ".git").exists():
            clear_stale_locks(open_worktree(Path(d.session.worktree), session_git_dir(d.session.repo, d.session.id)), d.session.branch)
        return
    ws = Workspace(d.paths, d.session, open_worktree(Path(d.session.worktree), session_git_dir(d.session.repo, d.session.id)), events)
    check_readable(ws.repo, d.session.branch)
    clear_lanes(ws)
    reconcile(ws, unwind_failed=False)
