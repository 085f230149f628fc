"""Named points in the write order where tests freeze a real run to kill -9 it.

Set TILTH_TEST_PAUSE_AT=<point> (or <point>@<task id>): on reaching it the process prints
`tilth: paused at <point> pid=<pid>` to stderr and waits for a signal forever. Unset
(always, outside tests) a checkpoint costs one dict lookup.
"""

from __future__ import annotations

import os
import signal
import sys

POINTS = {
    "worker": "the worker has edited the worktree but not returned its case",
    "before_commit": "an accept verdict is in the ledger; the task commit is not made",
    "after_commit": "the task commit exists; prd.json still says in_progress",
    "after_status": "prd.json says done; the progress line is not written",
    "before_failed_commit": "the last attempt was rejected; the FAILED placeholder is not made",
    "after_failed_commit": "the FAILED placeholder exists; prd.json still says in_progress",
}


def checkpoint(point: str, task_id: str) -> None:
    wanted = os.environ.get("TILTH_TEST_PAUSE_AT")
    if wanted is None or wanted not in (point, f"{point}@{task_id}"):
        return
    assert point in POINTS, point
    print(f"tilth: paused at {point} pid={os.getpid()}", file=sys.stderr, flush=True)
    while True:
        signal.pause()
