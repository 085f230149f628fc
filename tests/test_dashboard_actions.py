"""Acting from the dashboard, end to end, at phone width: a real `tilth serve` (given `tilth.actions`)
in Debian's chromium through Playwright, a real supervisor, the `openai` backend against the fake
model server (tests/fake_openai.py) for a task that parks on a question, and the scripted backend
for a session held in its worker step (tests/supervised.py) to note, stop and resume. Every wait is
Playwright's own `expect` or a file watch, never a sleep."""

from __future__ import annotations

import json
import re

import pytest

from conftest import task
from supervised import wait_until
from test_dashboard import browser, served  # noqa: F401  (fixtures)

QUESTION = "Keep the v1 API <script>window.pwned = 1</script> or move every caller to v2?"
ANSWER = "Move to v2 and keep a thin v1 shim for the CLI."
NOTE = "Prefer small commits; the CLI tests are slow."
PHONE = {"width": 390, "height": 844}


def no_sideways_scroll(page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url} is {width} px wide at {PHONE['width']} px"


def from_the_dashboard(sandbox, sid: str) -> list[dict]:
    return [e["data"] for e in sandbox.events(sid) if e["type"] == "acted" and e["data"].get("by") == "dashboard"]


@pytest.mark.browser
@pytest.mark.slow
def test_a_person_acts_from_the_dashboard_at_phone_width(sandbox, daemon, fake, model_env, served, browser):  # noqa: F811
    from fake_openai import ACCEPT, SUBMIT, call, reply
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    sandbox.env.update(model_env, TILTH_SELF_IMPROVEMENT="false", TILTH_PREFLIGHT="false")
    fake.enqueue("worker", reply(tool_calls=[call("needs_human", question=QUESTION, context="v1 has 3 callers")]),
                 reply(tool_calls=[call("write_file", path="api.txt", content="v2\n")]), reply(tool_calls=[SUBMIT]))
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    details = "## Steps\n\n1. list the callers\n2. decide <script>window.pwned = 2</script>"
    plan = sandbox.write_json("ask-prd.json", [task("T-1", "Pick the API", description=details)])
    parked = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "ask-1", "--foreground")
    assert parked.returncode == 5, parked.stdout + parked.stderr
    server = served()  # its environment (the model's) is what the supervisor it starts runs with
    page = browser.new_page(viewport=PHONE)
    server.open_in(page)

    # The first page leads with the question: its text (as text), the task, how long it has waited.
    page.goto(server.url)
    asked = page.locator('[data-question="ask-1/T-1"]')
    expect(asked.locator(".q-text")).to_have_text(QUESTION)
    expect(asked).to_contain_text("task T-1 Pick the API")
    expect(asked).to_contain_text(re.compile(r"waiting (under a minute|\d+m\d\ds)"))
    expect(page.locator('tr[data-session="ask-1"] .state')).to_have_text("waiting")
    no_sideways_scroll(page)

    # Answered in the browser: the task is queued again and the worker's next prompt holds the answer.
    asked.get_by_role("link", name="answer").click()
    expect(page.locator("#questions .q-text")).to_have_text(QUESTION)
    page.evaluate("window.notReloaded = true")
    no_sideways_scroll(page)
    assert page.request.post(f"{server.url}s/ask-1/answer", form={"text": ANSWER, "task": "T-1"}).status == 403
    assert page.request.post(f"{server.url}s/ask-1/answer", form={"text": ANSWER, "task": "T-1", "csrf": "forged"}
                             ).status == 403
    assert from_the_dashboard(sandbox, "ask-1") == [], "a refused POST does nothing"
    page.locator("#answer-T-1").fill(ANSWER)
    page.get_by_role("button", name="answer").click()
    expect(page.locator("#acted")).not_to_be_empty()
    expect(page.locator("#acted")).not_to_have_class("error")
    expect(page.locator("#head .state")).to_have_text("done")
    assert page.evaluate("window.notReloaded") is True, "the page followed the session live"
    worker_asks = [r["body"] for r in fake.requests if r["body"] and r["body"].get("model") == "worker"]
    assert ANSWER in json.dumps(worker_asks[-1]["messages"]), "the worker's next prompt holds the answer"
    assert ANSWER not in json.dumps(worker_asks[0]["messages"])
    assert [a["action"] for a in from_the_dashboard(sandbox, "ask-1")] == ["answer"]
    assert [e["data"] for e in sandbox.events("ask-1") if e["type"] == "session_queued"][-1]["by"] == "dashboard"

    # The transcript and the task's details are rendered markdown; a <script> in any text stays text.
    expect(page.locator("#transcript .md h1, #transcript .md h2").first).to_be_visible()
    expect(page.locator("#transcript")).to_contain_text("<script>window.pwned = 1</script>")
    page.locator("#detail-T-1 summary").click()
    expect(page.locator("#detail-T-1 h2")).to_have_text("Steps")
    expect(page.locator("#detail-T-1 ol li")).to_have_count(2)
    assert page.locator("#transcript script, #details script, #questions script").count() == 0
    assert page.evaluate("window.pwned") is None
    no_sideways_scroll(page)
    assert page.request.get(f"{server.url}favicon.ico").status == 200

    # A session held in its worker step: a note, a stop, then a resume, each from its page. A resume
    # records the acting process's settings (as `tilth resume` does), so this dashboard runs without the model's.
    server.stop()
    for name in model_env:
        del sandbox.env[name]
    server = served()
    daemon.start("held-1", [task("T-1"), task("T-2")], daemon.held("held-1", "T-1"))
    daemon.reached("held-1", "T-1")
    server.open_in(page)  # another port: another login
    page.goto(f"{server.url}s/held-1")
    expect(page.locator("#head .state")).to_have_text("running")
    page.locator("#note-text").fill(NOTE)
    page.get_by_role("button", name="leave note").click()
    expect(page.locator("#acted")).not_to_be_empty()
    inbox = sandbox.session_dir("held-1") / "inbox.jsonl"
    wait_until(sandbox.session_dir("held-1"), lambda: inbox.exists() and NOTE in inbox.read_text(), "the note")

    page.get_by_role("button", name="stop").click()
    expect(page.locator("#acted")).to_contain_text("stop")
    daemon.release("held-1", "T-1")
    expect(page.locator("#head .state")).to_have_text("stopped")
    assert daemon.settled("held-1") == "stopped"  # and its runner gone: a resume is refused while one runs
    page.get_by_role("button", name="resume").click()
    expect(page.locator("#head .state")).to_have_text("done")
    assert [a["action"] for a in from_the_dashboard(sandbox, "held-1")] == ["note", "stop", "resume"]
    assert [c["task"] for c in sandbox.commits("held-1")] == ["T-1", "T-2"]
    no_sideways_scroll(page)
