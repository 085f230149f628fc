"""The merge queue of parallel tasks: a lane's one commit lands on `session/<id>`, one lane at a
time, in the runner's main thread (the only writer of the session branch and of its worktree).

Landing a lane's outcome, journalled step by step (each event carries the lane):
1. `merge_started`: the lane's commit and the commit it goes onto: a task commit onto the branch's last
   task commit (below the placeholders, `run/stacking.py`), a placeholder onto the head;
2. its change is picked onto that commit as a three-way merge of trees (`git/lane_worktrees.pick_onto`: a
   cherry-pick, never a merge commit); a conflict ends here (`merge_conflict`), nothing touched;
3. the session worktree is set to the merged tree and the session's checks run on it, unless they ran on
   that very tree already (`merge_checks_stand`: the lane's own checks, when nothing landed since its start,
   or the checks of several lanes' changes merged together, `check_together`); a check that passed on the
   base commit and fails now ends here (`merge_checks_failed`): the worktree is put back, the branch never
   moved;
4. a task commit: the placeholders above go on the shelf and the branch down to its last task commit
   (the merged tree stays in the index); the ordinary task ending (`run/outcomes.py`: commit with its
   trailers, parent = the commit of step 1, so libgit2 refuses a branch that moved meanwhile; then
   prd.json, the progress line, the event); the shelved placeholders back on top; then `merge_landed`.
A kill before step 4's commit leaves the branch where it was: the next run's `lane_cleanup.clear_lanes`
puts the worktree back and the task to pending; after it, `recovery.reconcile` finds the commit.
A FAILED or PARKED placeholder lands the same way without the checks (it claims nothing); one
whose partial work conflicts lands with the head's files (`placeholder_emptied`).

A refused landing goes into the task's ledger for its next attempt (`note_refusal`: a `landing_refused`
line, never counted as an attempt); past the redo limit the task parks instead, its PARKED placeholder
asking a person how it should fit (`park`). The merge queue's checks hold one of the run's cores
(`run.cores`) like a lane's. The caller holds the run's `RunLock` around each landing (`store/events.py`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from tilth.core.faults import checkpoint
from tilth.git.lane_worktrees import pick_onto, pick_onto_tree, reset_to, show_tree, tree_of
from tilth.run import stacking
from tilth.run.outcomes import Outcome, Workspace, end_task
from tilth.run.step import Run
from tilth.store.events import EventLog, document
from tilth.store.ledger import LedgerEntry, Verdict, append_entry, append_refusal, read_entries
from tilth.store.prd import Task

document(
    {
        "merge_started": ("a lane's outcome began landing on the session branch; data: lane, commit (the lane's), "
                         "onto (the session head), started_from (the head the lane's worktree was made from), outcome",
                          "commit onto started_from outcome"),
        "merge_conflict": ("a lane's accepted change conflicts with what landed since it started; the branch did not "
                          "move and the task runs again on the new head; data: lane, paths, onto", "paths onto"),
        "merge_checks_failed": ("a lane's accepted change merged cleanly but the session's checks fail on the merged "
                               "tree; the branch did not move and the task runs again; data: lane, checks, onto", "checks onto"),
        "placeholder_emptied": ("a FAILED or PARKED placeholder's partial work conflicted with the session head; it "
                               "landed with the head's files; data: lane, paths", "paths"),
        "merge_landed": ("a lane's outcome is on the session branch; data: lane, sha, onto, outcome", "sha onto outcome"),
        "merge_checks_stand": ("a lane's accepted change lands without the checks running again: the merged tree is "
                              "one they passed on already; data: lane, tree, by (lane: its own checks, nothing landed "
                              "since its start; together: the checks of the lanes landing together, tasks)",
                               "tree by tasks"),
        "merge_checked_together": ("the accepted changes of several lanes ready at once were merged onto the session "
                                   "head and the checks run once on that tree; data: tasks, tree, passed (they land "
                                   "without running them again), failing (else: each lands on its own checks)",
                                    "tasks tree passed failing"),
    }
)


class LaneLog(EventLog):
    """A lane's view of the session journal: every event it emits carries `lane`, and goes through
    the session's one `EventLog` (serialized, with its listeners and roll-up)."""

    def __init__(self, shared: EventLog, lane: int):
        super().__init__(shared.path)
        self.shared, self.lane = shared, lane
        self.run_lock = shared.run_lock
        self.spent_usd = 0.0
        """What the lane's model calls cost (the report's cost of redos)."""
        self.rejected = 0
        """Verdicts that sent the lane's worker back to work (the scheduler stops waiting for it to land with another)."""

    def emit(self, type: str, task: str | None = None, iter: int | None = None, **data: Any) -> None:
        if type == "model_call" and isinstance(data.get("cost_usd"), (int, float)):
            self.spent_usd += data["cost_usd"]
        if type == "verdict" and data.get("verdict") == "reject":
            self.rejected += 1
        self.shared.emit(type, task, iter, **data, lane=self.lane)

    def read(self) -> list[dict[str, Any]]:
        return self.shared.read()


@dataclass(frozen=True)
class LaneResult:
    """What a lane hands the merge queue: how its task ended, the last ledger entry, its one commit."""

    outcome: Outcome
    entry: LedgerEntry
    commit: str
    started_from: str
    checked_tree: str | None = None
    """The tree the lane's last checks ran on (None: none ran)."""


@dataclass(frozen=True)
class Landing:
    sha: str | None
    """The commit on the session branch; None when it did not land."""
    refused: str = ""
    """`merge_conflict` or `merge_checks_failed` when it did not land."""
    what: tuple[str, ...] = ()
    """The conflicting paths, or the failing checks."""
    iteration: int = 0
    """The attempt whose change it was."""
    checks_s: float = 0.0
    """Time the merge queue's checks took in this landing."""


def land(run: Run, lane: int, task: Task, result: LaneResult, together: tuple[str, ...] = ()) -> Landing:
    """Land one lane's outcome on the session branch (`run`: the session's); `together`: the tasks whose
    changes, this one's among them, were checked merged together (`check_together`) and passed."""
    ws = run.ws
    log = LaneLog(ws.events, lane)
    entry = result.entry
    onto = stacking.floor_of(ws) if result.outcome == "done" else ws.tip  # a task commit goes below the placeholders
    log.emit("merge_started", task.id, entry.iter, commit=result.commit, onto=onto,
             started_from=result.started_from, outcome=result.outcome)
    tree, conflicts = pick_onto(ws.repo, result.commit, onto)
    if tree is None and result.outcome == "done":
        log.emit("merge_conflict", task.id, entry.iter, paths=conflicts, onto=onto)
        return Landing(None, "merge_conflict", tuple(conflicts), entry.iter)
    if tree is None:
        log.emit("placeholder_emptied", task.id, entry.iter, paths=conflicts)
        tree = tree_of(ws.repo, onto)
    show_tree(ws.repo, tree)
    checked = time.monotonic()
    if result.outcome == "done" and run.checks.commands and (str(tree) == result.checked_tree or together):
        log.emit("merge_checks_stand", task.id, entry.iter, tree=str(tree), by="together" if together else "lane",
                 **({"tasks": list(together)} if together else {}))
    elif result.outcome == "done" and (failing := failing_checks(run, task, entry.iter, log)):
        reset_to(ws.repo, ws.tip)
        log.emit("merge_checks_failed", task.id, entry.iter, checks=failing, onto=onto)
        return Landing(None, "merge_checks_failed", tuple(failing), entry.iter, time.monotonic() - checked)
    checks_s = time.monotonic() - checked
    checkpoint("merge_shown", task.id)
    if onto != ws.tip:
        stacking.shelve_above(replace(ws, events=log), task.id, keep_files=True)
        ws.tip = onto
    lane_ws = replace(ws, events=log)
    sha = end_task(lane_ws, task, result.outcome, entry, restage=False)
    ws.tip = lane_ws.tip
    stacking.raise_shelf(ws, task.id)
    log.emit("merge_landed", task.id, entry.iter, sha=sha, onto=onto, outcome=result.outcome)
    return Landing(sha, iteration=entry.iter, checks_s=checks_s)


def check_together(run: Run, ready: list[tuple[int, Task, LaneResult]]) -> tuple[str, ...]:
    """The accepted changes of the lanes `ready` at once (lane, task, result), merged in turn onto the branch's
    last task commit, checked once on the tree they make together: the tasks that then land without
    running the checks again (none when a check blocks: each lands on its own checks, and the one that
    breaks them is refused alone). A change that conflicts is left out (its landing finds the conflict)."""
    ws = run.ws
    floor = stacking.floor_of(ws)
    tree, tasks = tree_of(ws.repo, floor), list[str]()
    for _, task, result in ready:
        merged = pick_onto_tree(ws.repo, result.commit, tree)
        if merged is not None:
            tree, tasks = merged, [*tasks, task.id]
    if len(tasks) < 2:
        return ()
    first_lane, first_task, first = next(r for r in ready if r[1].id == tasks[0])
    log = LaneLog(ws.events, first_lane)
    show_tree(ws.repo, tree)
    try:
        failing = failing_checks(run, first_task, first.entry.iter, log)
    finally:
        reset_to(ws.repo, ws.tip)
    ws.events.emit("merge_checked_together", None, None, tasks=tasks, tree=str(tree), passed=not failing,
                   **({"failing": failing} if failing else {}))
    return () if failing else tuple(tasks)


def failing_checks(run: Run, task: Task, iteration: int, log: EventLog) -> list[str]:
    """The session's checks on the merged tree in the session worktree, holding one of the run's cores:
    the ones that block (a failure the base commit did not have), as `command (exit N)`."""
    if not run.checks.commands:
        return []
    with run.cores.held(task.id):
        checks = run.checks.run(log, task.id, iteration)
    verdict = run.checks.judged(Verdict(verdict="accept"), checks)
    if verdict.accepted:
        return []
    return [f"{c.command} (exit {c.exit_code})" for c in checks if not c.passed]


def note_refusal(ws: Workspace, task: Task, landing: Landing, lane: int, redo: int) -> int:
    """The refusal as a `landing_refused` ledger line (never an attempt: its iteration is the refused
    attempt's), so the task's next attempt sees what conflicted (or which check broke) in its context,
    and that it starts from a clean worktree on the new head; that iteration."""
    iteration = landing.iteration or len(read_entries(ws.paths.ledger_dir, task.id))
    listed = ", ".join(landing.what[:20])
    if landing.refused == "merge_conflict":
        concern = (f"Your accepted change could not land on the session branch: other tasks' work landed first and "
                   f"conflicts with it in {listed}.")
    else:
        concern = (f"Your accepted change merged onto the session branch, but then these checks failed: {listed}. "
                   "Another task's work landed first; the two together break them.")
    verdict = Verdict(verdict="reject", category=landing.refused, concern=concern,
                      next_step="Do the task again from the current session head: your worktree is a clean checkout "
                                "of it (the other tasks' work included, none of your earlier edits); keep their "
                                "changes and make yours fit with them.")
    append_refusal(ws.paths.ledger_dir, task.id,
                   LedgerEntry(iter=iteration, diff_summary="(did not land)", case=None, verdict=verdict))
    LaneLog(ws.events, lane).emit("verdict", task.id, iteration, verdict="reject", category=landing.refused,
                                  concern=concern, redo=redo)
    return iteration


def park(ws: Workspace, lane: int, task: Task, landing: Landing, refusals: int) -> tuple[int, str]:
    """The task's change was refused `refusals` times: its PARKED placeholder on the session branch, with
    a question for a person. The attempt's number and the placeholder's sha."""
    iteration = len(read_entries(ws.paths.ledger_dir, task.id)) + 1
    question = (f"{task.id}'s change was accepted {refusals} times but could not land on the session "
                f"branch ({landing.refused}: {', '.join(landing.what[:10])}). How should it fit with the "
                "other tasks' work?")
    entry = LedgerEntry(iter=iteration, diff_summary="(did not land)", case=None,
                        verdict=Verdict(verdict="needs_human", category=landing.refused, question=question,
                                        concern=question))
    append_entry(ws.paths.ledger_dir, task.id, entry)
    sha = end_task(replace(ws, events=LaneLog(ws.events, lane)), task, "parked", entry)
    ws.tip = sha
    return iteration, sha
