"""Strict readers of stdlib dataclasses from parsed JSON, for the files a read-only view must
load without pydantic (its start-up alone would break `tilth status`'s time budget).

A value of the wrong type raises `Odd` (a ValueError); the caller then treats the file as
unusable. `type(v) in ...` is used on purpose: a bool is no int here, as in the file formats.

A constraint beyond a field's type is a `Rule` in its `Annotated[...]`: read strictly here, and
told to pydantic by the rule itself, so the model and the strict reader share its one definition.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Annotated, Any, Callable, Union


class Odd(ValueError):
    """A value that is not what its field holds."""


SCALARS: dict[str, tuple[type, ...]] = {
    "int": (int,), "float": (float, int), "str": (str,), "bool": (bool,), "int | None": (int, type(None)),
    "str | None": (str, type(None)),
}
"""The types a field of each annotation may hold in the file."""


def dict_of(check: Callable[[Any], Any]) -> Callable[[Any], dict[str, Any]]:
    def read(v: Any) -> dict[str, Any]:
        if type(v) is not dict:
            raise Odd
        return {k: check(x) for k, x in v.items()}
    return read


def number_or_none(v: Any) -> float | int | None:
    if v is not None and type(v) is not float and type(v) is not int:
        raise Odd
    return v


class Rule:
    """A constraint on a value already of its field's type, carried in `Annotated[type, rule]`."""

    def read(self, value: Any) -> Any:
        """The value as the model holds it (stripped, say); `Odd` when it breaks the rule. This
        one keeps every value: a rule that only pydantic must be told (how to pick a union's form)."""
        return value

    def pydantic_type(self, source: Any) -> Any:
        """The type pydantic validates for `Annotated[source, self]`, said with pydantic's own
        annotations (imported here: only a process that already uses pydantic asks)."""
        raise NotImplementedError

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return handler.generate_schema(self.pydantic_type(source))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def reader_of(hint: Any) -> Callable[[Any], Any]:
    """The strict reader of one resolved annotation: a scalar, `None`, an enum (by value), a
    list, a union (its first member that reads the value), a dataclass, or any of these
    `Annotated` with `Rule`s. Anything else fails here, when the reader is built."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        own: list[Callable[[Any], Any]] = [r.read for r in hint.__metadata__ if isinstance(r, Rule) and type(r).read is not Rule.read]
        return _ruled(args[0], own)
    if origin in (Union, types.UnionType):
        return _either(args)
    if origin is list:
        return _list_of(reader_of(args[0]))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _member_of(hint)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return strict_record(hint)
    if hint is type(None) or hint in (int, float, str, bool):
        return _typed((type(None),) if hint is type(None) else SCALARS[hint.__name__])
    raise TypeError(f"no strict reader for {hint!r}")


def _odd(*_: Any) -> Any:
    raise Odd


def _ruled(base: Any, rules: list[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    # One closure per shape, not a loop: the views read every task of every plan this way.
    inner = reader_of(base)
    if not rules:
        return inner
    if len(rules) > 1:
        def chained(v: Any) -> Any:
            value = inner(v)
            for each in rules:
                value = each(value)
            return value
        return chained
    rule = rules[0]
    if base in (int, float, str, bool):
        allowed = SCALARS[base.__name__]
        return lambda v: rule(v) if type(v) in allowed else _odd()
    return lambda v: rule(inner(v))


def _either(hints: tuple[Any, ...]) -> Callable[[Any], Any]:
    """A union read by the form the value has (`str | SomeDataclass`: a str or a JSON object),
    or, when two members may hold values of one type, by its first member that reads it."""
    members = [reader_of(h) for h in hints]
    forms = [_json_types(h) for h in hints]
    if all(forms) and sum(len(f) for f in forms) == len(set().union(*forms)):
        by_type = {kind: member for member, form in zip(members, forms) for kind in form}
        return lambda v: (by_type.get(type(v)) or _odd)(v)

    def first(v: Any) -> Any:
        for member in members:
            try:
                return member(v)
            except Odd:
                pass
        raise Odd
    return first


def _json_types(hint: Any) -> set[type]:
    """The types a value of `hint` may have in parsed JSON; empty when that is not plain."""
    if typing.get_origin(hint) is Annotated:
        return _json_types(typing.get_args(hint)[0])
    if hint is type(None) or hint in (int, float, str, bool):
        return {type(None)} if hint is type(None) else set(SCALARS[hint.__name__])
    if typing.get_origin(hint) is list:
        return {list}
    if dataclasses.is_dataclass(hint):
        return {dict}
    return set()


def _list_of(item: Callable[[Any], Any]) -> Callable[[Any], list[Any]]:
    def read(v: Any) -> list[Any]:
        if type(v) is not list:
            raise Odd
        return [item(x) for x in v]
    return read


def _member_of(cls: type[enum.Enum]) -> Callable[[Any], Any]:
    kinds = {type(m.value) for m in cls}
    members = {m.value: m for m in cls}

    def read(v: Any) -> Any:
        member = members.get(v) if type(v) in kinds else None  # a list is no member, nor unhashable here
        if member is None:
            raise Odd
        return member
    return read


def strict_record(cls: type, nested: dict[str, Callable[[Any], Any]] | None = None) -> Callable[[Any], Any]:
    """The reader of one dataclass: each scalar field checked by its annotation, each other field
    by its reader in `nested`, or else by `reader_of` its resolved annotation; a field none of
    them reads fails here, when the reader is built, so a new field cannot go unchecked. Missing
    fields default (a required one missing is `Odd`); unknown ones are ignored, unless the class
    forbids them to pydantic (`__pydantic_config__ = {"extra": "forbid"}`)."""
    nested = dict(nested or {})
    fields = dataclasses.fields(cls)
    scalars = {f.name: SCALARS[name] for f in fields if (name := _scalar_name(f.type)) in SCALARS}
    unread = [f.name for f in fields if f.name not in scalars and f.name not in nested]
    if unread:
        hints = typing.get_type_hints(cls, include_extras=True)
        for name in unread:
            try:
                nested[name] = reader_of(hints[name])
            except TypeError as exc:
                raise TypeError(f"{cls.__name__}: no reader for {name} ({exc})") from None
    forbids_extra = getattr(cls, "__pydantic_config__", {}).get("extra") == "forbid"
    names = scalars.keys() | nested.keys()

    def read(v: Any) -> Any:
        if type(v) is not dict:
            raise Odd
        if not nested:  # scalars only (the roll-up's many rows): checked in place
            for name, value in v.items():
                allowed = scalars.get(name)
                if allowed is not None and type(value) not in allowed:
                    raise Odd
            kept = v if v.keys() <= names else _known(v, names, forbids_extra)
        else:
            kept = {}
            for name, value in v.items():
                allowed = scalars.get(name)
                if allowed is not None:
                    if type(value) not in allowed:
                        raise Odd
                    kept[name] = value
                elif (check := nested.get(name)) is not None:
                    kept[name] = check(value)
                elif forbids_extra:
                    raise Odd
        try:
            return cls(**kept)
        except TypeError:  # a required field is missing
            raise Odd from None
    return read


def plainly(read: Callable[[Any], Any], raw: Any) -> Any:
    """What `read` (a `strict_record`) makes of `raw` when it is plainly that; None when pydantic
    should judge it (and give its one-line error)."""
    try:
        return read(raw)
    except Odd:
        return None


def _scalar_name(annotation: Any) -> str:
    """`int`, `str | None`, ... whether the annotation is still a string or already a type."""
    if isinstance(annotation, str):
        return annotation
    return annotation.__name__ if annotation in (int, float, str, bool) else ""


def _known(v: dict[str, Any], names: Any, forbids_extra: bool) -> dict[str, Any]:
    if forbids_extra:
        raise Odd
    return {k: x for k, x in v.items() if k in names}


def _typed(allowed: tuple[type, ...]) -> Callable[[Any], Any]:
    return lambda v: v if type(v) in allowed else _odd()
