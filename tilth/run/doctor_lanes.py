"""`tilth doctor`'s check of parallel-task lanes: a worktree per running task while a runner holds the
session, none once it ended (a killed run's are removed by `--fix`, as by the next run: `lane_cleanup.clear_lanes`)."""

from __future__ import annotations

from tilth.git.lane_worktrees import leftover_lanes, lanes_root
from tilth.run.doctor_findings import OK, PROBLEM, RUNNING, Diagnosis


def check_lanes(d: Diagnosis) -> None:
    record = d.session
    left = leftover_lanes(record.repo, d.paths.home, record.id)
    if not left:
        d.add(OK, "no parallel-task lane left behind")
    elif d.holder is not None:
        d.add(RUNNING, f"{len(left)} task(s) running in lanes of their own: {', '.join(left)}")
    else:
        d.add(PROBLEM, f"lanes a killed run left for {', '.join(left)} (under {lanes_root(d.paths.home, record.id)}): "
                       "--fix removes them and puts their tasks back to pending (the next run does too)",
              "reconcile", f"lanes removed: {', '.join(left)}")
