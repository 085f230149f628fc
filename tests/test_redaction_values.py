"""A state file rewritten after every task is scanned only for the string values it did not hold
before; a value with a secret is redacted on every write, however often its neighbours were clean."""

from __future__ import annotations

import random
import string

import orjson
import pytest

from tilth.store import redaction
from tilth.store.jsonio import write_json

_rng = random.Random()
GITHUB_TOKEN = "ghp_" + "".join(_rng.choices(string.ascii_letters + string.digits, k=36))


@pytest.fixture
def scanning(monkeypatch):
    monkeypatch.setattr(redaction, "_scanning", True)
    monkeypatch.setattr(redaction, "_clean_values", {})
    monkeypatch.setattr(redaction, "_documents", {}, raising=False)


def plan(tasks: int, extra: dict | None = None) -> list[dict]:
    return [{"id": f"T-{i}", "title": f"Task {i}", "description": "Write one file.", **(extra or {})}
            for i in range(tasks)]


def test_a_secret_among_values_scanned_clean_before_is_redacted_every_time(tmp_path, scanning):
    path = tmp_path / "prd.json"
    write_json(path, plan(20))
    assert redaction._clean_values, "clean values are remembered"
    for _ in range(3):
        leaked = plan(20) + [{"id": "T-20", "title": "Task 20", "description": f"token = {GITHUB_TOKEN}"}]
        write_json(path, leaked)
        assert GITHUB_TOKEN not in path.read_text()
        assert orjson.loads(path.read_bytes())[20]["description"] == "token = [redacted]"
    assert hash(f"token = {GITHUB_TOKEN}") not in redaction._clean_values, "a value with a secret is never marked clean"


def test_only_values_no_finding_touches_are_marked_clean(scanning):
    """Values are scanned joined by newlines; a finding spanning from one into the next (a private
    key's header to its END line) keeps both unmarked, and its neighbours are still marked."""
    values = ["plain words", "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "more plain words"]
    joined = "\n".join(values)
    start, end = joined.index("-----BEGIN"), joined.index("KEY-----\nmore") + len("KEY-----")
    redaction._remember_clean(values, [(start, end)])
    assert set(redaction._clean_values) == {hash("plain words"), hash("more plain words")}
    redaction._remember_clean(values, [])
    assert {hash(v) for v in values} <= set(redaction._clean_values)


def test_the_remembered_values_are_bounded(scanning, monkeypatch):
    monkeypatch.setattr(redaction, "CLEAN_VALUES_KEPT", 10)
    redaction._remember_clean([f"value {i}" for i in range(25)], [])
    assert len(redaction._clean_values) == 10
    assert hash("value 24") in redaction._clean_values and hash("value 0") not in redaction._clean_values


def test_journal_lines_are_not_remembered(tmp_path, scanning):
    """Appended lines are written once each (a timestamp in every one): remembering their values
    would only push a plan's values out."""
    from tilth.store.jsonio import append_jsonl

    append_jsonl(tmp_path / "events.jsonl", {"ts": "2026-11-26T00:00:00Z", "type": "x", "data": {"a": "words"}})
    assert not redaction._clean_values


def test_a_big_plan_rewritten_with_one_status_flipped_scans_only_that_line(tmp_path, scanning):
    """A status flip in a plan too big for the remembered values (a 10,000-task plan holds more than
    `CLEAN_VALUES_KEPT`) scans the changed line, not the plan again: the write's cost stays flat."""
    path = tmp_path / "prd.json"
    tasks = plan(1500, {"status": "pending"})
    write_json(path, tasks)
    assert path.stat().st_size > 64 * 1024  # a document big enough to be kept (`DIFF_FROM`)
    redaction._clean_values.clear()  # as when the plan's values outnumber what is remembered
    tasks[700]["status"] = "in_progress"
    write_json(path, tasks)
    assert set(redaction._clean_values) == {hash("in_progress")}, "only the changed line's value was scanned"
    assert orjson.loads(path.read_bytes()) == tasks


def test_a_secret_on_a_changed_line_of_a_big_plan_is_redacted(tmp_path, scanning):
    path = tmp_path / "prd.json"
    tasks = plan(1500, {"status": "pending"})
    write_json(path, tasks)
    tasks[3]["description"] = f"token = {GITHUB_TOKEN}"
    tasks[900]["status"] = "done"
    tasks.append({"id": "T-1500", "title": f"pw {GITHUB_TOKEN}", "description": "d", "status": "pending"})
    for _ in range(2):
        write_json(path, tasks)
        assert GITHUB_TOKEN not in path.read_text()
        written = orjson.loads(path.read_bytes())
        assert written[3]["description"] == "token = [redacted]" and written[1500]["title"] == "pw [redacted]"
        assert written[900]["status"] == "done"
