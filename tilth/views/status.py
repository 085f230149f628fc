"""`tilth status`: what each session is doing, read from its files (never from a process).

Progress comes from prd.json; the current task, iteration, elapsed time, tokens, cost and
caps from the roll-up of events.jsonl (`store/rollup.py`: summary.json plus the lines written
since, never the whole journal; lower bounds, marked `+` and `≥`, when some calls' usage was
unknown); liveness from the session lock (a session marked running whose lock nobody holds was killed,
and shows as crashed). A session paused by a usage limit shows until when, in local time.

Read without pydantic (`store/session_peek.py`, `store/prd_peek.py`, the roll-up's own reader):
`tilth status` is a look, and pydantic's start-up alone would be most of its time.
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Any

from tilth.core.clock import parse_utc, utc_now
from tilth.core.errors import BadInput
from tilth.core.terminal import clean, unguarded
from tilth.store.home import SessionPaths, all_session_ids, session_paths
from tilth.store.lock import read_holder
from tilth.store.prd_peek import peek_plan
from tilth.store.prd_record import Task
from tilth.store.prd_rules import TaskStatus, blocked_by, blocked_label
from tilth.store.rollup import Rollup, load_rollup
from tilth.store.session_peek import peek_session
from tilth.store.session_record import SessionRecord
from tilth.store.session_state import SessionState, effective_state
from tilth.views.parallel_figures import figures, running_text, speedup_text
from tilth.views.figures import dollars, money, spend, token_count, verdict_label
from tilth.views.asking import answer_command, open_asks
from tilth.views.reasons import session_end, task_failure, task_outcome, verdict_words


VERDICT_CHARS = 100


def activity(rollup: Rollup, live: bool) -> dict[str, Any]:
    """Current task and iteration, the running time summed over every run
    (`tally.running_seconds`), `verdicts`: each evaluated task's attempts and last verdict, the
    spend, and each cap in force with how close the session is to it."""
    verdicts = {tid: {"attempts": t.attempts,
                      "last_verdict": verdict_label(t.verdict or "", t.category, t.concern, limit=VERDICT_CHARS),
                      "why": verdict_words(t.verdict, t.category, t.concern, limit=VERDICT_CHARS),
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


def session_summary(paths: SessionPaths) -> dict[str, Any]:
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
    lanes = figures(paths)
    for line in tasks:
        line.update(receipt(rollup, line["id"], utc_now() if live else None))
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
        "reason": _reason(record, state),
        "auto_resumes": record.auto_resumes,
        "auto_resume_at": record.auto_resume_at,
        "auto_resume_attempts": rollup.auto_resume_attempts,
        "paused_until": record.paused_until,
        "questions": questions(paths, [t["id"] for t in tasks if t["status"] == TaskStatus.parked]),
        "lanes": lanes["running"] if live else [],
        "parallel": lanes["totals"],
        **activity(rollup, live=state == SessionState.running),
    }
    if state not in LIVE:  # an ended (or archived, or not yet started) session has no current task
        summary.update(current_task=None, iteration=None)
    return summary


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


def receipt_text(line: dict[str, Any]) -> str:
    """`3 attempts, 12,000 in + 8,000 cached + 900 out tokens, $0.0420, 2m10s`."""
    if "tokens" not in line:
        return ""
    tokens = line["tokens"]
    return (f"{line['attempts']} attempt{'s' if line['attempts'] != 1 else ''}, {tokens['input']:,} in + "
            f"{tokens['cached']:,} cached + {tokens['output']:,} out tokens, "
            f"{money(line['cost_usd'], line.get('cost_is_lower_bound', False))}, {_duration(line['wall_s'])}")


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


def task_state(line: dict[str, Any]) -> str:
    """`pending`, `done`, ... or `blocked (T-1 failed)`."""
    return line.get("blocked") or line["status"]


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


def _progress(summary: dict[str, Any]) -> str:
    return summary.get("progress") or f"{sum(t['status'] == TaskStatus.done for t in summary['tasks'])}/{len(summary['tasks'])}"


def _duration(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _current(summary: dict[str, Any]) -> str:
    if summary["state"] not in LIVE or not summary.get("current_task"):
        return "-"
    return f"{summary['current_task']} #{summary['iteration']}" if summary.get("iteration") else summary["current_task"]


def _clock(ts: str) -> str:
    """`HH:MM:SS` (UTC, as `tilth logs` stamps lines) of an ISO time; anything else as it is."""
    return ts[11:19] if len(ts) >= 19 and ts[10:11] == "T" else ts


def _local_clock(ts: str, today: date | None = None) -> str:
    """`HH:MM` in local time of an ISO time, `YYYY-MM-DD HH:MM` when not today; anything else as it is."""
    moment = parse_utc(ts)
    if moment is None:
        return ts
    local = moment.astimezone()
    today = today or utc_now().astimezone().date()
    return f"{local:%H:%M}" if local.date() == today else f"{local:%Y-%m-%d %H:%M}"


def _paused(summary: dict[str, Any]) -> str:
    """`paused until 14:05 (usage limit)`: the why is the reason up to its first colon (the
    agent's own words after it are in the reason line of `tilth status <id>`)."""
    until, reason = summary.get("paused_until"), summary.get("reason") or ""
    why = f" ({reason.split(':', 1)[0].strip()})" if reason.strip() else ""
    return f"paused until {_local_clock(until)}{why}" if until else f"paused{why}"


def _state(summary: dict[str, Any]) -> str:
    """`queued until <time>`, `crashed (auto-resume 2/3 at 12:00:03)` while the supervisor will
    resume it, `running (auto-resumed 1x)` after it did, `paused until 14:05 (usage limit)`."""
    state, resumes = summary["state"], summary.get("auto_resumes") or 0
    if state == SessionState.queued and summary.get("start_at"):
        return f"queued until {summary['start_at']}"
    if state == SessionState.paused:
        return _paused(summary)
    if state == SessionState.crashed and summary.get("auto_resume_at"):
        attempts = summary.get("auto_resume_attempts")
        return (f"crashed (auto-resume {resumes + 1}{f'/{attempts}' if attempts else ''} "
                f"at {_clock(summary['auto_resume_at'])})")
    if state in (SessionState.queued, SessionState.running) and resumes:
        return f"{state} (auto-resumed {resumes}x)"
    return state


def _removed(summary: dict[str, Any]) -> bool:
    """Archived: `tilth cleanse` removed the branch and the worktree."""
    return summary["state"] == SessionState.archived


COLUMNS = ("SESSION", "STATE", "DONE", "CURRENT", "ELAPSED", "TOKENS", "COST", "BRANCH")


def rows(summaries: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    return [(s["id"], _state(s), _progress(s), _current(s), _duration(s.get("elapsed_s", 0)),
             f"{s.get('tokens', 0):,}{'+' if s.get('unknown_usage_calls') else ''}",
             spend(s.get("cost_usd", 0), s.get("cost_is_lower_bound", False), s.get("unpriced_calls", 0), places=2,
                   brief=True),
             f"{s['branch']} (removed)" if _removed(s) else s["branch"])
            for s in summaries]


def _with_legend(summaries: list[dict[str, Any]], footer: str) -> str:
    """The table's `+` / `≥` markers explained once, below it, when any row has them."""
    unknown = sum(s.get("unknown_usage_calls") or 0 for s in summaries)
    if not unknown:
        return footer
    legend = (f"+ / ≥: {unknown} model call{'' if unknown == 1 else 's'} with unknown usage; "
              "those totals are lower bounds (`tilth status <id>` for details)")
    return "\n".join(line for line in (legend, footer) if line)


def render_table(summaries: list[dict[str, Any]], footer: str = "") -> str:
    """Plain aligned columns, for pipes and scripts that read text."""
    footer = _with_legend(summaries, footer)
    if not summaries:
        return "no sessions; create one with `tilth start`" + (f"\n{footer}" if footer else "")
    table = [COLUMNS, *rows(summaries)]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table]
    return "\n".join(lines + ([footer] if footer else []))


STATE_STYLES = {"running": "bold green", "queued": "cyan", "done": "green", "failed": "bold red",
                "stopped": "yellow", "crashed": "bold magenta", "archived": "dim",
                "paused": "blue", "waiting": "bold yellow"}


def print_rich_table(summaries: list[dict[str, Any]], footer: str = "") -> None:
    """The same table for a terminal, with rich (imported only here, so pipes stay cheap)."""
    import sys

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=unguarded(sys.stdout))  # its colours are its own; every cell below is cleaned
    footer = _with_legend(summaries, footer)
    if not summaries:
        console.print(clean(render_table(summaries, footer)), markup=False, highlight=False)
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in ("DONE", "ELAPSED", "TOKENS", "COST") else "left",
                         no_wrap=name in ("SESSION", "BRANCH"))
    for summary, row in zip(summaries, rows(summaries)):
        style = STATE_STYLES.get(summary["state"], "")
        cells = [Text(clean(cell)) for cell in row]
        table.add_row(*cells[:1], Text(clean(row[1]), style=style), *cells[2:])
    console.print(table)
    if footer:
        console.print(clean(footer), markup=False, highlight=False)


def _sandbox(mode: str | None) -> str:
    if mode == "bwrap":
        return "bwrap (the agent's commands are confined)"
    if mode == "off":
        return "off: the agent's commands run UNCONFINED"
    return "not decided yet (decided when the session runs)"


def _verdict(last: dict[str, Any] | None, status: str) -> str:
    """`  (attempt 2: rejected: the evaluator found ...)`; a failed task's line says it failed after how many."""
    if not last:
        return ""
    why = last.get("why") or last["last_verdict"]
    if status == TaskStatus.failed and last.get("failure"):
        return f"  ({last['failure']})"
    return f"  (attempt {last['attempts']}: {why})" if last.get("attempts") else f"  ({why})"


CAP_WORDS = {"max_spend_usd": "spend", "max_tokens_total": "tokens", "max_wall_clock_s": "running time (all runs)",
             "max_evaluator_calls_per_task":
             "evaluator calls on the current task"}


def _caps(caps: dict[str, dict[str, Any]]) -> str:
    """`spend $0.40 of $1.00 (40%), this run's time 2m10s of 1h00m (4%)`; REACHED when one stopped it."""
    shown = []
    for name, cap in caps.items():
        limit, value = cap["limit"], cap["value"]
        fmt = {"max_spend_usd": money, "max_wall_clock_s": _duration}.get(name, lambda v: f"{v:g}")
        limit_fmt = {"max_spend_usd": dollars}.get(name, fmt)
        text = f"{CAP_WORDS.get(name, name)} {fmt(value) if value is not None else '-'} of {limit_fmt(limit)}"
        if cap["reached"]:
            text += " REACHED"
        elif value is not None and limit:
            text += f" ({min(999, round(100 * value / limit))}%)"
        shown.append(text)
    return ", ".join(shown)


def render_one(summary: dict[str, Any]) -> str:
    removed = _removed(summary)
    lines = [
        f"session {summary['id']}: {_state(summary)} ({_progress(summary)} done)",
        *([f"reason   {session_end(summary['state'], summary['reason'])}"] if summary.get("reason") and not removed
          else []),
        f"branch   {summary['branch']}" + (f" ({summary.get('reason') or 'removed by cleanse'})" if removed else ""),
        f"worktree {'(removed)' if removed else summary['worktree']}",
        f"backend  {summary['backend']}" + (" (test/demo backend, no model)" if summary["backend"] == "scripted" else ""),
        f"sandbox  {_sandbox(summary.get('sandbox'))}",
        f"current  {_current(summary)}" + (f" (pid {summary['pid']})" if summary.get("pid") else ""),
        f"elapsed  {_duration(summary.get('elapsed_s', 0))}, "
        f"{token_count(summary.get('tokens', 0), summary.get('unknown_usage_calls', 0), ' tokens')}, "
        f"{spend(summary.get('cost_usd', 0), summary.get('cost_is_lower_bound', False), summary.get('unpriced_calls', 0))}",
    ]
    lines += [f"caps     {_caps(summary['caps'])}"] if summary.get("caps") else []
    lines += [f"lanes    {running_text(summary['lanes'])}"] if summary.get("lanes") else []
    lines += [f"parallel {speedup_text(summary['parallel'])}"] if summary.get("parallel") else []
    verdicts = summary.get("verdicts") or {}
    shown = {t["id"]: task_outcome(task_state(t), summary["state"]) for t in summary["tasks"]}
    width = max([11, *map(len, shown.values())])
    for t in summary["tasks"]:
        lines.append(f"  {shown[t['id']]:<{width}} {t['id']}: {t['title']}{_verdict(verdicts.get(t['id']), t['status'])}")
        if t.get("attempts") or t.get("cost_usd"):
            lines.append(f"  {'':<{width}} {receipt_text(t)}")
    for q in summary.get("questions") or []:
        said = f"({q['asked_by']} asked) {q['question']}" if q["question"] else "(the question was not recorded)"
        lines.append(f"question {q['task']} {said}")
        lines += [f"  context: {' '.join(q['context'].split())[:300]}"] if q["context"] else []
        lines.append("  answered; the runner takes it at its next task boundary" if q["answered"]
                     else f"  answer:  {q['command']}")
    return "\n".join(lines)
