"""A session's run opened and closed around the task loop: opening (the lock, the recorded
settings and their keys, the backend, confinement, reconciliation with the branch, notices,
caps, the baseline), the tasks then the final review (`drive`), and the end (the state, the
`session_end` hooks, the end report) however the run ended."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from tilth.agents.accounting import Caps, Meter
from tilth.agents.backends.registry import make_backend
from tilth.agents.bounds import in_force
from tilth.agents.check_bundle import CheckBundle
from tilth.agents.confinement import Confinement, host_ports, session_confinement
from tilth.agents.netbox import method_in_force
from tilth.agents.hooks import Hooks, hook_dirs
from tilth.agents.sandbox import resolve_mode
from tilth.core.clock import iso
from tilth.core.config import DEFAULT_SECRET_PATTERNS, SECRET_FIELDS, Settings
from tilth.core.diskspace import is_disk_full
from tilth.core.errors import BadInput, DiskFull, StopRequested, TilthError
from tilth.core.travel import key_variable, with_session_view
from tilth.git.gitops import GitError, check_readable, open_worktree
from tilth.git.worktree_git import session_git_dir
from tilth.run import session_notices
from tilth.run.base_checks import ensure_baseline
from tilth.run.context import Sources
from tilth.run.failsafe import keep_reserve, not_started, release_reserve, stop_reason
from tilth.run.final_review import review_session
from tilth.run.lane_cleanup import clear_lanes
from tilth.run.lanes import run_lanes
from tilth.run.loop import in_turn
from tilth.run.outcomes import Workspace
from tilth.run.parking import end_state
from tilth.run.pausing import Paused
from tilth.run.recording import Recorder
from tilth.run.recovery import reconcile
from tilth.run.stacking import settle
from tilth.run.step import Run
from tilth.run.stopflag import StopFlag
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths
from tilth.store.lock import HeldLock, SessionLock
from tilth.store.prd import load_current_plan
from tilth.store.redaction import register_patterns, register_secret, scan_for_secrets
from tilth.store.rollup import keep_rollup
from tilth.store.session import SessionRecord, SessionState, load_session, pause, save_session, set_state
from tilth.store.transcript import Transcript, transcript_path
from tilth.views.endreport import record_report

document(
    {
        "session_started": ("a process took the session lock and began running; data: backend, pid, resume, "
                            "caps (the limits in force: max_spend_usd, max_tokens_total, max_wall_clock_s, "
                            "max_evaluator_calls_per_task)", "backend pid resume caps"),
        "sandbox": ("the confinement in force for the agent's commands; data: mode (bwrap|off), unconfined, "
                    "setting, network (on|off: whether the agent's commands reach the network), network_confinement "
                    "(how, with network on under bwrap: pasta|slirp4netns, a network namespace of their own, or host, "
                    "the host's network as it is; none otherwise), host_ports (the host loopback ports they may "
                    "reach), processes (how agent_max_processes is enforced: cgroup|rlimit|off|unbounded, root "
                    "without a pids cgroup)", "mode unconfined setting network network_confinement host_ports processes"),
        "session_end": ("the loop ended; data: state, exit_code, reason", "state exit_code reason"),
        "session_report": ("the end-of-session report, also written to report.md; data: text", "text"),
    }
)

EXIT_DONE, EXIT_FAILED, EXIT_STOPPED, EXIT_WAITING = 0, 1, 3, 5


def run_session(paths: SessionPaths, settings: Settings, stop: StopFlag, resume: bool = False,
                echo: Callable[[dict[str, Any]], None] | None = None, expect_queued: bool = False) -> int:
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
    ws = Workspace(paths, record, open_worktree(Path(record.worktree), session_git_dir(record.repo, record.id)), events,
                   protected=tuple(settings.protected_paths))
    check_readable(ws.repo, record.branch)
    sandbox = confine(paths, record, settings, events)
    clear_lanes(ws)
    reconcile(ws, unwind_failed=resume)
    set_state(paths, SessionState.running, pid=os.getpid())
    record_transcript(paths, record, backend.label, events)
    session_notices.watch(paths, settings.notify, events, not settings.stop_on_failure)
    events.emit("session_started", backend=backend.label, pid=os.getpid(), resume=resume, caps=Caps.limits(settings))
    hooks = Hooks(hook_dirs(paths.home), Path(record.worktree), events, paths.id, sandbox.git_dir)
    caps = Caps(settings, meter, events, rollup.clock.seconds() or 0.0)
    meter.halted = stop.urgent
    checks = CheckBundle.of_run(settings, record, sandbox)
    checks = replace(checks, baseline=ensure_baseline(paths, record, ws.repo, events, checks))
    return Run(ws, backend, settings, stop, caps, Sources(paths, ws.repo, settings, events), sandbox, checks, hooks)


def record_transcript(paths: SessionPaths, record: SessionRecord, backends: str, events: EventLog) -> None:
    """transcript.md follows the journal from here on (a header, or a resumed-run marker)."""
    transcript = Transcript(transcript_path(paths.dir))
    transcript.header(record.id, iso(), backends, record.repo, record.branch)

    def title_of(task_id: str) -> str:
        return next((t.title for t in load_current_plan(paths.prd) if t.id == task_id), "")

    events.listeners.append(Recorder(transcript, paths.ledger_dir, title_of))


def confine(paths: SessionPaths, record: SessionRecord, settings: Settings, events: EventLog) -> Confinement:
    """Decide the sandbox for this run, record it in session.json, and say so when unconfined."""
    mode = resolve_mode(settings.sandbox, settings.agent_network)
    record.sandbox = mode
    save_session(paths, record)
    network, ports = settings.agent_network, host_ports(settings)
    method = method_in_force(ports) if mode == "bwrap" and network == "on" else "none"
    events.emit("sandbox", mode=mode, unconfined=mode == "off", setting=settings.sandbox, network=network,
                network_confinement=method, host_ports=list(ports), processes=in_force(settings.agent_max_processes))
    return session_confinement(mode, paths, record, settings)


def drive(run: Run, lock: HeldLock) -> tuple[SessionState, str]:
    """The tasks (in turn, or in lanes with `parallel_tasks` > 1), then the final review, again
    while it adds follow-up tasks; the state the session ends in and why."""
    def tasks() -> bool:
        return run_lanes(run, lock) if run.settings.parallel_tasks > 1 else in_turn(run, lock)

    try:
        while tasks() and review_session(run.ws, run.backend, run.settings, run.sources, run.sandbox):
            pass  # its findings became follow-up tasks
    except Paused as paused:
        run.paused_until = paused.until
        return SessionState.paused, f"{paused.reason}; the supervisor resumes it at {paused.until}"
    except StopRequested as stop:
        return SessionState.stopped, str(stop) or "stop requested"
    return end_state(load_current_plan(run.ws.paths.prd), run.settings.stop_on_failure)


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
    try:
        settle(run.ws)  # a stop in mid-task: the placeholders back on top, the task's edits kept
    except (OSError, GitError):
        pass  # left on the shelf, where the next run's reconcile finishes it
    if state == SessionState.paused and run.paused_until:
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
