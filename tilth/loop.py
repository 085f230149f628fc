"""The session loop: pick the next pending task, iterate worker -> checks -> evaluator ->
ledger until accepted or out of attempts, end it as a commit or a FAILED placeholder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tilth.accounting import Caps, Meter
from tilth.backends import Backend, EvaluationJob, WorkerJob, make_backend
from tilth.checks import enforce_checks, run_checks
from tilth.config import Settings
from tilth.context import evaluator_prompt, worker_prompt
from tilth.errors import StopRequested, TilthError
from tilth.events import EventLog, document
from tilth.gitops import describe_diff, open_worktree, staged_diff
from tilth.home import SessionPaths
from tilth.ledger import Case, LedgerEntry, Verdict, append_entry, read_entries
from tilth.lock import SessionLock
from tilth.outcomes import Workspace, commit_done, commit_failed, stage
from tilth.prd import Task, TaskStatus, load_current_plan, next_pending, set_status
from tilth.progress import read_progress
from tilth.recovery import reconcile
from tilth.redaction import register_secret
from tilth.session import SessionState, load_session, save_session, set_state
from tilth.stopflag import StopFlag

document(
    {
        "session_started": "a process took the session lock and began running; data: backend, pid, resume",
        "task_started": "a task was marked in_progress",
        "prompt_assembled": "data.role, data.prompt: the full text a fresh context starts from",
        "worker_done": "the worker returned; data.made_case",
        "verdict": "the evaluator's verdict, appended to the ledger; data: verdict, category, concern",
        "session_end": "the loop ended; data: state, exit_code, reason",
    }
)

EXIT_DONE, EXIT_FAILED, EXIT_STOPPED = 0, 1, 3
NO_CASE = Verdict(verdict="reject", category="no_case", concern="The worker ended its turn without a case.",
                  next_step="Finish the task and make a case for each acceptance criterion.")


@dataclass
class Run:
    ws: Workspace
    backend: Backend
    settings: Settings
    stop: StopFlag
    caps: Caps


def run_session(paths: SessionPaths, settings: Settings, stop: StopFlag, resume: bool = False,
                backend_name: str | None = None, echo: Callable[[dict], None] | None = None) -> int:
    register_secret(settings.api_key)
    register_secret(settings.evaluator_api_key)
    with SessionLock(paths.lock, paths.id) as lock:
        record = load_session(paths)
        if backend_name and backend_name != record.backend.name:
            record.backend.name = backend_name
            save_session(paths, record)
        events = EventLog(paths.events, echo)
        meter = Meter.from_events(events.read())
        backend = make_backend(record.backend, settings, meter)
        ws = Workspace(paths, record, open_worktree(Path(record.worktree)), events)
        reconcile(ws, unwind_failed=resume)
        set_state(paths, SessionState.running, pid=os.getpid())
        events.emit("session_started", backend=backend.label, pid=os.getpid(), resume=resume)
        reason = ""
        try:
            state, reason = drive(Run(ws, backend, settings, stop, Caps(settings, meter, events)), lock)
        except TilthError as exc:
            set_state(paths, SessionState.stopped, pid=None)
            events.emit("session_end", state="stopped", exit_code=exc.exit_code, reason=str(exc))
            raise
        except BaseException:
            set_state(paths, SessionState.crashed, pid=None)
            raise
        set_state(paths, state, pid=None)
        exit_code = {SessionState.done: EXIT_DONE, SessionState.failed: EXIT_FAILED}.get(state, EXIT_STOPPED)
        events.emit("session_end", state=state.value, exit_code=exit_code, reason=reason)
        return exit_code


def drive(run: Run, lock: SessionLock) -> tuple[SessionState, str]:
    try:
        while (task := pick_next(run)) is not None:
            lock.beat()
            if not run_task(run, task) and not run.settings.continue_after_failure:
                break
    except StopRequested as stop:
        return SessionState.stopped, str(stop) or "stop requested"
    plan = load_current_plan(run.ws.paths.prd)
    failed = any(t.status == TaskStatus.failed for t in plan)
    return (SessionState.failed, "a task failed") if failed else (SessionState.done, "")


def pick_next(run: Run) -> Task | None:
    run.stop.check()
    run.caps.check()
    return next_pending(load_current_plan(run.ws.paths.prd))


def run_task(run: Run, task: Task) -> bool:
    """True when the task ends as a commit, False when it ends as a FAILED placeholder."""
    set_status(run.ws.paths.prd, task.id, TaskStatus.in_progress)
    run.ws.events.emit("task_started", task.id)
    entry = None
    for attempt in range(run.settings.max_iterations_per_task):
        if attempt:
            run.stop.check()
        run.caps.check(task.id)
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
    case = worker_turn(run, task, iteration, history)
    stage(ws, task, iteration)
    diff = staged_diff(ws.repo)
    summary = describe_diff(diff)
    verdict = NO_CASE if case is None else evaluate(run, task, iteration, history, case, diff.patch or "", summary)
    entry = LedgerEntry(iter=iteration, diff_summary=summary, case=case, verdict=verdict)
    append_entry(ws.paths.ledger_dir, task.id, entry)
    ws.events.emit("verdict", task.id, iteration, verdict=verdict.verdict, category=verdict.category,
                   concern=verdict.concern)
    return entry


def worker_turn(run: Run, task: Task, iteration: int, history: list[LedgerEntry]) -> Case | None:
    ws, settings = run.ws, run.settings
    recent = read_progress(ws.paths.progress)[-settings.journal_lines:] if settings.journal_lines else []
    prompt = worker_prompt(task, load_current_plan(ws.paths.prd), recent, history)
    ws.events.emit("prompt_assembled", task.id, iteration, role="worker", prompt=prompt)
    job = WorkerJob(ws.record.id, task, iteration, Path(ws.record.worktree), prompt, history, ws.events)
    case = run.backend.worker.work(job)
    ws.events.emit("worker_done", task.id, iteration, made_case=case is not None)
    return case


def evaluate(run: Run, task: Task, iteration: int, history: list[LedgerEntry], case: Case, diff: str,
             summary: str) -> Verdict:
    ws = run.ws
    checks = run_checks(run.settings.checks + ws.record.checks, Path(ws.record.worktree), run.settings.tool_timeout,
                        ws.events, task.id, iteration)
    prompt = evaluator_prompt(task, case, diff, history, checks)
    ws.events.emit("prompt_assembled", task.id, iteration, role="evaluator", prompt=prompt)
    job = EvaluationJob(ws.record.id, task, iteration, Path(ws.record.worktree), prompt, case, diff, summary,
                        history, ws.events, checks)
    return enforce_checks(run.backend.evaluator.evaluate(job), checks)
