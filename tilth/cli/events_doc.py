"""docs/events.md, generated from the event registry (`store/events.DOCUMENTED`, filled by every
module's `document()`): `python -m tilth.cli.events_doc > docs/events.md`;
`tests/test_event_registry.py` fails when the file is stale. In `cli/` because it imports every
module, so every registration has run."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from tilth.store.events import COMMON_FIELDS, DOCUMENTED

PACKAGE = Path(__file__).resolve().parents[1]
"""The `tilth` package directory."""

HEADER = """# Events

Every event type tilth writes to a session's `events.jsonl`, each line
`{"ts", "type", "task", "iter", "data"}`, with the fields its `data` may hold. Generated from the
registry (`document()` in each emitting module, `tilth/store/events.py`) by
`python -m tilth.cli.events_doc > docs/events.md`; edit those, not this file.

| type | data fields | meaning |
|---|---|---|
"""


def load_registry() -> None:
    """Every module of tilth imported, so every `document()` call has run."""
    for module in pkgutil.walk_packages([str(PACKAGE)], "tilth."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reference() -> str:
    load_registry()
    rows = [f"| `{name}` | {', '.join(f'`{f}`' for f in kind.fields) or '(none)'} | {_cell(kind.meaning)} |"
            for name, kind in sorted(DOCUMENTED.items())]
    common = f"\nAny type may also carry {', '.join(f'`{f}`' for f in sorted(COMMON_FIELDS))}.\n" if COMMON_FIELDS else ""
    return HEADER + "\n".join(rows) + "\n" + common


if __name__ == "__main__":
    print(reference(), end="")
