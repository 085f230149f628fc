"""The dashboard's first page: "needs you" first (every open question with its task and how long it
has waited, the sessions waiting, paused, failed or crashed with their reason, the spend of the
last 24 hours), then every session. Both are fragments the page's live stream replaces by id."""

from __future__ import annotations

from typing import Any

from tilth.views.figures import money
from tilth.views.pr_state import pr_words
from tilth.views.status import rows
from tilth.web.assets import SESSIONS_JS
from tilth.web.pages import bar, duration, e, href, page

STATE_WORDS = {"waiting": "waiting for your answer", "paused": "paused", "failed": "failed", "crashed": "crashed",
               "unreadable": "cannot be read"}


def waited(seconds: float | None) -> str:
    if seconds is None:
        return "for a while"
    if seconds < 60:
        return "under a minute"
    return duration(seconds)


def needs_you(needs: dict[str, Any], more: list[str] | None = None) -> str:
    """The "needs you" list; `more`: items of dispatched sessions (`web/dispatched.needs`)."""
    questions, attention, spend = needs["questions"], needs["attention"], needs["spend"]
    out = []
    for q in questions:
        link = href("s", q["session"])
        said = e(q["question"]) if q["question"] else '<span class="muted">(the question was not recorded)</span>'
        context = f'<div class="muted context">{e(q["context"])}</div>' if q["context"] else ""
        out.append(f'<li class="need question" data-question="{e(q["session"])}/{e(q["task"])}">'
                   f'<div class="q-text">{said}</div>{context}<div class="muted">task <b>{e(q["task"])}</b> '
                   f'{e(q["title"])} · session <a href="{link}">{e(q["session"])}</a> · asked by the '
                   f'{e(q["asked_by"] or "worker")} · waiting {e(waited(q["waited_s"]))}</div>'
                   f'<a class="button" href="{link}#answer-{e(q["task"])}">answer</a></li>')
    for a in attention:
        if a["state"] == "waiting" and any(q["session"] == a["session"] for q in questions):
            continue  # its questions above say it
        until = f' until {e(a["paused_until"])}' if a.get("paused_until") else ""
        out.append(f'<li class="need attention state-{e(a["state"])}" data-attention="{e(a["session"])}">'
                   f'<a href="{href("s", a["session"])}">{e(a["session"])}</a> '
                   f'<span class="badge state-{e(a["state"])}">{e(STATE_WORDS.get(a["state"], a["state"]))}</span>'
                   f'{until}<div>{e(a["reason"])}</div></li>')
    out += more or []
    spent = money(spend["usd"], spend["lower_bound"], 2)
    sessions = f'{spend["sessions"]} session{"" if spend["sessions"] == 1 else "s"}'
    night = f'<p class="spend" id="night-spend">spent in the last 24 hours: <b>{e(spent)}</b> ({e(sessions)})</p>'
    if not out:
        return f'<p class="muted all-clear">nothing needs you right now</p>{night}'
    return f'<ul class="needs">{"".join(out)}</ul>{night}'


def sessions_rows(summaries: list[dict[str, Any]]) -> str:
    if not summaries:
        return '<tr><td colspan="7" class="muted">no sessions; create one with <code>tilth start</code></td></tr>'
    out = []
    for s in summaries:
        link = f'<a href="{href("s", s["id"])}">{e(s["id"])}</a>'
        if "error" in s:
            out.append(f'<tr data-session="{e(s["id"])}"><td>{link}</td>'
                       f'<td colspan="6" class="error">{e(s["error"])}</td></tr>')
            continue
        sid, state, progress, current, elapsed, _tokens, cost, _branch = rows([s])[0]
        total = len(s.get("tasks") or [])
        out.append(f'<tr data-session="{e(sid)}" class="row-{e(s["state"])}"><td>{link}</td>'
                   f'<td><span class="state badge state-{e(s["state"])}">{e(state)}</span>'
                   + (f'<div class="pr muted">{e(pr_words(s["pr"]))}</div>' if s.get("pr") else "") + '</td>'
                   f'<td class="progress">{bar(s.get("tasks_done", 0), total)}{e(progress)}</td>'
                   f'<td class="current">{e(current)}</td><td class="num">{e(cost)}</td>'
                   f'<td class="num narrow-hide">{e(elapsed)}</td><td class="muted narrow-hide">{e(s.get("created"))}</td>'
                   "</tr>")
    return "".join(out)


def sessions_page(parts: dict[str, str], nonce: str) -> str:
    """The whole first page from its fragments (`web/live.overview_parts`: needs, sessions, dispatched)."""
    body = ('<h1>tilth <span id="live"></span></h1><h2>needs you</h2>'
            f'<div id="needs">{parts["needs"]}</div><h2>sessions</h2><div class="wide"><table><thead><tr>'
            '<th>session</th><th>state</th><th>done</th><th>current</th><th>spend</th><th class="narrow-hide">elapsed'
            '</th><th class="narrow-hide">created</th></tr></thead>'
            f'<tbody id="sessions">{parts["sessions"]}</tbody><tbody id="dispatched">{parts["dispatched"]}</tbody>'
            '</table></div>')
    return page("tilth sessions", body, nonce, SESSIONS_JS, {"state": "/live/sessions"})
