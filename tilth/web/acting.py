"""The dashboard's POST routes: answer, note, stop, resume (each the same operation the CLI's command
calls, `actions/`, with by="dashboard", so it is recorded as the CLI's would be and works for a
dispatched session too), and the login form. Every POST carries the CSRF token (`web/access.py`) and comes
from this dashboard's own pages (an `Origin` of another site is refused); the body is a small
urlencoded form read here (no multipart parser). The page's script asks for JSON (`Accept:
application/json`: {ok, what} or {ok: false, error}); a plain form post gets a 303 back to the page.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from tilth.core.errors import TilthError
from tilth.web import data, pages
from tilth.web.access import Guard, csrf_token, html, local_path, nonce, same
from tilth.web.forms import MAX_TEXT, login_form

FORM_BYTES = 64 << 10
BY = "dashboard"


class Refused(Exception):
    """A POST that is not let through: (status, one line)."""

    def __init__(self, status: int, line: str):
        super().__init__(line)
        self.status = status


async def read_form(request: Request) -> dict[str, str]:
    """The urlencoded body, checked: size, same origin, the CSRF token."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        raise Refused(403, "this form was sent from another site; use the dashboard's own page")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_BYTES:
            raise Refused(413, f"the form is over {FORM_BYTES // 1024} KiB")
    try:
        form = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
    except UnicodeDecodeError:
        raise Refused(400, "the form is not UTF-8") from None
    guard: Guard = request.scope["tilth.guard"]
    if not guard.csrf_ok(request, form.get("csrf")):
        raise Refused(403, "the form's CSRF token is missing or stale: reload the page and try again")
    return form


def _text(form: dict[str, str], what: str) -> str:
    text = form.get("text", "").replace("\r\n", "\n").strip()
    if not text:
        raise Refused(400, f"the {what} is empty: write something first")
    if len(text) > MAX_TEXT:
        raise Refused(400, f"the {what} is {len(text):,} characters; at most {MAX_TEXT:,}")
    return text


def _reply(request: Request, sid: str, status: int, payload: dict[str, Any]) -> Response:
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse(payload, status)
    if status >= 400:
        return html(request, pages.message_page("not done", payload["error"], nonce(request)), status)
    return RedirectResponse(pages.href("s", sid), 303)


def action_routes(home: Path) -> dict[str, Callable]:
    """The endpoints of POST /s/<id>/{answer,note,stop,resume}."""
    def do(kind: str) -> Callable:
        async def endpoint(request: Request) -> Response:
            sid = request.path_params["sid"]
            try:
                try:
                    data.paths_of(home, sid)
                except data.NotFound:
                    from tilth.web.dispatched import found  # a dispatched session: the broker must know it

                    await asyncio.to_thread(found, home, sid)
                form = await read_form(request)
                from tilth import actions  # the runner's, supervisor's and broker's code: loaded on the first action

                call = {"answer": lambda: actions.answer_question(home, sid, _text(form, "answer"), by=BY,
                                                                  task=form.get("task") or None),
                        "note": lambda: actions.leave_note(home, sid, _text(form, "note"), by=BY),
                        "stop": lambda: actions.stop_session(home, sid, by=BY),
                        "resume": lambda: actions.resume_session(home, sid, by=BY)}[kind]
                acted = await asyncio.to_thread(call)
            except data.NotFound as exc:
                return _reply(request, sid, 404, {"ok": False, "error": str(exc)})
            except Refused as exc:
                return _reply(request, sid, exc.status, {"ok": False, "error": str(exc)})
            except TilthError as exc:
                return _reply(request, sid, 409, {"ok": False, "error": data.one_line(exc)})
            said = " ".join([acted.what, *acted.warnings])  # the warnings: what the CLI says on stderr
            return _reply(request, sid, 200, {"ok": True, "what": said})
        return endpoint
    return {kind: do(kind) for kind in ("answer", "note", "stop", "resume")}


def login_routes() -> tuple[Callable, Callable]:
    """GET /login: the form; POST /login: the token checked, the cookie set, back to `next` (a path
    on this dashboard only)."""
    async def show(request: Request) -> Response:
        guard: Guard = request.scope["tilth.guard"]
        wanted = local_path(request.query_params.get("next"))
        if guard.token is None:
            return RedirectResponse(wanted, 303)
        failed = request.query_params.get("failed") == "1"
        return html(request, pages.page("tilth login", login_form(wanted, csrf_token(request), failed),
                                         nonce(request)), 401 if failed else 200)

    async def submit(request: Request) -> Response:
        guard: Guard = request.scope["tilth.guard"]
        try:
            form = await read_form(request)
        except Refused as exc:
            return html(request, pages.message_page("not done", str(exc), nonce(request)), exc.status)
        wanted = local_path(form.get("next"))
        if guard.token is None:
            return RedirectResponse(wanted, 303)
        if not same(form.get("token", ""), guard.token):
            return RedirectResponse("/login?" + urlencode({"next": wanted, "failed": "1"}), 303)
        response = RedirectResponse(wanted, 303)
        guard.sign_in(response, request.scope)
        return response

    return show, submit
