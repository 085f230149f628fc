"""What parallel tasks gained and cost, as a person reads it (the end report's `Parallel:` line,
`tilth status`): the session's wall time (every run's, the baseline and the final review included)
against an estimate of its time one task at a time (the lanes' wall time replaced by the landed
tasks' own time in their lanes: `parallel_summary`'s `alone_s`, an estimate, and said to be one),
the conflicts and redos counted from the journal (a killed run's too), the redos' time and cost from
`lanes.json`, and the lanes running now."""

from __future__ import annotations

from typing import Any

from tilth.store.home import SessionPaths
from tilth.store.lane_board import read_board, totals
from tilth.store.rollup import load_rollup
from tilth.store.rollup_fold import Rollup
from tilth.views.figures import money

ESTIMATED_FROM = ("estimated from each landed task's own time in its lane, without its waits for a core or for the "
                  "merge queue, its checks counted no longer than the same checks alone on the base commit, without "
                  "the merge queue's checks and the redos")


def figures(paths: SessionPaths, rollup: Rollup | None = None) -> dict[str, Any]:
    """`running` (the lanes now, as the runner last wrote them) and `totals` (None when no lane ever started):
    the ended runs' figures summed, `session_s` (the session's running time) and `alone_s` (the estimate
    one task at a time; None when a run's figures lack it or no run's lanes ended), conflicts and redos
    from the journal."""
    board = read_board(paths.dir)
    rolled = rollup if rollup is not None else load_rollup(paths.events)
    summed = totals(board["runs"])
    if summed is None and not rolled.lanes.started:
        return {"running": board["running"], "totals": None}
    t: dict[str, Any] = dict(summed or {"lanes": 0, "wall_s": 0.0, "task_s": 0.0, "redo_s": 0.0, "redo_usd": 0.0})
    t["conflicts"] = max(float(rolled.lanes.conflicts), float(t.get("conflicts") or 0))
    t["redos"] = max(float(rolled.lanes.redos), float(t.get("redos") or 0))
    session_s = rolled.clock.seconds()
    t["session_s"] = round(session_s, 3) if session_s is not None else None
    ended = board["runs"]
    t["alone_s"] = None if not ended or session_s is None or any("alone_s" not in r for r in ended) else \
        round(session_s - float(t["wall_s"]) + sum(float(r["alone_s"] or 0) for r in ended), 3)
    return {"running": board["running"], "totals": t}


def speedup_text(t: dict[str, Any]) -> str:
    session_s, alone_s = t.get("session_s"), t.get("alone_s")
    if session_s and alone_s:
        gain = (f"the session took {session_s:.1f} s of wall time against an estimated {alone_s:.1f} s one task at "
                f"a time ({session_s / alone_s:.2f}x the time; {ESTIMATED_FROM})")
    else:
        gain = f"{t['wall_s']:.1f} s of wall time in lanes (no estimate of the time one task at a time)"
    return (f"up to {int(t['lanes'])} lanes; {gain}; {int(t['conflicts'])} conflicts, {int(t['redos'])} redos "
            f"({t['redo_s']:.1f} s and {money(t.get('redo_usd', 0.0), False)} not landed)")


def running_text(running: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r.get('lane')}: {r.get('task')}" for r in running)


def parallel_lines(paths: SessionPaths) -> list[str]:
    """The report's line when any run of the session had lanes, else none."""
    t = figures(paths)["totals"]
    return [f"Parallel:   {speedup_text(t)}"] if t else []
