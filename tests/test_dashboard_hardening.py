"""The dashboard's defences, in process: the ASGI app `tilth serve` runs (`web/app.make_app`), driven
by a minimal ASGI server in the test (the requests a browser or an attacker would send, and a
client that stops reading). The token's sources go through `tilth serve`'s own parser. The same
app behind uvicorn is what tests/test_dashboard.py and tests/test_dashboard_actions.py drive."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path

import pytest

from tilth.core.errors import BadInput
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


def test_the_token_cookie_is_named_for_the_port_and_a_login_never_leaves_the_dashboard(home: Path) -> None:
    app = make_app(home, TOKEN, loopback_only=False)

    async def scenario() -> None:
        assert (await ask(app, "GET", "/api/sessions")).status == 401
        once = await ask(app, "GET", "//evil.example/x", query=f"token={TOKEN}")
        assert once.status == 303 and once.header("location") == "/", "a // path would be another site"
        assert once.cookies() == {f"tilth_token_{PORT}": TOKEN}
        assert (await ask(app, "GET", "/api/sessions", {"cookie": f"tilth_token_{PORT}={TOKEN}"})).status == 200
        assert (await ask(app, "GET", "/api/sessions", {"cookie": f"tilth_token_9999={TOKEN}"})).status == 401

        page = await ask(app, "GET", "/s/odd-1", {"accept": "text/html"})
        assert page.status == 303 and page.header("location") == "/login?next=%2Fs%2Fodd-1"
        form = await ask(app, "GET", "/login", query="next=/s/odd-1")
        csrf_cookie = form.cookies()[f"tilth_csrf_{PORT}"]
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.body).group(1)
        cookie = {"cookie": f"tilth_csrf_{PORT}={csrf_cookie}"}
        for wanted, lands in (("/s/odd-1", "/s/odd-1"), ("//evil.example", "/"), ("https://evil.example/", "/"),
                              ("/\\evil.example", "/"), ("javascript:alert(1)", "/"), ("", "/")):
            signed = await ask(app, "POST", "/login", cookie, f"csrf={csrf}&token={TOKEN}&next={wanted}")
            assert signed.status == 303 and signed.header("location") == lands, wanted
            assert signed.cookies() == {f"tilth_token_{PORT}": TOKEN}
        wrong = await ask(app, "POST", "/login", cookie, f"csrf={csrf}&token=nope&next=/")
        assert wrong.status == 303 and "failed=1" in wrong.header("location") and not wrong.cookies()
        no_csrf = await ask(app, "POST", "/login", cookie, f"token={TOKEN}&next=/")
        assert no_csrf.status == 403 and not no_csrf.cookies()

    run(scenario())


def test_a_post_without_the_csrf_token_or_from_another_site_is_refused(home: Path) -> None:
    app = make_app(home)  # loopback, no token: the CSRF token is what stops another site's form

    async def scenario() -> None:
        page = await ask(app, "GET", "/s/odd-1")
        assert page.status == 200
        browser = page.cookies()[f"tilth_csrf_{PORT}"]
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.body).group(1)
        cookie = f"tilth_csrf_{PORT}={browser}"
        for headers, body in (({"cookie": cookie}, "text=hi"), ({"cookie": cookie}, "csrf=forged&text=hi"),
                              ({}, f"csrf={csrf}&text=hi"),
                              ({"cookie": cookie, "origin": "http://evil.example"}, f"csrf={csrf}&text=hi")):
            refused = await ask(app, "POST", "/s/odd-1/note", {**headers, "accept": "application/json"}, body)
            assert refused.status == 403 and json.loads(refused.body)["ok"] is False, (headers, body)
        assert not (home / "sessions" / "odd-1" / "inbox.jsonl").exists(), "a refused POST does nothing"
        passed = await ask(app, "POST", "/s/odd-1/note", {"cookie": cookie, "accept": "application/json",
                                                          "origin": f"http://127.0.0.1:{PORT}"}, f"csrf={csrf}&text=hi")
        assert passed.status == 200 and json.loads(passed.body)["ok"] is True, passed.body
        notes = (home / "sessions" / "odd-1" / "inbox.jsonl").read_text()
        assert '"hi"' in notes and notes.count("\n") == 1

    run(scenario())


def test_an_odd_last_event_id_starts_the_log_from_its_end(home: Path) -> None:
    app = make_app(home)

    async def first_message(last_event_id: str) -> str:
        got: asyncio.Queue = asyncio.Queue()

        async def receive() -> dict:
            await asyncio.Event().wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            await got.put(message)

        task = asyncio.ensure_future(app(scope("GET", "/s/odd-1/live/log", {"last-event-id": last_event_id}),
                                         receive, send))
        start = await asyncio.wait_for(got.get(), 10)
        body = await asyncio.wait_for(got.get(), 10)
        task.cancel()
        assert start["status"] == 200
        return body["body"].decode()

    async def scenario() -> None:
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
        stuck = asyncio.Event()

        async def stalled_send(message: dict) -> None:
            if message["type"] == "http.response.body":
                stuck.set()
                await asyncio.Event().wait()  # a full socket buffer: uvicorn's send waits for the client

        async def reading_send(message: dict) -> None:
            pass

        stalled = asyncio.ensure_future(app(scope("GET", "/s/odd-1/live/log"), never_says_goodbye, stalled_send))
        reading = asyncio.ensure_future(app(scope("GET", "/live/sessions"), never_says_goodbye, reading_send))
        await asyncio.wait_for(stuck.wait(), 10)
        assert gate.open == 2
        busy = await ask(app, "GET", "/live/sessions")
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
