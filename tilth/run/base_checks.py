"""The baseline: before the first task, the session's checks and every task's verify commands run
once on the base commit (confined like every check), and the results, with the failing tests each
names, are recorded in `baseline.json` once; a resumed session reads the same record. Recorded only
while the worktree is the base commit, clean: a session whose branch already moved on (started before baselines existed)
has none, and every failing check blocks as before."""

from __future__ import annotations

import time

import pygit2

from tilth.agents.check_bundle import CheckBundle
from tilth.store.baseline import Baseline, BaselineCheck, load_baseline, save_baseline
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths
from tilth.store.prd import TaskStatus, load_current_plan
from tilth.store.session import SessionRecord

document({"baseline_recorded": ("the checks and verify commands ran once on the base commit (baseline.json); "
                                "data: commit, checks (command, exit_code, failing_ids, run_id), verifies (task, "
                                "criterion, command, exit_code, run_id, failing_ids when it names failing tests)",
                                "commit checks verifies"),
          "baseline_skipped": ("no baseline could be recorded (the branch already moved past the base commit, or "
                               "the worktree has changes); every failing check blocks; data: reason", "reason")})


def ensure_baseline(paths: SessionPaths, record: SessionRecord, repo: pygit2.Repository, events: EventLog,
                    checks: CheckBundle) -> Baseline | None:
    """The session's baseline: the recorded one, else recorded now when the worktree is the base commit."""
    if (found := load_baseline(paths.dir)) is not None:
        return found
    plan = [t for t in load_current_plan(paths.prd) if t.status != TaskStatus.done]
    if not checks.commands and not any(c.verify for t in plan for c in t.criteria):
        return None
    head = str(repo.head.target)
    if head != record.base_commit:
        events.emit("baseline_skipped", reason=f"the branch is at {head[:7]}, past the base commit "
                                               f"{record.base_commit[:7]}")
        return None
    if any(flags != pygit2.enums.FileStatus.IGNORED for flags in repo.status().values()):
        events.emit("baseline_skipped", reason="the worktree has uncommitted changes")
        return None
    began = time.monotonic()
    ran = checks.run(events, None, 0)
    checks_s = round(time.monotonic() - began, 3)
    verifies = {t.id: ran_here for t in plan if (ran_here := checks.verify(t, events, None, emit=False))}
    baseline = Baseline(commit=record.base_commit, verifies=verifies, checks_s=checks_s,
                        checks=[BaselineCheck(command=c.command, exit_code=c.exit_code, failing_ids=c.failing_ids,
                                                  run_id=c.run_id) for c in ran])
    save_baseline(paths.dir, baseline)
    events.emit("baseline_recorded", commit=baseline.commit,
                checks=[c.model_dump(mode="json") for c in baseline.checks],
                verifies=[{"task": task_id, "criterion": v.criterion, "command": v.command, "exit_code": v.exit_code,
                           "run_id": v.run_id, **({"failing_ids": v.failing_ids} if v.failing_ids else {})}
                          for task_id, results in verifies.items() for v in results])
    return baseline
