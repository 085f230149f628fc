"""`tilth status`: what each session is doing, read from its files (never from a process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilth.errors import BadInput
from tilth.home import SessionPaths, all_session_ids, session_paths
from tilth.lock import is_locked
from tilth.prd import TaskStatus, load_plan
from tilth.session import SessionRecord, SessionState, load_session


def effective_state(paths: SessionPaths, record: SessionRecord) -> str:
    """A session marked running whose lock nobody holds was killed: report it as crashed."""
    if record.state == SessionState.running and not is_locked(paths.lock):
        return SessionState.crashed.value
    return record.state.value


def session_summary(paths: SessionPaths) -> dict[str, Any]:
    record = load_session(paths)
    try:
        tasks = [{"id": t.id, "title": t.title, "status": t.status.value} for t in load_plan(paths.prd)]
    except BadInput:
        tasks = []
    return {
        "id": record.id,
        "state": effective_state(paths, record),
        "branch": record.branch,
        "worktree": record.worktree,
        "repo": record.repo,
        "backend": record.backend.name,
        "created": record.created,
        "tasks": tasks,
    }


def all_summaries(home: Path) -> list[dict[str, Any]]:
    return [session_summary(session_paths(i, home)) for i in all_session_ids(home)]


def _progress(summary: dict[str, Any]) -> str:
    done = sum(t["status"] == TaskStatus.done for t in summary["tasks"])
    return f"{done}/{len(summary['tasks'])}"


def render_table(summaries: list[dict[str, Any]]) -> str:
    if not summaries:
        return "no sessions; create one with `tilth start`"
    rows = [("SESSION", "STATE", "DONE", "BACKEND", "BRANCH")]
    rows += [(s["id"], s["state"], _progress(s), s["backend"], s["branch"]) for s in summaries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)


def render_one(summary: dict[str, Any]) -> str:
    lines = [
        f"session {summary['id']}: {summary['state']} ({_progress(summary)} done)",
        f"branch   {summary['branch']}",
        f"worktree {summary['worktree']}",
        f"backend  {summary['backend']}" + (" (test/demo backend, no model)" if summary["backend"] == "scripted" else ""),
    ]
    lines += [f"  {t['status']:<11} {t['id']}: {t['title']}" for t in summary["tasks"]]
    return "\n".join(lines)
