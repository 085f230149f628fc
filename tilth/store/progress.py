"""progress.txt: the harness's journal, one tab-separated line per task outcome.

    <UTC ISO-8601 ts>\t<task id>\t<done|failed:<reason>>\titer=<n>\tcommit=<short sha>\t<title>
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from tilth.core.clock import iso
from tilth.store.jsonio import append_line


class ProgressLine(BaseModel):
    ts: str
    task: str
    outcome: str
    """`done` or `failed:<reason>`."""
    iterations: int
    commit: str
    """Short sha of the task's commit or FAILED placeholder."""
    title: str

    def render(self) -> str:
        return f"{self.ts}\t{self.task}\t{self.outcome}\titer={self.iterations}\tcommit={self.commit}\t{self.title}"

    @classmethod
    def parse(cls, line: str) -> "ProgressLine | None":
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 6 or not parts[3].startswith("iter=") or not parts[4].startswith("commit="):
            return None
        try:
            iterations = int(parts[3][5:])
        except ValueError:
            return None
        return cls(ts=parts[0], task=parts[1], outcome=parts[2], iterations=iterations, commit=parts[4][7:], title=parts[5])


def outcome_line(task: str, outcome: str, iterations: int, commit: str, title: str) -> ProgressLine:
    return ProgressLine(ts=iso(), task=task, outcome=outcome, iterations=iterations, commit=commit[:7],
                        title=" ".join(title.split()))


def append_progress(path: Path, line: ProgressLine) -> None:
    append_line(path, line.render().encode())


@dataclass
class _Read:
    """What this process has parsed of a progress file: its lines up to `upto` bytes (a line end)."""

    inode: int
    upto: int
    lines: list[ProgressLine] = field(default_factory=list)


_read: dict[Path, _Read] = {}


def read_progress(path: Path) -> list[ProgressLine]:
    """Every well-formed line. The file only grows by appends, so a process parses only what was
    appended since it last looked (a replaced or shrunk file is read again from the start),
    which keeps a long session's per-task cost flat."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            seen = _read.get(path)
            if seen is None or seen.inode != st.st_ino or seen.upto > st.st_size:
                seen = _read[path] = _Read(st.st_ino, 0)
            f.seek(seen.upto)
            fresh = f.read()
    except FileNotFoundError:
        _read.pop(path, None)
        return []
    complete = fresh[:fresh.rfind(b"\n") + 1]
    for raw in complete.decode(errors="replace").splitlines():
        if (line := ProgressLine.parse(raw)) is not None:
            seen.lines.append(line)
    seen.upto += len(complete)
    tail = ProgressLine.parse(fresh[len(complete):].decode(errors="replace"))  # a last line not ended yet
    return seen.lines + ([tail] if tail is not None else [])


def recorded_commits(path: Path) -> set[str]:
    """Short shas that already have a progress line, so recovery never writes one twice."""
    return {line.commit for line in read_progress(path)}
