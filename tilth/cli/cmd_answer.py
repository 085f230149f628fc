"""`tilth answer <session> <task> "text"|--file F`: a person answers the question a parked task
waits on. The answer is appended to `answers/<task>.jsonl`; with no runner holding the session
the task goes back to pending at once and the session is queued for the supervisor again; a
running session takes the answer at its next task boundary (and the supervisor queues a session
that ended `waiting` meanwhile)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tilth.cli.pick import session_command
from tilth.core.errors import BadInput

ENDED = {"waiting", "failed", "stopped", "done", "crashed"}


def answer_text(args: argparse.Namespace) -> str:
    from tilth.store.answers import MAX_ANSWER_CHARS

    if (args.text is None) == (args.file is None):
        raise BadInput("give the answer as text or with --file PATH (one of them), e.g. "
                       "tilth answer s1 T-002 \"keep the v2 API\"")
    if args.file is not None:
        try:
            text = Path(args.file).read_text(errors="replace")
        except OSError as exc:
            raise BadInput(f"cannot read the answer file {args.file}: {exc.strerror}") from None
    else:
        text = args.text
    text = text.strip()
    if not text:
        raise BadInput("the answer is empty; say what the agents should do")
    if len(text) > MAX_ANSWER_CHARS:
        raise BadInput(f"the answer is {len(text):,} characters; keep it under {MAX_ANSWER_CHARS:,} "
                       "(put long material in the repository and point to it)")
    return text


def cmd_answer(args: argparse.Namespace) -> int:
    from tilth.cli import cmd_daemon
    from tilth.cli.pick import pick_session
    from tilth.store.answers import last_question, record_answer
    from tilth.store.events import EventLog
    from tilth.store.lock import SessionLock
    from tilth.store.prd import TaskStatus, set_statuses
    from tilth.store.prd_peek import peek_plan
    from tilth.store.session import effective_state, load_session, refuse_archived

    from tilth.cli import cmd_dispatch

    if found := cmd_dispatch.remote_state(args.id):
        return cmd_dispatch.answer(found, args.id, args.task, answer_text(args))
    paths, record = pick_session(args.id)
    refuse_archived(record)
    text = answer_text(args)
    plan = {t.id: t for t in peek_plan(paths.prd)}
    task = plan.get(args.task)
    if task is None:
        raise BadInput(f"session {paths.id} has no task {args.task!r}; `tilth status {paths.id}` lists its tasks")
    asked = last_question(paths.dir, task.id)
    if task.status != TaskStatus.parked:
        parked = [t.id for t in plan.values() if t.status == TaskStatus.parked]
        hint = f"the parked ones: {', '.join(parked)}" if parked else "no task of it is parked"
        raise BadInput(f"task {task.id} of session {paths.id} is not waiting for an answer (it is {task.status}); "
                       f"{hint}")
    if asked is None:
        raise BadInput(f"task {task.id} is parked but its question was not recorded; run `tilth doctor {paths.id}`")
    again = asked.answer is not None
    record_answer(paths.dir, task.id, asked.iter, text)
    lock = SessionLock(paths.lock, paths.id, role="cli")
    if not lock.try_acquire():
        print(f"answer recorded for {task.id}: session {paths.id} is running and takes it at its next task boundary")
        return 0
    try:
        if any(t.id == task.id and t.status == TaskStatus.parked for t in peek_plan(paths.prd)):
            set_statuses(paths.prd, {task.id: TaskStatus.pending})
            EventLog(paths.events).emit("task_answered", task.id, asked.iter, question=asked.question, by="answer")
        state = effective_state(paths, load_session(paths))
    finally:
        lock.release()
    print(f"answer {'replaced' if again else 'recorded'} for {task.id} ({asked.question!r}); it is pending again")
    if state not in ENDED:
        print(f"session {paths.id} is {state}; it runs {task.id} when it runs again")
        return 0
    if record.keys:
        from tilth.core.config import load_settings

        cmd_daemon.supervisor_sees_keys(paths.home, load_settings(paths.home))
    return cmd_daemon.hand_over(paths, "answer", resume=False)


def register(sub: argparse._SubParsersAction) -> None:
    answer = session_command(sub, "answer", "answer the question a parked task waits on; the task goes back to "
                                            "pending and the session is queued again", cmd_answer, "the session")
    answer.add_argument("task", help="the parked task (`tilth status <id>` lists open questions)")
    answer.add_argument("text", nargs="?", help="the answer")
    answer.add_argument("--file", metavar="PATH", help="read the answer from this file")
