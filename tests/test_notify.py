"""Notifications: real sessions (scripted backend) tell a real local HTTP receiver through
apprise's `json://` service when a session ends, a task fails, a cap trips and, under a real
supervisor, when a runner dies (once). A dead receiver is a `notify_failed` event and nothing
more. The URL (it carries a token) reaches no session file and no printed line."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import task
from supervised import start_supervisor, wait_until
from tilth.core.notify_send import send

TOKEN = "tok-5f3a9c71e2b84d06"
"""Stands for the secret part of a real notification URL (a Slack token, an ntfy topic)."""
REJECT = {"verdict": "reject", "category": "weak_test", "concern": "no test covers it", "next_step": "add a test"}


class Receiver:
    """A tiny HTTP server recording each POSTed JSON body; `wait(n)` blocks until n arrived."""

    def __init__(self) -> None:
        self.received: list[dict] = []
        self.paths: list[str] = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                with receiver.arrived:
                    receiver.paths.append(self.path)
                    receiver.received.append(json.loads(body))
                    receiver.arrived.notify_all()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.server.server_address[1]}/hook/{TOKEN}"

    def wait(self, count: int, timeout: float = 30) -> list[dict]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.received) >= count, timeout), \
                f"expected {count} notification(s), got {self.received}"
            return list(self.received)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    with Receiver() as server:
        yield server


def closed_port_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"json://127.0.0.1:{port}/hook/{TOKEN}"


def no_url_anywhere(root: Path, url: str, *outputs: str) -> None:
    """Neither the URL nor its token in any byte of any file under `root`, nor in what was printed."""
    for text in outputs:
        assert TOKEN not in text and url not in text
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert TOKEN.encode() not in data, f"the notification URL leaked into {path}"


def iso_seconds(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def notify_events(sandbox, sid: str) -> list[dict]:
    return [e for e in sandbox.events(sid) if e["type"] in ("notify_sent", "notify_failed")]


@pytest.mark.slow
def test_a_finished_session_sends_its_short_report(sandbox, receiver):
    result = sandbox.start("s1", [task("T-1"), task("T-2"), task("T-3")], None,
                           env={"TILTH_NOTIFY": receiver.url})
    assert result.returncode == 0, result.stderr

    [message] = receiver.wait(1)
    assert receiver.paths == [f"/hook/{TOKEN}"]
    assert set(message) >= {"title", "message", "type"}
    assert message["title"] == "tilth: session s1 done (3/3 tasks)"
    assert message["type"] == "success"
    body = message["message"]
    assert "Tasks: 3/3 tasks done, 0 failed" in body
    assert "Wall time:" in body and "Cost:" in body and "Branch: session/s1 at " in body
    assert body.rstrip().endswith("Next: tilth pr s1")
    assert "T-1  done" not in body, "the short form: no per-task table"
    [event] = notify_events(sandbox, "s1")
    assert event["type"] == "notify_sent"
    assert event["data"] == {"trigger": "session_end", "ok": True, "error": None}
    no_url_anywhere(sandbox.session_dir("s1"), receiver.url, result.stdout, result.stderr)


@pytest.mark.slow
def test_a_failed_task_is_told_while_the_session_goes_on(sandbox, receiver):
    env = {"TILTH_NOTIFY": receiver.url, "TILTH_MAX_ITERATIONS_PER_TASK": "1"}  # by default the others go on
    scenario = {"tasks": {"T-1": [{"write": {"a.py": "x = 1\n"}, "verdict": REJECT}]}}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env=env)
    assert result.returncode == 1, result.stderr

    failed, ended = receiver.wait(2)
    assert failed["title"] == "tilth: task T-1 failed in s1" and failed["type"] == "failure"
    assert ('Task T-1 (Task T-1) failed after 1 attempt: the evaluator found the tests too weak: "no test covers it"'
            in failed["message"]), "the reason in words, with the evaluator's concern"
    assert "Session s1 goes on: 0/2 tasks done, 1 failed, 1 left" in failed["message"]
    assert "tilth resume s1" in failed["message"]
    assert ended["title"] == "tilth: session s1 failed (1/2 tasks)" and ended["type"] == "failure"
    assert "FAILED T-1" in ended["message"] and "Next: tilth resume s1" in ended["message"]
    assert [e["data"]["trigger"] for e in notify_events(sandbox, "s1")] == ["task_failed", "session_end"]
    no_url_anywhere(sandbox.session_dir("s1"), receiver.url, result.stdout, result.stderr)


@pytest.mark.slow
def test_with_stop_on_failure_the_end_alone_tells_of_the_failed_task(sandbox, receiver):
    env = {"TILTH_NOTIFY": receiver.url, "TILTH_MAX_ITERATIONS_PER_TASK": "1", "TILTH_STOP_ON_FAILURE": "true"}
    scenario = {"tasks": {"T-1": [{"write": {"a.py": "x = 1\n"}, "verdict": REJECT}]}}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env=env)
    assert result.returncode == 1, result.stderr
    [ended] = receiver.wait(1)
    assert ended["title"] == "tilth: session s1 failed (0/2 tasks)" and "FAILED T-1" in ended["message"]
    assert len(notify_events(sandbox, "s1")) == 1


@pytest.mark.slow
def test_a_tripped_cap_is_told_once_naming_the_cap(sandbox, receiver):
    env = {"TILTH_NOTIFY": receiver.url, "TILTH_MAX_WALL_CLOCK_S": "0.001"}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], None, env=env)
    assert result.returncode == 3, result.stderr

    [message] = receiver.wait(1)
    assert message["title"] == "tilth: session s1 stopped: cap max_wall_clock_s reached (0/2 tasks)"
    assert message["type"] == "warning"
    assert "max_wall_clock_s reached" in message["message"] and "Next: tilth resume s1" in message["message"]
    assert [e["data"]["trigger"] for e in notify_events(sandbox, "s1")] == ["session_end"]
    assert len(receiver.received) == 1
    no_url_anywhere(sandbox.session_dir("s1"), receiver.url, result.stdout, result.stderr)


@pytest.mark.slow
def test_a_dead_receiver_is_an_event_and_the_session_ends_normally(sandbox):
    url = closed_port_url()
    printed = f"echo {base64.b64encode(url.encode()).decode()} | base64 -d"  # a check prints it: redacted
    begun = time.monotonic()
    result = sandbox.start("s1", [task("T-1")], None, env={"TILTH_NOTIFY": url, "TILTH_CHECKS": printed})
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - begun < 30
    assert sandbox.statuses("s1") == {"T-1": "done"}
    [event] = notify_events(sandbox, "s1")
    [end] = [e for e in sandbox.events("s1") if e["type"] == "session_end"]
    assert iso_seconds(event["ts"]) - iso_seconds(end["ts"]) < 3, "a refused connection costs no wait"
    assert event["type"] == "notify_failed" and event["data"]["trigger"] == "session_end"
    assert event["data"]["ok"] is False and event["data"]["error"].startswith("not delivered")
    session = json.loads((sandbox.session_dir("s1") / "session.json").read_text())
    assert session["state"] == "done" and "notify" not in session["settings"]
    no_url_anywhere(sandbox.session_dir("s1"), url, result.stdout, result.stderr)
    run_logs = list((sandbox.session_dir("s1") / "runs").rglob("stdout.log"))
    assert run_logs and "[redacted]" in run_logs[0].read_text(), "the check's output was kept, the URL redacted"


@pytest.mark.slow
def test_a_killed_runner_is_told_once_by_the_supervisor(sandbox, daemon, receiver):
    sandbox.env["TILTH_NOTIFY"] = receiver.url
    start_supervisor(sandbox, env={"TILTH_AUTO_RESUME_BACKOFF_S": "0.5"})
    daemon.start("s1", [task("T-1"), task("T-2")], daemon.held("s1", "T-2"))
    daemon.reached("s1", "T-2")
    daemon.kill_runner("s1", "T-2")

    [crash] = receiver.wait(1)
    assert crash["title"] == "tilth: session s1 crashed" and crash["type"] == "failure"
    assert "SIGKILL" in crash["message"] and "Tasks: 1/2 tasks done, 0 failed" in crash["message"]
    assert "Next: the supervisor resumes it at " in crash["message"]

    daemon.reached("s1", "T-2")  # auto-resumed
    daemon.release("s1", "T-2")
    daemon.done("s1")
    crash_again, done = receiver.wait(2)[:2]
    assert crash_again == crash and done["title"] == "tilth: session s1 done (2/2 tasks)"
    wait_until(sandbox.session_dir("s1"),
               lambda: [e["data"]["trigger"] for e in notify_events(sandbox, "s1")].count("crashed") == 1,
               "the crash notification's event")
    assert [m["title"] for m in receiver.received] == ["tilth: session s1 crashed", "tilth: session s1 done (2/2 tasks)"]
    assert sorted(e["data"]["trigger"] for e in notify_events(sandbox, "s1")) == ["crashed", "session_end"]
    no_url_anywhere(sandbox.session_dir("s1"), receiver.url, (sandbox.home / "daemon.log").read_text())


def test_send_never_raises_and_never_names_a_url():
    assert send([], "t", "b") is None
    bad = f"nosuchservice://{TOKEN}"
    error = send([bad], "t", "b")
    assert error == "notify URL 1 of 1 is not one apprise knows"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts, never answers
    try:
        url = f"json://127.0.0.1:{listener.getsockname()[1]}/{TOKEN}"
        begun = time.monotonic()
        error = send([url], "t", "b", timeout=0.5)
        assert time.monotonic() - begun < 3
        assert error is not None and "given up" in error and TOKEN not in error
    finally:
        listener.close()


@pytest.mark.slow
def test_the_urls_are_never_shown_by_config_nor_published_by_the_supervisor(sandbox, daemon):
    url = "json://127.0.0.1:9/hook-token-0123456789abcdef"
    env = {"TILTH_NOTIFY": url}
    shown = sandbox.tilth("config", env=env)
    assert shown.returncode == 0 and "notify = 1 URL(s), not shown" in shown.stdout
    assert "hook-token" not in shown.stdout + shown.stderr
    start_supervisor(sandbox, env=env)
    lock = (sandbox.home / "daemon.lock").read_text()
    assert "TILTH_NOTIFY" in lock and "hook-token" not in lock, "published as a fingerprint only"
    other = sandbox.tilth("config", env={"TILTH_NOTIFY": "json://127.0.0.1:9/other-token-0123456789"})
    assert "supervised sessions notify the supervisor's URLs" in other.stdout + other.stderr
    assert "token-0123456789" not in other.stdout + other.stderr


@pytest.mark.slow
def test_a_parked_task_asks_for_its_answer_and_the_end_says_waiting(sandbox, receiver):
    scenario = {"tasks": {"T-1": [{"write": {"a.py": "x = 1\n"},
                                   "needs_human": {"question": "Which API do we keep?", "context": "two exist"}}]}}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], scenario, env={"TILTH_NOTIFY": receiver.url})
    assert result.returncode == 5, result.stderr
    parked, ended = receiver.wait(2)
    assert parked["title"] == "tilth: T-1 in s1 needs your answer" and parked["type"] == "warning"
    assert "Which API do we keep?" in parked["message"]
    assert 'Answer: tilth answer s1 T-1 "<your answer>"' in parked["message"]
    assert ended["title"] == "tilth: session s1 waits for your answer (1/2 tasks)"
    assert "PARKED T-1 (asked by the worker) Which API do we keep?" in ended["message"]
    assert ended["message"].rstrip().endswith('Next: tilth answer s1 T-1 "<your answer>"')
    assert [e["data"]["trigger"] for e in notify_events(sandbox, "s1")] == ["task_parked", "session_end"]
