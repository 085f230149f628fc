"""The end-of-session report: what a run achieved, what it cost, and the exact next command.
Written to `sessions/<id>/report.md` at the end of every run and printed."""

from __future__ import annotations

from datetime import datetime

from tilth.store.home import SessionPaths
from tilth.store.jsonio import write_atomic
from tilth.views.tally import duration, money, resume_command, tally, token_count

REPORT = "report.md"


def build_report(paths: SessionPaths, now: datetime | None = None) -> str:
    t = tally(paths, now)
    head = t.head_commit[:7] if t.head_commit else "(worktree gone)"
    unpriced = f" ({t.unpriced_calls} model calls without a price)" if t.unpriced_calls else ""
    lines = [
        f"Session {t.id}: {t.state}",
        f"Tasks:      {t.done}/{len(t.tasks)} done, {t.failed} failed",
    ]
    lines += [f"  FAILED {task.id} {task.title}: {task.reason}" for task in t.tasks if task.outcome == "failed"]
    lines += [
        f"Iterations: {t.iterations}",
        f"Tokens:     {token_count(t.tokens, t.unknown_usage_calls)}",
        f"Cost:       {money(t.cost_usd, t.cost_is_lower_bound)}{unpriced}",
        f"Wall time:  {duration(t.wall_seconds)}",
        f"Git: {t.base_commit[:7]} -> {head} on {t.branch}",
        f"Next: tilth pr {t.id}" if t.all_done else f"Next: {resume_command(t.id)}",
    ]
    return "\n".join(lines) + "\n"


def record_report(paths: SessionPaths) -> str:
    text = build_report(paths)
    write_atomic(paths.dir / REPORT, text.encode())
    return text
