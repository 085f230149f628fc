"""session.json is defined once (`store/session_record.SessionRecord`): what the writer writes,
the pydantic-free reader reads back whole, and it reads nothing the pydantic model would read
differently."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from tilth.store.session import _ADAPTER, record_json
from tilth.store.session_record import BackendChoice, SessionRecord, read_record
from tilth.store.session_state import SessionState
from tilth.store.strict import strict_record

FULL = SessionRecord(id="s1", repo="/r", base_commit="0" * 40, branch="session/s1", worktree="/w/s1",
                     state=SessionState.paused, reason="usage limit: later", backend=BackendChoice("scripted", "/s"),
                     created="2026-01-01T00:00:00Z", updated="2026-01-01T00:00:01Z", sandbox="off", checks=["true"],
                     settings={"max_spend_usd": 2.5, "notify": []}, keys=["api_key"], pid=7, supervised=True,
                     start_at="2026-01-02T00:00:00Z", resume_requested=True, auto_resumes=2,
                     auto_resume_at="2026-01-01T00:01:00.000Z", paused_until="2026-01-01T02:00:00Z")


def test_what_the_writer_writes_the_fast_reader_reads_back_whole():
    assert all(getattr(FULL, f.name) != f.default for f in dataclasses.fields(SessionRecord)
               if f.default is not dataclasses.MISSING), "every field set away from its default"
    written = record_json(FULL)
    assert set(written) == {f.name for f in dataclasses.fields(SessionRecord)}
    assert read_record(written) == FULL == _ADAPTER.validate_python(written)


@pytest.mark.parametrize("change", [
    {"pid": "7"}, {"pid": 7.0}, {"pid": True}, {"supervised": 1}, {"auto_resumes": "2"}, {"state": "nonsense"},
    {"state": 3}, {"backend": {"scenario": None}}, {"backend": "scripted"}, {"checks": "true"}, {"keys": [1]},
    {"settings": []}, {"id": None}, {"created": 5},
])
def test_the_fast_reader_leaves_to_pydantic_whatever_is_not_plainly_valid(change):
    raw = {**record_json(FULL), **change}
    assert read_record(raw) is None
    try:
        _ADAPTER.validate_python(raw)  # the model may coerce it or refuse it: either way it decides
    except ValidationError:
        pass


@pytest.mark.parametrize("missing", ["id", "backend", "updated"])
def test_a_record_without_a_required_field_is_left_to_pydantic_which_refuses_it(missing):
    raw = {k: v for k, v in record_json(FULL).items() if k != missing}
    assert read_record(raw) is None
    with pytest.raises(ValidationError):
        _ADAPTER.validate_python(raw)


def test_a_field_the_strict_reader_cannot_check_fails_when_the_reader_is_built():
    @dataclasses.dataclass
    class Grown(SessionRecord):
        labels: set[str] = dataclasses.field(default_factory=set)

    with pytest.raises(TypeError, match="no reader for labels"):
        strict_record(Grown, {"backend": lambda v: v, "state": lambda v: v, "checks": list, "keys": list,
                              "settings": dict})
