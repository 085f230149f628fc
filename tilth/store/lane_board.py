"""`sessions/<id>/lanes.json`: the lanes of parallel tasks as `tilth status` shows them: the ones
running now (lane, task, the head it started from, since when) and each ended run's figures (the
data of its `parallel_summary` event). Written atomically by the runner's scheduler at every lane
start and end; read without pydantic (a file that is not plainly this shape reads as empty: it is
a view, the journal has the facts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tilth.store.jsonio import parse_object, write_atomic

BOARD = "lanes.json"


def board_path(session_dir: Path) -> Path:
    return session_dir / BOARD


def read_board(session_dir: Path) -> dict[str, list[dict[str, Any]]]:
    try:
        raw = parse_object(board_path(session_dir).read_bytes())
    except (OSError, ValueError):
        raw = None
    raw = raw or {}
    running, runs = raw.get("running"), raw.get("runs")
    return {"running": [r for r in running if isinstance(r, dict)] if isinstance(running, list) else [],
            "runs": [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []}


def write_board(session_dir: Path, running: list[dict[str, Any]], runs: list[dict[str, Any]] | None = None) -> None:
    """The lanes running now; `runs` (the ended runs' figures) kept as they are unless given."""
    kept = read_board(session_dir)["runs"] if runs is None else runs
    write_atomic(board_path(session_dir), orjson.dumps({"running": running, "runs": kept}))


def totals(runs: list[dict[str, Any]]) -> dict[str, float] | None:
    """The ended runs' figures summed (`lanes`: the most at once), or None without any."""
    if not runs:
        return None
    def total(key: str) -> float:
        return round(sum(float(r.get(key) or 0) for r in runs), 3)

    return {"lanes": max(int(r.get("lanes") or 0) for r in runs), "wall_s": total("wall_s"),
            "task_s": total("task_s"), "conflicts": total("conflicts"), "redos": total("redos"),
            "redo_s": total("redo_s"), "redo_usd": round(sum(float(r.get("redo_usd") or 0) for r in runs), 6)}
