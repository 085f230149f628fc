"""`tilth status` as a person reads it: the table of sessions (plain, or rich on a terminal) and one session's lines.

What it renders is gathered by `views/status_data.py`; lower bounds are marked `+` and `≥` when some
calls' usage was unknown, and a session paused by a usage limit shows until when, in local time.
Pydantic-free, like what it renders: `tilth status` is a look.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Callable

from tilth.core.clock import parse_utc, utc_now
from tilth.core.terminal import clean, unguarded
from tilth.store.prd_rules import TaskStatus
from tilth.store.session_state import SessionState
from tilth.views.parallel_figures import running_text, speedup_text
from tilth.views.figures import dollars, money, plural, spend, token_count
from tilth.views.pr_state import in_words
from tilth.views.reasons import session_end, task_outcome
from tilth.views.status_data import LIVE


def receipt_text(line: dict[str, Any]) -> str:
    """`3 attempts, 12,000 in + 8,000 cached + 900 out tokens, $0.0420, 2m10s`."""
    if "tokens" not in line:
        return ""
    tokens = line["tokens"]
    return (f"{line['attempts']} attempt{'s' if line['attempts'] != 1 else ''}, {tokens['input']:,} in + "
            f"{tokens['cached']:,} cached + {tokens['output']:,} out tokens, "
            f"{money(line['cost_usd'], line.get('cost_is_lower_bound', False))}, {_duration(line['wall_s'])}")


def task_state(line: dict[str, Any]) -> str:
    """`pending`, `done`, ... or `blocked (T-1 failed)`."""
    state: str = line.get("blocked") or line["status"]
    return state


def _progress(summary: dict[str, Any]) -> str:
    return summary.get("progress") or f"{sum(t['status'] == TaskStatus.done for t in summary['tasks'])}/{len(summary['tasks'])}"


def _duration(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _current(summary: dict[str, Any]) -> str:
    if summary["state"] not in LIVE or not summary.get("current_task"):
        return "-"
    current = f"{summary['current_task']} #{summary['iteration']}" if summary.get("iteration") else summary["current_task"]
    waits = [w for w in summary.get("waiting") or [] if w["task"] == summary["current_task"]]
    if not waits:
        return current
    w = waits[0]
    waited = f", {int(w['waited_s'])} s" if w.get("waited_s") is not None else ""
    retry = f", attempt {w['attempt']}" if w["attempt"] > 1 else ""
    return f"{current} (waits on {'retry of ' if w['on'] == 'retry' else ''}{w['name']}{waited}{retry})"


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
    state: str = summary["state"]
    resumes = summary.get("auto_resumes") or 0
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
    state: str = summary["state"]
    return state == SessionState.archived


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


def _number(value: float) -> str:
    return f"{value:g}"


def _caps(caps: dict[str, dict[str, Any]]) -> str:
    """`spend $0.40 of $1.00 (40%), this run's time 2m10s of 1h00m (4%)`; REACHED when one stopped it."""
    shown = []
    for name, cap in caps.items():
        limit, value = cap["limit"], cap["value"]
        formats: dict[str, Callable[[float], str]] = {"max_spend_usd": money, "max_wall_clock_s": _duration}
        fmt = formats.get(name, _number)
        limit_fmt = {"max_spend_usd": dollars}.get(name, fmt)
        text = f"{CAP_WORDS.get(name, name)} {fmt(value) if value is not None else '-'} of {limit_fmt(limit)}"
        if cap["reached"]:
            text += " REACHED"
        elif value is not None and limit:
            text += f" ({min(999, round(100 * value / limit))}%)"
        shown.append(text)
    return ", ".join(shown)


def _commits(commits: list[dict[str, str]]) -> str:
    """`2 task commits, then 1 placeholder above them: abc1234 FAILED (T-2)`: the branch as it is."""
    done = [c for c in commits if not c["outcome"]]
    held = [f"{c['sha'][:7]} {c['outcome'].upper()} ({c['task']})" for c in commits if c["outcome"]]
    text = plural(len(done), "task commit")
    if held:
        last_done = max((n for n, c in enumerate(commits) if not c["outcome"]), default=-1)
        above = all(n > last_done for n, c in enumerate(commits) if c["outcome"])
        text += (", then " if above and done else ", ") + plural(len(held), "placeholder") \
            + (" above them" if above and done else "") + ": " + "; ".join(held)
    return text


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
        *[f"waiting  {(w['task'] + ': ') if w['task'] else ''}on {w['text']}" for w in summary.get("waiting") or []],
        f"elapsed  {_duration(summary.get('elapsed_s', 0))}, "
        f"{token_count(summary.get('tokens', 0), summary.get('unknown_usage_calls', 0), ' tokens')}, "
        f"{spend(summary.get('cost_usd', 0), summary.get('cost_is_lower_bound', False), summary.get('unpriced_calls', 0))}",
    ]
    if pr := summary.get("pr"):
        lines.append(f"pr       {in_words(pr['state'], pr['number'], pr['fixes'], pr.get('question') or '')} ({pr['url']})")
        lines += [f"pr       {line}" for line in pr.get("unheeded") or []]
    lines += [f"commits  {_commits(summary['commits'])}"] if summary.get("commits") else []
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
