"""The session loop: pick the next pending task, iterate worker -> the harness's own proof (diff
inspection, checks, verify commands) -> evaluator -> ledger until accepted, out of attempts or
waiting for a person, end it as a commit, a FAILED placeholder or a PARKED one; then the final
review."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from hashlib import sha1
from pathlib import Path
from typing import Callable

from tilth.agents.accounting import CapReached, Caps, Meter
from tilth.agents.backends.chat import ProviderError
from tilth.agents.backends.registry import make_backend
from tilth.agents.bounds import in_force
from tilth.agents.checks import enforce_change, enforce_checks, excused, run_checks
from tilth.agents.guard import findings, guard_rejection
from tilth.agents.hooks import Hooks, hook_dirs
from tilth.agents.protocol import AgentFailed, Backend, EvaluationJob, LearningJob, UsageLimited, WorkerJob
from tilth.agents.confinement import Confinement, session_confinement
from tilth.agents.sandbox import resolve_mode
from tilth.agents.verify import run_verifies, verify_rejection
from tilth.core.clock import iso
from tilth.core.config import DEFAULT_SECRET_PATTERNS, SECRET_FIELDS, Settings
from tilth.core.diskspace import is_disk_full
from tilth.core.errors import BadInput, DiskFull, StopRequested, TilthError
from tilth.core.travel import key_variable, with_session_view
from tilth.git.gitops import check_readable, describe_diff, diff_changes, open_worktree, staged_diff
from tilth.git.worktree_git import session_git_dir
from tilth.run.base_checks import ensure_baseline
from tilth.run.context import Sources, evaluator_prompt, learning_prompt, worker_prompt
from tilth.run import session_notices
from tilth.run.failsafe import keep_reserve, not_started, release_reserve, stop_reason
from tilth.run.final_review import review_session
from tilth.run.lane_cleanup import clear_lanes
from tilth.run.lanes import run_lanes
from tilth.run.outcomes import Workspace, commit_done, commit_failed, commit_parked, note_daily_memory, stage
from tilth.run.parking import end_state, no_second_park, take_answers
from tilth.run.pausing import Paused, wait_out
from tilth.run.recording import Recorder
from tilth.run.recovery import reconcile
from tilth.run.secret_gate import rejection as secret_rejection
from tilth.run.stalling import break_stall
from tilth.run.stopflag import StopFlag
from tilth.store.baseline import Baseline
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths
from tilth.store.inbox import take_unread
from tilth.store.learnings import append_learnings
from tilth.store.ledger import Case, LedgerEntry, Question, Verdict, VerifyResult, append_entry, read_entries, \
    worker_question
from tilth.store.lock import SessionLock
from tilth.store.prd import Task, TaskStatus, load_current_plan, next_pending, set_status
from tilth.store.redaction import register_patterns, register_secret, scan_for_secrets
from tilth.store.rollup import keep_rollup
from tilth.store.session import SessionRecord, SessionState, load_session, pause, save_session, set_state
from tilth.store.progress_summary import SummarySettings, learnings_path, write_summary
from tilth.store.transcript import Transcript, transcript_path
from tilth.views.endreport import record_report

document(
    {
        "session_started": ("a process took the session lock and began running; data: backend, pid, resume, "
                            "caps (the limits in force: max_spend_usd, max_tokens_total, max_wall_clock_s, "
                            "max_evaluator_calls_per_task)", "backend pid resume caps"),
        "sandbox": ("the confinement in force for the agent's commands; data: mode (bwrap|off), unconfined, "
                    "setting, network (on|off: whether the agent's commands reach the network), processes "
                    "(how agent_max_processes is enforced: cgroup|rlimit|off|unbounded, root without a pids cgroup)",
                    "mode unconfined setting network processes"),
        "task_started": ("a task was marked in_progress; data: start (in a lane: the session head it started from)", "start"),
        "attempts_used_up": ("a task has had max_attempts_per_task_total attempts over all runs and fails without "
                             "another; raise TILTH_MAX_ATTEMPTS_PER_TASK_TOTAL and resume to give it more; "
                             "data: attempts, limit", "attempts limit"),
        "notes_taken": ("at a task boundary the runner took the notes left with `tilth note` since the last one; "
                        "data: count, ids (they reach every later prompt they apply to), by (who left each, in "
                        "the order of ids: cli|dashboard, unknown for a note through the broker whose `by` is "
                        "none of these, null when its line does not say)", "count ids by"),
        "learnings_proposed": ("the self-improvement step ran; data: count (0 when nothing durable), error",
                               "count error"),
        "worker_done": ("the worker returned; data: made_case, failed (why its agent process failed, when it did), "
                        "asked (the question it ended with instead of a case: the task parks)",
                        "made_case asked failed"),
        "verdict": ("the evaluator's verdict, appended to the ledger; data: verdict, category, concern, redo (a lane's "
                    "accepted change that did not land: why it runs again)", "verdict category concern redo"),
        "session_end": ("the loop ended; data: state, exit_code, reason", "state exit_code reason"),
        "session_report": ("the end-of-session report, also written to report.md; data: text", "text"),
    }
)

EXIT_DONE, EXIT_FAILED, EXIT_STOPPED, EXIT_WAITING = 0, 1, 3, 5
NO_CASE = Verdict(verdict="reject", category="no_case", concern="The worker ended its turn without a case.",
                  next_step="Finish the task and make a case for each acceptance criterion.")


@dataclass
class Run:
    ws: Workspace
    backend: Backend
    settings: Settings
    stop: StopFlag
    caps: Caps
    sources: Sources
    sandbox: Confinement
    hooks: Hooks
    paused_until: str | None = None
    """Set when the run ends paused by a usage limit (the supervisor resumes it then)."""
    diff_shas: dict[str, dict[int, str]] = field(default_factory=dict)
    """Per task, each attempt's diff (sha1) in this run, for the stall breaker."""
    baseline: Baseline | None = None
    """The checks and verify commands on the base commit (`run/base_checks.py`)."""


def run_session(paths: SessionPaths, settings: Settings, stop: StopFlag, resume: bool = False,
                echo: Callable[[dict], None] | None = None, expect_queued: bool = False) -> int:
    """Run the session to its end with its recorded settings (`settings` gives the keys and
    anything the session did not record). `expect_queued` (a supervisor's child): do nothing
    unless the session is still queued once the lock is held, so a `tilth stop` racing the
    spawn wins."""
    register_secret(settings.api_key)
    register_secret(settings.evaluator_api_key)
    scan_for_secrets()
    with SessionLock(paths.lock, paths.id) as lock:
        if expect_queued and load_session(paths).state != SessionState.queued:
            return EXIT_STOPPED
        try:
            settings = session_settings(paths, settings)
        except BadInput as exc:
            set_state(paths, SessionState.stopped, pid=None, reason=str(exc))
            raise
        register_patterns([*DEFAULT_SECRET_PATTERNS, *settings.secret_patterns])
        try:
            keep_reserve(paths)
            run = prepare(paths, settings, stop, resume, EventLog(paths.events, echo))
        except BaseException as exc:
            if (stopped := stop_reason(exc, paths)) is None:
                raise
            not_started(paths, stopped)
            raise stopped from None
        try:
            state, reason = drive(run, lock)
        except TilthError as exc:
            finish(run, SessionState.stopped, exc.exit_code, str(exc))
            raise
        except BaseException as exc:
            if (stopped := stop_reason(exc, paths, run.ws.record.repo)) is None:
                set_state(paths, SessionState.crashed, pid=None, reason=crash_reason(exc))
                session_notices.crashed(run.ws.events, crash_reason(exc))
                raise
            stop_after(run, stopped)
            raise stopped from None
        exit_code = {SessionState.done: EXIT_DONE, SessionState.failed: EXIT_FAILED,
                     SessionState.waiting: EXIT_WAITING}.get(state, EXIT_STOPPED)
        finish(run, state, exit_code, reason)
        return exit_code


def session_settings(paths: SessionPaths, settings: Settings) -> Settings:
    """The session's recorded settings over this process's; the keys it started with must be here."""
    record = load_session(paths)
    resolved = with_session_view(settings, record.settings)
    missing = [key_variable(key) for key in record.keys
               if not (getattr(resolved, key) if key in SECRET_FIELDS else os.environ.get(key))]
    if missing:
        where = f"put it in {paths.home / 'config.toml'} or in the supervisor's environment" \
            if all(name.startswith("TILTH_") for name in missing) else "set it in the supervisor's environment"
        raise BadInput(f"session {paths.id} was started with {' and '.join(missing)}, which this process does not "
                       f"have (keys are never written to disk): {where}, then `tilth resume {paths.id}`")
    return resolved


def prepare(paths: SessionPaths, settings: Settings, stop: StopFlag, resume: bool, events: EventLog) -> Run:
    """Everything before the first task: backend, sandbox, reconciliation with the branch."""
    record = load_session(paths)
    rollup = keep_rollup(events)
    meter = Meter.from_rollup(rollup)
    backend = make_backend(record.backend, settings, meter)
    ws = Workspace(paths, record, open_worktree(Path(record.worktree), session_git_dir(record.repo, record.id)), events)
    check_readable(ws.repo, record.branch)
    sandbox = confine(paths, record, settings, events)
    clear_lanes(ws)
    reconcile(ws, unwind_failed=resume, unwind_head=settings.parallel_tasks == 1)
    set_state(paths, SessionState.running, pid=os.getpid())
    record_transcript(paths, record, backend.label, events)
    session_notices.watch(paths, settings.notify, events, not settings.stop_on_failure)
    events.emit("session_started", backend=backend.label, pid=os.getpid(), resume=resume, caps=Caps.limits(settings))
    hooks = Hooks(hook_dirs(paths.home), Path(record.worktree), events, paths.id, sandbox.git_dir)
    caps = Caps(settings, meter, events, rollup.clock.seconds() or 0.0)
    baseline = ensure_baseline(paths, record, ws.repo, settings, events, sandbox)
    return Run(ws, backend, settings, stop, caps, Sources(paths, ws.repo, settings, events),
               sandbox, hooks, baseline=baseline)


def record_transcript(paths: SessionPaths, record: SessionRecord, backends: str, events: EventLog) -> None:
    """transcript.md follows the journal from here on (a header, or a resumed-run marker)."""
    transcript = Transcript(transcript_path(paths.dir))
    transcript.header(record.id, iso(), backends, record.repo, record.branch)

    def title_of(task_id: str) -> str:
        return next((t.title for t in load_current_plan(paths.prd) if t.id == task_id), "")

    events.listeners.append(Recorder(transcript, paths.ledger_dir, title_of))


def stop_after(run: Run, reason: TilthError) -> None:
    """End as `stopped` after a full disk or a git failure. On a full disk the ballast goes
    first, and what cannot be written after the state and `session_end` is given up."""
    if isinstance(reason, DiskFull):
        release_reserve(run.ws.paths)
    try:
        finish(run, SessionState.stopped, reason.exit_code, str(reason))
    except OSError as exc:
        if not is_disk_full(exc):
            raise


def finish(run: Run, state: SessionState, exit_code: int, reason: str) -> None:
    paths, events = run.ws.paths, run.ws.events
    if state == SessionState.paused:
        pause(paths, run.paused_until, reason)
    else:
        set_state(paths, state, pid=None, reason=reason or None)
    events.emit("session_end", state=state.value, exit_code=exit_code, reason=reason)
    run.hooks.run("session_end", None, None, state=state.value)
    events.emit("session_report", text=record_report(paths))


def crash_reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"crashed: {type(exc).__name__}" + (f": {text}" if text else "")


def confine(paths: SessionPaths, record: SessionRecord, settings: Settings, events: EventLog) -> Confinement:
    """Decide the sandbox for this run, record it in session.json, and say so when unconfined."""
    mode = resolve_mode(settings.sandbox, settings.agent_network)
    record.sandbox = mode
    save_session(paths, record)
    network = settings.agent_network
    events.emit("sandbox", mode=mode, unconfined=mode == "off", setting=settings.sandbox, network=network,
                processes=in_force(settings.agent_max_processes))
    return session_confinement(mode, paths, record, settings)


def drive(run: Run, lock: SessionLock) -> tuple[SessionState, str]:
    tasks = (lambda: run_lanes(run, lock, attempt, after_task, learn)) if run.settings.parallel_tasks > 1 else \
        (lambda: in_turn(run, lock))
    try:
        while tasks() and review_session(run.ws, run.backend, run.settings, run.sources, run.sandbox):
            pass  # its findings became follow-up tasks
    except Paused as paused:
        run.paused_until = paused.until
        return SessionState.paused, f"{paused.reason}; the supervisor resumes it at {paused.until}"
    except StopRequested as stop:
        return SessionState.stopped, str(stop) or "stop requested"
    return end_state(load_current_plan(run.ws.paths.prd), run.settings.stop_on_failure)


def in_turn(run: Run, lock: SessionLock) -> bool:
    """The tasks one after another; False when a failure ends the session (`stop_on_failure`)."""
    while (task := pick_next(run)) is not None:
        lock.beat()
        if run_task(run, task) == "failed" and run.settings.stop_on_failure:
            return False
    return True


def pick_next(run: Run) -> Task | None:
    run.stop.check()
    run.caps.check()
    take_answers(run.ws)
    return next_pending(load_current_plan(run.ws.paths.prd))


def run_task(run: Run, task: Task) -> str:
    """How the task ended: `done` (a commit), `failed` (a FAILED placeholder) or `parked` (a
    PARKED placeholder: it waits for a person's answer)."""
    set_status(run.ws.paths.prd, task.id, TaskStatus.in_progress)
    run.ws.events.emit("task_started", task.id)
    if notes := take_unread(run.ws.paths.dir):
        run.ws.events.emit("notes_taken", task.id, count=len(notes), ids=[n.id for n in notes],
                           by=[n.by for n in notes])
    outcome, entry = attempt(run, task)
    sha = commit_done(run.ws, task, entry, restage=False) if outcome == "done" else \
        commit_parked(run.ws, task, entry) if outcome == "parked" else commit_failed(run.ws, task, entry)
    after_task(run, task, outcome, entry.iter, sha)
    return outcome


def attempt(run: Run, task: Task) -> tuple[str, LedgerEntry]:
    """Attempts until one is accepted (`done`, diff staged), asks (`parked`) or none are left (`failed`); no commit."""
    entry, attempts = None, 0
    while attempts < run.settings.max_iterations_per_task:
        if attempts:
            run.stop.check()
        run.caps.check(task.id)
        if (used_up := attempts_used_up(run, task)) is not None:
            entry = used_up
            break
        try:
            entry = run_iteration(run, task)
        except UsageLimited as limit:
            wait_out(run.ws, run.settings, run.stop, task.id, limit)
            run.stop.check()
            continue
        attempts += 1
        if entry.verdict.accepted or entry.verdict.parks:
            return ("done" if entry.verdict.accepted else "parked"), entry
    run.stop.check()  # a stop during the last attempt may have spoiled it: the task is stopped, not failed
    return "failed", entry


def attempts_used_up(run: Run, task: Task) -> LedgerEntry | None:
    """The task's last ledger entry once it has had `max_attempts_per_task_total` attempts over all
    runs (it then fails without another; a resume must raise the setting first)."""
    entries = read_entries(run.ws.paths.ledger_dir, task.id)
    if len(entries) < run.settings.max_attempts_per_task_total:
        return None
    run.ws.events.emit("attempts_used_up", task.id, entries[-1].iter, attempts=len(entries),
                       limit=run.settings.max_attempts_per_task_total)
    return entries[-1]


def run_iteration(run: Run, task: Task) -> LedgerEntry:
    ws, settings = run.ws, run.settings
    entries = read_entries(ws.paths.ledger_dir, task.id)
    iteration = len(entries) + 1
    history = entries[-settings.ledger_entries:] if settings.ledger_entries else []
    case, failed = worker_turn(run, task, iteration, history)
    secrets = stage(ws, task, iteration)
    diff = staged_diff(ws.repo)
    summary = describe_diff(diff)
    verifies: list[VerifyResult] = []
    verdict = secret_rejection(secrets) if secrets else failed or (NO_CASE if case is None else None)
    if verdict is None:
        verdict = guard_rejection(findings(diff_changes(ws.repo, diff), settings.protected_paths, task.may_change))
    if verdict is None:
        verdict, verifies = evaluate(run, task, iteration, history, case, diff.patch or "", summary)
    if (checked := no_second_park(ws.paths.dir, task.id, verdict)) is not verdict:
        ws.events.emit("question_repeated", task.id, iteration, asked_by=verdict.asked_by, question=verdict.question)
        verdict = checked
    if not verdict.parks:
        verdict = enforce_change(verdict, len(diff) == 0, task.allow_empty)
    elif not verdict.category or verdict.category == "none":
        verdict = verdict.model_copy(update={"category": "evaluator_question"})
    verdict = break_stall(run.diff_shas.setdefault(task.id, {}), run.settings.stall_after, ws.events, task.id, iteration,
                          verdict, entries, sha1((diff.patch or "").encode()).hexdigest())
    entry = LedgerEntry(iter=iteration, diff_summary=summary, case=case, verdict=verdict, verifies=verifies)
    append_entry(ws.paths.ledger_dir, task.id, entry)
    ws.events.emit("verdict", task.id, iteration, verdict=verdict.verdict, category=verdict.category,
                   concern=verdict.concern)
    return entry


def worker_turn(run: Run, task: Task, iteration: int,
                history: list[LedgerEntry]) -> tuple[Case | None, Verdict | None]:
    """The worker's case, or the rejection its failed agent process earns."""
    ws = run.ws
    prompt = worker_prompt(run.sources, task, load_current_plan(ws.paths.prd), iteration, history)
    job = WorkerJob(ws.record.id, task, iteration, Path(ws.record.worktree), prompt, history, ws.events,
                    run.sources.notes, run.sandbox, run.hooks)
    try:
        answer = run.backend.worker.work(job)
    except AgentFailed as exc:
        ws.events.emit("worker_done", task.id, iteration, made_case=False, failed=str(exc))
        return None, Verdict(verdict="reject", category="agent_failed", concern=str(exc),
                             next_step="Finish the task; the edits of this attempt are still in the working tree.")
    if isinstance(answer, Question):
        ws.events.emit("worker_done", task.id, iteration, made_case=False, asked=answer.question)
        return None, worker_question(answer)
    ws.events.emit("worker_done", task.id, iteration, made_case=answer is not None)
    return answer, None


def evaluate(run: Run, task: Task, iteration: int, history: list[LedgerEntry], case: Case, diff: str,
             summary: str) -> tuple[Verdict, list[VerifyResult]]:
    """The checks and verify commands, then (unless a verify failed) the evaluator's verdict."""
    ws, s = run.ws, run.settings
    worktree = Path(ws.record.worktree)
    checks = run_checks(s.checks + ws.record.checks, worktree, s.tool_timeout, ws.events, task.id, iteration,
                        run.sandbox, s.script_runs_keep)
    verifies = run_verifies(task, worktree, s.verify_timeout_s, ws.events, iteration, run.sandbox, s.script_runs_keep)
    if (refused := verify_rejection(verifies)) is not None:
        return refused, verifies
    prompt = evaluator_prompt(run.sources, task, iteration, case, diff, history, checks, verifies,
                              [c.command for c in excused(checks, run.baseline)])
    job = EvaluationJob(ws.record.id, task, iteration, worktree, prompt, case, diff, summary,
                        history, ws.events, checks, run.sandbox)
    return enforce_checks(run.backend.evaluator.evaluate(job), checks, run.baseline), verifies


def after_task(run: Run, task: Task, outcome: str, iteration: int, sha: str, learned: bool = False) -> None:
    """The outcome's daily memory line, the self-improvement step (unless a parallel task's lane
    `learned` already), a fresh progress summary, then the post_task hooks. Best effort: a provider
    failure here loses only the proposals, never the task's outcome. A parked task has not ended:
    no memory line, nothing to learn yet."""
    ws, s = run.ws, run.settings
    if outcome != "parked":
        note_daily_memory(ws, task.id, task.title, outcome == "done", sha, s)
    if s.self_improvement and outcome != "parked" and not learned:
        learn(run, task, outcome, iteration)
    write_summary(ws.paths, SummarySettings(s.summary_recent_tasks, s.summary_learnings, s.summary_table_rows))
    run.hooks.run("post_task", task.id, iteration, outcome=outcome, commit=sha)


def learn(run: Run, task: Task, outcome: str, iteration: int) -> None:
    ws, s = run.ws, run.settings
    history = read_entries(ws.paths.ledger_dir, task.id)[-s.ledger_entries:] if s.ledger_entries else []
    prompt = learning_prompt(run.sources, task, outcome, history)
    try:
        job = LearningJob(ws.record.id, task, outcome, iteration, prompt, ws.events, Path(ws.record.worktree),
                          run.sandbox)
        proposals = run.backend.learner.propose(job)
        append_learnings(learnings_path(ws.paths), task.id, task.title, proposals)
        ws.events.emit("learnings_proposed", task.id, iteration, count=len(proposals), error=None)
    except (ProviderError, AgentFailed, UsageLimited, CapReached) as exc:  # a cap stops at the next task
        ws.events.emit("learnings_proposed", task.id, iteration, count=0, error=str(exc))
