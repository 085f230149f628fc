"""A person answers the question a parked task of a session this machine has waits on (`answer_here`,
the local half of `answer_question`; a dispatched session's is `remote.Dispatched.answer`). The answer is
appended to `answers/<task>.jsonl`; with no runner holding the session the task goes back to pending at
once (`store/unparking.py`) and an ended session is queued for the supervisor again; a running session
takes the answer at its next task boundary (and the supervisor queues a session that ended `waiting`
meanwhile)."""

from __future__ import annotations

from pathlib import Path

from tilth.actions.acted import Acted, changeable, only_parked, record_act
from tilth.core.errors import BadInput

ENDED = {"waiting", "failed", "stopped", "done", "crashed"}


def checked_answer(text: str) -> str:
    from tilth.store.answers import MAX_ANSWER_CHARS

    text = text.strip()
    if not text:
        raise BadInput("the answer is empty; say what the agents should do")
    if len(text) > MAX_ANSWER_CHARS:
        raise BadInput(f"the answer is {len(text):,} characters; keep it under {MAX_ANSWER_CHARS:,} "
                       "(put long material in the repository and point to it)")
    return text


def answer_here(home: Path, session_id: str, text: str, *, by: str, task: str | None = None) -> Acted:
    """Answer the question task `task` of a session this machine has is parked on (None: its one parked task)."""
    from tilth.store.answers import last_question, record_answer
    from tilth.store.events import EventLog
    from tilth.store.lock import SessionLock
    from tilth.store.prd import TaskStatus
    from tilth.store.prd_peek import peek_plan
    from tilth.store.session import effective_state, load_session
    from tilth.store.unparking import unpark_answered

    paths, record = changeable(home, session_id)
    text = checked_answer(text)
    plan = {t.id: t for t in peek_plan(paths.prd)}
    parked = [t.id for t in plan.values() if t.status == TaskStatus.parked]
    task_id = task if task is not None else only_parked(paths.id, parked)
    chosen = plan.get(task_id)
    if chosen is None:
        raise BadInput(f"session {paths.id} has no task {task_id!r}; `tilth status {paths.id}` lists its tasks")
    asked = last_question(paths.dir, chosen.id)
    if chosen.status != TaskStatus.parked:
        hint = f"the parked ones: {', '.join(parked)}" if parked else "no task of it is parked"
        raise BadInput(f"task {chosen.id} of session {paths.id} is not waiting for an answer (it is "
                       f"{chosen.status}); {hint}")
    if asked is None:
        raise BadInput(f"task {chosen.id} is parked but its question was not recorded; run `tilth doctor {paths.id}`")
    again = asked.answer is not None
    answer_id = record_answer(paths.dir, chosen.id, asked.iter, text, by=by)
    events = [record_act(paths, "answer", by, chosen.id, note=answer_id)]
    lock = SessionLock(paths.lock, paths.id, role="cli")
    if not lock.try_acquire():
        return Acted(paths.id, f"answer recorded for {chosen.id}: session {paths.id} is running and takes it at "
                               "its next task boundary", tuple(events))
    try:
        if unpark_answered(paths, EventLog(paths.events), only=chosen.id):
            events.append("task_answered")
        state = effective_state(paths, load_session(paths))
    finally:
        lock.release()
    what = f"answer {'replaced' if again else 'recorded'} for {chosen.id} ({asked.question!r}); it is pending again"
    if state not in ENDED:
        return Acted(paths.id, what, tuple(events), (f"session {paths.id} is {state}; it runs {chosen.id} when it "
                                                     "runs again",))
    warnings: list[str] = []
    if record.keys:
        from tilth.actions.handing import supervisor_sees_keys
        from tilth.core.settings_load import load_settings

        warnings = supervisor_sees_keys(paths.home, load_settings(paths.home))
    from tilth.actions.handing import hand_over

    more = hand_over(paths, "answer", resume=False, by=by)
    return Acted(paths.id, what, (*events, "session_queued"), tuple(more), tuple(warnings))

