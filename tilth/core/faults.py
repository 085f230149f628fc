"""Named points in the write order where tests freeze a real run to kill -9 it.

Set TILTH_TEST_PAUSE_AT=<point> (or <point>@<task id>; <point>@<session id> for the creation
points) together with TILTH_TEST_FAULTS=1, the test-only switch the test helpers set and production
code never does (a stray TILTH_TEST_PAUSE_AT alone is ignored): on reaching it the process prints
`tilth: paused at <point> pid=<pid>` to stderr and waits for a signal: SIGUSR1 continues the run,
SIGTERM/SIGINT continue it to the next safe point where it stops (so `tilth stop` and Ctrl-C still
work), SIGKILL is what the crash tests send. Unset (always, outside tests; the supervisor never
passes TILTH_TEST_PAUSE_AT to a session) a checkpoint costs one dict lookup.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

POINTS = {
    "pr_rebase_push": "tilth follow rebased the session branch and checked it; the push with its lease is not made",
    "worker": "the worker has edited the worktree but not returned its case",
    "before_commit": "an accept verdict is in the ledger; the task commit is not made",
    "after_commit": "the task commit exists; prd.json still says in_progress",
    "after_status": "prd.json says done; the progress line is not written",
    "before_failed_commit": "the last attempt was rejected; the FAILED placeholder is not made",
    "after_failed_commit": "the FAILED placeholder exists; prd.json still says in_progress",
    "after_failed_status": "prd.json says failed; the progress line is not written",
    "before_parked_commit": "a needs_human entry is in the ledger and its question in answers/; no PARKED placeholder",
    "after_parked_commit": "the PARKED placeholder exists; prd.json still says in_progress",
    "after_parked_status": "prd.json says parked; the progress line is not written",
    "placeholders_shelved": "a task is about to run: the placeholders above the last task commit have shelf refs; "
                            "the branch has not moved",
    "placeholders_lowered": "the branch, index and files stand on the last task commit; the task has not begun",
    "placeholder_taken": "a retried task's placeholder is its partial work's ref; its shelf ref is still there",
    "placeholder_reapplied": "a shelved placeholder is back on top of the branch; its shelf ref is still there",
    "lane_committed": "parallel tasks: a lane's one commit is on its lane branch; nothing of it has landed",
    "merge_shown": "parallel tasks: the merged tree is in the session worktree and its checks passed; the session "
                   "branch has not moved",
    "before_push": "a dispatched run checked its lease and sealed its snapshot; the push has not started",
    "after_worktree": "`tilth start`: branch and worktree exist; the staging dir holds only the creation record",
    "before_session_dir": "`tilth start`: the staging dir is complete (session.json too) but not renamed into place",
    "pr_task_added": "`tilth follow`: a CI failure's follow-up task is in the plan; pr.json does not count it yet",
    "pr_review_task_added": "`tilth follow`: a review batch's follow-up task is in the plan; pr.json does not "
                            "record it yet",
}


PAUSE_ENV = "TILTH_TEST_PAUSE_AT"
SWITCH_ENV = "TILTH_TEST_FAULTS"


def pause_point() -> str | None:
    """The pause point asked for, honoured only with the test-only switch on as well."""
    if os.environ.get(SWITCH_ENV) != "1":
        return None
    return os.environ.get(PAUSE_ENV) or None


def checkpoint(point: str, task_id: str) -> None:
    wanted = pause_point()
    if wanted is None or wanted not in (point, f"{point}@{task_id}"):
        return
    assert point in POINTS, point
    signals = {signal.SIGUSR1, signal.SIGTERM, signal.SIGINT}
    if threading.current_thread() is threading.main_thread():
        received = _wait_in_main_thread(point, signals)
    else:
        received = _wait_in_this_thread(point, signals)
    if received != signal.SIGUSR1:
        signal.raise_signal(received)  # to the process's own handler: a stop at the next safe point


def _wait_in_main_thread(point: str, signals: set[signal.Signals]) -> int:
    """Handlers, not a blocked mask: the test's signal is process-directed, and another thread of the
    process (a lease renewer) that does not block it would otherwise take it and die of it."""
    got: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: got.append(signum)) for s in signals}
    try:
        print(f"tilth: paused at {point} pid={os.getpid()}", file=sys.stderr, flush=True)
        while not got:
            time.sleep(0.02)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return got[0]


def _wait_in_this_thread(point: str, signals: set[signal.Signals]) -> int:
    # Blocked before the announcement, so a signal sent the moment it is read is not lost.
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        print(f"tilth: paused at {point} pid={os.getpid()}", file=sys.stderr, flush=True)
        received = signal.sigwait(signals)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
    return received
