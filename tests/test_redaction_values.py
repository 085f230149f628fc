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
