"""prompts.jsonl: the full text each fresh context started from, one `{ts, task, iter, role,
prompt}` line each, kept out of events.jsonl so the journal stays small and fast to read.

The `prompt_assembled` event refers to its line by byte offset (`prompt_offset`) and says its
length (`prompt_chars`); events from before this file existed carry the text as `prompt`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from tilth.core.clock import iso_ms
from tilth.store.jsonio import append_jsonl, parse_object

FILE_NAME = "prompts.jsonl"
APPENDING = threading.Lock()
"""The offset and the append of one prompt together: parallel tasks' lanes assemble prompts in threads."""


def append_prompt(path: Path, task_id: str, iteration: int | None, role: str, prompt: str) -> int:
    """Append one prompt; the byte offset its line starts at (or, after a torn line, just before it)."""
    with APPENDING:
        return _append(path, task_id, iteration, role, prompt)


def _append(path: Path, task_id: str, iteration: int | None, role: str, prompt: str) -> int:
    try:
        offset = os.stat(path).st_size
    except FileNotFoundError:
        offset = 0
    # Unsynced like its `prompt_assembled` event: after a power loss a reference may point past
    # the end, which `read_prompt` answers with None.
    append_jsonl(path, {"ts": iso_ms(), "task": task_id, "iter": iteration, "role": role, "prompt": prompt},
                 sync=False)
    return offset


def read_prompt(path: Path, offset: int) -> str | None:
    """The prompt whose line starts at `offset` (skipping the newline that ends a torn line
    before it); None when the file or the line is gone or damaged."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            line = f.readline()
            if line == b"\n":
                line = f.readline()
    except OSError:
        return None
    row = parse_object(line) if line.endswith(b"\n") else None
    return row["prompt"] if row is not None and isinstance(row.get("prompt"), str) else None


def prompt_of(data: dict[str, Any], session_dir: Path) -> str | None:
    """The text of a `prompt_assembled` event, old (inline) or new (a reference)."""
    if isinstance(prompt := data.get("prompt"), str):
        return prompt
    offset = data.get("prompt_offset")
    return read_prompt(session_dir / FILE_NAME, offset) if type(offset) is int and offset >= 0 else None
