"""Placeholders live above the task commits: the session branch is always `<task commits...>` followed
by the FAILED/PARKED placeholders of the tasks not yet done, so every task commit stands on its own
and any placeholder can be taken off for its task's retry.

Around each task run in turn (`loop.run_task`), journalled step by step (`git/shelf.py` holds the git side):
1. `make_room`: the placeholders above the last task commit go on the shelf (`placeholders_shelved`:
   a ref each), then the branch, index and files go down to that commit (`placeholders_lowered`), so
   the task never sees another task's partial work;
2. a task being retried takes its own placeholder off the shelf: its work becomes the task's kept
   partial work (`refs/tilth/partial/<session>/<task>`, applied three-way by `lane_partials.restore_in_turn`;
   where it no longer applies the task starts clean and its ledger says so) (`placeholder_taken`);
3. the task ends as one commit on that task commit (`run/outcomes.py`), then `raise_shelf` puts each
   shelved placeholder back on top (`placeholder_reapplied`, a compare-and-swap commit each, then its
   shelf ref goes); a placeholder whose work conflicts with the new head goes back with the head's
   files and its work kept off the branch under its task's partial ref.
A kill -9 at any step is finished by the next run's `settle` (from `recovery.reconcile`): a shelf ref
whose task already has a placeholder on top is only removed, the others are re-applied; an interrupted
task's edits in the worktree are kept as its partial work first, so the branch and worktree end as a
run leaves them.
"""

from __future__ import annotations

import pygit2

from tilth.core.faults import checkpoint
from tilth.git.commits import TaskCommit, read_task_commit
from tilth.git.partial_refs import partial_ref
from tilth.git.shelf import above, kept_off, lower, reapply, shelve, shelved, show_head, stack, unshelve
from tilth.run import lane_partials
from tilth.run.outcomes import Workspace
from tilth.store.events import document
from tilth.store.ledger import read_entries
from tilth.store.prd import TaskStatus, load_current_plan

document(
    {
        "placeholders_shelved": ("a task is about to run: the placeholders above the last task commit were put on "
                                 "the shelf (a ref each, refs/tilth/shelf/<session>/<task>) before the branch goes "
                                 "down to that commit; data: shas, tasks, floor", "shas tasks floor"),
        "placeholders_lowered": ("the branch, index and files stand on the last task commit (floor) for the task "
                                 "about to run; the shelved placeholders go back on top after its commit; data: "
                                 "floor", "floor"),
        "placeholder_taken": ("a task being retried took its placeholder off the branch: its partial work is the "
                              "task's kept work (ref), applied to the task's starting point; data: sha (the "
                              "placeholder), partial (the commit holding the work), ref", "sha partial ref"),
        "placeholder_reapplied": ("a shelved placeholder went back on top of the branch after a task commit landed "
                                  "below it; data: was (its sha before), sha, onto, kept_off (the paths whose "
                                  "conflict kept its partial work off the branch, under ref; empty when it applied)",
                                  "was sha onto kept_off ref"),
        "placeholders_raised": ("every shelved placeholder is back on top of the branch and the files follow its "
                                "tip (a dispatched session pushes here); data: tip", "tip"),
    }
)


def make_room(ws: Workspace, task_id: str) -> None:
    """Before a task's first attempt: the branch down to its last task commit with the placeholders
    shelved, and the task's own placeholder (a retry) taken off as its partial work."""
    tip = str(ws.repo.head.target)
    if stack(ws.repo, tip, ws.record.base_commit)[1]:
        keep_edits(ws, task_id, "lowered")  # edits a run before this layout left on the placeholders
        if not ws.repo.status():
            shelve_above(ws, task_id)
    take(ws, task_id)


def shelve_above(ws: Workspace, task_id: str, keep_files: bool = False) -> None:
    """The placeholders above the last task commit on the shelf, then the branch down to that commit
    (index and files too, unless `keep_files`: the merge queue's merged tree is what it commits)."""
    tip = str(ws.repo.head.target)
    floor, placeholders = stack(ws.repo, tip, ws.record.base_commit)
    if not placeholders:
        return
    shelve(ws.repo, ws.record.id, placeholders)
    ws.events.emit("placeholders_shelved", task_id, shas=[p.sha for p in placeholders],
                   tasks=[p.task_id for p in placeholders], floor=floor)
    checkpoint("placeholders_shelved", task_id)
    lower(ws.repo, ws.record.branch, tip, floor, keep_files)
    ws.tip = floor
    ws.events.emit("placeholders_lowered", task_id, floor=floor)
    checkpoint("placeholders_lowered", task_id)


def floor_of(ws: Workspace) -> str:
    """The branch's last task commit (or its base): where a task starts and a task commit lands."""
    return stack(ws.repo, str(ws.repo.head.target), ws.record.base_commit)[0]


def take_off(ws: Workspace, task_id: str) -> None:
    """Parallel tasks, in the main thread between landings: a retried task's placeholder leaves the
    branch as the task's partial work (its lane starts from it); the others go back on top."""
    if not above(ws.repo, str(ws.repo.head.target), ws.record.base_commit, task_id):
        return
    shelve_above(ws, task_id)
    take(ws, task_id)
    raise_shelf(ws, task_id)


def take(ws: Workspace, task_id: str) -> None:
    """The task's shelved placeholder becomes its partial work (the work an emptied one stands for,
    else the placeholder itself), then leaves the shelf."""
    rid = ws.record.id
    sha = dict(shelved(ws.repo, rid)).get(task_id)
    if sha is None:
        return
    work = kept_off(ws.repo[sha].peel(pygit2.Commit)) or sha
    ref = partial_ref(rid, task_id)
    ws.repo.references.create(ref, ws.repo[work].id, force=True)
    ws.events.emit("placeholder_taken", task_id, sha=sha, partial=work, ref=ref)
    checkpoint("placeholder_taken", task_id)
    unshelve(ws.repo, rid, task_id)


def shelved_commits(ws: Workspace) -> list[TaskCommit]:
    """The shelved placeholders as task commits, oldest first (on top of the branch's, where they belong)."""
    found = (read_task_commit(ws.repo[sha].peel(pygit2.Commit)) for _, sha in shelved(ws.repo, ws.record.id))
    return [c for c in found if c is not None]


def raise_shelf(ws: Workspace, task_id: str | None = None) -> None:
    """Each shelved placeholder back on top of the branch, oldest first; then index and files at the
    new tip (a clean worktree: the task's ending committed it)."""
    rid, base, branch = ws.record.id, ws.record.base_commit, ws.record.branch
    waiting = shelved(ws.repo, rid)
    if not waiting:
        return
    for shelved_task, sha in waiting:
        tip = str(ws.repo.head.target)
        if not above(ws.repo, tip, base, shelved_task):
            ref = partial_ref(rid, shelved_task)
            new, conflicts = reapply(ws.repo, branch, sha, tip, ref)
            if conflicts:
                ws.repo.references.create(ref, ws.repo[kept_off(ws.repo[new].peel(pygit2.Commit)) or sha].id, force=True)
            ws.tip = new
            ws.events.emit("placeholder_reapplied", shelved_task, was=sha, sha=new, onto=tip, kept_off=conflicts,
                           ref=ref if conflicts else None)
            checkpoint("placeholder_reapplied", task_id or shelved_task)
        unshelve(ws.repo, rid, shelved_task)
    ws.tip = str(ws.repo.head.target)
    show_head(ws.repo)
    ws.events.emit("placeholders_raised", task_id, tip=ws.tip)


def keep_edits(ws: Workspace, owner: str, why: str) -> None:
    """An interrupted task's edits in the session worktree kept as its partial work (its next run
    applies them to where it starts), and the worktree back at the branch tip."""
    if ws.repo.status() and lane_partials.keep(ws, ws.repo, owner, str(ws.repo.head.target), why, ws.events):
        show_head(ws.repo)


def settle(ws: Workspace, why: str = "stopped") -> None:
    """At a run's end (and by `recovery.reconcile` after a kill): placeholders left on the shelf go back
    on top, after the edits of the task in progress are kept as its partial work. Files that lag behind
    a re-application a kill cut short follow the branch; any other edits that could not be kept stay,
    and so does the shelf."""
    if not (waiting := shelved(ws.repo, ws.record.id)):
        return
    owner = next((t.id for t in load_current_plan(ws.paths.prd) if t.status == TaskStatus.in_progress), None)
    if owner is not None:
        last = read_entries(ws.paths.ledger_dir, owner)[-1:]
        if last and (last[0].verdict.accepted or last[0].verdict.parks):
            return  # its worktree is a commit the next reconcile makes first (accepted, or parked), then settles
        keep_edits(ws, owner, why)
    tip, base = str(ws.repo.head.target), ws.record.base_commit
    if ws.repo.status() and (owner is not None or not any(above(ws.repo, tip, base, t) for t, _ in waiting)):
        return  # edits that could not be kept (no re-application a kill cut short): they stay where they are
    raise_shelf(ws)
