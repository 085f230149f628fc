"""The dashboard's defences, in process: the ASGI app `tilth serve` runs (`web/app.make_app`), driven
by a minimal ASGI server in the test (the requests a browser or an attacker would send, and a
client that stops reading), logged in through one-time links made as `tilth serve --login` makes them.
The token's sources go through `tilth serve`'s own parser. The same
app behind uvicorn is what tests/test_dashboard.py and tests/test_dashboard_actions.py drive."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import time
from pathlib import Path

import pytest

from tilth.core.errors import BadInput
from tilth.store.dashboard_secret import LOGIN_TTL_S, DashboardSecret
from tilth.web.app import make_app
from tilth.web.streaming import StreamGate

PORT = 8765
TOKEN = "s3cret-token"


class Reply:
    def __init__(self, messages: list[dict]):
        start = messages[0]
        self.status = start["status"]
        self.headers = [(k.decode().lower(), v.decode()) for k, v in start.get("headers", [])]
        self.body = b"".join(m.get("body", b"") for m in messages[1:]).decode()

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)

    def cookies(self) -> dict[str, str]:
        return dict(v.split(";")[0].split("=", 1) for k, v in self.headers if k == "set-cookie")


def scope(method: str, path: str, headers: dict[str, str] | None = None, query: str = "") -> dict:
    given = {"host": f"127.0.0.1:{PORT}", **(headers or {})}
    return {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": query.encode(),
            "headers": [(k.encode(), v.encode()) for k, v in given.items()], "server": ("127.0.0.1", PORT),
            "client": ("127.0.0.1", 40000), "scheme": "http", "http_version": "1.1", "root_path": ""}


async def ask(app, method: str, path: str, headers: dict[str, str] | None = None, body: str = "",
              query: str = "") -> Reply:
    sent, out = False, []

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body.encode(), "more_body": False}
        await asyncio.Event().wait()  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        out.append(message)

    await app(scope(method, path, headers, query), receive, send)
    return Reply(out)


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    session = tmp_path / "sessions" / "odd-1"
    session.mkdir(parents=True)
    (session / "session.json").write_text(json.dumps({
        "id": "odd-1", "repo": str(tmp_path / "repo"), "base_commit": "0" * 40, "branch": "session/odd-1",
        "worktree": str(tmp_path / "wt"), "state": "stopped", "backend": {"name": "scripted"},
        "created": "2026-01-01T00:00:00Z", "updated": "2026-01-01T00:00:00Z"}))
    (session / "prd.json").write_text(json.dumps([{"id": "T-1", "title": "One", "description": "# Steps\n<b>x</b>",
                                                   "acceptance_criteria": ["works"]}]))
    (session / "events.jsonl").write_text(json.dumps({"ts": "2026-01-01T00:00:00.000Z", "type": "task_started",
                                                      "task": "T-1", "iter": 1, "data": {"title": "One"}}) + "\n")
    return tmp_path


def cookie_of(reply: Reply) -> str:
    [(name, value)] = reply.cookies().items()
    return f"{name}={value}"


async def logged_in(app, home: Path) -> str:
    """A new login through a one-time link, as `tilth serve --login` makes one: its `cookie` header."""
    link = DashboardSecret(home).mint_login()
    reply = await ask(app, "GET", "/login", query=f"once={link}")
    assert reply.status == 303 and reply.header("location") == "/", reply.status
    return cookie_of(reply)


def test_the_login_cookie_is_named_for_the_port_and_a_login_never_leaves_the_dashboard(home: Path) -> None:
    app = make_app(home, TOKEN, loopback_only=False)

    async def scenario() -> None:
        assert (await ask(app, "GET", "/api/sessions")).status == 401
        once = await ask(app, "GET", "//evil.example/x", query=f"token={TOKEN}")
        assert once.status == 303 and once.header("location") == "/", "a // path would be another site"
        [(name, value)] = once.cookies().items()
        assert name == f"tilth_login_{PORT}" and TOKEN not in value, "the cookie is a login, never the token"
        assert {"HttpOnly", "SameSite=strict", "Path=/"} <= {p.strip() for p in once.header("set-cookie").split(";")}
        assert (await ask(app, "GET", "/api/sessions", {"cookie": f"{name}={value}"})).status == 200
        assert (await ask(app, "GET", "/api/sessions", {"cookie": f"tilth_login_9999={value}"})).status == 401
        tampered = value[:-1] + ("1" if value.endswith("0") else "0")
        assert (await ask(app, "GET", "/api/sessions", {"cookie": f"{name}={tampered}"})).status == 401

        page = await ask(app, "GET", "/s/odd-1", {"accept": "text/html"})
        assert page.status == 401 and "tilth serve --login" in page.body and 'name="next" value="/s/odd-1"' in page.body
        assert "One" not in page.body and "csrf" not in page.body, "nothing of the session"
        here = {"origin": f"http://127.0.0.1:{PORT}"}
        for wanted, lands in (("/s/odd-1", "/s/odd-1"), ("//evil.example", "/"), ("https://evil.example/", "/"),
                              ("/\\evil.example", "/"), ("javascript:alert(1)", "/"), ("", "/")):
            signed = await ask(app, "POST", "/login", here, f"token={TOKEN}&next={wanted}")
            assert signed.status == 303 and signed.header("location") == lands, wanted
            assert list(signed.cookies()) == [f"tilth_login_{PORT}"]
        wrong = await ask(app, "POST", "/login", here, "token=nope&next=/")
        assert wrong.status == 303 and "failed=1" in wrong.header("location") and not wrong.cookies()
        for origin in ({}, {"origin": "null"}, {"origin": "http://evil.example"}):
            elsewhere = await ask(app, "POST", "/login", origin, f"token={TOKEN}&next=/")
            assert elsewhere.status == 403 and not elsewhere.cookies(), origin

    run(scenario())


def test_only_a_login_acts_and_only_with_its_own_csrf_token_from_the_dashboards_page(home: Path) -> None:
    """`tilth serve` with its defaults: what another local user or an agent on the host's loopback can
    send gets nothing and changes nothing."""
    app = make_app(home)
    secret = DashboardSecret(home)
    inbox = home / "sessions" / "odd-1" / "inbox.jsonl"

    async def csrf_of(cookie: str) -> str:
        page = await ask(app, "GET", "/s/odd-1", {"cookie": cookie})
        assert page.status == 200
        return re.search(r'name="csrf" value="([^"]+)"', page.body).group(1)

    async def note(headers: dict[str, str], body: str) -> Reply:
        return await ask(app, "POST", "/s/odd-1/note", {**headers, "accept": "application/json"}, body)

    async def scenario() -> None:
        link = secret.mint_login()
        first = await ask(app, "GET", "/login", query=f"once={link}")
        assert first.status == 303 and first.header("location") == "/", "the link leaves the address bar"
        again = await ask(app, "GET", "/login", query=f"once={link}")
        assert again.status == 401 and not again.cookies() and "used already" in again.body, "a link works once"
        mine, theirs = cookie_of(first), await logged_in(app, home)
        csrf, their_csrf = await csrf_of(mine), await csrf_of(theirs)
        assert csrf != their_csrf

        for path in ("/api/sessions", "/api/s/odd-1", "/s/odd-1", "/", "/live/sessions", "/s/odd-1/live/log"):
            for accept in ("text/html", "*/*"):
                nobody = await ask(app, "GET", path, {"accept": accept})
                assert nobody.status == 401 and "odd-1" not in nobody.body and "csrf" not in nobody.body, path
        here = f"http://127.0.0.1:{PORT}"
        for headers, body in (({"origin": here}, f"csrf={csrf}&text=hi"),                     # no login
                              ({"cookie": theirs, "origin": here}, f"csrf={csrf}&text=hi"),   # another login's token
                              ({"cookie": mine}, f"csrf={csrf}&text=hi"),                     # no Origin
                              ({"cookie": mine, "origin": "null"}, f"csrf={csrf}&text=hi"),
                              ({"cookie": mine, "origin": "http://evil.example"}, f"csrf={csrf}&text=hi"),
                              ({"cookie": mine, "origin": "http://127.0.0.1:1"}, f"csrf={csrf}&text=hi"),
                              ({"cookie": mine, "origin": here}, "text=hi"),
                              ({"cookie": mine, "origin": here}, "csrf=forged&text=hi")):
            refused = await note(headers, body)
            assert refused.status in (401, 403), (headers, body, refused.status)
            assert refused.status == 401 or json.loads(refused.body)["ok"] is False
        assert not inbox.exists(), "a refused POST does nothing"
        for cookie, token in ((mine, csrf), (theirs, their_csrf)):
            passed = await note({"cookie": cookie, "origin": here}, f"csrf={token}&text=hi")
            assert passed.status == 200 and json.loads(passed.body)["ok"] is True, passed.body
        assert inbox.read_text().count("\n") == 2

        unused, stale = secret.mint_login(), secret.mint_login()
        aged = time.time() - LOGIN_TTL_S - 60
        os.utime(secret.logins / hashlib.sha256(stale.encode()).hexdigest(), (aged, aged))
        assert (await ask(app, "GET", "/login", query=f"once={stale}")).status == 401, "an expired link"
        secret.rotate()
        assert (await ask(app, "GET", "/api/sessions", {"cookie": mine})).status == 401, "a rotation ends every login"
        assert (await note({"cookie": mine, "origin": here}, f"csrf={csrf}&text=hi")).status == 401
        assert (await ask(app, "GET", "/login", query=f"once={unused}")).status == 401, "and every unused link"
        assert inbox.read_text().count("\n") == 2
        assert (await ask(app, "GET", "/api/sessions", {"cookie": await logged_in(app, home)})).status == 200

    run(scenario())


def test_the_secret_is_the_owners_alone_and_every_page_allows_only_its_own_script(home: Path) -> None:
    """The secret 0600 in a 0700 directory, a secret others may read refused in one line (dashboard.md,
    security.md); each page's Content-Security-Policy: its own nonced script, no framing, forms to itself."""
    import stat

    app = make_app(home)
    secret = DashboardSecret(home)
    secret.mint_login()  # an unused login link's file
    assert stat.S_IMODE(secret.dir.stat().st_mode) == 0o700 and stat.S_IMODE(secret.file.stat().st_mode) == 0o600
    assert [stat.S_IMODE(p.stat().st_mode) for p in secret.logins.iterdir()] == [0o600]

    async def scenario() -> None:
        cookie = await logged_in(app, home)
        for path in ("/", "/s/odd-1"):
            page = await ask(app, "GET", path, {"cookie": cookie})
            policy = dict(part.strip().split(" ", 1) for part in page.header("content-security-policy").split(";"))
            nonce = re.search(r"<script nonce=\"([^\"]+)\"", page.body).group(1)
            assert policy["script-src"] == f"'nonce-{nonce}'" and policy["default-src"] == "'none'", policy
            assert policy["frame-ancestors"] == "'none'" and policy["form-action"] == "'self'", policy
            assert policy["base-uri"] == "'none'", policy
        assert (await ask(app, "GET", "/", {"cookie": cookie, "host": "evil.example"})).status == 400, "DNS rebinding"

    run(scenario())
    secret.file.chmod(0o644)
    with pytest.raises(BadInput, match="readable by others; `tilth serve --rotate-secret` makes a new one"):
        DashboardSecret(home).value()
    with pytest.raises(BadInput, match="readable by others"):
        make_app(home)


def test_an_odd_last_event_id_starts_the_log_from_its_end(home: Path) -> None:
    app = make_app(home)
    cookie = ""

    async def first_message(last_event_id: str) -> str:
        got: asyncio.Queue = asyncio.Queue()

        async def receive() -> dict:
            await asyncio.Event().wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            await got.put(message)

        task = asyncio.ensure_future(app(scope("GET", "/s/odd-1/live/log", {"last-event-id": last_event_id,
                                                                            "cookie": cookie}), receive, send))
        start = await asyncio.wait_for(got.get(), 10)
        body = await asyncio.wait_for(got.get(), 10)
        task.cancel()
        assert start["status"] == 200
        return body["body"].decode()

    async def scenario() -> None:
        nonlocal cookie
        cookie = await logged_in(app, home)
        for odd in ("²", "9" * 5000, "-1", "1e5", "abc", " 3", "99999999999999999999", ""):
            first = await first_message(odd)
            assert "event: lines" in first and "[T-1] started" in first, (odd, first)

    run(scenario())


def test_live_streams_are_capped_and_a_client_that_stops_reading_is_dropped(home: Path) -> None:
    gate = StreamGate(most=2, stall_s=0.3)
    app = make_app(home, gate=gate)

    async def never_says_goodbye() -> dict:
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def scenario() -> None:
        signed = {"cookie": await logged_in(app, home)}
        stuck = asyncio.Event()

        async def stalled_send(message: dict) -> None:
            if message["type"] == "http.response.body":
                stuck.set()
                await asyncio.Event().wait()  # a full socket buffer: uvicorn's send waits for the client

        async def reading_send(message: dict) -> None:
            pass

        stalled = asyncio.ensure_future(app(scope("GET", "/s/odd-1/live/log", signed), never_says_goodbye, stalled_send))
        reading = asyncio.ensure_future(app(scope("GET", "/live/sessions", signed), never_says_goodbye, reading_send))
        await asyncio.wait_for(stuck.wait(), 10)
        assert gate.open == 2
        busy = await asyncio.wait_for(ask(app, "GET", "/live/sessions", signed), 5)  # admitted, it never ends
        assert busy.status == 503 and busy.header("retry-after") == "5", "a third stream is refused"

        await asyncio.wait_for(stalled, 5)  # dropped after stall_s, not held for ever
        assert gate.open == 1 and not reading.done()
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
        assert gate.open == 0

    run(scenario())


def test_the_favicon_is_served_and_markdown_is_rendered_with_every_text_escaped(home: Path) -> None:
    from tilth.web.rendered import markdown

    icon = run(ask(make_app(home), "GET", "/favicon.ico"))
    assert icon.status == 200 and icon.header("content-type") == "image/svg+xml" and icon.body.startswith("<svg")
    shown = markdown("# Plan <script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n[a](javascript:alert(1))")
    assert "<h1>Plan &lt;script&gt;alert(1)&lt;/script&gt;</h1>" in shown
    assert "<img" not in shown and "&lt;img src=x onerror=alert(1)&gt;" in shown
    assert 'href="javascript' not in shown


def parsed(*argv: str) -> argparse.Namespace:
    from tilth.cli.cmd_serve import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["serve", *argv])


def test_the_token_comes_from_a_file_the_environment_or_argv(tmp_path: Path, monkeypatch) -> None:
    from tilth.cli.cmd_serve import TOKEN_ENV, token_from

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert token_from(parsed()) is None
    monkeypatch.setenv(TOKEN_ENV, "from-env\n")
    assert token_from(parsed()) == "from-env"
    held = tmp_path / "token"
    held.write_text("from-file\n")
    assert token_from(parsed("--token-file", str(held))) == "from-file", "the file wins over the environment"
    assert token_from(parsed("--token", "from-argv")) == "from-argv"
    for argv, said in ((["--token-file", str(tmp_path / "none")], "No such file"),
                       (["--token-file", str(held), "--token", "x"], "both given")):
        with pytest.raises(BadInput, match=said):
            token_from(parsed(*argv))
    for content, said in (("", "empty"), ("two words\n", "one token"), ("x" * 5000, "over 4096 bytes")):
        held.write_text(content)
        with pytest.raises(BadInput, match=said):
            token_from(parsed("--token-file", str(held)))
    monkeypatch.setenv(TOKEN_ENV, "  ")
    with pytest.raises(BadInput, match="set but empty"):
        token_from(parsed())
