"""What `tilth status` shows of each session, gathered from its files (never from a process).

Progress comes from prd.json; the current task, iteration, elapsed time, tokens, cost and
caps from the roll-up of events.jsonl (`store/rollup.py`: summary.json plus the lines written
since, never the whole journal; lower bounds, `cost_is_lower_bound`, when some calls' usage was
unknown); liveness from the session lock (a session marked running whose lock nobody holds was killed,
and shows as crashed). `views/status.py` renders what is gathered here.

Read without pydantic (`store/session_peek.py`, `store/prd_peek.py`, the roll-up's own reader):
`tilth status` is a look, and pydantic's start-up alone would be most of its time.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from tilth.core.clock import utc_now
from tilth.core.errors import BadInput
from tilth.store.home import SessionPaths, all_session_ids, session_paths
from tilth.store.jsonio import parse_object
from tilth.store.lock import read_holder
from tilth.store.pr_record import load_pr
from tilth.store.prd_peek import peek_plan
from tilth.store.prd_record import Task
from tilth.store.prd_rules import TaskStatus, blocked_by, blocked_label
from tilth.store.rollup import load_rollup
from tilth.store.rollup_fold import Rollup
from tilth.store.session_peek import peek_session
from tilth.store.session_record import SessionRecord
from tilth.store.session_state import SessionState, effective_state
from tilth.views.fallbacks import fallback_data
from tilth.views.parallel_figures import figures
from tilth.views.figures import verdict_label
from tilth.views.asking import answer_command, open_asks
from tilth.views.waiting import waiting_data
from tilth.views.reasons import session_end, task_failure, task_outcome, verdict_words


VERDICT_CHARS = 100


def activity(rollup: Rollup, live: bool) -> dict[str, Any]:
    """Current task and iteration, the running time summed over every run
    (`tally.running_seconds`), `verdicts`: each evaluated task's attempts and last verdict, the
    spend, and each cap in force with how close the session is to it."""
    verdicts = {tid: {"attempts": t.attempts,
                      "last_verdict": verdict_label(t.verdict or "", t.category, t.concern, limit=VERDICT_CHARS),
                      # a parked task's line says its question, never the context that came with it
                      "why": verdict_words(t.verdict, t.category, t.question if t.verdict == "needs_human"
                                           and t.question else t.concern, limit=VERDICT_CHARS),
                      **({"failure": task_failure(t.attempts or 0, t.category, t.concern, limit=VERDICT_CHARS)}
                         if t.verdict == "reject" else {})}
                for tid, t in rollup.tasks.items() if t.verdict is not None}
    now = utc_now() if live else None
    totals = rollup.totals
    return {"current_task": rollup.current_task, "iteration": rollup.iteration,
            "elapsed_s": round(rollup.clock.seconds(now) or 0.0, 1), "verdicts": verdicts,
            "tokens": totals.tokens, "cost_usd": round(totals.cost_usd, 6), "model_calls": totals.model_calls,
            "unpriced_calls": totals.unpriced_calls,
            "unknown_usage_calls": totals.unknown_usage_calls, "cost_is_lower_bound": totals.cost_is_lower_bound,
            "caps": caps(rollup, now)}


def caps(rollup: Rollup, now: datetime | None) -> dict[str, dict[str, Any]]:
    """Each cap the last run set (or that stopped it): limit, the value it is checked against
    (spend, tokens and wall clock: the session's over all its runs; evaluator calls: the current task's),
    and whether it was reached."""
    clock, task = rollup.clock, rollup.tasks.get(rollup.current_task or "")
    run_s = None
    if clock.ran:  # the wall-clock cap counts the session's running time over all its runs
        run_s = round(clock.seconds(now if clock.open_since is not None else None) or 0.0, 1)
    values = {"max_spend_usd": round(rollup.totals.cost_usd, 6), "max_tokens_total": rollup.totals.tokens,
              "max_wall_clock_s": run_s,
              "max_evaluator_calls_per_task": task.evaluator_calls if task else None}
    shown = {}
    for name in dict.fromkeys([*rollup.caps, *rollup.caps_reached]):
        limit = rollup.caps.get(name, rollup.caps_reached.get(name, {}).get("limit"))
        if limit is None:
            continue
        reached = rollup.caps_reached.get(name)
        shown[name] = {"limit": limit, "value": reached["value"] if reached else values.get(name),
                       "reached": reached is not None}
    return shown


def branch_commits(record: SessionRecord) -> list[dict[str, str]]:
    """The branch's commits as they are (oldest first: task commits, then the placeholders above them):
    short sha, task, outcome (`failed`, `parked`, or empty for a task commit); none when it is gone."""
    from tilth.git import gitcli

    try:
        if not Path(record.repo).is_dir():
            return []
        found = gitcli.log_records(record.repo, record.base_commit, record.branch)
    except (BadInput, OSError, ValueError, gitcli.GitFailed):
        return []
    return [{"sha": c["sha"], "task": c.get("Tilth-Task", ""), "outcome": c.get("Tilth-Outcome", "")} for c in found]


def session_summary(paths: SessionPaths, with_commits: bool = False) -> dict[str, Any]:
    """`with_commits` (one session's view): the branch's commits too, read with git."""
    record = peek_session(paths)
    try:
        tasks = task_lines(peek_plan(paths.prd))
    except BadInput:
        tasks = []
    state = effective_state(paths, record)
    done = sum(t["status"] == TaskStatus.done for t in tasks)
    holder = read_holder(paths.lock) if state in (SessionState.running, SessionState.paused) else None
    rollup = load_rollup(paths.events)
    live = state == SessionState.running
    lanes = figures(paths, rollup)
    for line in tasks:
        line.update(receipt(rollup, line["id"], utc_now() if live else None))
        line["outcome"] = task_outcome(line.get("blocked") or line["status"], state)  # as `tilth status` says it
    summary = {
        "id": record.id,
        "state": state,
        "branch": record.branch,
        "worktree": record.worktree,
        "repo": record.repo,
        "backend": record.backend.name,
        "sandbox": record.sandbox,
        "created": record.created,
        "tasks": tasks,
        "progress": f"{done}/{len(tasks)}",
        "tasks_done": done,
        "pid": holder.get("pid") if holder else None,
        "supervised": record.supervised,
        "start_at": record.start_at,
        "reason": session_end(state, _reason(record, state), rollup.stopped_by) or None,
        "stopped_by": rollup.stopped_by if state == SessionState.stopped else None,
        "auto_resumes": record.auto_resumes,
        "auto_resume_at": record.auto_resume_at,
        "auto_resume_attempts": rollup.auto_resume_attempts,
        "paused_until": record.paused_until,
        "questions": questions(paths, [t["id"] for t in tasks if t["status"] == TaskStatus.parked]),
        "lanes": lanes["running"] if live else [],
        "parallel": lanes["totals"],
        **activity(rollup, live=state == SessionState.running),
        **fallback_data(rollup),
    }
    summary["pr"] = pull_request(paths)
    summary["forecast"] = parse_object((paths.dir / "forecast.json").read_bytes()) \
        if (paths.dir / "forecast.json").is_file() else None  # what `tilth start` forecast (views/forecast.py)
    # what a running session waits on: a model call, a retry's backoff, a CLI agent run (since when, which attempt)
    summary["waiting"] = waiting_data(rollup.waiting, utc_now()) if live else []
    if state not in LIVE:  # an ended (or archived, or not yet started) session has no current task
        summary.update(current_task=None, iteration=None)
    if with_commits:
        summary["commits"] = branch_commits(record)
    return summary


def pull_request(paths: SessionPaths) -> dict[str, Any] | None:
    """The session's PR as `tilth follow` last saw it: number, url, state, head, fixes (and its question)."""
    try:
        pr = load_pr(paths.dir)
    except BadInput:
        return None
    if pr is None:
        return None
    return {**pr.shown(), "question": pr.question, **({"unheeded": pr.unheeded} if pr.unheeded else {})}


LIVE = (SessionState.running, SessionState.paused, SessionState.crashed)
"""The states in which a session has a current task: running, paused in the middle of one, or crashed
in it (to be resumed there); an ended session has none."""


def receipt(rollup: Rollup, task_id: str, now: datetime | None) -> dict[str, Any]:
    """What a task has cost so far over every attempt and run: `attempts` (evaluated), `cost_usd`
    (`cost_is_lower_bound` when some call's usage was unknown), `tokens` {input (not read from a
    cache), cached, output} and `wall_s` (its running time, the open span of a running task too)."""
    t = rollup.tasks.get(task_id)
    if t is None:
        return {"attempts": 0, "cost_usd": 0.0, "cost_is_lower_bound": False,
                "tokens": {"input": 0, "cached": 0, "output": 0}, "wall_s": 0.0}
    wall = t.wall_s
    if task_id == rollup.current_task and rollup.task_since is not None:
        wall += _seconds_between(rollup.task_since, now) if now is not None else 0.0
    return {"attempts": t.attempts or 0, "cost_usd": round(t.cost_usd, 6), "cost_is_lower_bound": t.unknown_usage_calls > 0,
            "tokens": {"input": t.prompt_tokens - t.cached_tokens, "cached": t.cached_tokens,
                       "output": t.completion_tokens}, "wall_s": round(wall, 1)}


def _seconds_between(since: str, now: datetime) -> float:
    try:
        return max(0.0, (now - datetime.fromisoformat(since.replace("Z", "+00:00"))).total_seconds())
    except ValueError:
        return 0.0


def task_lines(plan: list[Task]) -> list[dict[str, Any]]:
    """Each task as `--json` shows it; `depends_on` and `blocked_by` (the failed tasks a pending one
    waits on, so it never runs in this session) only when there are any."""
    blocked = blocked_by(plan)
    statuses = {t.id: t.status for t in plan}
    lines = []
    for t in plan:
        line: dict[str, Any] = {"id": t.id, "title": t.title, "status": t.status}
        if t.depends_on:
            line["depends_on"] = list(t.depends_on)
        if t.id in blocked:
            line["blocked_by"] = list(blocked[t.id])
            line["blocked"] = blocked_label(blocked[t.id], statuses)
        lines.append(line)
    return lines


def questions(paths: SessionPaths, parked: list[str]) -> list[dict[str, Any]]:
    """The open questions of the parked tasks, each with the command that answers it."""
    return [{"task": task_id, "question": asked.question if asked else None,
             "asked_by": asked.asked_by if asked else None, "context": asked.context if asked else "",
             "answered": bool(asked and asked.answer is not None), "command": answer_command(paths.id, task_id)}
            for task_id, asked in open_asks(paths, parked)]


def _reason(record: SessionRecord, state: str) -> str | None:
    """A runner killed outright (kill -9, power loss) never wrote why; say what is known. An
    archived session's reason says where its work went (`tilth cleanse`), a paused one's which limit
    it hit."""
    if state == SessionState.crashed and not record.reason:
        return "the process running it died without recording why (killed or lost power)"
    return record.reason if state in (SessionState.stopped, SessionState.crashed, SessionState.failed,
                                      SessionState.archived, SessionState.paused, SessionState.waiting) else None


def all_summaries(home: Path) -> list[dict[str, Any]]:
    return [session_summary(session_paths(i, home)) for i in all_session_ids(home)]
