"""The actions a person takes (tilth/actions), called in-process as the dashboard calls them: each
records who acted (`by`) in the events it writes, and an answer reaches a parked task."""

from __future__ import annotations

import json
import os

import pytest
import redis

from conftest import task
from dispatch_cluster import cluster  # noqa: F401,F811 (the fixture)

from tilth.actions import answer_question, leave_note, resume_session, stop_session
from tilth.actions.planning import replace_plan
from tilth.core.errors import BadInput

QUESTION = "Keep the v1 API or move every caller to v2?"
ASKS = {"write": {"partial.py": "# half done\n"}, "needs_human": {"question": QUESTION, "context": "v1 has 3 callers"}}
FINISHES = {"write": {"finished.py": "done = True\n"}}


@pytest.fixture
def here(sandbox, monkeypatch):
    """This process acts on the sandbox's home as a `tilth` command there would (the dashboard does)."""
    for name in [n for n in os.environ if n.startswith("TILTH_")]:
        monkeypatch.delenv(name)
    for name, value in sandbox.env.items():
        if name.startswith("TILTH_"):
            monkeypatch.setenv(name, value)
    return sandbox


def parked(sandbox, sid: str = "s1") -> None:
    """A session whose one task asked a question: it ended `waiting`."""
    result = sandbox.start(sid, [task("T-001", "API choice")], {"tasks": {"T-001": [ASKS, FINISHES]}})
    assert result.returncode == 5, result.stderr


def acted(sandbox, sid: str = "s1") -> list[dict]:
    """The `acted` events after the one `tilth start` wrote."""
    started, *after = [e for e in sandbox.events(sid) if e["type"] == "acted"]
    assert started["data"] == {"action": "start", "by": "cli"}
    return after


def test_an_action_by_nobody_known_is_refused(here):
    parked(here)
    # the parked task's line says the worker's question, and its context only where it is the context
    shown = here.tilth("status", "s1").stdout
    assert f'(attempt 1: waits for an answer: "{QUESTION}")' in shown and f"question T-001 (worker asked) {QUESTION}" \
        in shown and "  context: v1 has 3 callers" in shown, shown
    with pytest.raises(BadInput, match="unknown actor 'robot'"):
        leave_note(here.home, "s1", "use v2", by="robot")
    assert not (here.session_dir("s1") / "inbox.jsonl").exists()


def test_a_note_records_who_left_it(here):
    parked(here)
    done = leave_note(here.home, "s1", "  prefer   the v2 API ", by="dashboard", task="T-001")
    [note] = [json.loads(line) for line in (here.session_dir("s1") / "inbox.jsonl").read_text().splitlines()]
    assert note["text"] == "prefer the v2 API" and note["task"] == "T-001"
    assert done.session_id == "s1" and done.events == ("acted",) and note["id"] in done.what
    [event] = acted(here)
    assert event["task"] == "T-001" and event["data"] == {"action": "note", "by": "dashboard", "note": note["id"]}
    with pytest.raises(BadInput, match="has no task 'T-9'"):
        leave_note(here.home, "s1", "x", task="T-9")


def test_a_bad_answer_is_refused_and_nothing_is_written(here):
    parked(here)
    before = (here.session_dir("s1") / "answers" / "T-001.jsonl").read_text()
    for text, task_id, said in (("  ", None, "the answer is empty"), ("v2", "T-9", "has no task 'T-9'"),
                                ("v2", None, None)):
        if said is None:  # answered on a session of another home: it is not there
            with pytest.raises(BadInput, match="no session 's1'"):
                answer_question(here.root, "s1", text)
            continue
        with pytest.raises(BadInput, match=said):
            answer_question(here.home, "s1", text, task=task_id)
    assert (here.session_dir("s1") / "answers" / "T-001.jsonl").read_text() == before
    assert acted(here) == []


def test_stopping_a_session_that_does_not_run_changes_nothing(here):
    parked(here)
    done = stop_session(here.home, "s1", by="dashboard")
    assert "nothing to stop" in done.what and done.events == ()
    assert acted(here) == []


def test_a_plan_replaced_from_the_dashboard_must_be_valid_and_still_the_one_edited(here):
    parked(here)
    live = here.session_dir("s1") / "prd.json"
    before = live.read_bytes()
    grown = json.dumps([*json.loads(before), task("T-002", "Docs")]).encode()
    with pytest.raises(BadInput, match="the previous plan is kept"):
        replace_plan(here.home, "s1", b"[{}]", expected=before, by="dashboard")
    with pytest.raises(BadInput, match="changed while you edited it"):
        replace_plan(here.home, "s1", grown, expected=before.replace(b"parked", b"pending"), by="dashboard")
    assert live.read_bytes() == before and acted(here) == []
    done = replace_plan(here.home, "s1", grown, expected=before, by="dashboard")
    assert done.what.startswith("plan saved") and done.events == ("acted",)
    assert [t["id"] for t in here.plan("s1")] == ["T-001", "T-002"]
    assert [e["data"] for e in acted(here)] == [{"action": "plan", "by": "dashboard"}]


@pytest.mark.slow
def test_an_answer_from_the_dashboard_puts_the_parked_task_back_and_the_supervisor_finishes_it(daemon, here):
    parked(here)
    done = answer_question(here.home, "s1", "Move to v2.", by="dashboard")  # the one parked task
    assert done.events == ("acted", "task_answered", "session_queued"), done
    assert "it is pending again" in done.what and done.more[0].startswith("session s1 queued; supervisor pid")
    events = here.events("s1")
    [answer] = acted(here)
    assert answer["task"] == "T-001" and answer["data"]["action"] == "answer" and answer["data"]["by"] == "dashboard"
    [answered] = [e for e in events if e["type"] == "task_answered"]
    assert answered["data"]["by"] == "dashboard"
    assert [e["data"]["by"] for e in events if e["type"] == "session_queued"] == ["dashboard"]
    daemon.done("s1")
    assert here.statuses("s1") == {"T-001": "done"}


@pytest.mark.slow
def test_a_stop_from_the_dashboard_is_in_the_journal_before_the_runner_ends(daemon, here):
    daemon.start("s1", [task("T-1"), task("T-2")], daemon.held("s1", "T-1"))
    daemon.reached("s1", "T-1")
    done = stop_session(here.home, "s1", by="dashboard")
    assert done.events == ("acted",) and "asked its runner" in done.what
    daemon.release("s1", "T-1")
    assert daemon.settled("s1") == "stopped"
    types = [e["type"] for e in here.events("s1")]
    [stop] = acted(here)
    assert stop["data"]["action"] == "stop" and stop["data"]["by"] == "dashboard" and stop["data"]["now"] is False
    assert types.index("acted") < types.index("session_end"), "who stopped it is known when the run ends"
    # every view says it as the docs promise, never `stopped on request` nor `stop requested`
    summary = json.loads(here.tilth("status", "s1", "--json").stdout)
    assert summary["reason"] == "stopped from the dashboard" and summary["stopped_by"] == "dashboard", summary
    assert "reason   stopped from the dashboard" in here.tilth("status", "s1").stdout
    assert "session s1: stopped (stopped from the dashboard)" in here.tilth("wait", "s1", "--timeout", "5").stdout
    assert (here.session_dir("s1") / "report.md").read_text().startswith("Session s1: stopped from the dashboard")
    digest = json.loads(here.tilth("digest", "--json").stdout)
    assert any("stopped from the dashboard" in line for line in digest["needs_you"]), digest["needs_you"]

    again = resume_session(here.home, "s1", by="dashboard")
    assert again.events[-2:] == ("session_queued", "acted") and again.what.startswith("session s1 queued")
    daemon.done("s1")
    queued = [e["data"] for e in here.events("s1") if e["type"] == "session_queued"]
    assert queued[-1]["by"] == "dashboard" and queued[-1]["reason"] == "resume"
    assert [e["data"]["action"] for e in acted(here)] == ["stop", "resume"]


@pytest.mark.slow
def test_a_scheduled_session_stopped_from_the_dashboard_says_so(daemon, here):
    daemon.start("s1", [task("T-1")], None, "--at", "2099-01-01T00:00:00Z")
    done = stop_session(here.home, "s1", by="dashboard")
    assert done.events == ("session_stopped", "acted") and "it is stopped now" in done.what
    record = daemon.record("s1")
    assert record["state"] == "stopped" and record["reason"] == "stopped on the dashboard before it ran"
    [stopped] = daemon.events("s1", "session_stopped")
    assert stopped["data"]["by"] == "dashboard"
    assert [e["data"] for e in acted(here)] == [{"action": "stop", "by": "dashboard", "now": False}]


@pytest.mark.redis
@pytest.mark.timeout(120)
def test_a_dispatched_session_is_stopped_from_the_dashboard_through_the_broker(cluster, monkeypatch):  # noqa: F811
    for name in [n for n in os.environ if n.startswith("TILTH_")]:
        monkeypatch.delenv(name)
    cluster.worker("w1")
    cluster.start("t1", held="T-1")
    cluster.reached("t1", "T-1")
    elsewhere = cluster.home("h9")  # a machine that does not have the session: the broker knows it
    with pytest.raises(BadInput, match="has no task 'T-9'"):
        leave_note(elsewhere, "t1", "x", by="dashboard", task="T-9")
    noted = leave_note(elsewhere, "t1", "prefer small commits", by="dashboard")
    assert noted.dispatched and noted.events == () and "its worker takes it" in noted.what
    [item] = [json.loads(raw) for raw in redis.Redis.from_url(cluster.redis.url).lrange("tilth:inbox:t1", 0, -1)]
    assert item["kind"] == "note" and item["by"] == "dashboard"
    done = stop_session(elsewhere, "t1", by="dashboard")
    assert done.dispatched and "asked its worker" in done.what, done
    cluster.release("t1", "T-1")
    assert cluster.wait("t1").returncode == 3
    record = json.loads(cluster.file("t1", "session.json"))
    assert record["state"] == "stopped" and "stop requested on the dashboard" in record["reason"], record


def test_the_package_offers_every_action_by_name():
    import tilth.actions

    offered = {name: getattr(tilth.actions, name) for name in tilth.actions.__all__}
    assert all(callable(thing) for thing in offered.values()) and set(offered) == set(tilth.actions.WHERE)
    with pytest.raises(AttributeError):
        tilth.actions.nothing_of_the_kind  # noqa: B018


def test_a_persons_action_between_runs_is_not_running_time(tmp_path):
    from tilth.store.rollup import rebuild
    from tilth.views.tally import running_seconds

    def at(clock: str, kind: str, **data) -> dict:
        return {"ts": f"2026-01-01T{clock}.000Z", "type": kind, "task": None, "iter": None, "data": data}

    events = [at("00:00:00", "session_started"), at("00:00:10", "task_started"),  # then killed: no end
              at("01:00:00", "acted", action="resume", by="dashboard"),
              at("01:00:01", "session_started"), at("01:00:06", "session_end", state="done")]
    log = tmp_path / "events.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert running_seconds(events) == 15.0
    assert rebuild(log).clock.seconds() == 15.0


def test_a_dashboard_resume_keeps_the_recorded_settings_a_cli_resume_takes_the_shells(here, monkeypatch):
    """The dashboard's own environment is not the person's shell: resuming from it changes no setting."""
    parked(here)
    monkeypatch.setenv("TILTH_MAX_SPEND_USD", "7.5")
    from_page = resume_session(here.home, "s1", by="dashboard", foreground=True)
    assert "settings_recorded" not in from_page.events
    assert not any("replace the recorded" in w for w in from_page.warnings)
    from_shell = resume_session(here.home, "s1", by="cli", foreground=True)
    assert "settings_recorded" in from_shell.events
    assert any("max_spend_usd" in w for w in from_shell.warnings)


def test_who_answered_or_noted_is_kept_as_cli_or_dashboard_and_anything_else_as_unknown(tmp_path):
    from tilth.store.actors import known_actor
    from tilth.store.answers import answers_path, last_question, record_answer, record_question
    from tilth.store.inbox import add_note, all_notes

    assert [known_actor(by) for by in ("cli", "dashboard", "runner", "answer", "CLI", None, ["cli"], {"by": 1})] \
        == ["cli", "dashboard"] + ["unknown"] * 6
    for tid, by in (("T-1", "dashboard"), ("T-2", "runner"), ("T-3", None)):
        record_question(tmp_path, tid, 1, "worker", f"{tid}?", "")
        record_answer(tmp_path, tid, 1, "yes", f"id-{tid}", by=by)
    assert [last_question(tmp_path, t).answered_by for t in ("T-1", "T-2", "T-3")] == ["dashboard", "unknown", None]
    with answers_path(tmp_path, "T-3").open("a") as rewritten:  # a carried file rewritten on the remote
        rewritten.write(json.dumps({"kind": "answer", "iter": 1, "text": "no", "id": "x", "by": ["cli"]}) + "\n")
    assert last_question(tmp_path, "T-3").answered_by == "unknown"
    add_note(tmp_path, "a", None, "n1", by="dashboard")
    add_note(tmp_path, "b", None, "n2", by="\x1b[2Jdashboard")
    add_note(tmp_path, "c", None)
    assert [n.by for n in all_notes(tmp_path)] == ["dashboard", "unknown", None]


def test_logs_say_who_answered_and_who_left_the_notes_taken():
    from tilth.views.readable import Readable

    def line(kind: str, data: dict) -> str:
        [said] = Readable().lines({"ts": "2026-01-01T00:00:00.000Z", "type": kind, "task": "T-1", "iter": 1,
                                   "data": data})
        return said

    assert line("task_answered", {"question": "q", "by": "dashboard"}).endswith("(answered on the dashboard)")
    assert line("task_answered", {"question": "q", "by": "unknown"}).endswith("answered; pending again")
    assert line("notes_taken", {"count": 2, "ids": ["a", "b"], "by": ["dashboard", "cli"]}).endswith(
        "took 2 notes left on the dashboard and with `tilth note`")
    assert line("notes_taken", {"count": 1, "ids": ["a"], "by": ["unknown"]}).endswith(
        "took 1 note left by someone unknown")
    assert line("notes_taken", {"count": 1, "ids": ["a"]}).endswith("took 1 note left with `tilth note`")
    assert line("notes_taken", {"count": 1, "ids": ["a"], "by": [["x"]]}).endswith("left by someone unknown")
