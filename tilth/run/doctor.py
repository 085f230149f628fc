"""`tilth doctor`: a session's files cross-checked against its branch, read-only.

Git is the truth for what is done, so every check compares a file with the branch: prd.json
statuses and progress.txt lines with the task commits' trailers, the ledger with their
iteration counts; the journal must parse; the worktree must exist, be registered with the
repository and stand on `session/<id>`; session.json must agree with the session lock. This
module checks the session's own files (lock, state, journal) and runs every check in `diagnose`;
the checks against the branch are `run/doctor_branch.py`'s, the findings `run/doctor_findings.py`'s. Each finding is one line; those `--fix`
can derive from git carry the name of their repair (`run/doctor_fix.py`), the rest say what a
person should run.

A branch that is not where tilth left it (gone, without its base, or without tilth's last task
commit) is never a thing to repair: statuses derived from it would record the move as the truth.
"""

from __future__ import annotations

import os

from tilth.core.errors import BadInput
from tilth.core.processes import proc_stat
from tilth.git.gitops import GitError
from tilth.git.worktrees import open_repo
from tilth.run.doctor_branch import (check_branch, check_git_locks, check_ledger, check_progress, check_statuses,
                                     check_worktree)
from tilth.run.doctor_lanes import check_lanes
from tilth.run.doctor_findings import OK, PERSON, PROBLEM, RUNNING, TORN_SUFFIX, Diagnosis
from tilth.store.baseline import load_baseline
from tilth.store.events import is_event
from tilth.store.home import SessionPaths
from tilth.store.jsonio import parse_object
from tilth.store.lock import live_holder, read_holder
from tilth.store.rollup import fingerprint, read_saved
from tilth.store.session import SessionState, load_session

def diagnose(paths: SessionPaths, locked_by_us: bool = False) -> Diagnosis:
    """Every check, reading only. `locked_by_us`: the caller holds session.lock (so no runner does)."""
    d = Diagnosis(paths)
    try:
        d.record = load_session(paths)
    except BadInput as exc:
        d.add(PERSON, f"{exc}")
        return d
    if d.session.state == SessionState.archived:
        d.add(OK, "archived: its branch and worktree were retired; nothing to check")
        return d
    check_runner(d, locked_by_us)
    check_journal(d)
    check_baseline(d)
    repo = open_repo(d.session.repo)
    if repo is None:
        d.add(PERSON, f"the session's repository {d.session.repo} is gone or is not a git repository: restore it "
                      f"there, then run tilth doctor {paths.id}")
        return d
    try:
        check_branch(d, repo)
        check_worktree(d, repo)
        check_git_locks(d, repo)
        check_lanes(d)
        if d.branch_ok:
            check_statuses(d)
            check_progress(d)
            check_ledger(d)
        elif d.tip is not None:
            d.add(PERSON, "prd.json, progress.txt and the ledger are not checked against a branch tilth did not "
                          f"leave there: put it back, then run tilth doctor {paths.id} --fix")
    except GitError as exc:
        d.add(PERSON, f"git cannot read {d.session.branch} in {d.session.repo}: {str(exc).splitlines()[0]}")
    return d


def process_state(pid: object) -> str:
    """How /proc sees a pid (a zombie holds no flock, and kill(pid, 0) would call it alive)."""
    if type(pid) is not int:
        return "unknown"
    stat = proc_stat(pid)
    if stat is None:
        return "gone"
    return "a zombie" if stat[0] == "Z" else "alive"


def check_runner(d: Diagnosis, locked_by_us: bool) -> None:
    record, sid = d.session, d.paths.id
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
