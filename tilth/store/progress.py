"""progress.txt: the harness's journal, one tab-separated line per task outcome.

    <UTC ISO-8601 ts>\t<task id>\t<done|failed:<reason>>\titer=<n>\tcommit=<short sha>\t<title>
"""

from __future__ import annotations

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


def read_progress(path: Path) -> list[ProgressLine]:
    if not path.exists():
        return []
    lines = (ProgressLine.parse(raw) for raw in path.read_text(errors="replace").splitlines())
    return [line for line in lines if line is not None]


def recorded_commits(path: Path) -> set[str]:
    """Short shas that already have a progress line, so recovery never writes one twice."""
    return {line.commit for line in read_progress(path)}
