"""The dashboard's forms: answer a parked task's question, leave a note for the next task, stop,
resume (the session page), and the login form. Each is a plain POST with the CSRF token
(`web/access.py`), so it works without script; the page's script sends it in the background and
says what was done (`web/assets.py`). Which buttons show follows the session's state."""

from __future__ import annotations

from typing import Any

from tilth.web.pages import e, href

STOPPABLE = ("running", "queued", "paused", "crashed")
RESUMABLE = ("stopped", "failed", "crashed", "paused")
MAX_TEXT = 8000
"""The longest answer or note a form takes (`store/answers.MAX_ANSWER_CHARS`)."""


def _form(action: str, csrf: str, inner: str, cls: str) -> str:
    return (f'<form method="post" action="{e(action)}" class="act {cls}">'
            f'<input type="hidden" name="csrf" value="{e(csrf)}">{inner}</form>')


def answer_forms(sid: str, questions: list[dict[str, Any]], csrf: str) -> str:
    """Each open question of the session, with the form that answers it."""
    out = []
    for q in questions:
        if q.get("answered"):
            out.append(f'<div class="question answered" data-question="{e(q["task"])}"><b>{e(q["task"])}</b> '
                       "answered; the task runs again at the next boundary</div>")
            continue
        said = e(q["question"]) if q.get("question") else '<span class="muted">(the question was not recorded)</span>'
        context = f'<div class="muted context">{e(q["context"])}</div>' if q.get("context") else ""
        field = f'answer-{q["task"]}'
        inner = (f'<label for="{e(field)}">your answer</label><textarea id="{e(field)}" name="text" rows="3" '
                 f'maxlength="{MAX_TEXT}" required></textarea><input type="hidden" name="task" value="{e(q["task"])}">'
                 '<button type="submit">answer</button>')
        out.append(f'<div class="question" data-question="{e(q["task"])}"><div><b>{e(q["task"])}</b> asks '
                   f'<span class="muted">(the {e(q.get("asked_by") or "worker")})</span>:</div>'
                   f'<div class="q-text">{said}</div>{context}'
                   + _form(href("s", sid, "answer"), csrf, inner, "answer") + "</div>")
    return "".join(out)


def controls(sid: str, s: dict[str, Any], csrf: str, resumable: tuple[str, ...] = RESUMABLE) -> str:
    """The note form, and stop or resume as the state allows (`resumable`: the states a resume is offered in)."""
    if "error" in s:
        return ""
    state = s.get("state")
    if state in ("done", "archived"):
        return f'<p class="muted">nothing to do here: the session is {e(state)}</p>'
    note = _form(href("s", sid, "note"), csrf,
                 f'<label for="note-text">a note for the next task</label><textarea id="note-text" name="text" '
                 f'rows="2" maxlength="{MAX_TEXT}" required></textarea><button type="submit">leave note</button>', "note")
    buttons = ""
    if state in STOPPABLE:
        buttons += _form(href("s", sid, "stop"), csrf, '<button type="submit" class="danger">stop</button>', "stop")
    if state in resumable:
        buttons += _form(href("s", sid, "resume"), csrf, '<button type="submit">resume</button>', "resume")
    return f'{note}<div class="buttons" data-state="{e(state)}">{buttons}</div>'


def login_form(wanted: str, failed: bool) -> str:
    """The configured token's form (a one-time login link needs none)."""
    said = '<p class="error">that token is not right</p>' if failed else ""
    inner = (f'<input type="hidden" name="next" value="{e(wanted)}"><label for="token">or the token</label>'
             '<input id="token" name="token" type="password" autocomplete="current-password" required>'
             '<button type="submit">open</button>')
    return f'{said}<form method="post" action="/login" class="act login">{inner}</form>'
