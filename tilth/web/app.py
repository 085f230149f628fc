"""The dashboard's routes (Starlette), read-only over $TILTH_HOME:

  /                           every session, live          /api/sessions       the same, as JSON
  /s/<id>                     one session, live            /api/s/<id>         `tilth status <id> --json`
  /s/<id>/commit/<sha>        one commit of session/<id>   /s/<id>/live/{state,log}  its SSE streams
  /live/sessions              the sessions page's stream

Ids are checked with `store/home.check_session_id`; an unknown session or commit is a 404. With a
token every request must carry it: `?token=` once (a cookie then carries it), or
`Authorization: Bearer`. Bound to loopback without a token, only loopback Host names are served
(a page elsewhere cannot read the dashboard by rebinding its DNS name to 127.0.0.1).
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tilth.web import data, live, pages

LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}


def _nonce(request: Request) -> str:
    return request.scope.setdefault("tilth.nonce", secrets.token_urlsafe(12))


def html(request: Request, body: str, status: int = 200) -> HTMLResponse:
    nonce = _nonce(request)
    csp = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; connect-src 'self'; "
           "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return HTMLResponse(body, status, headers={"Content-Security-Policy": csp, "Cache-Control": "no-store"})


def stream(source) -> StreamingResponse:
    return StreamingResponse(source, media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def make_app(home: Path, token: str | None = None, loopback_only: bool = True,
             stopping: live.Stopping = lambda: False) -> Callable:
    def paths(request: Request):
        return data.paths_of(home, request.path_params["sid"])

    def missing(request: Request, exc: data.NotFound) -> Response:
        return html(request, pages.message_page("not found", str(exc), _nonce(request)), 404)

    def guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request)
            except data.NotFound as exc:
                return missing(request, exc)
        return endpoint

    async def sessions(request: Request) -> Response:
        return html(request, pages.sessions_page(data.overview(home), _nonce(request)))

    async def sessions_json(request: Request) -> Response:
        return JSONResponse(data.overview(home))

    async def sessions_live(request: Request) -> Response:
        return stream(live.state_stream(lambda: live.overview_parts(home), stopping))

    async def session(request: Request) -> Response:
        found = paths(request)
        return html(request, pages.session_page(found.id, live.SessionParts(found)(), _nonce(request)))

    async def session_json(request: Request) -> Response:
        return JSONResponse(data.summary(paths(request)))

    async def session_state(request: Request) -> Response:
        return stream(live.state_stream(live.SessionParts(paths(request)), stopping))

    async def session_log(request: Request) -> Response:
        return stream(live.log_stream(paths(request), request.headers.get("last-event-id"), stopping))

    async def commit(request: Request) -> Response:
        found = paths(request)
        diff = data.commit_diff(found, request.path_params["sha"])
        return html(request, pages.commit_page(found.id, diff, _nonce(request)))

    routes = [Route("/", guarded(sessions)), Route("/api/sessions", guarded(sessions_json)),
              Route("/live/sessions", guarded(sessions_live)), Route("/s/{sid}", guarded(session)),
              Route("/api/s/{sid}", guarded(session_json)), Route("/s/{sid}/live/state", guarded(session_state)),
              Route("/s/{sid}/live/log", guarded(session_log)), Route("/s/{sid}/commit/{sha}", guarded(commit))]

    async def unknown(request: Request, exc: Exception) -> Response:
        return html(request, pages.message_page("not found", f"nothing at {request.url.path}", _nonce(request)), 404)

    app = Starlette(routes=routes, exception_handlers={404: unknown})
    return Guard(app, token, loopback_only)


class Guard:
    """ASGI wrapper: the token on every request (when there is one), loopback Host names only
    (when bound to loopback without one), and the headers every response gets."""

    def __init__(self, app: Callable, token: str | None, loopback_only: bool):
        self.app, self.token, self.loopback_only = app, token, loopback_only

    def cookie_name(self, scope: dict) -> str:
        port = (scope.get("server") or ("", 0))[1]
        return f"tilth_token_{port}"

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        if self.loopback_only and not self.token and request.url.hostname not in LOOPBACK_NAMES:
            return await PlainTextResponse("this dashboard answers to localhost only\n", 400)(scope, receive, send)
        if self.token:
            given = request.query_params.get("token")
            if given is not None and _same(given, self.token):
                # Once: the cookie carries it from here, and the address bar loses it.
                rest = urlencode([(k, v) for k, v in parse_qsl(request.url.query) if k != "token"])
                response = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), 303)
                response.set_cookie(self.cookie_name(scope), self.token, httponly=True, samesite="strict")
                return await response(scope, receive, send)
            bearer = request.headers.get("authorization", "")
            offered = bearer[7:] if bearer.lower().startswith("bearer ") else request.cookies.get(self.cookie_name(scope))
            if not offered or not _same(offered, self.token):
                return await PlainTextResponse("a token is required: open the dashboard's address with ?token=...\n",
                                               401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-content-type-options", b"nosniff"),
                                      (b"referrer-policy", b"no-referrer")]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
