"""The dashboard's HTML: whole pages and the fragments the live streams replace by id.
Plain HTML with one inline stylesheet and script (`web/assets.py`); every piece of text from a
session (titles, verdicts, diffs, log lines, file contents) goes through `html.escape`."""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

from tilth.views.figures import dollars, spend, verdict_label
from tilth.views.pr_state import followups, pr_words
from tilth.views.status import receipt_text, rows, task_state
from tilth.web.assets import CSS, SESSION_JS, SESSIONS_JS
from tilth.web.data import Attempt, CommitDiff
from tilth.web.rendered import markdown


def e(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def href(*parts: str) -> str:
    return "/" + "/".join(quote(p, safe="") for p in parts)


def page(title: str, body: str, nonce: str, script: str = "", data: dict[str, str] | None = None) -> str:
    attrs = "".join(f' data-{k}="{e(v)}"' for k, v in (data or {}).items())
    js = f'<script nonce="{e(nonce)}">{script}</script>' if script else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
            '<meta name="viewport" content="width=device-width,initial-scale=1"><link rel="icon" href="/favicon.ico">'
            f'<style>{CSS}</style></head>'
            f"<body{attrs}>{body}{js}</body></html>")


def bar(done: float, total: float, cls: str = "") -> str:
    pct = 0 if not total else max(0, min(100, round(100 * done / total)))
    return f'<span class="bar {cls}" title="{pct}%"><span style="width:{pct}%"></span></span>'


# -- one session --------------------------------------------------------------------------

def head(s: dict[str, Any]) -> str:
    if "error" in s:
        return f'<p class="error">{e(s["error"])}</p>'
    _, state, progress, current, elapsed, tokens, cost, branch = rows([s])[0]
    reason = f'<div>reason: {e(s["reason"])}</div>' if s.get("reason") else ""
    backend = e(s.get("backend")) + (" (test/demo backend, no model)" if s.get("backend") == "scripted" else "")
    return (f'<div>state: <b class="state badge state-{e(s["state"])}">{e(state)}</b>, '
            f'{bar(s.get("tasks_done", 0), len(s.get("tasks") or []))}{e(progress)} done, current {e(current)}</div>'
            f'{reason}{pull_request(s)}<div class="muted">branch {e(branch)} · backend {backend} · '
            f'{e(tokens)} tokens · {e(cost)} · elapsed {e(elapsed)}</div>')


def pull_request(s: dict[str, Any]) -> str:
    """The PR's state in words, its URL as text (never a link the page follows) and its follow-up tasks."""
    pr = s.get("pr")
    if not pr:
        return ""
    tasks = "".join(f'<li data-followup="{e(t["id"])}">{e(t["id"])} {e(t["title"])}: {e(task_state(t))}</li>'
                    for t in followups(s.get("tasks") or []))
    return (f'<div class="pr" data-pr-state="{e(pr.get("state"))}">{e(pr_words(pr))} '
            f'<span class="muted">{e(pr.get("url"))}</span></div>'
            + (f'<ul class="followups">{tasks}</ul>' if tasks else ""))


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


METERS = (("max_spend_usd", "spend", dollars),
          ("max_wall_clock_s", "wall clock (all runs)", duration),
          ("max_evaluator_calls_per_task", "evaluator calls (current task)", lambda v: f"{v:g}"))


def meters(s: dict[str, Any]) -> str:
    if "error" in s:
        return ""
    caps, out = s.get("caps") or {}, []
    plain = {"max_spend_usd": s.get("cost_usd"), "max_wall_clock_s": s.get("elapsed_s"), "max_evaluator_calls_per_task": None}
    for name, label, fmt in METERS:
        cap = caps.get(name)
        if cap is None:
            value = plain[name]
            shown = "-" if value is None else (spend(value, s.get("cost_is_lower_bound", False),
                                                     s.get("unpriced_calls", 0), 2, brief=True)
                                               if name == "max_spend_usd" else fmt(value))
            out.append(f'<div data-meter="{name}">{e(label)}: {e(shown)} <span class="muted">(no cap)</span></div>')
            continue
        value, limit = cap.get("value"), cap.get("limit") or 0
        ratio = (value or 0) / limit if limit else 0
        cls = "over" if cap.get("reached") or ratio >= 1 else "hot" if ratio >= 0.8 else ""
        text = f"{'-' if value is None else fmt(value)} of {fmt(limit)}"
        if value is None and name == "max_wall_clock_s":
            text = f"not running (cap {fmt(limit)})"
        text += " REACHED" if cap.get("reached") else ""
        out.append(f'<div data-meter="{name}">{bar(value or 0, limit, cls)}{e(label)}: {e(text)}</div>')
    return "".join(out)


def _why(t: dict[str, Any], v: dict[str, Any]) -> str:
    """The last verdict in words (a failed task: why it failed), as `tilth status` says it."""
    return str((v.get("failure") if t.get("status") == "failed" else None) or v.get("why") or v.get("last_verdict", ""))


def waiting_since(w: dict[str, Any]) -> str:
    """`waiting on the worker's model gpt-4o-mini since 14:02:07 UTC (attempt 2)`: a time, which a page
    that is not redrawn every second keeps true."""
    what = {"agent": "agent", "retry": "model"}.get(w["on"], "model")
    retry = "to retry " if w["on"] == "retry" else ""
    attempt = f" (attempt {w['attempt']})" if w["attempt"] > 1 else ""
    return f"waiting {retry}on the {w['role']}'s {what} {w['name']} since {w['since'][11:19]} UTC{attempt}"


def tasks(s: dict[str, Any]) -> str:
    if "error" in s:
        return ""
    verdicts = s.get("verdicts") or {}
    out = ['<div class="wide"><table><thead><tr><th>task</th><th>title</th><th>status</th><th>attempts</th>'
           '<th>last verdict</th><th class="receipt">receipt</th></tr></thead><tbody>']
    for t in s.get("tasks") or []:
        v = verdicts.get(t["id"]) or {}
        iters = v.get("attempts") or ""
        if t["id"] == s.get("current_task") and s.get("iteration") and t["status"] == "in_progress":
            iters = f"#{s['iteration']} now"
        waits = "".join(f'<div class="muted waiting">{e(waiting_since(w))}</div>'
                        for w in s.get("waiting") or [] if w["task"] == t["id"])
        out.append(f'<tr data-task="{e(t["id"])}"><td>{e(t["id"])}</td><td>{e(t["title"])}</td>'
                   f'<td class="status status-{e(t["status"])}">{e(task_state(t))}{waits}</td>'
                   f'<td class="iters num">{e(iters)}</td><td class="verdict">{e(_why(t, v))}</td>'
                   f'<td class="receipt">{e(receipt_text(t) if t.get("attempts") or t.get("cost_usd") else "")}'
                   "</td></tr>")
    return "".join(out) + "</tbody></table></div>"


def _attempt(tid: str, a: Attempt) -> str:
    label = verdict_label(a.verdict, a.category, a.concern, limit=2000)
    criteria = "".join(f"<li>{e(c)}: <span class='muted'>{e(ev)}</span></li>" for c, ev in a.criteria)
    details = (f'<details id="case-{e(tid)}-{a.iteration}"><summary>case criteria ({len(a.criteria)})</summary>'
               f"<ul>{criteria}</ul></details>") if a.criteria else ""
    panel = "".join(f'<div class="panel">{e(who)}: <span class="v-{e(v)}">{e(verdict_label(v, cat, con, limit=500))}'
                    "</span></div>" for who, v, cat, con in a.panel)
    nxt = f'<div class="muted">next step: {e(a.next_step)}</div>' if a.next_step and a.verdict != "accept" else ""
    return (f'<div class="attempt" data-iter="{a.iteration}"><div>#{a.iteration} '
            f'<span class="verdict-word v-{e(a.verdict)}">{e(a.verdict)}</span> '
            f'<span class="verdict-text">{e(label[len(a.verdict):].lstrip(" :") if label != a.verdict else "")}</span>'
            f' <span class="muted">{e(a.ts)}</span></div><div>case: {e(a.summary)}</div>{details}{panel}{nxt}</div>')


def ledger(entries: dict[str, list[Attempt]], titles: dict[str, str]) -> str:
    if not entries:
        return '<p class="muted">no evaluations yet</p>'
    return "".join(f'<div class="ledger-task" data-ledger="{e(tid)}"><b>{e(tid)}</b> {e(titles.get(tid, ""))}'
                   + "".join(_attempt(tid, a) for a in attempts) + "</div>" for tid, attempts in entries.items())


def commits(sid: str, records: list[dict[str, str]]) -> str:
    if not records:
        return '<p class="muted">no commits on the branch yet</p>'
    out = ['<div class="wide"><table><thead><tr><th>commit</th><th>task</th><th>subject</th><th>attempts</th></tr>'
           "</thead><tbody>"]
    held = [c for c in records if c.get("Tilth-Outcome") in ("failed", "parked")]
    for c in records:
        failed = c.get("Tilth-Outcome") == "failed"
        out.append(f'<tr data-commit="{e(c["sha"])}"><td><a href="{href("s", sid, "commit", c["sha"])}">'
                   f'<code>{e(c["sha"])}</code></a></td><td>{e(c.get("Tilth-Task"))}</td>'
                   f'<td{" class=error" if failed else ""}>{e(c.get("subject"))}</td>'
                   f'<td class="num">{e(c.get("Tilth-Iterations"))}</td></tr>')
    note = (f'<p class="muted">{len(held)} placeholder{"s" if len(held) > 1 else ""} (partial work of a task not '
            "done) above the task commits; each task's retry replaces its placeholder with the task's one commit</p>"
            if held else "")
    return "".join(out) + "</tbody></table></div>" + note


def text(body: str | None, missing: str, rendered: bool) -> str:
    """A session's text file: transcript.md rendered as markdown, report.md (aligned plain text) as it is."""
    if body is None:
        return f'<p class="muted">{e(missing)}</p>'
    return markdown(body) if rendered else f"<pre>{e(body)}</pre>"


def task_details(details: list[dict[str, Any]]) -> str:
    """Each task's description and criteria, rendered from the plan's markdown."""
    out = []
    for t in details:
        criteria = "".join(f"<li>{markdown(c)}</li>" for c in t["criteria"])
        out.append(f'<details class="task-detail" id="detail-{e(t["id"])}"><summary><b>{e(t["id"])}</b> '
                   f'{e(t["title"])}</summary>{markdown(t["description"]) if t["description"] else ""}'
                   + (f"<div>criteria:</div><ul>{criteria}</ul>" if criteria else "") + "</details>")
    return "".join(out)


SECTIONS = (("head", None), ("meters", "meters"), ("tasks", "tasks"), ("ledger", "ledger (each evaluated attempt)"),
            ("commits", "commits on the branch"), ("report", "report"), ("transcript", "transcript"),
            ("questions", None), ("act", "act"), ("details", "task details"))


def session_page(sid: str, parts: dict[str, str], nonce: str) -> str:
    def section(name: str, title: str | None) -> str:
        return (f"<h2>{e(title)}</h2>" if title else "") + f'<div id="{name}">{parts.get(name, "")}</div>'

    left = "".join(section(n, t) for n, t in SECTIONS if n in ("meters", "tasks", "commits"))
    sections = (section(*SECTIONS[0]) + section(*SECTIONS[7]) + '<p id="acted" role="status"></p>'
                + section(*SECTIONS[8]) + f'<div class="grid"><div>{left}{section(*SECTIONS[9])}</div>'
                f'<div>{section(*SECTIONS[3])}</div></div><h2>events</h2><pre id="log"></pre>'
                + "".join(section(n, t) for n, t in SECTIONS[5:7]))
    body = (f'<p><a href="/">&larr; all sessions</a></p><h1>session {e(sid)} <span id="live"></span></h1>{sections}')
    return page(f"tilth {sid}", body, nonce, SESSIONS_JS + SESSION_JS,
                {"state": href("s", sid, "live", "state"), "log": href("s", sid, "live", "log")})


def _diff_line(line: str, in_patch: bool) -> str:
    cls = ""
    if line.startswith("diff --git"):
        cls = "file"
    elif in_patch and line.startswith(("+++", "---")):
        cls = "meta"
    elif in_patch and line.startswith("+"):
        cls = "add"
    elif in_patch and line.startswith("-"):
        cls = "del"
    elif in_patch and line.startswith("@@"):
        cls = "hunk"
    return f'<span class="{cls}">{e(line)}</span>' if cls else e(line)


def commit_page(sid: str, diff: CommitDiff, nonce: str) -> str:
    lines, in_patch, out = diff.text.splitlines(), False, []
    for line in lines:
        in_patch = in_patch or line.startswith("diff --git")
        out.append(_diff_line(line, in_patch))
    cut = '<p class="muted">[... the rest of this diff is not shown ...]</p>' if diff.truncated else ""
    body = (f'<p><a href="{href("s", sid)}">&larr; session {e(sid)}</a></p><h1>commit <code>{e(diff.sha[:12])}</code>'
            f'</h1><pre class="diff">{chr(10).join(out)}</pre>{cut}')
    return page(f"tilth {sid} {diff.sha[:12]}", body, nonce)


def message_page(title: str, message: str, nonce: str) -> str:
    return page(title, f'<p><a href="/">&larr; all sessions</a></p><h1>{e(title)}</h1><p>{e(message)}</p>', nonce)
