"""The broker's `tilth:session:<id>` hash has one declaration of its fields
(`dispatch/broker.STATE_FIELDS`): every write the source makes names only declared fields, and a
write of an undeclared one is refused before it reaches Redis."""

from __future__ import annotations

import ast
from pathlib import Path

import orjson
import pytest

import tilth
from tilth.dispatch.broker import LISTED, STATE_FIELDS, _flat

WRITERS = {"set_state": 1, "register": 1, "publish_state": None}
"""Calls that write the hash, with the position of the fields dict among their arguments (None:
the fields are keyword arguments)."""


def written_fields() -> dict[str, set[str]]:
    """Each literal field name the source writes to the hash, with where."""
    found: dict[str, set[str]] = {}
    for path in sorted((Path(tilth.__file__).parent / "dispatch").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            at = WRITERS.get(node.func.attr, -1)
            if at == -1:
                continue
            keys = [k.arg for k in node.keywords if k.arg] if at is None else \
                [k.value for k in getattr(node.args[at], "keys", []) if isinstance(k, ast.Constant)] \
                if len(node.args) > at else []
            for key in keys:
                found.setdefault(str(key), set()).add(f"{path.name}:{node.lineno}")
    return found


def test_every_field_the_source_writes_is_declared():
    written = written_fields()
    assert {"state", "worker", "remote", "job", "reason"} <= written.keys(), "the scan no longer sees the writes"
    assert not {k: v for k, v in written.items() if k not in STATE_FIELDS}


def test_an_undeclared_field_is_refused_and_lists_are_json():
    with pytest.raises(ValueError, match="no field lane; declare it in broker.STATE_FIELDS"):
        _flat({"state": "running", "lane": 2})
    flat = _flat({"tasks": [{"id": "T-1"}], "reason": None, "pid": 7})
    assert flat == {"tasks": orjson.dumps([{"id": "T-1"}]).decode(), "reason": "", "pid": "7"}
    assert set(LISTED) <= STATE_FIELDS.keys()
