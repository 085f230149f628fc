"""`tilth digest [--since 12h] [--json]`: what happened across sessions in a window (overnight),
and what needs the person.

Per session touched in the window (its session.json `updated`, or the roll-up's last event,
whichever is later): the tasks done and failed in the window (the daily memory's lines for that
session, `store/daily_memory.py`) and overall (the plan), spend and running time (the roll-up,
`store/rollup.load_rollup`: only the lines since its last save are folded, the journal is never
read whole), the branch head (short sha, the git CLI) and what needs the person: failed tasks
with their last concern, a stopped, crashed, failed or paused session with its reason, and
parked tasks if the plan or the roll-up says so. No pydantic, pygit2 or openai for a readable home.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any


from tilth.core.clock import parse_utc, utc_now
from tilth.core.errors import BadInput
from tilth.store.daily_memory import Entry, read_since
from tilth.store.home import all_session_ids, session_paths
from tilth.store.prd_peek import peek_plan
from tilth.store.rollup import load_rollup
from tilth.store.session_peek import peek_session
from tilth.store.session_state import effective_state
from tilth.views.figures import duration, plural, spend
from tilth.views.reasons import session_end, task_failure

DEFAULT_SINCE = "24h"
RELATIVE = re.compile(r"^\s*(\d+)\s*([mhd])\s*$")
UNITS = {"m": "minutes", "h": "hours", "d": "days"}
NEEDS_STATES = {"stopped", "crashed", "failed", "paused"}
"""A `waiting` session needs the person too: each parked task is listed with its answer command."""


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """`30m`, `12h`, `2d` back from now, or an ISO time (local unless it has a zone); aware UTC."""
    now = now or utc_now()
    m = RELATIVE.match(text or "")
    if m:
        try:
            return now - timedelta(**{UNITS[m[2]]: int(m[1])})
        except OverflowError:  # further back than datetime reaches (year 1)
            raise BadInput(f"--since {text!r} reaches back before the year 1; give a shorter span") from None
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadInput(f"--since {text!r}: give a span such as 30m, 12h or 2d, or an ISO time such as "
                       "2026-11-24T06:00") from None
    return (moment if moment.tzinfo else moment.astimezone()).astimezone(timezone.utc)


def _head(repo: str, branch: str) -> str | None:
    from tilth.git.gitcli import branch_tip

    try:
        tip = branch_tip(repo, branch)
    except Exception:  # a repo gone or damaged: the digest still speaks of the rest
        return None
    return tip[:7] if tip else None


@dataclass
class SessionDigest:
    id: str
    state: str
    reason: str | None
    touched: str
    branch: str
    head: str | None
    tasks: int
    done: int
    failed: int
    pending: int
    done_in_window: list[str]
    failed_in_window: list[str]
    cost_usd: float
    cost_is_lower_bound: bool
    tokens: int
    running_s: float | None
    needs: list[str] = field(default_factory=list)
    unpriced_calls: int = 0


def session_digest(home: Path, session_id: str, since: datetime, entries: list[Entry],
                   now: datetime) -> SessionDigest | None:
    """The session's digest, or None when nothing touched it since `since`."""
    paths = session_paths(session_id, home)
    view = peek_session(paths)
    roll = load_rollup(paths.events, paths.rollup)
    times = [t for t in (parse_utc(view.updated), parse_utc(roll.clock.last_ts)) if t is not None]
    touched = max(times) if times else None
    if touched is None or touched < since:
        return None
    plan = peek_plan(paths.prd)
    statuses = {t.id: t.status for t in plan}
    titles = {t.id: t.title for t in plan}
    mine = [e for e in entries if e.session == session_id]
    state = effective_state(paths, view)
    needs = []
    for tid, status in statuses.items():
        if status == "failed":
            t = roll.tasks.get(tid)
            why = task_failure(t.attempts or 0, t.category, t.concern, limit=160).removeprefix("failed ") \
                if t is not None and t.verdict == "reject" else ""
            needs.append(f"task {tid} ({titles[tid]}) failed" + (f" {why}" if why else ""))
    parked = sorted({tid for tid, s in statuses.items() if s == "parked"}
                    | {tid for tid, t in roll.tasks.items() if t.status == "parked"})
    needs.extend(f"task {tid} parked, waiting for your answer (`tilth answer {session_id} {tid} \"...\"`)"
                 for tid in parked)
    if state in NEEDS_STATES:
        until = f" until {view.paused_until}" if state == "paused" and view.paused_until else ""
        said = session_end(state, view.reason, roll.stopped_by)
        needs.append((f"session {said}" if said.split(" ", 1)[0] == state else
                      f"session {state}{until}" + (f": {said}" if said else ""))
                     + ("" if state == "paused" else f" (`tilth resume {session_id}`)"))
    running = roll.clock.seconds(now if state == "running" else None)
    return SessionDigest(
        id=session_id, state=state, reason=view.reason, touched=touched.strftime("%Y-%m-%dT%H:%M:%SZ"),
        branch=view.branch, head=_head(view.repo, view.branch), tasks=len(plan),
        done=sum(s == "done" for s in statuses.values()), failed=sum(s == "failed" for s in statuses.values()),
        pending=sum(s in ("pending", "in_progress") for s in statuses.values()),
        done_in_window=[e.task_id for e in mine if e.ok], failed_in_window=[e.task_id for e in mine if not e.ok],
        cost_usd=round(roll.totals.cost_usd, 6), cost_is_lower_bound=roll.totals.cost_is_lower_bound,
        unpriced_calls=roll.totals.unpriced_calls,
        tokens=roll.totals.tokens, running_s=None if running is None else round(running, 1), needs=needs)


def build_digest(home: Path, since: datetime, now: datetime | None = None) -> dict[str, Any]:
    now = now or utc_now()
    entries = read_since(home, since)
    sessions = []
    for session_id in all_session_ids(home):
        try:
            found = session_digest(home, session_id, since, entries, now)
        except BadInput as exc:  # one damaged session: said, the others still shown
            sessions.append({"id": session_id, "error": str(exc)})
            continue
        if found is not None:
            sessions.append(asdict(found))
    sessions.sort(key=lambda s: s.get("touched", ""), reverse=True)
    return {
        "since": since.strftime("%Y-%m-%dT%H:%M:%SZ"), "until": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sessions": sessions,
        "memory": [{"at": e.at.isoformat(), "ok": e.ok, "agent": e.agent, "session": e.session,
                    "task": e.task_id, "title": e.title, "result": e.message} for e in entries],
        "needs_you": [f"{s['id']}: {n}" for s in sessions for n in s.get("needs", [])]
                     + [f"{s['id']}: {s['error']}" for s in sessions if "error" in s],
    }


def _local(ts: str) -> str:
    moment = parse_utc(ts)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M") if moment else ts


def render(digest: dict[str, Any]) -> str:
    sessions = digest["sessions"]
    lines = [f"since {_local(digest['since'])}: {plural(len(sessions), 'session')} touched"]
    for s in sessions:
        if "error" in s:
            lines.append(f"\n{s['id']}: {s['error']}")
            continue
        window = f"{len(s['done_in_window'])} done, {len(s['failed_in_window'])} failed in the window"
        lines.append(f"\n{s['id']} [{s['state']}] {window}; overall {s['done']}/{s['tasks']} done, {s['failed']} "
                     f"failed, {s['pending']} pending")
        lines.append(f"  spend {spend(s['cost_usd'], s['cost_is_lower_bound'], s.get('unpriced_calls', 0))}, "
                     f"{s['tokens']:,} tokens, "
                     f"ran {duration(s['running_s'], 'never ran', hour_seconds=False)}; {s['branch']} at {s['head'] or '(no branch)'}; "
                     f"last activity {_local(s['touched'])}")
        for e in digest["memory"]:
            if e["session"] == s["id"]:
                lines.append(f"  {'done' if e['ok'] else 'failed'}: {e['task']} {e['title']}")
    needs = digest["needs_you"]
    lines.append("\nneeds you:" if needs else "\nnothing needs you")
    lines.extend(f"  - {n}" for n in needs)
    return "\n".join(lines)
