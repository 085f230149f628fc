"""Who may use the dashboard, as an ASGI wrapper around every request. It is the person's alone:
every page, `/api/*` and live stream needs the login cookie, which only a one-time login link
(`store/dashboard_secret.py`: `tilth serve` prints one, `tilth serve --login` another) or a configured
token (`?token=` once or the login form; or `Authorization: Bearer`, which reads but never acts) gives.
Without it a request gets 401 and the page that says how to log in, nothing of any session.

The cookie is `<random id>.<expiry>.<HMAC under the home's dashboard secret>`, so it survives a restart
and a `--rotate-secret` ends every one. Every request that is not a GET must come from this dashboard
(`Origin` present and this host: anything else is a 403 before any route runs), and a form must carry
the CSRF token of the same login (an HMAC of the cookie's id): a token read from a page served to
another login is useless. Cookies ignore ports, so the cookie's name holds the server's port. On a
loopback bind only loopback Host names are answered (no DNS rebinding onto it).
"""

from __future__ import annotations

import hmac
import re
import secrets
from hashlib import sha256
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response

from tilth.core.clock import wall
from tilth.store.dashboard_secret import DashboardSecret
from tilth.web import pages
from tilth.web.forms import login_form

LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}
PUBLIC_PATHS = {"/favicon.ico", "/login"}
"""Served without a login: the icon says nothing, and /login is how one logs in."""
SAFE_METHODS = {"GET", "HEAD"}
LOGIN_DAYS = 30
"""How long a login cookie lasts (a rotation ends it sooner)."""
SAFE_PATH = re.compile(r"^/(?![/\\])[A-Za-z0-9/._~%!$&'()*+,;=:@-]*$")
"""A path on this dashboard: one leading slash (never `//host` or `/\\host`, which a browser reads
as another site), no scheme, no control characters."""
HOW_TO_LOG_IN = ("open the one-time login link `tilth serve` printed when it started, or run "
                 "`tilth serve --login` on this machine for a new one")


def nonce(request: Request) -> str:
    """This response's script nonce (the Content-Security-Policy allows only that script)."""
    return str(request.scope.setdefault("tilth.nonce", secrets.token_urlsafe(12)))


def html(request: Request, body: str, status: int = 200) -> HTMLResponse:
    csp = (f"default-src 'none'; script-src 'nonce-{nonce(request)}'; style-src 'unsafe-inline'; "
           "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
    return HTMLResponse(body, status, headers={"Content-Security-Policy": csp, "Cache-Control": "no-store"})


def csrf_token(request: Request) -> str:
    """The CSRF token the forms of this response carry: bound to this request's login ("" for a
    bearer token's reads, whose forms are then refused)."""
    guard: Guard = request.scope["tilth.guard"]
    login = request.scope.get("tilth.login")
    return guard.csrf_for(login) if login else ""


def login_page(request: Request, wanted: str, status: int, failed: bool = False) -> Response:
    """What a request without a login gets: how to log in (and the token's form when there is one);
    nothing of any session."""
    guard: Guard = request.scope["tilth.guard"]
    said = f"<p>This dashboard is yours alone: {HOW_TO_LOG_IN}.</p>"
    form = login_form(wanted, failed) if guard.token else ""
    return html(request, pages.page("tilth: log in", f"<h1>tilth</h1>{said}{form}", nonce(request)), status)


def local_path(wanted: str | None) -> str:
    """Where to go after a login: `wanted` when it is a path on this dashboard, else the first page."""
    return wanted if wanted and SAFE_PATH.match(wanted) else "/"


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def from_here(request: Request) -> bool:
    """The request says it comes from a page of this dashboard (a missing or `null` Origin does not)."""
    origin = urlsplit(request.headers.get("origin", ""))
    return origin.scheme in ("http", "https") and origin.netloc == request.headers.get("host")


def refuse(request: Request, status: int, line: str) -> Response:
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"ok": False, "error": line}, status)
    return PlainTextResponse(line + "\n", status)


class Guard:
    """The login cookie, the configured token, the Origin and Host checks, and the common headers."""

    def __init__(self, app: ASGIApp, home: Path, token: str | None, loopback_only: bool):
        self.app, self.token, self.loopback_only = app, token, loopback_only
        self.secret = DashboardSecret(home)
        self.secret.value()  # made (or refused) before the first request

    def cookie_name(self, scope: Scope) -> str:
        port = (scope.get("server") or ("", 0))[1]
        return f"tilth_login_{port}"

    def _mac(self, *parts: str) -> str:
        return hmac.new(self.secret.value(), "\0".join(parts).encode(), sha256).hexdigest()

    def csrf_for(self, login: str) -> str:
        return self._mac("csrf", login)

    def csrf_ok(self, request: Request, given: str | None) -> bool:
        login: str | None = request.scope.get("tilth.login")
        if not (login and given):
            return False
        return same(given, self.csrf_for(login))

    def sign_in(self, response: Response, scope: Scope) -> None:
        """A new login: its cookie, HttpOnly, SameSite=Strict, for this port's name."""
        login, expires = secrets.token_urlsafe(24), str(int(wall()) + LOGIN_DAYS * 86400)
        value = f"{login}.{expires}.{self._mac('login', login, expires)}"
        response.set_cookie(self.cookie_name(scope), value, max_age=LOGIN_DAYS * 86400, path="/", httponly=True,
                            samesite="strict")

    def login_of(self, request: Request) -> str | None:
        """The login id the request's cookie proves, else None."""
        login, _, rest = request.cookies.get(self.cookie_name(request.scope), "").partition(".")
        expires, _, mac = rest.partition(".")
        if not (login and expires.isdigit() and mac) or int(expires) < wall():
            return None
        return login if same(mac, self._mac("login", login, expires)) else None

    def bearer_ok(self, request: Request) -> bool:
        bearer = request.headers.get("authorization", "")
        return bool(self.token) and bearer.lower().startswith("bearer ") and same(bearer[7:], self.token or "")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        scope["tilth.guard"] = self

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer")]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        response = self.answer_first(request)
        if response is not None:
            await response(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def answer_first(self, request: Request) -> Response | None:
        """The response the guard gives itself (a refusal, a token's login), or None to let the route answer."""
        scope = request.scope
        if self.loopback_only and request.url.hostname not in LOOPBACK_NAMES:
            return PlainTextResponse("this dashboard answers to localhost only\n", 400)
        if request.method not in SAFE_METHODS and not from_here(request):
            return refuse(request, 403, "this request does not come from the dashboard's own page "
                          "(no Origin, or another site's)")
        login = self.login_of(request)
        given = request.query_params.get("token") if self.token else None
        if given is not None and same(given, self.token or ""):
            # Once: the cookie carries the login from here, and the address bar loses the token.
            rest = urlencode([(k, v) for k, v in parse_qsl(request.url.query) if k != "token"])
            response = RedirectResponse(local_path(request.url.path) + (f"?{rest}" if rest else ""), 303)
            self.sign_in(response, scope)
            return response
        if request.url.path not in PUBLIC_PATHS and login is None and not (
                request.method in SAFE_METHODS and self.bearer_ok(request)):
            if "text/html" in request.headers.get("accept", "") and request.method in SAFE_METHODS:
                return login_page(request, local_path(request.url.path), 401)
            return PlainTextResponse(f"log in first: {HOW_TO_LOG_IN}\n", 401, headers={"WWW-Authenticate": "Bearer"})
        scope["tilth.login"] = login
        return None
