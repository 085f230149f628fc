"""The dashboard's POST routes: answer, note, stop, resume (each the same operation the CLI's command
calls, `actions/`, with by="dashboard", so it is recorded as the CLI's would be and works for a
dispatched session too), and the login: a one-time link (`GET /login?once=...`) or the configured
token's form. Every POST comes from this dashboard's own pages (`Origin`, checked by `web/access.py`
before any route) and, but the login form, carries the CSRF token of the login that sends it; the body
is a small urlencoded form read here (no multipart parser). The page's script asks for JSON (`Accept:
application/json`: {ok, what} or {ok: false, error}); a plain form post gets a 303 back to the page.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from tilth.core.errors import TilthError
from tilth.web import data, pages
from tilth.store.dashboard_secret import LOGIN_PARAM
from tilth.web.access import HOW_TO_LOG_IN, Guard, html, local_path, login_page, nonce, same
from tilth.web.forms import MAX_TEXT

Endpoint = Callable[[Request], Awaitable[Response]]
FORM_BYTES = 64 << 10
BY = "dashboard"


class Refused(Exception):
    """A POST that is not let through: (status, one line)."""

    def __init__(self, status: int, line: str):
        super().__init__(line)
        self.status = status


async def read_form(request: Request, csrf: bool = True) -> dict[str, str]:
    """The urlencoded body, checked: its size and (with `csrf`) the CSRF token of this request's login."""
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
    if csrf and not guard.csrf_ok(request, form.get("csrf")):
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


def action_routes(home: Path) -> dict[str, Endpoint]:
    """The endpoints of POST /s/<id>/{answer,note,stop,resume}."""
    def do(kind: str) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            sid = request.path_params["sid"]
            try:
                await asyncio.to_thread(data.place_of, home, sid)  # a session here, or one the broker knows
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


def login_routes() -> tuple[Endpoint, Endpoint]:
    """GET /login?once=<token>: a one-time link used, the cookie set, on to the first page (so the link
    leaves the address bar); GET /login: how to log in; POST /login: the configured token checked, the
    cookie set, back to `next` (a path on this dashboard only)."""
    async def show(request: Request) -> Response:
        guard: Guard = request.scope["tilth.guard"]
        once = request.query_params.get(LOGIN_PARAM)
        if once is not None:
            if not await asyncio.to_thread(guard.secret.use_login, once):
                return html(request, pages.message_page(
                    "log in", f"This login link was used already or has expired: {HOW_TO_LOG_IN}.",
                    nonce(request)), 401)
            response = RedirectResponse("/", 303)
            guard.sign_in(response, request.scope)
            return response
        wanted = local_path(request.query_params.get("next"))
        if request.scope.get("tilth.login"):
            return RedirectResponse(wanted, 303)
        failed = request.query_params.get("failed") == "1"
        return login_page(request, wanted, 401 if failed else 200, failed)

    async def submit(request: Request) -> Response:
        guard: Guard = request.scope["tilth.guard"]
        try:
            form = await read_form(request, csrf=False)  # no login to bind it to yet; the Origin was checked
        except Refused as exc:
            return html(request, pages.message_page("not done", str(exc), nonce(request)), exc.status)
        wanted = local_path(form.get("next"))
        if guard.token is None or not same(form.get("token", ""), guard.token):
            return RedirectResponse("/login?" + urlencode({"next": wanted, "failed": "1"}), 303)
        response = RedirectResponse(wanted, 303)
        guard.sign_in(response, request.scope)
        return response

    return show, submit
