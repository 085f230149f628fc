"""Token and cost totals are summed in one place (`store/calls.Totals`): the roll-up's session
and task totals, the runner's `Meter` and the report's tally all give the same figures for the
same `model_call` events, damaged and old ones included."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from tilth.agents.accounting import Meter
from tilth.store.calls import Totals
from tilth.store.events import EventLog
from tilth.store.rollup import rebuild

importlib.import_module("tilth.run.loop")  # registers task_started (accounting registers model_call)

CALLS = [  # (task, data of its model_call)
    ("T-1", {"role": "worker", "prompt_tokens": 100, "cached_tokens": 40, "completion_tokens": 10, "total_tokens": 110,
             "usage_known": True, "cost_usd": 0.01, "cost_source": "price_table"}),
    ("T-1", {"role": "evaluator", "prompt_tokens": 7.0, "completion_tokens": 3, "usage_known": True, "cost_usd": 0.5,
             "cost_source": "provider"}),
    ("T-1", {"role": "worker", "prompt_tokens": None, "completion_tokens": 5, "usage_known": False, "cost_usd": 0.0,
             "cost_source": "unknown"}),
    ("T-2", {"role": "worker", "prompt_tokens": 20, "completion_tokens": 2, "cost_usd": -1, "cost_source": "unknown"}),
    ("T-2", {"role": "worker", "prompt_tokens": -5, "completion_tokens": "x", "cost_usd": float("nan")}),
    ("T-2", {"role": "worker", "prompt_tokens": 8, "cached_tokens": 99, "completion_tokens": 1}),  # before usage_known
]


def journal(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    for tid in ("T-1", "T-2"):
        log.emit("task_started", tid)
        for task_id, data in CALLS:
            if task_id == tid:
                log.emit("model_call", tid, 1, **data)
    return log.read()


def totals_of(obj) -> dict:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(Totals)}


def test_every_total_is_the_one_sum(tmp_path):
    events = journal(tmp_path)
    whole = Totals.of_events(events)
    assert (whole.model_calls, whole.tokens, whole.prompt_tokens, whole.cached_tokens, whole.completion_tokens) == \
        (6, 110 + 10 + 5 + 22 + 0 + 9, 100 + 7 + 20 + 8, 40 + 0 + 8, 10 + 3 + 5 + 2 + 1)
    assert (whole.unknown_usage_calls, whole.unknown_cost_calls, whole.unpriced_calls) == (2, 2, 2)
    assert whole.cost_usd == pytest.approx(0.51) and whole.cost_is_lower_bound

    rolled = rebuild(tmp_path / "events.jsonl")
    assert totals_of(rolled.totals) == totals_of(whole)
    assert totals_of(Meter.from_events(events)) == totals_of(whole)
    assert Meter.from_rollup(rolled) == Meter.from_events(events)
    for tid in ("T-1", "T-2"):
        assert totals_of(rolled.tasks[tid]) == totals_of(Totals.of_events(e for e in events if e["task"] == tid))
    assert rolled.tasks["T-1"].cached_tokens == 40 and rolled.tasks["T-2"].prompt_tokens == 28
