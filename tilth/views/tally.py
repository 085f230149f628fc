"""What a session did, per task and in total: the facts behind the PR description and the
end-of-session report.

Outcomes come from the branch first (git is the source of truth), then prd.json;
iterations and the last verdict from the ledger; tokens and cost from `model_call` events,
read by `accounting.Meter` (calls with unknown usage make both totals lower bounds, shown as
`1,234+ (3 calls with unknown usage)` and `≥ $0.0123`); a failure's reason from the FAILED
placeholder's `Tilth-Reason`, else its progress line.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pygit2

from tilth.agents.accounting import Meter
from tilth.core.clock import utc_now
from tilth.core.errors import BadInput
from tilth.git.commits import TaskCommit, branch_task_commits
from tilth.git.gitops import open_worktree
from tilth.store.events import EventLog
from tilth.store.home import SessionPaths
from tilth.store.ledger import read_entries
from tilth.store.prd import load_plan
from tilth.store.progress import read_progress
from tilth.store.session import load_session


@dataclass(frozen=True)
class TaskTally:
    id: str
    title: str
    outcome: str
    """done | failed | pending | in_progress"""
    iterations: int
    last_verdict: str
    """`category: concern` of the evaluator's last verdict, `accept`, or "" if never evaluated."""
    tokens: int
    cost_usd: float
    reason: str
    """Why it failed; "" unless failed."""


@dataclass(frozen=True)
class SessionTally:
    id: str
    state: str
    branch: str
    base_commit: str
    head_commit: str | None
    """Tip of the branch read through the worktree; None when the worktree is gone."""
    tasks: list[TaskTally]
    tokens: int
    cost_usd: float
    unpriced_calls: int
    """Model calls with known usage whose cost was unknown (no provider figure, no price-table entry)."""
    wall_seconds: float | None
    unknown_usage_calls: int = 0
    """Model calls whose token counts were missing or unusable: `tokens` is a lower bound."""
    cost_is_lower_bound: bool = False
    """Some of those calls had no cost from the provider or the price table either."""

    @property
    def done(self) -> int:
        return sum(t.outcome == "done" for t in self.tasks)

    @property
    def failed(self) -> int:
        return sum(t.outcome == "failed" for t in self.tasks)

    @property
    def iterations(self) -> int:
        return sum(t.iterations for t in self.tasks)

    @property
    def all_done(self) -> bool:
        return self.done == len(self.tasks)


def _parse_ts(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def wall_seconds(events: list[dict[str, Any]], now: datetime) -> float | None:
    """First `session_started` to the last `session_end`, or to now while a run is unfinished."""
    starts = [_parse_ts(e["ts"]) for e in events if e.get("type") == "session_started"]
    if not starts:
        return None
    ends = [_parse_ts(e["ts"]) for e in events if e.get("type") == "session_end"]
    end = ends[-1] if ends and ends[-1] >= starts[-1] else now
    return max(0.0, (end - starts[0]).total_seconds())


def _branch_commits(worktree: str, base: str) -> tuple[str | None, dict[str, TaskCommit]]:
    try:
        repo = open_worktree(Path(worktree))
        commits = branch_task_commits(repo, base)
        return str(repo.head.target), {c.task_id: c for c in commits}
    except (BadInput, pygit2.GitError):
        return None, {}


def _failure_reasons(paths: SessionPaths) -> dict[str, str]:
    return {line.task: line.outcome.removeprefix("failed:") for line in read_progress(paths.progress)
            if line.outcome.startswith("failed:")}


def _verdict_text(paths: SessionPaths, task_id: str) -> tuple[int, str]:
    entries = read_entries(paths.ledger_dir, task_id)
    if not entries:
        return 0, ""
    v = entries[-1].verdict
    head = v.category or v.verdict
    return len(entries), (f"{head}: {' '.join(v.concern.split())}" if v.concern.strip() else head)


def tally(paths: SessionPaths, now: datetime | None = None) -> SessionTally:
    record = load_session(paths)
    events = EventLog(paths.events).read()
    head, commits = _branch_commits(record.worktree, record.base_commit)
    try:
        plan = [(t.id, t.title, t.status.value) for t in load_plan(paths.prd)]
    except BadInput:
        plan = []
    known = {tid for tid, _, _ in plan}
    plan += [(c.task_id, c.title, "") for c in commits.values() if c.task_id not in known]

    calls = [e for e in events if e.get("type") == "model_call"]
    reasons = _failure_reasons(paths)
    tasks = []
    for task_id, title, status in plan:
        commit = commits.get(task_id)
        outcome = ("failed" if commit.failed else "done") if commit else status
        iterations, verdict = _verdict_text(paths, task_id)
        if commit:
            iterations = max(iterations, commit.iterations)
        mine = Meter.from_events([e for e in calls if e.get("task") == task_id])
        reason = ""
        if outcome == "failed":
            reason = (commit.reason if commit else "") or reasons.get(task_id) or "(no reason recorded)"
        tasks.append(TaskTally(
            id=task_id, title=title, outcome=outcome, iterations=iterations, last_verdict=verdict,
            tokens=mine.tokens, cost_usd=mine.cost_usd, reason=reason,
        ))
    total = Meter.from_events(calls)
    return SessionTally(
        id=record.id, state=record.state.value, branch=record.branch, base_commit=record.base_commit,
        head_commit=head, tasks=tasks, tokens=total.tokens, cost_usd=total.cost_usd,
        unpriced_calls=total.unpriced_calls, wall_seconds=wall_seconds(events, now or utc_now()),
        unknown_usage_calls=total.unknown_usage_calls, cost_is_lower_bound=total.cost_is_lower_bound,
    )


def money(usd: float, lower_bound: bool = False, places: int = 4) -> str:
    """`$0.0123`, or `≥ $0.0123` when some calls' cost could not be known."""
    return f"{'≥ ' if lower_bound else ''}${usd:.{places}f}"


def token_count(tokens: int, unknown_usage_calls: int, unit: str = "") -> str:
    """`1,234`, or `1,234+ (3 calls with unknown usage)` when some calls' counts were missing or unusable."""
    if not unknown_usage_calls:
        return f"{tokens:,}{unit}"
    calls = "call" if unknown_usage_calls == 1 else "calls"
    return f"{tokens:,}+{unit} ({unknown_usage_calls} {calls} with unknown usage)"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "(never ran)"
    s = int(round(seconds))
    h, m, s = s // 3600, s % 3600 // 60, s % 60
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s" if m else f"{s}s"


def resume_command(session_id: str) -> str:
    return f"tilth resume {session_id}"
