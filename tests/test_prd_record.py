"""prd.json's task is defined once (`store/prd_record.py`): the strict reader the read-only views use
(`read_task`) and the pydantic model the runner uses (`prd.parse_plan`) are both built from it, so
they agree on every field and every constraint. The probes below are derived from the definition
(its fields, the rules in its annotations): a field or rule added there is probed here at once."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Annotated, Any

import pytest
from pydantic import TypeAdapter, ValidationError

from conftest import task
from tilth.core.errors import BadInput
from tilth.store.prd import parse_plan
from tilth.store.prd_record import Criterion, Task, read_task
from tilth.store.strict import Odd, Rule, reader_of, strict_record

PROBES: list[Any] = [
    None, True, False, 0, 1, 1.0, "", " ", "\x1c", "x", " padded \u2003", "T-2", "T 2", "T-2\n", "-T", "true", "yes",
    "pending", "done", "finished", [], [""], ["x"], [" x "], ["T-2"], ["T 2"], ["T-2\n"], [1], [None],
    [{"text": "x"}], [{"text": " x ", "verify": " make "}], [{"text": "x", "verify": ""}], [{"text": "x", "other": "y"}],
    [{"verify": "make"}], ["x", {"text": "y"}], {"text": "x"}, {}, "t" * 300, f" {'t' * 300} ", "t" * 301,
]
"""JSON values of every kind, each near some field's edge (blank, padded, bad id, lax spellings)."""
MISSING = object()


TASK_MODEL = TypeAdapter(Task)
"""The model `prd.parse_plan` validates each task with (the plan's own rules, unique ids and
dependencies, are `prd_rules`' and checked around it by both readers)."""


def model_reads(raw: dict[str, Any]) -> Task | None:
    """The task as the model reads it; None when it refuses it."""
    try:
        return TASK_MODEL.validate_python(raw)
    except ValidationError:
        return None


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(Task)])
def test_the_peek_and_the_model_read_each_field_of_the_one_definition_alike(name):
    refused = accepted = 0
    for probe in [MISSING, *PROBES]:
        raw = {k: v for k, v in task("T-1").items() if k != name}
        if probe is not MISSING:
            raw[name] = probe
        peeked, modelled = read_task(raw), model_reads(raw)
        if peeked is not None:
            assert peeked == modelled, (name, probe)  # read alike, to the stripped character
            accepted += 1
        refused += modelled is None
    assert refused and accepted, f"the probes never test both sides of {name}"


def rules_in(hint: Any) -> list[Any]:
    """Every `Annotated[...]` carrying a `Rule` in a resolved annotation, the dataclasses' fields' too."""
    found = []
    if typing.get_origin(hint) is Annotated and any(isinstance(m, Rule) for m in hint.__metadata__):
        found.append(hint)
    if dataclasses.is_dataclass(hint):
        for inner in typing.get_type_hints(hint, include_extras=True).values():
            found += rules_in(inner)
    for arg in typing.get_args(hint):
        found += rules_in(arg)
    return found


RULED = list({repr(h): h for h in rules_in(Task)}.values())


def test_the_task_carries_every_rule_of_prd_rules():
    kinds = {type(m).__name__ for h in RULED for m in h.__metadata__ if isinstance(m, Rule)}
    assert kinds == {"TaskIdText", "NotBlank", "Title", "AtLeastOne", "TextOrObject"}


@pytest.mark.parametrize("hint", RULED, ids=repr)
def test_each_rule_means_the_same_to_pydantic_and_to_the_strict_reader(hint):
    """pydantic coerces none of the probes into these types (a number is no text, a text no list),
    so the two must agree exactly: both refuse, or both take the very same value."""
    model, strict = TypeAdapter(hint), reader_of(hint)
    outcomes = set()
    for probe in PROBES:
        try:
            expected = model.validate_python(probe)
        except ValidationError:
            expected = MISSING
        try:
            got = strict(probe)
        except Odd:
            got = MISSING
        assert got == expected, probe
        outcomes.add(got is MISSING)
    assert outcomes == {True, False}


def test_a_field_no_strict_reader_can_read_fails_when_the_reader_is_built():
    @dataclasses.dataclass
    class Odd_:
        tags: set[str]

    with pytest.raises(TypeError, match="no strict reader"):
        strict_record(Odd_)


def test_the_plan_validates_its_tasks_with_the_one_definition():
    plan = [task("T-1", title=" One ", depends_on=["T-2"], acceptance_criteria=[" a ", {"text": "b", "verify": "c"}]),
            task("T-2", status="done", files=["src/*.py "])]
    assert parse_plan(json.dumps(plan).encode(), "prd.json") == [read_task(t) for t in plan] == \
        [model_reads(t) for t in plan]
    with pytest.raises(BadInput, match=r"task 'T-1' \(#1\), field title: Value error, must not be blank"):
        parse_plan(json.dumps([task("T-1", title="\x1c")]).encode(), "prd.json")


def test_a_title_is_a_line_not_a_document():
    # a 100,000-character title used to be taken, and every page listing the task then took 30-100 s
    assert parse_plan(json.dumps([task("T-1", title="t" * 300)]).encode(), "prd.json")[0].title == "t" * 300
    with pytest.raises(BadInput, match=r"task 'T-1' \(#1\), field title: 100,000 characters; a title holds at most "
                                       r"300 \(the rest belongs in the description\)"):
        parse_plan(json.dumps([task("T-1", title="t" * 100_000)]).encode(), "prd.json")
    assert read_task(task("T-1", title="t" * 301)) is None


def test_a_criterion_forbids_unknown_keys_to_both_and_a_task_ignores_them():
    assert read_task(task("T-1", acceptance_criteria=[{"text": "x", "verfiy": "typo"}])) is None
    assert model_reads(task("T-1", acceptance_criteria=[{"text": "x", "verfiy": "typo"}])) is None
    kept = task("T-1", owner="me", acceptance_criteria=[{"text": " x ", "verify": "make"}])
    assert read_task(kept) == model_reads(kept) == Task(id="T-1", title="Task T-1", description="Do T-1.",
                                                        acceptance_criteria=[Criterion(text="x", verify="make")])
