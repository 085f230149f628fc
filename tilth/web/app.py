"""The dashboard's routes (Starlette):

  /                           needs you, every session, live    /api/sessions       the sessions, as JSON
  /s/<id>                     one session, live, with its forms /api/s/<id>         `tilth status <id> --json`
  /s/<id>/commit/<sha>        one commit of session/<id>        /s/<id>/live/{state,log}  its SSE streams
  /live/sessions              the first page's stream           /favicon.ico        the icon
  POST /s/<id>/{answer,note,stop,resume}   a person's action (`web/acting.py`)
  /login                      a one-time login link used (GET ?once=), how to log in (GET), the token checked (POST)

Ids are checked with `store/home.check_session_id`; an unknown session or commit is a 404. Who
may ask, the CSRF token and the headers are `web/access.py`'s; how a stream is sent, capped and
dropped when its client stalls is `web/streaming.py`'s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tilth.actions.place import Here
from tilth.actions.remote import Dispatched
from tilth.store.home import SessionPaths
from tilth.web import data, dispatched, live, overview, pages
from tilth.web.access import Guard, csrf_token, html, nonce
from tilth.web.acting import action_routes, login_routes
from tilth.web.assets import FAVICON
from tilth.web.streaming import EventStream, StreamGate

Answer = Response | EventStream
"""What a route gives: a response, or a live stream (an ASGI app of its own)."""


def make_app(home: Path, token: str | None = None, loopback_only: bool = True,
             stopping: live.Stopping = lambda: False, gate: StreamGate | None = None) -> Guard:
    gate = gate or StreamGate()

    def paths(request: Request) -> SessionPaths:
        return data.paths_of(home, request.path_params["sid"])

    def place(request: Request) -> Here | Dispatched:
        return data.place_of(home, request.path_params["sid"])

    def guarded(handler: Callable[[Request], Awaitable[Answer]]) -> Callable[[Request], Awaitable[Answer]]:
        async def endpoint(request: Request) -> Answer:
            try:
                return await handler(request)
            except data.NotFound as exc:
                return html(request, pages.message_page("not found", str(exc), nonce(request)), 404)
        return endpoint

    async def sessions(request: Request) -> Response:
        return html(request, overview.sessions_page(live.overview_parts(home), nonce(request)))

    async def sessions_json(request: Request) -> Response:
        return JSONResponse(data.overview(home))

    async def sessions_live(request: Request) -> EventStream:
        return EventStream(lambda: live.state_stream(lambda: live.overview_parts(home), stopping), gate)

    # A session this machine has is drawn from its files, a dispatched one from what the broker holds.
    async def session(request: Request) -> Response:
        found = await asyncio.to_thread(place, request)
        if isinstance(found, Here):
            parts = live.SessionParts(found.paths, csrf_token(request))()
            return html(request, pages.session_page(found.id, parts, nonce(request)))
        remote = dispatched.Parts(found, csrf_token(request))
        return html(request, dispatched.session_page(found.id, await asyncio.to_thread(remote), nonce(request)))

    async def session_json(request: Request) -> Response:
        found = await asyncio.to_thread(place, request)
        return JSONResponse(data.summary(found.paths) if isinstance(found, Here) else dispatched.summary(found))

    async def session_state(request: Request) -> EventStream:
        found = await asyncio.to_thread(place, request)
        parts: Callable[[], dict[str, str]] = (live.SessionParts(found.paths, csrf_token(request))
                                               if isinstance(found, Here) else dispatched.Parts(found, csrf_token(request)))
        return EventStream(lambda: live.state_stream(parts, stopping), gate)

    async def session_log(request: Request) -> EventStream:
        found, resume_at = await asyncio.to_thread(place, request), request.headers.get("last-event-id")
        if isinstance(found, Here):
            return EventStream(lambda: live.log_stream(found.paths, resume_at, stopping), gate)
        return EventStream(lambda: live.relayed_stream(found, resume_at, stopping), gate)

    async def commit(request: Request) -> Response:
        found = paths(request)
        diff = data.commit_diff(found, request.path_params["sha"])
        return html(request, pages.commit_page(found.id, diff, nonce(request)))

    async def favicon(request: Request) -> Response:
        return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    show_login, submit_login = login_routes()
    acts = action_routes(home)
    routes = [Route("/", guarded(sessions)), Route("/api/sessions", guarded(sessions_json)),
              Route("/live/sessions", guarded(sessions_live)), Route("/s/{sid}", guarded(session)),
              Route("/api/s/{sid}", guarded(session_json)), Route("/s/{sid}/live/state", guarded(session_state)),
              Route("/s/{sid}/live/log", guarded(session_log)), Route("/s/{sid}/commit/{sha}", guarded(commit)),
              Route("/favicon.ico", favicon), Route("/login", show_login, methods=["GET"]),
              Route("/login", submit_login, methods=["POST"]),
              *(Route(f"/s/{{sid}}/{kind}", endpoint, methods=["POST"]) for kind, endpoint in acts.items())]

    async def unknown(request: Request, exc: Exception) -> Response:
        return html(request, pages.message_page("not found", f"nothing at {request.url.path}", nonce(request)), 404)

    app = Starlette(routes=routes, exception_handlers={404: unknown})
    return Guard(app, home, token, loopback_only)
