"""docs/settings.md, generated from `Settings` (type, default, documentation) and `travel.scope_of`:
`python -m tilth.core.settings_doc > docs/settings.md`; `tests/test_settings_scopes.py` fails when
the file is stale."""

from __future__ import annotations

import ast
import inspect
from typing import Any

from tilth.core import config
from tilth.core.config import Settings, env_name
from tilth.core.travel import SCOPES, scope_of

HEADER = """# Settings

Every setting tilth reads, with its environment variable, default, scope and meaning. Generated from
`tilth/core/config.py` and `tilth/core/travel.py` by `python -m tilth.core.settings_doc > docs/settings.md`;
edit those, not this file.

Each is an environment variable `TILTH_<NAME>` or a key in `$TILTH_HOME/config.toml`; `tilth config` shows
the value in force, where it came from and its scope, and `tilth config <id>` a session's recorded ones.

## Scopes

| scope | meaning |
|---|---|
"""


def docstrings() -> dict[str, str]:
    """Each field's docstring (the string right after its declaration in `Settings`)."""
    tree = ast.parse(inspect.getsource(config))
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Settings":
            body = node.body
            for at, item in enumerate(body[:-1]):
                after = body[at + 1]
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) \
                        and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                    found[item.target.id] = " ".join(str(after.value.value).split())
    return found


def _default(field: str) -> str:
    info = Settings.model_fields[field]
    value: Any = info.get_default(call_default_factory=True)
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    text = repr(value) if isinstance(value, (list, dict, str)) else str(value)
    return text.replace("|", "\\|")


def reference() -> str:
    docs = docstrings()
    lines = [HEADER.rstrip("\n")]
    lines += [f"| `{scope}` | {meaning} |" for scope, meaning in SCOPES.items()]
    lines += ["", "## Every setting", "", "| setting | environment | default | scope | meaning |", "|---|---|---|---|---|"]
    for field in Settings.model_fields:
        meaning = docs.get(field, "").replace("|", "\\|")
        lines.append(f"| `{field}` | `{env_name(field)}` | `{_default(field)}` | {scope_of(field)} | {meaning} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(reference(), end="")
