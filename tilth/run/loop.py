"""The task loop: pick the next pending task, iterate worker -> the harness's own proof (diff
inspection, checks, verify commands) -> evaluator -> ledger until accepted, out of attempts or
waiting for a person, and end it as a commit, a FAILED placeholder or a PARKED one
(`run/session_run.py` opens and closes the run around it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from hashlib import sha1
from pathlib import Path

from tilth.agents.accounting import CapReached, Caps
from tilth.agents.backends.chat import ProviderError
from tilth.agents.check_bundle import CheckBundle
from tilth.agents.checks import enforce_change
from tilth.agents.confinement import Confinement
from tilth.agents.guard import grouped, guard_rejection
from tilth.agents.hooks import Hooks
from tilth.agents.protocol import AgentFailed, Backend, EvaluationJob, LearningJob, UsageLimited, WorkerJob
from tilth.agents.verify import verify_rejection
from tilth.core.config import Settings
from tilth.git.gitops import describe_diff, staged_diff
from tilth.run.context import Sources, evaluator_prompt, learning_prompt, worker_prompt
from tilth.run import lane_partials, stacking
from tilth.run.keeping import refused
from tilth.run.outcomes import Outcome, Workspace, end_task, note_daily_memory, stage
from tilth.run.parking import no_second_park, take_answers
from tilth.run.pausing import wait_out
from tilth.run.secret_gate import rejection as secret_rejection
from tilth.run.stalling import break_stall
from tilth.run.stopflag import StopFlag
from tilth.store.events import document
from tilth.store.inbox import take_unread
from tilth.store.learnings import append_learnings
from tilth.store.ledger import Case, LedgerEntry, Question, Verdict, VerifyResult, append_entry, read_entries, \
    worker_question
from tilth.store.lock import SessionLock
from tilth.store.prd import Task, TaskStatus, load_current_plan, next_pending, set_status
from tilth.store.progress_summary import SummarySettings, learnings_path, write_summary

document(
    {
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
    }
)

NO_CASE = Verdict(verdict="reject", category="no_case", concern="The worker ended its turn without a case.",
                  next_step="Finish the task and make a case for each acceptance criterion.")


@dataclass
class Run:
    """What the task loop works with for one run of a session (`session_run.prepare` builds it)."""

    ws: Workspace
    backend: Backend
    settings: Settings
    stop: StopFlag
    caps: Caps
    sources: Sources
    sandbox: Confinement
    checks: CheckBundle
    """What the checks and verify commands run with, the baseline included (a lane's: in its own worktree)."""
    hooks: Hooks
    paused_until: str | None = None
    """Set when the run ends paused by a usage limit (the supervisor resumes it then)."""
    diff_shas: dict[str, dict[int, str]] = field(default_factory=dict)
    """Per task, each attempt's diff (sha1) in this run, for the stall breaker."""


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
    stacking.make_room(run.ws, task.id)  # from the last task commit; its own placeholder becomes its kept work
    lane_partials.restore_in_turn(run.ws, task)
    outcome, entry = attempt(run, task)
    sha = end_task(run.ws, task, outcome, entry, restage=False)
    stacking.raise_shelf(run.ws, task.id)
    lane_partials.forget(run.ws, task.id)
    after_task(run, task, outcome, entry.iter, sha)
    return outcome


def attempt(run: Run, task: Task) -> tuple[Outcome, LedgerEntry]:
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
        verdict = guard_rejection(grouped(refused(ws.repo, ws.protected_paths(), task.may_change)))
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
    ws, bundle = run.ws, run.checks
    worktree = Path(ws.record.worktree)
    checks = bundle.run(ws.events, task.id, iteration)
    verifies = bundle.verify(task, ws.events, iteration)
    if (refused := verify_rejection(verifies)) is not None:
        return refused, verifies
    prompt = evaluator_prompt(run.sources, task, iteration, case, diff, history, checks, verifies,
                              bundle.excused(checks))
    job = EvaluationJob(ws.record.id, task, iteration, worktree, prompt, case, diff, summary,
                        history, ws.events, checks, run.sandbox)
    return bundle.judged(run.backend.evaluator.evaluate(job), checks), verifies


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
