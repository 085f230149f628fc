"""What parallel tasks gained and cost, as a person reads it (the end report's `Parallel:` line,
`tilth status`): the ended runs' figures from `lanes.json` summed (the lanes' wall time against the
sum of their tasks' times, conflicts, redos and their time), and the lanes running now."""

from __future__ import annotations

from typing import Any

from tilth.store.lane_board import read_board, totals
from tilth.store.home import SessionPaths
from tilth.views.figures import money


def figures(paths: SessionPaths) -> dict[str, Any]:
    """`running` (the lanes now, as the runner last wrote them) and `totals` (None before any ended run)."""
    board = read_board(paths.dir)
    return {"running": board["running"], "totals": totals(board["runs"])}


def speedup_text(t: dict[str, float]) -> str:
    speed = f" ({t['task_s'] / t['wall_s']:.1f}x)" if t["wall_s"] > 0 else ""
    return (f"up to {int(t['lanes'])} lanes; {t['wall_s']:.1f} s of wall time for {t['task_s']:.1f} s of task time"
            f"{speed}; {int(t['conflicts'])} conflicts, {int(t['redos'])} redos ({t['redo_s']:.1f} s and "
            f"{money(t.get('redo_usd', 0.0), False)} not landed)")


def running_text(running: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r.get('lane')}: {r.get('task')}" for r in running)


def parallel_lines(paths: SessionPaths) -> list[str]:
    """The report's line when any run of the session had lanes, else none."""
    t = figures(paths)["totals"]
    return [f"Parallel:   {speedup_text(t)}"] if t else []
