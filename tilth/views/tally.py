"""What a session did, per task and in total: the facts behind the PR description and the
end-of-session report.

Outcomes come from the branch first (git is the source of truth), then prd.json;
iterations, rejections and the last verdict from the ledger (labelled by
`report.verdict_label`: an accept never shows a category); checks on the last attempt from
`checks_run` events; tokens and cost from `model_call` events,
summed by `store/calls.Totals` (calls with unknown usage make both totals lower bounds, shown as
`1,234+ (3 calls with unknown usage)` and `≥ $0.0123`); a failure's reason from the FAILED
placeholder's `Tilth-Reason`, else its progress line (the readings per task, criteria proofs
included, are `views/evidence.py`'s). Wall time is running time only: the sum of each run's span,
`session_started` to its `session_end` (or, for a run that was killed, to its last event), so
time spent stopped or crashed is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pygit2

from tilth.core.errors import BadInput
from tilth.git.commits import TaskCommit, branch_task_commits
from tilth.git.gitops import open_worktree
from tilth.git.worktree_git import session_git_dir
from tilth.store.events import EventLog
from tilth.store.home import SessionPaths
from tilth.store.calls import Totals
from tilth.store.prd import blocked_by, load_plan
from tilth.store.prd_rules import blocked_label
from tilth.store.rollup import load_rollup
from tilth.store.rollup_fold import OUTSIDE_RUN
from tilth.store.session import load_session
from tilth.store.session_record import SessionRecord
from tilth.views import figures
from tilth.views.evidence import (CriterionProof, failing_before, failure_reasons, last_checks, proofs,
                                   read_baseline, stopped_by, verdicts)
from tilth.views.figures import verdict_label
from tilth.views.reasons import session_end, task_failure, verdict_words


@dataclass(frozen=True)
class TaskTally:
    id: str
    title: str
    outcome: str
    """done | failed | pending | in_progress"""
    iterations: int
    last_verdict: str
    """`accept`, `reject (<category>): <concern>`, or "" if never evaluated."""
    last_words: str
    """The same in words (`reasons.verdict_words`): `accepted`, `rejected: the evaluator found ...`."""
    tokens: int
    cost_usd: float
    reason: str
    """Why it failed, in words (`reasons.task_failure`); "" unless failed."""
    reason_code: str = ""
    """The failure's code as recorded (`iterations_exhausted after 2 attempts; ...`)."""
    rejections: tuple[str, ...] = ()
    """The category of each rejected attempt, in order."""
    checks: tuple[int, int] | None = None
    """(passed, failed) checks of the last attempt; None when no check ran."""
    commit: str = ""
    """The task's commit (or FAILED placeholder) on the branch; "" when there is none."""
    prompt_tokens: int = 0
    """Input tokens over every attempt and run, cached ones included."""
    cached_tokens: int = 0
    completion_tokens: int = 0
    cost_is_lower_bound: bool = False
    """Some of its calls' usage was unknown: `cost_usd` is at least this."""
    wall_s: float = 0.0
    """Its running time over every run."""
    depends_on: tuple[str, ...] = ()
    blocked_by: tuple[str, ...] = ()
    """The failed or parked tasks this pending one waits on (`depends_on`, directly or not): it cannot run."""
    blocked: str = ""
    """`blocked (T-1 failed)`, `blocked (T-2 parked)` when `blocked_by`."""
    criteria: tuple[CriterionProof, ...] = ()

    @property
    def shown_outcome(self) -> str:
        """The outcome, or `blocked (T-1 failed)` for a pending task a failure blocks."""
        return self.blocked or self.outcome


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
    runs: int = 0
    """How many times a process ran the session (`session_started` events)."""
    reason: str | None = None
    """Why the session ended stopped or crashed (session.json); a failed one lists its failed tasks instead."""
    failing_before: tuple[str, ...] = ()
    """The checks that already failed on the base commit (`baseline.json`): `pytest -q` (exit 1)."""
    final_review: tuple[str, ...] | None = None
    """The last final review's findings (the evaluator over the whole diff); None when none ran."""
    final_review_error: str = ""
    final_review_concern: str = ""
    """What an accepting final review said anyway (the scripted backend says no model looked)."""
    commits: tuple[TaskCommit, ...] = ()
    """tilth's commits on the branch since its base, oldest first: task commits and placeholders, retried ones too."""

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
    def blocked(self) -> int:
        return sum(bool(t.blocked_by) for t in self.tasks)

    @property
    def parked(self) -> int:
        return sum(t.outcome == "parked" for t in self.tasks)

    @property
    def all_done(self) -> bool:
        return self.done == len(self.tasks)


@dataclass(frozen=True)
class _Node:
    id: str
    status: str
    depends_on: tuple[str, ...]


def _parse_ts(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def running_seconds(events: list[dict[str, Any]], now: datetime | None = None) -> float | None:
    """The sum of every run's span: `session_started` to the following `session_end`; a run
    that never ended (killed, or still going) lasts to its last event, or to `now` if given.
    None when the session never ran."""
    total, ran = 0.0, False
    opened: datetime | None = None
    last: datetime | None = None
    for event in events:
        if event["type"] in OUTSIDE_RUN:
            continue
        ts = _parse_ts(event["ts"])
        if event["type"] == "session_started":
            if opened is not None and last is not None:
                total += (last - opened).total_seconds()
            opened, ran = ts, True
        elif event["type"] == "session_end" and opened is not None:
            total += (ts - opened).total_seconds()
            opened = None
        last = ts
    end = now or last
    if opened is not None and end is not None:
        total += (end - opened).total_seconds()
    return max(0.0, total) if ran else None


def _branch_commits(record: SessionRecord, base: str) -> tuple[str | None, list[TaskCommit]]:
    try:
        repo = open_worktree(Path(record.worktree), session_git_dir(record.repo, record.id), repair=False)
        return str(repo.head.target), branch_task_commits(repo, base)
    except (BadInput, pygit2.GitError):
        return None, []


def _calls_by_task(calls: list[dict[str, Any]]) -> dict[Any, list[dict[str, Any]]]:
    grouped: dict[Any, list[dict[str, Any]]] = {}
    for call in calls:
        grouped.setdefault(call.get("task"), []).append(call)
    return grouped


def tally(paths: SessionPaths) -> SessionTally:
    record = load_session(paths)
    events = EventLog(paths.events).read()
    head, on_branch = _branch_commits(record, record.base_commit)
    commits = {c.task_id: c for c in on_branch}
    try:
        tasks_read = load_plan(paths.prd)
    except BadInput:
        tasks_read = []
    plan = [(t.id, t.title, t.status.value, tuple(t.depends_on)) for t in tasks_read]
    criteria = {t.id: t.criteria for t in tasks_read}
    known = {tid for tid, _, _, _ in plan}
    plan += [(c.task_id, c.title, "", ()) for c in commits.values() if c.task_id not in known]

    calls = [e for e in events if e.get("type") == "model_call"]
    calls_of, checks_of = _calls_by_task(calls), last_checks(events)
    rolled = load_rollup(paths.events)
    reasons = failure_reasons(paths)
    baseline = read_baseline(paths)
    tasks = []
    for task_id, title, status, depends_on in plan:
        commit = commits.get(task_id)
        outcome = ("parked" if commit.parked else "failed" if commit.failed else "done") if commit else status
        if commit and commit.parked and status in ("pending", "in_progress"):
            outcome = status  # answered: the task is being retried
        iterations, last, rejections, verifies = verdicts(paths, task_id)
        verdict = verdict_label(last.verdict, last.category, last.concern, limit=10_000) if last else ""
        words = verdict_words(last.verdict, last.category, last.concern) if last else ""
        checks = checks_of.get((task_id, iterations)) if iterations else None
        if commit:
            iterations = max(iterations, commit.iterations)
        if task_id in rolled.tasks:  # an attempt cut off before its verdict was made all the same
            iterations = max(iterations, rolled.tasks[task_id].attempts or 0)
        mine = Totals.of_events(calls_of.get(task_id, []))
        reason = code = ""
        if outcome == "failed":
            code = (commit.reason if commit else "") or reasons.get(task_id) or ""
            reason = task_failure(iterations, last.category, last.concern) if last and not last.accepted \
                else f"failed after {figures.plural(iterations, 'attempt')}"
        tasks.append(TaskTally(
            id=task_id, title=title, outcome=outcome, iterations=iterations, last_verdict=verdict, last_words=words,
            tokens=mine.tokens, cost_usd=mine.cost_usd, reason=reason, reason_code=code, rejections=rejections, checks=checks,
            commit=commit.sha[:7] if commit else "", depends_on=depends_on,
            prompt_tokens=mine.prompt_tokens, cached_tokens=mine.cached_tokens,
            completion_tokens=mine.completion_tokens, cost_is_lower_bound=mine.unknown_usage_calls > 0,
            wall_s=rolled.tasks[task_id].wall_s if task_id in rolled.tasks else 0.0,
            criteria=proofs(criteria.get(task_id, []), verifies,
                            baseline.verifies.get(task_id, []) if baseline is not None else []),
        ))
    blocked = blocked_by([_Node(t.id, t.outcome, t.depends_on) for t in tasks])
    outcomes = {t.id: t.outcome for t in tasks}
    tasks = [replace(t, blocked_by=blocked[t.id], blocked=blocked_label(blocked[t.id], outcomes)) if t.id in blocked
             else t for t in tasks]
    total = Totals.of_events(calls)
    review = next((e for e in reversed(events) if e.get("type") == "final_review"), None)
    return SessionTally(
        id=record.id, state=record.state.value, branch=record.branch, base_commit=record.base_commit,
        head_commit=head, tasks=tasks, tokens=total.tokens, cost_usd=total.cost_usd,
        unpriced_calls=total.unpriced_calls, wall_seconds=running_seconds(events),
        unknown_usage_calls=total.unknown_usage_calls, cost_is_lower_bound=total.cost_is_lower_bound,
        runs=sum(e["type"] == "session_started" for e in events),
        reason=session_end(record.state.value, record.reason, stopped_by(events))
        if record.state.value in ("stopped", "crashed", "paused") else None,
        failing_before=failing_before(baseline),
        final_review=tuple(review["data"].get("findings") or ()) if review else None,
        final_review_error=str(review["data"].get("error") or "") if review else "",
        final_review_concern=str(review["data"].get("concern") or "") if review else "",
        commits=tuple(on_branch),
    )


# Where the report, the notifications and `tilth pr` have always found them.
money, token_count, duration = figures.money, figures.token_count, figures.duration


def resume_command(session_id: str) -> str:
    return f"tilth resume {session_id}"
