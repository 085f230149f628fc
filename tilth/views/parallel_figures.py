"""What parallel tasks gained and cost, for the end report: the runs' `parallel_summary` events
summed (wall time of the lanes against the sum of their tasks' times, conflicts, redos and their time)."""

from __future__ import annotations

from tilth.store.events import read_events
from tilth.store.home import SessionPaths


def parallel_lines(paths: SessionPaths) -> list[str]:
    """One line when any run of the session had lanes, else none."""
    runs = [e["data"] for e in read_events(paths.events) if e["type"] == "parallel_summary"]
    if not runs:
        return []
    def total(key: str) -> float:
        return sum(float(r.get(key) or 0) for r in runs)

    wall, task = total("wall_s"), total("task_s")
    lanes = max(int(r.get("lanes") or 0) for r in runs)
    speed = f" ({task / wall:.1f}x)" if wall > 0 else ""
    return [f"Parallel:   up to {lanes} lanes; {wall:.1f} s of wall time for {task:.1f} s of task time{speed}; "
            f"{int(total('conflicts'))} conflicts, {int(total('redos'))} redos ({total('redo_s'):.1f} s not landed)"]
