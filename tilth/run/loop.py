"""The task loop, one task at a time: pick the next pending task (taking answers first), its step
(`run/step.py`: begun, then attempted) in the session worktree, and its end as a commit, a FAILED
placeholder or a PARKED one; then what follows every task's end, in turn or in a lane (`after_task`:
the daily memory line, the self-improvement step, the progress summary, the post_task hooks).
`run/session_run.py` opens and closes the run around it."""

from __future__ import annotations

from pathlib import Path

from tilth.agents.accounting import CapReached
from tilth.agents.backends.chat import ProviderError
from tilth.agents.protocol import AgentFailed, LearningJob, UsageLimited
from tilth.run import lane_partials, stacking
from tilth.run.context import learning_prompt
from tilth.run.outcomes import end_task, note_daily_memory
from tilth.run.parking import take_answers
from tilth.run.step import Run, attempt, begin_task
from tilth.store.events import document
from tilth.store.learnings import append_learnings
from tilth.store.ledger import read_entries
from tilth.store.lock import HeldLock
from tilth.store.prd import Task, load_current_plan, next_pending
from tilth.store.progress_summary import SummarySettings, learnings_path, write_summary

document(
    {
        "learnings_proposed": ("the self-improvement step ran; data: count (0 when nothing durable), error",
                               "count error"),
    }
)


def in_turn(run: Run, lock: HeldLock) -> bool:
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
    begin_task(run, task)
    outcome, entry = attempt(run, task)
    sha = end_task(run.ws, task, outcome, entry, restage=False)
    stacking.raise_shelf(run.ws, task.id)
    lane_partials.forget(run.ws, task.id)
    after_task(run, task, outcome, entry.iter, sha)
    return outcome


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
