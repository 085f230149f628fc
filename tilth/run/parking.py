"""A task that waits for a person: the question an iteration ends with, the answers that let
it go on, and how a session whose remaining tasks all wait ends.

A parked task keeps its partial work in a PARKED placeholder (`outcomes.end_task`), above the
task commits like every placeholder (`run/stacking.py`). Once `tilth answer` has answered its last
question (`store/answers.py`), the runner puts it back to pending at the next task boundary (parallel
tasks: at every step of the lane scheduler); when the task runs again its placeholder leaves the
branch and its work is where the retry starts, so the retry ends as the task's one commit. The
retry's attempts start from zero; the answer is a channel of its prompts.
"""

from __future__ import annotations

from pathlib import Path

from tilth.run.outcomes import Workspace
from tilth.store.answers import exchanges, last_question, same_question
from tilth.store.events import document
from tilth.store.ledger import LedgerEntry, Verdict
from tilth.store.prd import Task, TaskStatus, blocked_by
from tilth.store.session import SessionState
from tilth.store.unparking import unpark_answered

document(
    {
        "question_repeated": ("an agent asked a question already answered for this task; it became a rejection "
                              "carrying the answer, not a second park; data: asked_by, question", "asked_by question"),
    }
)


def take_answers(ws: Workspace) -> list[str]:
    """Every parked task whose question is answered goes back to pending (`tilth answer` or the
    supervisor may have flipped it already); under the session lock, at a task boundary. Its placeholder
    stays on the branch until the task runs again (`stacking.make_room` takes it off then)."""
    return unpark_answered(ws.paths, ws.events)


def still_asking(session_dir: Path, task_id: str, entry: LedgerEntry) -> bool:
    """The ledger's last entry parks the task and nobody has answered it yet (a retry after the
    answer starts with that entry still last)."""
    if not entry.verdict.parks:
        return False
    asked = last_question(session_dir, task_id)
    return not (asked is not None and asked.iter == entry.iter and asked.answer is not None)


def no_second_park(session_dir: Path, task_id: str, verdict: Verdict) -> Verdict:
    """A question already answered for this task is not asked again: it becomes a rejection that
    carries the answer, so the task cannot wait twice on one question."""
    if not verdict.parks:
        return verdict
    earlier = next((a for a in exchanges(session_dir, task_id)
                    if a.answer is not None and same_question(a.question, verdict.question)), None)
    if earlier is None:
        return verdict
    return Verdict(verdict="reject", category="asked_before", evaluator=verdict.evaluator, panel=verdict.panel,
                   concern=f"The {verdict.asked_by} asked again a question a person already answered: "
                           f"{earlier.question!r} -> {earlier.answer!r}",
                   next_step="Go on with the task using that answer (it is in the answers channel of the prompt).")


def end_state(plan: list[Task], stop_on_failure: bool) -> tuple[SessionState, str]:
    """Nothing is left to run: done; failed naming the failed tasks and the ones they block; or
    waiting when what is left waits only on parked tasks."""
    failed = [t.id for t in plan if t.status == TaskStatus.failed]
    parked = [t.id for t in plan if t.status == TaskStatus.parked]
    blocked = blocked_by(plan)
    if not failed and not blocked and not parked:
        return SessionState.done, ""
    reason = f"task{'s' if len(failed) > 1 else ''} {', '.join(failed)} failed" if failed else ""
    if parked:
        reason += ("; " if reason else "") + f"waiting for an answer: {', '.join(parked)}"
    if blocked:
        reason += ("; " if reason else "") + "blocked: " + ", ".join(
            f"{tid} ({', '.join(roots)} {'parked' if all(r in parked for r in roots) else 'failed'})"
            for tid, roots in blocked.items())
    left = sum(t.status == TaskStatus.pending and t.id not in blocked for t in plan)
    if stop_on_failure and left:
        reason += (f"; stopped at the first failure (stop_on_failure = true), {left} other "
                   f"task{'s' if left > 1 else ''} not run")
    return (SessionState.failed if failed else SessionState.waiting), reason
