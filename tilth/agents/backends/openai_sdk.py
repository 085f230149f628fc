"""Imports the `openai` SDK without its eager type packages, so a run holds only the types it uses.

The SDK's `openai/types/**/__init__.py` files import every model of their package (about 1,100
modules): `import openai` alone costs ~16 MiB, most of a session's memory above the 60 MiB it
may use. Each of those files is nothing but `from .module import Name as Name` lines, so each
such package is made lazy here: importing it binds no names; asking it for a name imports the
one module that defines it (PEP 562 `__getattr__`), and its submodules import as usual. A
package file with any other statement is imported as the SDK wrote it. The SDK itself, its
client and its models are untouched; only when its type packages run changes.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

PREFIX = "openai.types"


def import_openai() -> Any:
    """The `openai` module, its type packages lazy (when it was not imported already)."""
    if not any(isinstance(finder, LazyTypePackages) for finder in sys.meta_path):
        sys.meta_path.insert(0, LazyTypePackages())
    import openai

    return openai


def exported_names(source: str) -> dict[str, tuple[str, str]] | None:
    """`{name: (relative module, attribute)}` of a package file made only of `from .m import a as b`
    lines (plus a docstring and `from __future__`); None when it holds anything else."""
    names: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
            return None
        for alias in node.names:
            if alias.name == "*":
                return None
            names[alias.asname or alias.name] = (node.module, alias.name)
    return names


class LazyTypePackages(importlib.abc.MetaPathFinder):
    """Finds `openai.types` and its subpackages and hands each to `LazyPackage` when it can."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != PREFIX and not fullname.startswith(PREFIX + "."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or not spec.submodule_search_locations:
            return None
        try:
            with open(spec.origin, encoding="utf-8") as file:
                names = exported_names(file.read())
        except (OSError, SyntaxError, ValueError):
            return None
        if names is None:
            return None
        lazy = importlib.util.spec_from_file_location(fullname, spec.origin, loader=LazyPackage(names),
                                                      submodule_search_locations=spec.submodule_search_locations)
        return lazy


class LazyPackage(importlib.abc.Loader):
    """A package whose names are imported one module at a time, when first asked for."""

    def __init__(self, names: dict[str, tuple[str, str]]):
        self.names = names

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        names, package = self.names, module.__name__

        def __getattr__(name: str) -> Any:
            if name not in names:  # a submodule: `from package import sub` then imports it
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            relative, attribute = names[name]
            value = getattr(importlib.import_module(f"{package}.{relative}"), attribute)
            setattr(module, name, value)
            return value

        def __dir__() -> list[str]:
            return sorted(set(module.__dict__) | set(names))

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        module.__dir__ = __dir__  # type: ignore[method-assign]
        module.__all__ = list(names)  # type: ignore[attr-defined]
