"""Dispatched sessions on the dashboard: a real redis-server as the broker (tests/redis_server.py) holding
a session this machine has no directory of, a real `tilth serve`, and Debian's chromium through Playwright.
The broker's state hash and relayed events are written the way a worker writes them (`Broker.register`,
`append_events`), with hostile text in every field a page shows; the session's lease is held, so an answer
is left for its worker. Every wait is Playwright's `expect`, never a sleep."""

from __future__ import annotations

import json
import re
import time

import pytest
import redis

from dispatch_cluster import required
from redis_server import RedisServer
from test_dashboard import browser, served  # noqa: F401  (fixtures)

HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
QUESTION = f"Keep the v1 API? {HOSTILE}"
ANSWER = "Move to v2; keep a thin v1 shim."
WORKER = f"box-7:4242:{HOSTILE}"


def configure(sandbox, broker_url: str) -> None:
    sandbox.home.mkdir(exist_ok=True)
    (sandbox.home / "config.toml").write_text(
        f'[dispatch]\nbroker_url = "{broker_url}"\nremote = "{sandbox.root / "remote.git"}"\nlease_s = 600\n')


@pytest.fixture
def broker(sandbox, tmp_path):
    server = RedisServer(tmp_path / "redis", required(), persistent=False).start()
    configure(sandbox, server.url)
    try:
        yield server
    finally:
        server.stop()


def hold_a_parked_session(url: str, sid: str) -> redis.Redis:
    """What a worker running `sid` leaves in the broker: its state, its relayed events, its lease."""
    from tilth.core.dispatching import Dispatch
    from tilth.dispatch.broker import Broker

    held = Broker(Dispatch(broker_url=url, remote="/nowhere", lease_s=600))
    held.register(sid, {"id": sid, "state": "running", "progress": "1/3", "current": "T-2",
                        "branch": f"session/{sid}", "remote": f"https://evil.example/{HOSTILE}", "worker": WORKER,
                        "reason": HOSTILE,
                        "tasks": [{"id": "T-1", "title": "Pick the API", "status": "parked"},
                                  {"id": "T-2", "title": f"Port callers {HOSTILE}", "status": "in_progress"},
                                  {"id": "T-3", "title": "Docs", "status": "done"}],
                        "questions": [{"task": "T-1", "question": QUESTION}]})
    event = {"ts": "2026-01-02T03:04:05.000Z", "task": "T-2", "iter": 1}
    held.append_events(sid, [json.dumps({**event, "type": "session_crashed", "data": {"reason": f"Port {HOSTILE}"}}).encode(),
                             json.dumps({**event, "type": "model_call",
                                         "data": {"role": "worker", "model": "m", "prompt_tokens": 10,
                                                  "completion_tokens": 5, "cost_usd": 0.0123}}).encode(),
                             b'{"not": "an event"}'])
    assert held.take_lease(sid, WORKER)
    held.redis.sadd("tilth:sessions", "../../etc", "<b>x</b>")  # ids that are not session ids: never listed
    return held.redis


@pytest.mark.redis
@pytest.mark.browser
def test_a_dispatched_session_is_shown_escaped_and_answered_from_its_page(sandbox, broker, served, browser):  # noqa: F811
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    client = hold_a_parked_session(broker.url, "far-1")
    listed = sandbox.tilth("status").stdout  # the same reader, worded for a terminal
    assert "dispatched sessions (broker):" in listed and re.search(r"far-1  running\s+1/3  T-2", listed), listed
    assert "etc" not in listed
    server = served()

    status, body, _ = server.get("/")
    assert status == 200
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in body and "<script>window.pwned" not in body
    assert "etc" not in body and "&lt;b&gt;x" not in body, "an id that is not a session id is never listed"

    page = browser.new_page()
    server.open_in(page)
    row = page.locator('tr[data-session="far-1"]')
    expect(row).to_have_attribute("data-dispatched", "1")
    expect(row.locator(".badge.dispatched")).to_have_text("dispatched")
    expect(row.locator(".state")).to_have_text("running")
    expect(row.locator(".current")).to_have_text("T-2")
    expect(row.locator(".worker")).to_have_text(f"on {WORKER}")
    expect(row.locator("td.num").first).to_have_text("≥ $0.01")
    asked = page.locator('[data-question="far-1/T-1"]')
    expect(asked.locator(".q-text")).to_have_text(QUESTION)
    expect(asked).to_contain_text("task T-1 Pick the API")
    assert page.locator("#dispatched img, #needs img, #dispatched script, #needs script").count() == 0

    asked.get_by_role("link", name="answer").click()
    expect(page).to_have_url(re.compile(r"/s/far-1#answer-T-1$"))
    expect(page.locator("#head .state")).to_have_text("running")
    expect(page.locator("#head")).to_contain_text(f"on {WORKER}")
    expect(page.locator("#head")).to_contain_text("spend ≥ $0.0123")
    expect(page.locator('#tasks tr[data-task="T-2"]')).to_contain_text(f"Port callers {HOSTILE}")
    expect(page.locator("#questions .q-text")).to_have_text(QUESTION)
    expect(page.locator("#log")).to_contain_text(f"session crashed: Port {HOSTILE}")
    expect(page.locator("#act button", has_text="stop")).to_be_visible()
    assert page.locator("#head img, #tasks img, #questions img, #log img, #head script, #tasks script").count() == 0

    assert page.request.post(f"{server.url}s/far-1/answer", form={"text": ANSWER, "task": "T-1"}).status == 403
    assert client.llen("tilth:inbox:far-1") == 0, "a POST without the CSRF token leaves nothing"
    page.locator("#answer-T-1").fill(ANSWER)
    page.get_by_role("button", name="answer").click()
    expect(page.locator("#acted")).to_contain_text("answer recorded for T-1")
    expect(page.locator("#acted")).not_to_have_class("error")
    items = [json.loads(raw) for raw in client.lrange("tilth:inbox:far-1", 0, -1)]
    assert [(i["kind"], i["task"], i["text"], i["by"]) for i in items] == [("answer", "T-1", ANSWER, "dashboard")]
    assert page.evaluate("window.pwned") is None

    page.locator("#note-text").fill("Prefer small commits.")
    page.get_by_role("button", name="leave note").click()
    expect(page.locator("#acted")).to_contain_text("note for session far-1")
    page.get_by_role("button", name="stop").click()
    expect(page.locator("#acted")).to_contain_text("asked its worker")
    items = [json.loads(raw) for raw in client.lrange("tilth:inbox:far-1", 0, -1)]
    assert [(i["kind"], i["by"]) for i in items] == [("answer", "dashboard"), ("note", "dashboard")]
    assert client.get("tilth:stop:far-1") == b"dashboard"
    assert page.evaluate("window.pwned") is None

    gone = page.request.post(f"{server.url}s/nowhere-1/answer", form={"text": ANSWER, "task": "T-1"})
    assert gone.status in (403, 404)
    assert server.get("/s/nowhere-1")[0] == 404 and server.get("/s/..%2Fetc")[0] == 404


@pytest.mark.slow
def test_an_unreachable_broker_is_one_line_on_the_overview(sandbox, served):  # noqa: F811
    configure(sandbox, "redis://127.0.0.1:1/0")
    server = served()
    started = time.monotonic()
    status, body, _ = server.get("/")
    assert status == 200, body
    assert time.monotonic() - started < 5, "a refused connection is said at once"
    said = re.findall(r'id="broker-down">([^<]*)<', body)
    assert said == ["dispatched sessions: the broker redis://127.0.0.1:1/0 is unreachable (Error 111 connecting to "
                    "127.0.0.1:1. Connection refused.)"], body
    assert server.get("/s/far-1")[0] == 404
    listed = sandbox.tilth("status")
    assert "dispatched: the broker redis://127.0.0.1:1/0 is unreachable" in listed.stdout, listed.stdout + listed.stderr
