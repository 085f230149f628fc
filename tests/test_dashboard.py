"""`tilth serve`, end to end: a real `tilth serve` subprocess watched in a real browser (Debian's
chromium through Playwright) while a real supervised session runs on the scripted backend. The
session's first task is held in its worker step until the test releases it (tests/supervised.py),
so the test decides when the pages must change; every wait is Playwright's own auto-waiting
`expect`, never a sleep. Without /usr/bin/chromium the browser test skips, unless
TILTH_REQUIRE_BROWSER=1 or CI=true, where it fails (`make browser` installs it)."""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import task

CHROMIUM = Path("/usr/bin/chromium")
REQUIRED = os.environ.get("TILTH_REQUIRE_BROWSER") == "1" or os.environ.get("CI") == "true"
TOKEN = "s3cret-token"


class Served:
    """A `tilth serve` subprocess on a free port; `url` from its first line, `login_url` (the one-time
    login link it printed) from its second. `get` asks as a logged-in browser would (logged in once,
    through that link) unless `signed_in=False`; `open_in` logs a Playwright page's browser in."""

    def __init__(self, sandbox, *args: str):
        self.sandbox = sandbox
        self.proc = subprocess.Popen([sys.executable, "-m", "tilth", "serve", "--port", "0", *args],
                                     env=sandbox.env, cwd=sandbox.root, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        line = self.proc.stdout.readline() if selector.select(timeout=30) else ""
        if not line.startswith("dashboard: "):
            self.stop()
            raise AssertionError(f"tilth serve did not come up: {line!r} {self.proc.stderr.read()!r}")
        self.url = line.split()[1]
        said = self.proc.stdout.readline()  # printed with the first line
        assert said.startswith(f"log in: {self.url}login?once="), said
        self.login_url: str | None = said.split()[2]
        self.cookie: str | None = None

    def new_login_url(self) -> str:
        """The printed link while unused, then a new one each time, from `tilth serve --login`."""
        link, self.login_url = self.login_url, None
        if link is None:
            made = self.sandbox.tilth("serve", "--login")
            assert made.returncode == 0, made.stderr
            link = made.stdout.split()[2]
        return link

    def log_in(self) -> str:
        """A new login through a login link: the `Cookie` header value that carries it."""
        status, _, headers = fetch(self.new_login_url())
        assert status == 303 and headers["location"] == "/", (status, headers)
        return headers["set-cookie"].split(";")[0]

    def open_in(self, page) -> None:
        """Log the page's browser in, as a person does: the login link, which ends on the first page."""
        page.goto(self.new_login_url())
        assert page.url == self.url, page.url

    def get(self, path: str, headers: dict[str, str] | None = None,
            signed_in: bool = True) -> tuple[int, str, dict[str, str]]:
        if signed_in and self.cookie is None:
            self.cookie = self.log_in()
        return fetch(self.url.rstrip("/") + path, {**({"Cookie": self.cookie} if signed_in else {}), **(headers or {})})

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def fetch(url: str, headers: dict[str, str] | None = None, data: bytes | None = None
          ) -> tuple[int, str, dict[str, str]]:
    """One request, redirects not followed: (status, body, headers)."""
    request = urllib.request.Request(url, headers=headers or {}, data=data)
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.fixture
def served(sandbox):
    servers: list[Served] = []

    def start(*args: str) -> Served:
        servers.append(Served(sandbox, *args))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or not CHROMIUM.exists():
        why = "playwright is not installed" if sync_playwright is None else f"no {CHROMIUM} (`make browser`)"
        if REQUIRED:
            pytest.fail(f"the dashboard's browser test needs a browser: {why}")
        pytest.skip(why)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def rejected_then_accepted() -> list[dict]:
    return [{"write": {"scripted/{task}.md": "first try\n"},
             "case": {"summary": "wrote a first try", "criteria": [{"criterion": "exists", "evidence": "the file"}]},
             "verdict": {"verdict": "reject", "category": "weak_test", "concern": "the <b>first</b> try is thin"}},
            {"write": {"scripted/{task}.md": "second try, better\n"}, "case": {"summary": "covered the gaps"}}]


@pytest.mark.browser
def test_the_pages_follow_a_running_session_live(sandbox, daemon, served, browser, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)  # a loaded CI machine: the session itself must get there first
    sid = "live-1"
    sandbox.env.update(TILTH_MAX_SPEND_USD="5", TILTH_MAX_WALL_CLOCK_S="3600", TILTH_MAX_EVALUATOR_CALLS_PER_TASK="6")
    scenario = daemon.held(sid, "T-1")
    scenario["tasks"]["T-2"] = rejected_then_accepted()
    daemon.start(sid, [task("T-1", "First <task>"), task("T-2")], scenario)
    daemon.reached(sid, "T-1")
    server = served()
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    server.open_in(page)

    page.goto(server.url)
    row = page.locator(f'tr[data-session="{sid}"]')
    expect(row.locator(".state")).to_have_text("running")
    expect(row.locator(".progress")).to_have_text("0/2")
    page.screenshot(path=tmp_path / "sessions.png")

    overview = browser.new_page()
    server.open_in(overview)
    overview.evaluate("window.notReloaded = true")

    page.goto(f"{server.url}s/{sid}")
    page.evaluate("window.notReloaded = true")
    expect(page.locator('tr[data-task="T-1"] td').nth(1)).to_have_text("First <task>")  # escaped, shown as text
    expect(page.locator('tr[data-task="T-1"] .status')).to_have_text("in_progress")
    expect(page.locator('tr[data-task="T-2"] .status')).to_have_text("pending")
    expect(page.locator("#log")).to_contain_text("[T-1] started")
    expect(page.locator('[data-meter="max_spend_usd"]')).to_have_text("spend: $0.00 of $5.00")
    expect(page.locator('[data-meter="max_evaluator_calls_per_task"]')).to_contain_text("of 6")
    expect(page.locator('[data-meter="max_wall_clock_s"]')).to_contain_text("of 1h00m")

    daemon.release(sid, "T-1")
    expect(page.locator('tr[data-task="T-1"] .status')).to_have_text("done")
    expect(page.locator('tr[data-task="T-2"] .status')).to_have_text("done")
    expect(page.locator('tr[data-task="T-2"] .iters')).to_have_text("2")
    ledger = page.locator('[data-ledger="T-2"]')
    expect(ledger.locator(".verdict-word")).to_have_text(["reject", "accept"])
    expect(ledger.locator(".attempt").first).to_contain_text("weak_test")
    expect(ledger.locator(".attempt").first).to_contain_text("the <b>first</b> try is thin")
    expect(page.locator("#log")).to_contain_text("verdict: reject (weak_test)")
    expect(page.locator("#head .state")).to_have_text("done")
    expect(page.locator("#commits tr[data-commit]")).to_have_count(2)
    assert page.evaluate("window.notReloaded") is True
    page.screenshot(path=tmp_path / "session.png", full_page=True)
    page.screenshot(path=tmp_path / "session-top.png")

    expect(overview.locator(f'tr[data-session="{sid}"] .state')).to_have_text("done")
    expect(overview.locator(f'tr[data-session="{sid}"] .progress')).to_have_text("2/2")
    assert overview.evaluate("window.notReloaded") is True

    page.locator("#commits tr[data-commit] a").first.click()
    expect(page.locator("h1")).to_contain_text("commit")
    expect(page.locator(".diff .add").filter(has_text="+held T-1")).to_be_visible()
    expect(page.locator(".diff .file")).to_contain_text("scripted/T-1.md")
    page.screenshot(path=tmp_path / "commit.png", full_page=True)
    if os.environ.get("TILTH_DASHBOARD_SCREENSHOT"):  # refreshing docs/dashboard.png
        Path(os.environ["TILTH_DASHBOARD_SCREENSHOT"]).write_bytes((tmp_path / "session-top.png").read_bytes())


def test_unknown_sessions_and_commits_are_404_and_a_damaged_session_is_one_line(sandbox, served) -> None:
    result = sandbox.start("ok-1", [task("T-1")])
    assert result.returncode == 0, result.stderr
    broken = sandbox.home / "sessions" / "broken-1"
    broken.mkdir()
    (broken / "session.json").write_text("{not json")
    server = served()

    status, body, _ = server.get("/")
    assert status == 200 and 'data-session="ok-1"' in body
    assert 'data-session="broken-1"' in body and 'class="error"' in body
    status, listed, _ = server.get("/api/sessions")
    assert status == 200 and {s["id"] for s in json.loads(listed)} == {"ok-1", "broken-1"}
    assert [s["error"] for s in json.loads(listed) if s["id"] == "broken-1"][0].count("\n") == 0
    status, body, _ = server.get("/s/broken-1")
    assert status == 200 and 'class="error"' in body

    main = subprocess.run(["git", "-C", str(sandbox.repo), "rev-parse", "main"], capture_output=True,
                          text=True).stdout.strip()
    mine = [c["sha"] for c in sandbox.commits("ok-1")]
    assert server.get(f"/s/ok-1/commit/{mine[0][:10]}")[0] == 200
    for path in ("/s/nope", "/s/ok-1/commit/" + main, "/s/ok-1/commit/zzzz", "/s/..%2F..%2Fetc",
                 "/s/.creating-x", "/s/ok-1/commit/" + mine[0] + "%2F..", "/nothing"):
        assert server.get(path)[0] == 404, path
    assert server.get("/", {"Host": "evil.example"})[0] == 400  # DNS rebinding onto a loopback dashboard

    broken.joinpath("session.json").unlink()  # a session dir going away while served
    broken.rmdir()
    status, body, _ = server.get("/")
    assert status == 200 and "broken-1" not in body


@pytest.mark.slow
def test_any_bind_needs_a_login_and_a_configured_token_is_another_way_in(sandbox, served) -> None:
    server = served("--host", "0.0.0.0")
    assert server.get("/", signed_in=False)[0] == 401
    assert server.get("/", {"Host": "evil.example"})[0] == 200, "not loopback: any name, but only with the login"
    assert server.stop() == 0

    server = served("--host", "0.0.0.0", "--token", TOKEN)
    assert json.loads((sandbox.home / "serve.json").read_text())["url"] == server.url
    assert TOKEN not in (sandbox.home / "serve.json").read_text()
    assert server.get("/", signed_in=False)[0] == 401
    assert server.get("/api/sessions", {"Authorization": "Bearer wrong"}, signed_in=False)[0] == 401
    assert server.get("/api/sessions", {"Authorization": f"Bearer {TOKEN}"}, signed_in=False)[0] == 200
    status, _, headers = server.get(f"/?token={TOKEN}", signed_in=False)
    assert status == 303 and headers["location"] == "/"
    cookie = headers["set-cookie"].split(";")[0]
    assert cookie.startswith(f"tilth_login_{server.url.rsplit(':', 1)[1].strip('/')}=") and TOKEN not in cookie
    assert server.get("/", {"Cookie": cookie}, signed_in=False)[0] == 200
    assert server.get("/live/sessions", {"Cookie": "tilth_login_1=" + cookie.split("=", 1)[1]},
                      signed_in=False)[0] == 401

    started = sandbox.start("with-dash", [task("T-1")])
    assert f"dashboard: {server.url}s/with-dash" in started.stdout
    assert server.stop() == 0
    assert not (sandbox.home / "serve.json").exists()
    assert "dashboard:" not in sandbox.start("without-dash", [task("T-1")]).stdout
    assert "no dashboard is running" in sandbox.tilth("serve", "--login").stderr


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_daemon_serve_prints_the_login_link_runs_the_dashboard_as_a_child_and_stops_it(sandbox, daemon) -> None:
    from supervised import alive, wait_until

    started = sandbox.tilth("daemon", "--serve", str(free_port()))
    assert started.returncode == 0, started.stderr
    said = dict(line.split(": ", 1) for line in started.stdout.splitlines() if ": " in line)
    serve_json = sandbox.home / "serve.json"
    wait_until(sandbox.home, serve_json.exists, "the dashboard to publish serve.json")
    info = json.loads(serve_json.read_text())
    assert said["dashboard"].startswith(info["url"])
    link = said["log in"].split()[0]
    assert fetch(info["url"] + "api/sessions")[0] == 401
    status, _, headers = fetch(link)
    assert status == 303 and fetch(info["url"] + "api/sessions", {"Cookie": headers["set-cookie"].split(";")[0]})[0] == 200
    assert fetch(link)[0] == 401, "the link works once"
    log = sandbox.home / "daemon.log"
    wait_until(sandbox.home, lambda: "log in:" in log.read_text(), "the dashboard's lines in the log")
    assert "once=" not in log.read_text(), "no login link is left in the log"
    assert sandbox.tilth("daemon", "stop", "--timeout", "20").returncode == 0
    assert not serve_json.exists() and not alive(info["pid"])


def test_help_loads_no_web_stack(tmp_path: Path) -> None:
    for args in (["--help"], ["serve", "-h"]):
        result = subprocess.run([sys.executable, "-X", "importtime", "-m", "tilth", *args], capture_output=True,
                                text=True, timeout=60, env={**os.environ, "TILTH_HOME": str(tmp_path)})
        assert result.returncode == 0, result.stderr
        modules = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if "|" in line}
        assert not {m for m in modules if m.split(".")[0] in ("starlette", "uvicorn", "anyio")}, args


def test_the_session_page_shows_each_tasks_receipt(sandbox, served) -> None:
    scenario = {"tasks": {"T-1": [{"write": {"a.txt": "1\n"}, "case": {"summary": "first"},
                                   "verdict": {"verdict": "reject", "category": "weak_test", "concern": "thin"}},
                                  {"write": {"a.txt": "2\n"}, "case": {"summary": "second"}}]}}
    assert sandbox.start("r-1", [task("T-1")], scenario).returncode == 0
    status, body, _ = served().get("/s/r-1")
    row = body[body.index('data-task="T-1"'):]
    row = row[:row.index("</tr>")]
    assert status == 200 and '<td class="receipt">2 attempts, 0 in + 0 cached + 0 out tokens, $0.0000' in row, row


def open_stream(url: str, path: str, token: str) -> tuple[socket.socket, str]:
    """A raw connection asking for a live stream; its status line."""
    parsed = urllib.parse.urlsplit(url)
    conn = socket.create_connection((parsed.hostname, parsed.port), timeout=10)
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: {parsed.netloc}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    head = b""
    while b"\r\n" not in head:
        chunk = conn.recv(256)
        if not chunk:
            break
        head += chunk
    return conn, head.split(b"\r\n")[0].decode()


@pytest.mark.slow
def test_the_token_from_a_file_or_the_environment_stays_out_of_ps_and_live_streams_are_capped(
        sandbox, served, tmp_path: Path) -> None:
    from tilth.web.streaming import StreamGate

    held = tmp_path / "token"
    held.write_text(TOKEN + "\n")
    server = served("--token-file", str(held))
    assert TOKEN.encode() not in Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
    assert server.get("/api/sessions", signed_in=False)[0] == 401
    assert server.get("/api/sessions", {"Authorization": f"Bearer {TOKEN}"}, signed_in=False)[0] == 200

    most = StreamGate().most
    streams = [open_stream(server.url, "/live/sessions", TOKEN) for _ in range(most)]
    try:
        assert {status for _, status in streams} == {"HTTP/1.1 200 OK"}
        extra, status = open_stream(server.url, "/live/sessions", TOKEN)
        extra.close()
        assert status == "HTTP/1.1 503 Service Unavailable", "one stream over the cap is refused"
    finally:
        for conn, _ in streams:
            conn.close()
    assert server.stop() == 0

    sandbox.env["TILTH_DASHBOARD_TOKEN"] = "from-the-environment"
    server = served()
    assert server.get("/api/sessions", {"Authorization": "Bearer from-the-environment"}, signed_in=False)[0] == 200
    assert server.get("/api/sessions", {"Authorization": f"Bearer {TOKEN}"}, signed_in=False)[0] == 401


@pytest.mark.slow
def test_every_field_a_session_writes_is_escaped_on_every_page(sandbox, served) -> None:
    """Titles, cases, criteria, evidence, concerns, next steps, commit subjects, the reason, transcript,
    report and diff lines are the worker's, the plan's or the remote's words: each is shown, and only
    as text (a `<x-...>` tag written anywhere never reaches a page as markup)."""
    def tag(field: str) -> str:
        return f"<x-{field} onload=alert(1)>"

    rejected = {"verdict": "reject", "category": "acceptance_gap", "concern": tag("concern"), "next_step": tag("next")}
    scenario = {"tasks": {
        "T-1": [{"write": {"page.txt": f"{tag('context')}\nsecond\nthird\n"}, "verdict": rejected,
                 "case": {"summary": tag("summary"), "criteria": [{"criterion": tag("criterion"),
                                                                   "evidence": tag("evidence")}]}},
                {"write": {"page.txt": f"{tag('context')}\nsecond\nthird\n"}}],
        "T-2": [{"write": {"page.txt": f"{tag('context')}\nsecond\nchanged\n"}}],
        "T-3": [{"write": {"three.txt": "3\n"}, "verdict": {**rejected, "concern": tag("last")}}] * 2,
    }}
    plan = [task("T-1", title=tag("title")), task("T-2"), task("T-3")]
    result = sandbox.start("x-1", plan, scenario, env={"TILTH_MAX_ITERATIONS_PER_TASK": "2", "TILTH_FINAL_REVIEW": "0"})
    assert result.returncode == 1, result.stdout + result.stderr
    record = sandbox.session_dir("x-1") / "session.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "reason": tag("reason")}))
    with (sandbox.session_dir("x-1") / "transcript.md").open("a") as f:
        f.write(f"\n{tag('transcript')}\n")

    server = served()
    shas = [c["sha"] for c in sandbox.commits("x-1")]
    pages = {path: server.get(path) for path in ["/", "/s/x-1", *(f"/s/x-1/commit/{sha}" for sha in shas)]}
    for path, (status, body, _) in pages.items():
        assert status == 200, path
        assert "<x-" not in body, (path, body[max(0, body.find("<x-") - 300):body.find("<x-") + 100])
    shown = "".join(body for _, body, _ in pages.values())
    for field in ("title", "summary", "criterion", "evidence", "concern", "next", "last", "reason", "transcript",
                  "context"):
        assert f"&lt;x-{field} onload=alert(1)&gt;" in shown, f"the {field} is shown, as text"
