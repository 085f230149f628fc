"""Strict readers of stdlib dataclasses from parsed JSON, for the files a read-only view must
load without pydantic (its start-up alone would break `tilth status`'s time budget).

A value of the wrong type raises `Odd` (a ValueError); the caller then treats the file as
unusable. `type(v) in ...` is used on purpose: a bool is no int here, as in the file formats.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable


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


def strict_record(cls: type, nested: dict[str, Callable[[Any], Any]] | None = None) -> Callable[[Any], Any]:
    """The reader of one dataclass: each scalar field checked by its annotation, each other field
    by its reader in `nested`. A field that is neither fails here, when the reader is built, so a
    new field cannot go unchecked. Missing fields default (a required one missing is `Odd`);
    unknown ones are ignored."""
    nested = nested or {}
    fields = dataclasses.fields(cls)
    scalars = {f.name: SCALARS[f.type] for f in fields if f.type in SCALARS}
    unchecked = [f.name for f in fields if f.name not in scalars and f.name not in nested]
    if unchecked:
        raise TypeError(f"{cls.__name__}: no reader for {', '.join(unchecked)}")
    names = scalars.keys() | nested.keys()

    def read(v: Any) -> Any:
        if type(v) is not dict:
            raise Odd
        for name, value in v.items():
            allowed = scalars.get(name)
            if allowed is not None and type(value) not in allowed:
                raise Odd
        kept = v if v.keys() <= names and not nested else {k: x for k, x in v.items() if k in names}
        for name, check in nested.items():
            if name in kept:
                kept[name] = check(kept[name])
        try:
            return cls(**kept)
        except TypeError:  # a required field is missing
            raise Odd from None
    return read
