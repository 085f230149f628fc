"""A dispatched session on the dashboard (one this machine has no directory of but the broker knows): its
row and its questions on the first page, its page (state, tasks, questions with the forms that answer
them, note/stop/resume, the events its worker relayed (`web/live.relayed_stream`)). All of it is what
the broker holds (`actions/remote_read.py`, `views/remote_status.py`), which is untrusted: every string
escaped, ids checked before they name a page, and nothing of it decides a URL, a path or what runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilth.views.remote_status import current_of, progress_of, questions_of, tasks_of
from tilth.views.reasons import session_end
from tilth.web import forms
from tilth.web.assets import SESSION_JS, SESSIONS_JS
from tilth.web.pages import bar, e, href, page

if TYPE_CHECKING:
    from tilth.actions.remote import Dispatched
    from tilth.actions.remote_read import Listing

ATTENTION = ("waiting", "paused", "failed", "crashed", "refused", "forgotten")
RESUMABLE = (*forms.RESUMABLE, "refused", "forgotten")
BADGE = '<span class="badge dispatched" title="runs on a worker through the broker">dispatched</span>'


DOWN_S = 10.0
"""An unreachable broker is asked again only after this long (a connection may take seconds to fail)."""
_down: dict[Path, tuple[float, Listing]] = {}


def listing(home: Path) -> Listing | None:
    """The broker's sessions this machine has no directory of; None without `[dispatch]`."""
    from tilth.actions.remote_read import listing as read

    said = _down.get(home)
    if said is not None and time.monotonic() < said[0]:
        return said[1]
    found = read(home, skip_local=True, with_forgotten=False)
    if found is not None and found.down:
        _down[home] = (time.monotonic() + DOWN_S, found)
    return found


def rows(home: Path, found: Listing | None) -> str:
    """The first page's rows of dispatched sessions, or the one line that says the broker is unreachable."""
    if found is None:
        return ""
    if found.down:
        return (f'<tr class="broker-down"><td colspan="7" class="error" id="broker-down">dispatched sessions: '
                f'{e(found.down)}</td></tr>')
    from tilth.actions.remote_read import broker_for, relayed_spend

    broker, out = broker_for(home), []
    if broker is None:  # [dispatch] removed since the listing was read
        return ""
    for s in found.states:
        sid, state = s["id"], str(s.get("state") or "?")
        done, total = progress_of(s)
        worker = f'on {s["worker"]}' if s.get("worker") else "no worker holds it"
        out.append(f'<tr data-session="{e(sid)}" data-dispatched="1" class="row-{e(state)}"><td>'
                   f'<a href="{href("s", sid)}">{e(sid)}</a> {BADGE}<div class="muted worker">{e(worker)}</div></td>'
                   f'<td><span class="state badge state-{e(state)}">{e(state)}</span></td>'
                   f'<td class="progress">{bar(done, total)}{e(s.get("progress") or "?")}</td>'
                   f'<td class="current">{e(current_of(s) or "-")}</td><td class="num">{e(relayed_spend(broker, sid))}</td>'
                   '<td class="num narrow-hide">-</td><td class="muted narrow-hide">dispatched</td></tr>')
    return "".join(out)


def needs(found: Listing | None) -> list[str]:
    """The "needs you" items of dispatched sessions: each open question, each session waiting on a person."""
    if found is None or found.down:
        return []
    out = []
    for s in found.states:
        sid, asked = s["id"], questions_of(s)
        titles = {t["id"]: t["title"] for t in tasks_of(s)}
        for q in asked:
            said = e(q["question"]) or '<span class="muted">(the question was not recorded)</span>'
            out.append(f'<li class="need question" data-question="{e(sid)}/{e(q["task"])}"><div class="q-text">{said}'
                       f'</div><div class="muted">task <b>{e(q["task"])}</b> {e(titles.get(q["task"], ""))} · session '
                       f'<a href="{href("s", sid)}">{e(sid)}</a> {BADGE}</div>'
                       f'<a class="button" href="{href("s", sid)}#answer-{e(q["task"])}">answer</a></li>')
        state = str(s.get("state") or "")
        if state in ATTENTION and not (state == "waiting" and asked):
            reason = session_end(state, str(s.get("reason") or ""))
            out.append(f'<li class="need attention state-{e(state)}" data-attention="{e(sid)}"><a href="'
                       f'{href("s", sid)}">{e(sid)}</a> {BADGE} <span class="badge state-{e(state)}">{e(state)}</span>'
                       f'<div>{e(reason)}</div></li>')
    return out


def summary(place: Dispatched) -> dict[str, Any]:
    """`/api/s/<id>` of a dispatched session: the broker's state hash as the lookup read it."""
    return {**place.state, "dispatched": True}


class Parts:
    """A dispatched session page's fragments, from the broker's state hash read again at each call."""

    def __init__(self, place: Dispatched, csrf: str):
        self.place, self.sid, self.csrf = place, place.id, csrf

    def __call__(self) -> dict[str, str]:
        from tilth.actions.remote import Unreachable
        from tilth.actions.remote_read import relayed_spend

        try:
            state = self.place.fresh_state()
        except Unreachable as exc:
            return {"head": f'<p class="error" id="broker-down">{e(str(exc))}</p>'}
        spent = relayed_spend(self.place.broker, self.sid, 4)
        return {"head": head(state, spent), "tasks": task_table(state),
                "questions": forms.answer_forms(self.sid, questions_of(state), self.csrf),
                "act": forms.controls(self.sid, {"state": state.get("state")}, self.csrf, RESUMABLE)}


def head(state: dict[str, Any], spent: str) -> str:
    name = str(state.get("state") or "?")
    done, total = progress_of(state)
    reason = session_end(name, str(state.get("reason") or ""))
    worker = f'on {state["worker"]}' if state.get("worker") else "no worker holds it"
    return (f'<div>state: <b class="state badge state-{e(name)}">{e(name)}</b> {BADGE}, {bar(done, total)}'
            f'{e(state.get("progress") or "?")} done, current {e(current_of(state) or "-")}</div>'
            + (f'<div>reason: {e(reason)}</div>' if reason else "")
            + f'<div class="muted">{e(worker)} · branch {e(state.get("branch"))} on {e(state.get("remote"))} · '
            f'spend {e(spent)} <span class="muted">(the model calls the broker relayed)</span></div>')


def task_table(state: dict[str, Any]) -> str:
    listed = tasks_of(state)
    if not listed:
        return '<p class="muted">the broker lists no tasks yet</p>'
    return ('<div class="wide"><table><thead><tr><th>task</th><th>title</th><th>status</th></tr></thead><tbody>'
            + "".join(f'<tr data-task="{e(t["id"])}"><td>{e(t["id"])}</td><td>{e(t["title"])}</td>'
                      f'<td class="status status-{e(t["status"])}">{e(t["status"])}</td></tr>' for t in listed)
            + "</tbody></table></div>")


def session_page(sid: str, parts: dict[str, str], nonce: str) -> str:
    def section(name: str, title: str | None = None) -> str:
        return (f"<h2>{e(title)}</h2>" if title else "") + f'<div id="{name}">{parts.get(name, "")}</div>'

    body = (f'<p><a href="/">&larr; all sessions</a></p><h1>session {e(sid)} <span id="live"></span></h1>'
            + section("head") + section("questions") + '<p id="acted" role="status"></p>' + section("act", "act")
            + section("tasks", "tasks") + '<h2>events <span class="muted">(relayed by the broker)</span></h2>'
            '<pre id="log"></pre>')
    return page(f"tilth {sid}", body, nonce, SESSIONS_JS + SESSION_JS,
                {"state": href("s", sid, "live", "state"), "log": href("s", sid, "live", "log")})
