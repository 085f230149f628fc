"""A killed parallel run's lanes, cleared before the next run reconciles (and by `tilth doctor --fix`),
their tasks' work kept for their next lanes."""

from __future__ import annotations

from tilth.git.lane_worktrees import drop_lane, leftover_lanes, remove_lanes_root, reset_to
from tilth.run.lane_partials import keep_left
from tilth.run.lane_work import remove_home
from tilth.run.outcomes import Workspace
from tilth.store.events import document
from tilth.store.lane_board import read_board, write_board
from tilth.store.prd import TaskStatus, load_current_plan, set_status

document(
    {
        "lanes_cleared": ("at run start, lanes a killed run left were removed and their tasks put back to pending; the "
                         "session worktree was put back to the branch tip (a merge the kill cut short); data: tasks", "tasks"),
    }
)


def clear_lanes(ws: Workspace) -> None:
    """Before reconcile: lanes a killed run left are removed (an in-progress task's work in its
    lane kept first: `lane_partials.keep_left`), their in-progress tasks go back to pending, and
    the session worktree goes back to the branch tip (while lanes exist only the merge queue writes
    it, so anything there is a merge the kill cut short). The lanes are what this machine has left,
    and what `lanes.json` says ran (a dispatched session taken over on another machine has no lane
    of its own: its tasks in lanes must not look interrupted here); only ids of the plan's tasks
    are taken from the file."""
    paths, record = ws.paths, ws.record
    plan = {t.id: t.status for t in load_current_plan(paths.prd)}
    listed = {r.get("task") for r in read_board(paths.dir)["running"]} & set(plan)
    left = sorted(set(leftover_lanes(record.repo, paths.home, record.id)) | {str(t) for t in listed})
    for home in paths.lane_homes():
        remove_home(home)
    if not left:
        return
    tip = str(ws.repo.references[f"refs/heads/{record.branch}"].target)
    reset_to(ws.repo, tip)
    for task_id in left:
        if plan.get(task_id) == TaskStatus.in_progress:  # its lane's work, for the task's next lane
            keep_left(ws, task_id, tip)
        drop_lane(record.repo, paths.home, record.id, task_id)
    remove_lanes_root(paths.home, record.id)
    for task_id in left:
        if plan.get(task_id) == TaskStatus.in_progress:
            set_status(paths.prd, task_id, TaskStatus.pending)
    write_board(paths.dir, [])
    ws.events.emit("lanes_cleared", tasks=left)
