"""progress-summary.md: a compact, bounded picture of the session for fresh contexts.

Regenerated after every task outcome and whenever it is older than the journal or the
proposed learnings (mtime). It holds, most important first so a budget cuts the least
important: completion status, key learnings de-duplicated from reviewer concerns and
proposed learnings (capped, newest kept), the last few outcomes in detail, and a task
table windowed so it stays bounded.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from itertools import islice
from pathlib import Path
from typing import Callable

from tilth.store.home import SessionPaths
from tilth.store.jsonio import write_atomic
from tilth.store.learnings import read_learnings
from tilth.store.ledger import read_entries
from tilth.store.prd import Task, TaskStatus, load_plan
from tilth.store.progress import ProgressLine, read_progress

MARKS = {TaskStatus.done: "done", TaskStatus.failed: "FAILED", TaskStatus.in_progress: "current",
         TaskStatus.pending: "pending", TaskStatus.parked: "PARKED (waits for an answer)"}


@dataclass(frozen=True)
class SummarySettings:
    recent_tasks: int = 3
    learnings: int = 15
    table_rows: int = 20


def summary_path(paths: SessionPaths) -> Path:
    return paths.dir / "progress-summary.md"


def learnings_path(paths: SessionPaths) -> Path:
    return paths.dir / "proposed-learnings.md"


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9 ]", "", " ".join(text.lower().split()))


def _may_hold_concerns(paths: SessionPaths, plan: list[Task], progress: list[ProgressLine]) -> list[Task]:
    """The tasks whose ledger can hold a rejection, in plan order: every task with a ledger
    except those whose latest outcome is done at the first attempt (one entry, accepted).
    Skipping those keeps the summary's cost flat as a long session goes on."""
    try:
        with_ledger = {name.removesuffix(".jsonl") for name in os.listdir(paths.ledger_dir)}
    except OSError:
        return []
    latest = {line.task: line for line in progress}
    clean = {tid for tid, line in latest.items() if line.outcome == "done" and line.iterations == 1}
    return [t for t in plan if t.id in with_ledger and t.id not in clean]


def key_learnings(paths: SessionPaths, plan: list[Task], limit: int,
                  progress: list[ProgressLine] | None = None) -> list[str]:
    """Newest first until `limit`, duplicates (case/punctuation-insensitive) dropped."""
    found: list[str] = [f"{learning} ({task_id})" for task_id, learning in read_learnings(learnings_path(paths))]
    progress = read_progress(paths.progress) if progress is None else progress
    for task in _may_hold_concerns(paths, plan, progress):
        for entry in read_entries(paths.ledger_dir, task.id):
            v = entry.verdict
            if not v.accepted and v.concern and v.category not in ("no_case", "parse_failed"):
                found.append(f"Reviewer flagged {v.category or 'a problem'} on {task.id}: {v.concern}")
    kept, seen = [], set()
    for item in reversed(found):
        key = _norm(re.sub(r" \(\S+\)$| on \S+:", "", item))
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept[:limit]


def _table(plan: list[Task], rows: int, attempts: Callable[[str], int]) -> list[str]:
    """Unfinished tasks first claim the rows, then the most recently listed done ones (found from
    either end, so a long plan is not walked whole)."""
    unfinished = list(islice((at for at, t in enumerate(plan) if t.status != TaskStatus.done), rows))
    room = rows - len(unfinished)
    last = len(plan) - 1
    done = list(islice((last - back for back, t in enumerate(reversed(plan)) if t.status == TaskStatus.done), room)) \
        if room > 0 else []
    shown = sorted(set(unfinished) | set(done))
    lines = ["| ID | Title | Status | Attempts |", "|---|---|---|---|"]
    lines += [f"| {t.id} | {t.title} | {MARKS[t.status]} | {attempts(t.id)} |" for t in (plan[at] for at in shown)]
    if len(plan) > len(shown):
        lines.append(f"[... {len(plan) - len(shown)} more tasks not listed ...]")
    return lines


def build_summary(paths: SessionPaths, settings: SummarySettings = SummarySettings()) -> str:
    plan = load_plan(paths.prd)
    progress = read_progress(paths.progress)

    @cache
    def attempts(task_id: str) -> int:
        return len(read_entries(paths.ledger_dir, task_id))

    by_status: dict[TaskStatus, list[Task]] = {status: [] for status in TaskStatus}
    for task in plan:  # one pass: a plan can hold 20,000 tasks and this runs after every task
        by_status[task.status].append(task)
    done, failed, parked = len(by_status[TaskStatus.done]), by_status[TaskStatus.failed], by_status[TaskStatus.parked]
    current = next(iter(by_status[TaskStatus.in_progress] or by_status[TaskStatus.pending]), None)
    out = ["# Progress summary", "", f"Completed: {done}/{len(plan)} tasks"]
    out.append(f"Current: {current.id} (attempt {attempts(current.id) + 1})" if current else "Current: none")
    out.append("Failed: " + (", ".join(t.id for t in failed) if failed else "none"))
    if parked:
        out.append("Parked (waiting for a person's answer): " + ", ".join(t.id for t in parked))
    learnings = key_learnings(paths, plan, settings.learnings, progress)
    out += ["", "## Key learnings", *([f"- {item}" for item in learnings] or ["- none recorded yet"])]
    out += ["", f"## Recent outcomes (last {settings.recent_tasks})"]
    recent = progress[-settings.recent_tasks:][::-1] if settings.recent_tasks else []
    in_plan = {line.task for line in recent} & {t.id for t in plan} if recent else set()
    for line in recent:
        out.append(f"### {line.task}: {line.title} ({line.outcome}, {line.iterations} attempt(s))")
        entries = read_entries(paths.ledger_dir, line.task) if line.task in in_plan else []
        if entries and entries[-1].case:
            out.append(f"- Summary: {' '.join(entries[-1].case.summary.split())[:400]}")
        if entries:
            out.append(f"- Changes: {entries[-1].diff_summary}")
            if not entries[-1].verdict.accepted and entries[-1].verdict.concern:
                out.append(f"- Last concern: {entries[-1].verdict.concern[:300]}")
    out += ["", "## Tasks", *_table(plan, settings.table_rows, attempts)]
    return "\n".join(out) + "\n"


def write_summary(paths: SessionPaths, settings: SummarySettings = SummarySettings()) -> str:
    text = build_summary(paths, settings)
    write_atomic(summary_path(paths), text.encode())
    return text


def is_fresh(paths: SessionPaths) -> bool:
    summary = summary_path(paths)
    if not summary.exists():
        return False
    sources = [p for p in (paths.progress, learnings_path(paths)) if p.exists()]
    return all(summary.stat().st_mtime_ns >= p.stat().st_mtime_ns for p in sources)


def current_summary(paths: SessionPaths, settings: SummarySettings = SummarySettings()) -> str:
    """The summary text, regenerated first if it is missing or older than its sources."""
    if is_fresh(paths):
        return summary_path(paths).read_text()
    return write_summary(paths, settings)
