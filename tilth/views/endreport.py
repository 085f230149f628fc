"""The end-of-session report: what a run achieved, task by task (and what proved each criterion),
what it cost, and the exact next command. Written to `sessions/<id>/report.md` at the end of every run and printed."""

from __future__ import annotations

from tilth.core.errors import BadInput
from tilth.store.home import SessionPaths
from tilth.store.pr_record import load_pr
from tilth.store.jsonio import write_atomic
from tilth.store.rollup import load_rollup
from tilth.views.asking import answer_command, question_lines
from tilth.views.fallbacks import fallback_lines
from tilth.views.figures import plural, spend
from tilth.views.parallel_figures import parallel_lines
from tilth.views.pr_state import pr_words
from tilth.views.reasons import task_outcome
from tilth.views.proof import proof_lines
from tilth.views.tally import SessionTally, TaskTally, duration, money, resume_command, tally, token_count

REPORT = "report.md"
TABLE = ("task", "outcome", "attempts", "rejections", "checks (last attempt)", "commit", "tokens in/cached/out",
         "cost", "time")


def rejections(task: TaskTally) -> str:
    """`0`, or `2 (weak_test, check_failed)`."""
    return f"{len(task.rejections)} ({', '.join(task.rejections)})" if task.rejections else "0"


def checks(task: TaskTally) -> str:
    if task.checks is None:
        return "-"
    passed, failed = task.checks
    return ", ".join(part for part in (f"{passed} passed" if passed else "", f"{failed} failed" if failed else "")
                     if part)


def tokens(task: TaskTally) -> str:
    """Every attempt's and run's: input not read from a cache / cached / output."""
    return f"{task.prompt_tokens - task.cached_tokens:,}/{task.cached_tokens:,}/{task.completion_tokens:,}"


def task_table(t: SessionTally) -> list[str]:
    """One aligned row per task, under a header."""
    rows = [TABLE] + [(task.id, task_outcome(task.shown_outcome, t.state), str(task.iterations), rejections(task), checks(task),
                       task.commit or "-", tokens(task), money(task.cost_usd, task.cost_is_lower_bound),
                       duration(task.wall_s, never="-")) for task in t.tasks]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def failed_lines(t: SessionTally) -> list[str]:
    """`  FAILED T-2 <title>: failed after 2 attempts: the evaluator found ...`, one per failed task."""
    return [f"  FAILED {task.id} {task.title}: {task.reason}" for task in t.tasks if task.outcome == "failed"]


def commit_count(t: SessionTally) -> str:
    """The branch's commits as they are: how many, how many finish a task, and each placeholder
    (FAILED or PARKED) by sha, in order: the ones above the task commits, where a session keeps them,
    and any a later retry of its task went past (a branch made before placeholders stayed on top)."""
    latest = {c.task_id: c.sha for c in t.commits}
    done = sum(not c.placeholder for c in t.commits)
    line = f"{plural(len(t.commits), 'commit')}: {plural(done, 'task commit')}"
    last_done = max((n for n, c in enumerate(t.commits) if not c.placeholder), default=-1)
    held = [f"`{c.sha[:7]}` {'PARKED' if c.parked else 'FAILED'} ({c.task_id})"
            + ("" if latest[c.task_id] == c.sha else ", retried in a later commit")
            + ("" if n > last_done else ", below later task commits")
            for n, c in enumerate(t.commits) if c.placeholder]
    if held:
        where = " above them" if done and all(n > last_done for n, c in enumerate(t.commits) if c.placeholder) else ""
        line += f", {plural(len(held), 'placeholder')}{where} holding partial work: " + "; ".join(held)
    return line


def pr_line(paths: SessionPaths) -> list[str]:
    """`PR:         PR #1 CI failing; 1 follow-up fix pushed (<url>)`, as `tilth follow` last saw it."""
    try:
        pr = load_pr(paths.dir)
    except BadInput as exc:
        return [f"PR:         unreadable ({exc})"]
    if pr is None:
        return []
    return [f"PR:         {pr_words(pr.shown() | {'question': pr.question})} ({pr.url})"]


def headline(t: SessionTally) -> str:
    """`Session s1: failed`, `Session s1: stopped by `tilth stop``, `Session s1: stopped (cap ... reached)`."""
    if t.reason and t.reason.split(" ", 1)[0] == t.state:
        return f"Session {t.id}: {t.reason}"
    return f"Session {t.id}: {t.state}" + (f" ({t.reason})" if t.reason else "")


def build_report(paths: SessionPaths) -> str:
    t = tally(paths)
    head = t.head_commit[:7] if t.head_commit else "(worktree gone)"
    lines = [
        headline(t),
        f"Tasks:      {t.done}/{len(t.tasks)} done, {t.failed} failed"
        + (f", {t.parked} parked" if t.parked else "") + (f", {t.blocked} blocked" if t.blocked else ""),
    ]
    lines += task_table(t) if t.tasks else []
    lines += failed_lines(t)
    outcomes = {task.id: task.outcome for task in t.tasks}
    lines += [f"  BLOCKED {task.id} {task.title}: waits on " + ", ".join(
        f"{root}, which {'waits for an answer' if outcomes.get(root) == 'parked' else 'failed'}"
        for root in task.blocked_by) for task in t.tasks if task.blocked_by]
    lines += question_lines(paths, parked := [task.id for task in t.tasks if task.outcome == "parked"])
    lines += proof_lines(t)
    lines += parallel_lines(paths)
    lines += fallback_lines(load_rollup(paths.events))
    lines += [
        f"Attempts:   {t.iterations}",
        f"Tokens:     {token_count(t.tokens, t.unknown_usage_calls)}",
        f"Cost:       {spend(t.cost_usd, t.cost_is_lower_bound, t.unpriced_calls)}",
        f"Wall time:  {duration(t.wall_seconds)}" + (f" over {t.runs} runs (time stopped not counted)"
                                                     if t.runs > 1 else ""),
        f"Git: {t.base_commit[:7]} -> {head} on {t.branch}",
        f"Commits:    {commit_count(t)}",
        *pr_line(paths),
        f"Next: tilth pr {t.id}" if t.all_done else f"Next: {answer_command(t.id, parked[0])}" if parked
        else f"Next: {resume_command(t.id)}",
    ]
    return "\n".join(lines) + "\n"


def record_report(paths: SessionPaths) -> str:
    text = build_report(paths)
    write_atomic(paths.dir / REPORT, text.encode())
    return text
