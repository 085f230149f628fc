"""sessions/<id>/kb/: the worker's scratch notes, kept outside the worktree so they never
reach the branch. One markdown file per note; the index is each note's first line."""

from __future__ import annotations

import re
from pathlib import Path

from tilth.core.errors import ToolError
from tilth.store.jsonio import write_atomic

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
NOTE_CHARS = 20_000


class KnowledgeBase:
    def __init__(self, directory: Path):
        self.directory = directory

    def _path(self, name: str) -> Path:
        stem = name.removesuffix(".md")
        if not NAME.match(stem):
            raise ToolError(f"note name {name!r} is not allowed; use letters, digits, '.', '_' or '-' (max 64)")
        return self.directory / f"{stem}.md"

    def write(self, name: str, text: str) -> str:
        if len(text) > NOTE_CHARS:
            raise ToolError(f"the note is {len(text)} characters; keep notes under {NOTE_CHARS}")
        write_atomic(self._path(name), text.encode())
        return f"saved note {name.removesuffix('.md')!r} ({len(text)} characters)"

    def read(self, name: str) -> str:
        path = self._path(name)
        if not path.is_file():
            known = ", ".join(self.names()) or "none yet"
            raise ToolError(f"there is no note {name!r}; notes: {known}")
        return path.read_text(errors="replace")

    def names(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.md"))

    def index(self) -> list[str]:
        """`name: first line` per note."""
        rows = []
        for name in self.names():
            text = (self.directory / f"{name}.md").read_text(errors="replace").strip()
            first = text.splitlines()[0][:120] if text else "(empty)"
            rows.append(f"{name}: {first}")
        return rows
