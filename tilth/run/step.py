"""One task's step, the same in turn and in a lane: its beginning (`begin_task`: in progress, the notes
left since the last task, its kept partial work in the worktree it runs in) and its attempts
(`attempt`: worker -> the harness's own proof (diff inspection, checks, verify commands) ->
evaluator -> ledger, until one is accepted, one asks a person or none are left). How it ends is the
caller's: `run/loop.py` commits it in the session worktree, `run/lane_work.py` on the lane's branch
for the merge queue. `Run` is what a step works with: the session's, or a lane's with a workspace
of its own."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from hashlib import sha1
from pathlib import Path

from tilth.agents.accounting import Caps
from tilth.agents.backends.fallback import acting_fallbacks
from tilth.agents.check_bundle import CheckBundle
from tilth.agents.checks import enforce_change
from tilth.agents.confinement import Confinement
from tilth.agents.guard import grouped, guard_rejection
from tilth.agents.hooks import Hooks
from tilth.agents.protocol import AgentFailed, Backend, EvaluationJob, UsageLimited, WorkerJob
from tilth.agents.verify import verify_rejection
from tilth.core.config import Settings
from tilth.core.errors import StopRequested
from tilth.git.gitops import describe_diff, open_worktree
from tilth.git.lane_worktrees import staged_tree
from tilth.git.worktree_git import session_git_dir
from tilth.run import lane_partials, stacking
from tilth.run.context import Sources, evaluator_prompt, worker_prompt
from tilth.run.keeping import refused
from tilth.run.lane_limits import Cores
from tilth.run.outcomes import Outcome, Workspace, stage
from tilth.run.parking import no_second_park
from tilth.run.pausing import wait_out
from tilth.run.secret_gate import rejection as secret_rejection
from tilth.run.stalling import break_stall
from tilth.run.stopflag import StopFlag
from tilth.run.test_count import Census
from tilth.store.events import document
from tilth.store.inbox import take_unread
from tilth.store.ledger import Case, CheckRun, LedgerEntry, Question, Verdict, VerifyResult, append_entry, \
    read_entries, worker_question
from tilth.store.prd import Task, TaskStatus, load_current_plan, set_status

document(
    {
        "task_started": ("a task was marked in_progress; data: start (in a lane: the session head it started from)", "start"),
        "lane_started": ("a task began in a lane of its own; data: lane, start (the session head its worktree was made "
                        "from: it holds every commit the task depends on), redo (0, 1: again on a newer head, 2: alone)", "start redo"),
        "notes_taken": ("at a task boundary the runner took the notes left with `tilth note` since the last one; "
                        "data: count, ids (they reach every later prompt they apply to), by (who left each, in "
                        "the order of ids: cli|dashboard, unknown for a note through the broker whose `by` is "
                        "none of these, null when its line does not say)", "count ids by"),
        "attempts_used_up": ("a task has had max_attempts_per_task_total attempts over all runs and fails without "
                             "another; raise TILTH_MAX_ATTEMPTS_PER_TASK_TOTAL and resume to give it more; "
                             "data: attempts, limit", "attempts limit"),
        "attempt_cut": ("an attempt stopped inside it, after a model call, its CLI agent killed, or between the "
                        "worker's turn and the evaluator, because the session must stop at once: its dispatched worker "
                        "lost it (`lease_lost`, or its push refused) and whatever the attempt made would be refused; "
                        "nothing of the attempt reaches the ledger; data: reason", "reason"),
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
    """What a task's step works with for one run of a session (`session_run.prepare` builds it; a lane
    works with a copy whose workspace, sources, confinement and hooks are the lane's own)."""

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
    cores: Cores = field(default_factory=lambda: Cores(1))
    """The checks that may run at once (`run/lane_limits.py`): one in turn; the lane scheduler sets the run's."""
    checked_trees: dict[str, str] = field(default_factory=dict)
    """Per task, the tree its last checks ran on (the merge queue runs them again only on another tree)."""


def on_this_thread(run: Run) -> Run:
    """The run with a workspace and sources of the calling thread's own: pygit2 objects are never
    shared between threads."""
    ws = run.ws
    repo = open_worktree(Path(ws.record.worktree), session_git_dir(ws.record.repo, ws.record.id), repair=False)
    return replace(run, ws=replace(ws, repo=repo), sources=Sources(ws.paths, repo, run.settings, ws.events))


def begin_task(run: Run, task: Task, start: str | None = None, redo: int = 0) -> None:
    """A task begins: in progress in prd.json (`task_started`), the notes left since the last task taken,
    and its kept partial work put in the worktree it runs in. In turn (`start` None) that is the
    session worktree, lowered to the last task commit first (`stacking.make_room`); in a lane (`run`
    the lane's) it is the lane's worktree, made from the session head `start`."""
    ws = run.ws
    set_status(ws.paths.prd, task.id, TaskStatus.in_progress)
    if start is None:
        ws.events.emit("task_started", task.id)
    else:
        ws.events.emit("task_started", task.id, start=start)
        ws.events.emit("lane_started", task.id, start=start, redo=redo)
    if notes := take_unread(ws.paths.dir):
        ws.events.emit("notes_taken", task.id, count=len(notes), ids=[n.id for n in notes],
                       by=[n.by for n in notes])
    if start is None:
        stacking.make_room(ws, task.id)  # from the last task commit; its own placeholder becomes its kept work
        lane_partials.restore_in_turn(ws, task)
    else:
        lane_partials.restore(ws, ws.repo, task, start, ws.events)


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
        except StopRequested:
            if (why := run.stop.urgent()) is not None:
                run.ws.events.emit("attempt_cut", task.id, len(read_entries(run.ws.paths.ledger_dir, task.id)) + 1,
                                   reason=why)
            raise
        except UsageLimited as limit:
            wait_out(run.ws, run.settings, run.stop, task.id, limit)
            run.stop.check()
            continue
        attempts += 1
        if entry.verdict.accepted or entry.verdict.parks:
            return ("done" if entry.verdict.accepted else "parked"), entry
    run.stop.check()  # a stop during the last attempt may have spoiled it: the task is stopped, not failed
    assert entry is not None, "max_iterations_per_task is at least 1"
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
    run.stop.check_urgent()  # the worker's turn is over: no evaluator for an attempt that would be refused
    secrets, diff = stage(ws, task, iteration)
    summary = describe_diff(diff)
    verifies: list[VerifyResult] = []
    verdict = secret_rejection(secrets) if secrets else failed or (NO_CASE if case is None else None)
    count = Census.of(run.checks, task, ws.paths.dir).counting(ws.repo, task.may_change, ws.events, task.id, iteration)
    if verdict is None:
        verdict = guard_rejection(grouped(refused(ws.repo, ws.protected_paths(), task.may_change, count, diff)))
    checks: list[CheckRun] = []
    if verdict is None and case is not None:
        verdict, verifies, checks = evaluate(run, task, iteration, history, case, diff.patch or "", summary)
    assert verdict is not None, "a missing case is NO_CASE"
    if (checked := no_second_park(ws.paths.dir, task.id, verdict)) is not verdict:
        ws.events.emit("question_repeated", task.id, iteration, asked_by=verdict.asked_by, question=verdict.question)
        verdict = checked
    if not verdict.parks:
        verdict = enforce_change(verdict, len(diff) == 0, task.allow_empty)
    elif not verdict.category or verdict.category == "none":
        verdict = verdict.model_copy(update={"category": "evaluator_question"})
    verdict = break_stall(run.diff_shas.setdefault(task.id, {}), run.settings.stall_after, ws.events, task.id, iteration,
                          verdict, entries, sha1((diff.patch or "").encode()).hexdigest())
    entry = LedgerEntry(iter=iteration, diff_summary=summary, case=case, verdict=verdict, verifies=verifies,
                        checks=checks, tests_counted=count.compared,
                        fallback=acting_fallbacks(("worker", run.backend.worker), ("evaluator", run.backend.evaluator)))
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
             summary: str) -> tuple[Verdict, list[VerifyResult], list[CheckRun]]:
    """The checks and verify commands, then (unless a verify failed) the evaluator's verdict; the checks
    as the ledger keeps them."""
    ws, bundle = run.ws, run.checks
    worktree = Path(ws.record.worktree)
    with run.cores.held(task.id):
        if bundle.commands:
            run.checked_trees[task.id] = staged_tree(ws.repo)
        began = run.cores.clock()
        checks = bundle.run(ws.events, task.id, iteration)
        if bundle.commands:
            run.cores.checked(task.id, run.cores.clock() - began, bundle.baseline.checks_s if bundle.baseline else None)
        verifies = bundle.verify(task, ws.events, iteration)
    excused = bundle.excused(checks)
    kept = [CheckRun(command=c.command, exit_code=c.exit_code, excused=c.command in excused) for c in checks]
    if (refused := verify_rejection(verifies)) is not None:
        return refused, verifies, kept
    run.stop.check_urgent()  # the checks may have run long
    prompt = evaluator_prompt(run.sources, task, iteration, case, diff, history, checks, verifies, excused)
    job = EvaluationJob(ws.record.id, task, iteration, worktree, prompt, case, diff, summary,
                        history, ws.events, checks, run.sandbox)
    return bundle.judged(run.backend.evaluator.evaluate(job), checks), verifies, kept
