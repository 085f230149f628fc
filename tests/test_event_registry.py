"""Every event type the source emits is registered (`store/events.document`), and every data
field it emits is one its registration declares: read from the source itself with `ast`, so an
emit on a path no test runs is checked too."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

import tilth
from tilth.cli import events_doc
from tilth.store.events import DOCUMENTED, document, fields_of

SOURCE = Path(tilth.__file__).parent

EMITTERS = {"emit": 0, "change": 3}
"""Calls that write an event, by function name, with the position of the event type among their
arguments: `EventLog.emit(type, task, iter, **data)` and `daemon/transitions.change(paths, role,
decide, type, *, then, **data)`. Their other keyword arguments are the event's data fields."""
NOT_DATA = {"change": {"then"}}
"""An emitter's own keyword arguments, which are no data field."""


@dataclass(frozen=True)
class Emitted:
    where: str
    types: frozenset[str]
    fields: tuple[str, ...]
    """In the order the call writes them."""


class Unreadable(Exception):
    """An emit whose type or fields the source does not spell out."""


def _constants(node: ast.expr) -> set[str]:
    """The strings an expression can be: a constant, or a conditional between them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _constants(node.body) | _constants(node.orelse)
    raise Unreadable(ast.unparse(node))


def _keys(node: ast.expr, function: ast.AST | None) -> list[str]:
    """The keys of a `**` argument: a dict display (its own `**` parts read the same way) or `dict(...)`
    call, a conditional between them, or a local name assigned once from one of those in the same function."""
    if isinstance(node, ast.Name) and function is not None:
        assigned: list[ast.expr] = [a.value for a in ast.walk(function) if isinstance(a, ast.Assign)
                                    and any(isinstance(t, ast.Name) and t.id == node.id for t in a.targets)]
        assigned += [a.value for a in ast.walk(function) if isinstance(a, ast.AnnAssign) and a.value is not None
                     and isinstance(a.target, ast.Name) and a.target.id == node.id]
        if len(assigned) == 1:
            return _keys(assigned[0], None)
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict" and not node.args \
            and all(k.arg is not None for k in node.keywords):
        return [str(k.arg) for k in node.keywords]
    if isinstance(node, ast.Dict):
        found: list[str] = []
        for key, value in zip(node.keys, node.values):
            found += _keys(value, None) if key is None else sorted(_constants(key))  # `**part` inside the display
        return found
    if isinstance(node, ast.IfExp):
        return _keys(node.body, function) + _keys(node.orelse, function)
    raise Unreadable(ast.unparse(node))


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> set[str]:
    if function is None:
        return set()
    a = function.args
    return {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg)))}


def emitted(source: str, where: str) -> list[Emitted]:
    """Each call of an emitter in `source` with the types and fields it writes. A call that passes
    its own parameter on as the type (and `**` its own keywords) is an emitter itself: it must be in
    EMITTERS, where its callers are read."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name not in EMITTERS or len(node.args) <= EMITTERS[name]:
            continue
        enclosing = parents.get(node)
        while enclosing is not None and not isinstance(enclosing, (ast.FunctionDef, ast.AsyncFunctionDef)):
            enclosing = parents.get(enclosing)
        kind = node.args[EMITTERS[name]]
        at = f"{where}:{node.lineno}"
        if isinstance(kind, ast.Name) and kind.id in _parameters(enclosing):
            assert enclosing is not None and enclosing.name in EMITTERS, \
                f"{at}: {enclosing.name if enclosing else '?'} emits an event type it is given: add it to EMITTERS"
            continue
        try:
            types = _constants(kind)
            own = NOT_DATA.get(str(name), set())
            fields = [field for k in node.keywords if k.arg not in own
                      for field in ([k.arg] if k.arg is not None else _keys(k.value, enclosing))]
        except Unreadable as exc:
            raise AssertionError(f"{at}: the event's type or fields are not spelled out ({exc}); write them as "
                                 "string constants so this test can read them") from None
        found.append(Emitted(at, frozenset(types), tuple(dict.fromkeys(fields))))
    return found


@functools.cache
def all_emitted() -> list[Emitted]:
    texts = {path: path.read_text() for path in sorted(SOURCE.rglob("*.py"))}
    return [e for path, text in texts.items() if any(f"{name}(" in text for name in EMITTERS)
            for e in emitted(text, str(path.relative_to(SOURCE.parent)))]


@functools.cache
def load_registry() -> None:
    events_doc.load_registry()


def problems(found: list[Emitted]) -> list[str]:
    wrong = []
    for e in found:
        for kind in sorted(e.types):
            if kind not in DOCUMENTED:
                wrong.append(f"{e.where}: event type {kind!r} is emitted but not registered: "
                             f"document({{{kind!r}: (meaning, fields)}}) in its module")
                continue
            extra = set(e.fields) - fields_of(kind)
            if extra:
                wrong.append(f"{e.where}: {kind!r} emits {', '.join(sorted(extra))}, not declared in its "
                             "document() fields")
    return wrong


def test_every_emitted_type_and_field_is_registered() -> None:
    load_registry()
    found = all_emitted()
    assert len(found) > 50, "the scan found almost no emits: it no longer reads the source"
    assert not problems(found), "\n".join(problems(found))


def test_every_registered_type_is_emitted_somewhere() -> None:
    """A registration nobody emits is a stale line in the registry."""
    load_registry()
    emitted_types = {kind for e in all_emitted() for kind in e.types}
    assert not set(DOCUMENTED) - emitted_types, sorted(set(DOCUMENTED) - emitted_types)


def test_the_scan_catches_an_unregistered_type_and_an_undeclared_field() -> None:
    """The check itself: a new type, a new field, a conditional type and a `**` field are all seen."""
    document({"registry_probe": ("a probe for this test; data: known", "known")})
    try:
        source = ("def f(log, flag):\n"
                  "    log.emit('registry_probe', None, None, known=1, unknown=2)\n"
                  "    log.emit('never_registered' if flag else 'registry_probe', **{'known': 1})\n"
                  "    log.emit('registry_probe', **({'other': 1} if flag else {}))\n")
        found = problems(emitted(source, "probe.py"))
        assert any("'registry_probe' emits unknown" in p for p in found), found
        assert any("'never_registered' is emitted but not registered" in p for p in found), found
        assert any("'registry_probe' emits other" in p for p in found), found
        assert len(found) == 3, found
        assert problems(emitted("def f(log):\n    log.emit('registry_probe', known=1)\n", "ok.py")) == []
        with pytest.raises(AssertionError, match="not spelled out"):
            emitted("def f(log, data):\n    log.emit('registry_probe', **data)\n", "dyn.py")
        local = "def f(log):\n    data = dict(known=1, more=2)\n    log.emit('registry_probe', **data)\n"
        assert problems(emitted(local, "local.py")) == ["local.py:3: 'registry_probe' emits more, not declared in "
                                                        "its document() fields"]
        with pytest.raises(AssertionError, match="add it to EMITTERS"):
            emitted("def relay(log, kind):\n    log.emit(kind)\n", "relay.py")
    finally:
        del DOCUMENTED["registry_probe"]


def test_a_declaration_that_is_not_two_strings_is_refused() -> None:
    with pytest.raises(TypeError, match="two strings"):
        document({"registry_probe": (("meaning", "field"), "field")})
    assert "registry_probe" not in DOCUMENTED



def test_docs_events_md_is_generated_from_the_registry() -> None:
    text = (SOURCE.parent / "docs" / "events.md").read_text()
    assert text == events_doc.reference(), "docs/events.md is stale: python -m tilth.cli.events_doc > docs/events.md"
