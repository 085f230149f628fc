"""The session loop: pick the next pending task, iterate worker -> evaluator -> ledger
until accepted or out of attempts, end it as a commit or a FAILED placeholder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pygit2

from tilth.backends import Backend, EvaluationJob, WorkerJob, make_backend
from tilth.config import Settings
from tilth.context import evaluator_prompt, worker_prompt
from tilth.errors import PlanChanged, StopRequested
from tilth.events import EventLog, document
from tilth.gitops import open_worktree, staged_diff
from tilth.home import SessionPaths
from tilth.ledger import LedgerEntry, Verdict, append_entry, read_entries
from tilth.lock import SessionLock
from tilth.outcomes import Workspace, commit_done, commit_failed, stage
from tilth.prd import Task, TaskStatus, load_current_plan, next_pending, set_status
from tilth.progress import read_progress
from tilth.recovery import reconcile
from tilth.session import SessionState, load_session, set_state
from tilth.stopflag import StopFlag

document(
    {
        "session_started": "a process took the session lock and began running; data: backend, pid, resume",
        "task_started": "a task was marked in_progress",
        "prompt_assembled": "data.role, data.prompt: the full text a fresh context starts from",
        "worker_done": "the worker returned; data.made_case",
        "verdict": "the evaluator's verdict, appended to the ledger; data: verdict, category, concern",
        "session_end": "the loop ended; data: state, exit_code",
    }
)

EXIT_DONE, EXIT_FAILED, EXIT_STOPPED = 0, 1, 3


@dataclass
class Run:
    ws: Workspace
    backend: Backend
    settings: Settings
    stop: StopFlag


def run_session(paths: SessionPaths, settings: Settings, stop: StopFlag, resume: bool = False,
                echo: Callable[[dict], None] | None = None) -> int:
    with SessionLock(paths.lock, paths.id) as lock:
        record = load_session(paths)
        events = EventLog(paths.events, echo)
        ws = Workspace(paths, record, open_worktree(Path(record.worktree)), events)
        backend = make_backend(record.backend)
        reconcile(ws, unwind_failed=resume)
        set_state(paths, SessionState.running, pid=os.getpid())
        events.emit("session_started", backend=backend.label, pid=os.getpid(), resume=resume)
        try:
            state = drive(Run(ws, backend, settings, stop), lock)
        except PlanChanged:
            set_state(paths, SessionState.stopped, pid=None)
            raise
        except BaseException:
            set_state(paths, SessionState.crashed, pid=None)
            raise
        set_state(paths, state, pid=None)
        exit_code = {SessionState.done: EXIT_DONE, SessionState.failed: EXIT_FAILED}.get(state, EXIT_STOPPED)
        events.emit("session_end", state=state.value, exit_code=exit_code)
        return exit_code


def drive(run: Run, lock: SessionLock) -> SessionState:
    try:
        while (task := pick_next(run)) is not None:
            lock.beat()
            if not run_task(run, task) and not run.settings.continue_after_failure:
                break
    except StopRequested:
        return SessionState.stopped
    plan = load_current_plan(run.ws.paths.prd)
    return SessionState.failed if any(t.status == TaskStatus.failed for t in plan) else SessionState.done


def pick_next(run: Run) -> Task | None:
    run.stop.check()
    return next_pending(load_current_plan(run.ws.paths.prd))


def run_task(run: Run, task: Task) -> bool:
    """True when the task ends as a commit, False when it ends as a FAILED placeholder."""
    set_status(run.ws.paths.prd, task.id, TaskStatus.in_progress)
    run.ws.events.emit("task_started", task.id)
    entry = None
    for attempt in range(run.settings.max_iterations_per_task):
        if attempt:
            run.stop.check()
        entry = run_iteration(run, task)
        if entry.verdict.accepted:
            commit_done(run.ws, task, entry)
            return True
    commit_failed(run.ws, task, entry)
    return False


def run_iteration(run: Run, task: Task) -> LedgerEntry:
    ws, settings = run.ws, run.settings
    entries = read_entries(ws.paths.ledger_dir, task.id)
    iteration = len(entries) + 1
    history = entries[-settings.ledger_entries:] if settings.ledger_entries else []
    recent = read_progress(ws.paths.progress)[-settings.journal_lines:] if settings.journal_lines else []

    prompt = worker_prompt(task, load_current_plan(ws.paths.prd), recent, history)
    ws.events.emit("prompt_assembled", task.id, iteration, role="worker", prompt=prompt)
    case = run.backend.worker.work(WorkerJob(ws.record.id, task, iteration, Path(ws.record.worktree), prompt, history, ws.events))
    ws.events.emit("worker_done", task.id, iteration, made_case=case is not None)

    stage(ws, task, iteration)
    diff = staged_diff(ws.repo)
    summary = diff_summary(diff)
    if case is None:
        verdict = Verdict(verdict="reject", category="no_case", concern="The worker ended its turn without a case.",
                          next_step="Finish the task and make a case for each acceptance criterion.")
    else:
        prompt = evaluator_prompt(task, case, diff.patch or "", history)
        ws.events.emit("prompt_assembled", task.id, iteration, role="evaluator", prompt=prompt)
        job = EvaluationJob(ws.record.id, task, iteration, Path(ws.record.worktree), prompt, case,
                            diff.patch or "", summary, history, ws.events)
        verdict = run.backend.evaluator.evaluate(job)
    entry = LedgerEntry(iter=iteration, diff_summary=summary, case=case, verdict=verdict)
    append_entry(ws.paths.ledger_dir, task.id, entry)
    ws.events.emit("verdict", task.id, iteration, verdict=verdict.verdict, category=verdict.category,
                   concern=verdict.concern)
    return entry


def diff_summary(diff: pygit2.Diff) -> str:
    stats = diff.stats
    files = [patch.delta.new_file.path for patch in diff]
    shown = ", ".join(files[:10]) + (f", and {len(files) - 10} more" if len(files) > 10 else "")
    return f"{stats.files_changed} files changed, +{stats.insertions} -{stats.deletions}" + (f": {shown}" if files else "")
