"""Who may use the dashboard, as an ASGI wrapper around every request: the token (when there is
one: `?token=` once or the `/login` form, then a cookie; or `Authorization: Bearer`), loopback Host
names only on a loopback bind without one, the CSRF token every POST must carry, and the headers
every response gets.

Cookies ignore ports, so every cookie's name holds the server's port (another service on the same
host never receives this one's token, nor overwrites it). The CSRF token is an HMAC, under a secret
made at start, of a random per-browser cookie: a page on another site can neither read the cookie
nor compute the token, and a POST without the right one is a 403.
"""

from __future__ import annotations

import hmac
import re
import secrets
from hashlib import sha256
from typing import Callable
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse

LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}
PUBLIC_PATHS = {"/favicon.ico", "/login"}
"""Served without the token: the icon says nothing, and the login form is how the token is given."""
SAFE_PATH = re.compile(r"^/(?![/\\])[A-Za-z0-9/._~%!$&'()*+,;=:@-]*$")
"""A path on this dashboard: one leading slash (never `//host` or `/\\host`, which a browser reads
as another site), no scheme, no control characters."""


def nonce(request: Request) -> str:
    """This response's script nonce (the Content-Security-Policy allows only that script)."""
    return request.scope.setdefault("tilth.nonce", secrets.token_urlsafe(12))


def html(request: Request, body: str, status: int = 200) -> HTMLResponse:
    csp = (f"default-src 'none'; script-src 'nonce-{nonce(request)}'; style-src 'unsafe-inline'; "
           "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
    return HTMLResponse(body, status, headers={"Content-Security-Policy": csp, "Cache-Control": "no-store"})


def csrf_token(request: Request) -> str:
    """The CSRF token the forms of this response carry (its cookie goes with the response when new)."""
    request.scope["tilth.csrf_used"] = True
    guard: Guard = request.scope["tilth.guard"]
    return guard.csrf_for(request.scope["tilth.browser"])


def local_path(wanted: str | None) -> str:
    """Where to go after a login: `wanted` when it is a path on this dashboard, else the first page."""
    return wanted if wanted and SAFE_PATH.match(wanted) else "/"


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


class Guard:
    """The token, the loopback Host check, the CSRF cookie, and the common response headers."""

    def __init__(self, app: Callable, token: str | None, loopback_only: bool):
        self.app, self.token, self.loopback_only = app, token, loopback_only
        self.secret = secrets.token_bytes(32)

    def cookie_name(self, scope: dict, what: str = "token") -> str:
        port = (scope.get("server") or ("", 0))[1]
        return f"tilth_{what}_{port}"

    def csrf_for(self, browser: str) -> str:
        return hmac.new(self.secret, browser.encode(), sha256).hexdigest()

    def csrf_ok(self, request: Request, given: str | None) -> bool:
        browser = request.cookies.get(self.cookie_name(request.scope, "csrf"))
        return bool(browser and given) and same(given, self.csrf_for(browser))

    def signed_in(self, request: Request) -> bool:
        if not self.token:
            return True
        bearer = request.headers.get("authorization", "")
        offered = bearer[7:] if bearer.lower().startswith("bearer ") else request.cookies.get(
            self.cookie_name(request.scope))
        return bool(offered) and same(offered, self.token)

    def sign_in(self, response, scope: dict) -> None:
        response.set_cookie(self.cookie_name(scope), self.token, httponly=True, samesite="strict")

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        if self.loopback_only and not self.token and request.url.hostname not in LOOPBACK_NAMES:
            return await PlainTextResponse("this dashboard answers to localhost only\n", 400)(scope, receive, send)
        if self.token:
            given = request.query_params.get("token")
            if given is not None and same(given, self.token):
                # Once: the cookie carries it from here, and the address bar loses it.
                rest = urlencode([(k, v) for k, v in parse_qsl(request.url.query) if k != "token"])
                response = RedirectResponse(local_path(request.url.path) + (f"?{rest}" if rest else ""), 303)
                self.sign_in(response, scope)
                return await response(scope, receive, send)
            if request.url.path not in PUBLIC_PATHS and not self.signed_in(request):
                if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
                    target = urlencode({"next": local_path(request.url.path)})
                    return await RedirectResponse(f"/login?{target}", 303)(scope, receive, send)
                return await PlainTextResponse("a token is required: open the dashboard's address with ?token=...\n",
                                               401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
        scope["tilth.guard"] = self
        browser = request.cookies.get(self.cookie_name(scope, "csrf"))
        fresh = None
        if not browser or len(browser) > 64:
            browser = fresh = secrets.token_urlsafe(24)
        scope["tilth.browser"] = browser

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
                if fresh and scope.get("tilth.csrf_used"):  # only with a page whose forms carry it
                    extra.append((b"set-cookie", f"{self.cookie_name(scope, 'csrf')}={fresh}; HttpOnly; Path=/; "
                                                 "SameSite=Strict".encode()))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)
