"""The questions a session's parked tasks wait on, as a person reads them: each with the exact
`tilth answer` command (status, the end report, notifications, the digest)."""

from __future__ import annotations

import shlex

from tilth.store.answers import Asked, last_question
from tilth.store.home import SessionPaths


def answer_command(session_id: str, task_id: str) -> str:
    return f"tilth answer {shlex.quote(session_id)} {shlex.quote(task_id)} \"<your answer>\""


def open_asks(paths: SessionPaths, parked: list[str]) -> list[tuple[str, Asked | None]]:
    """Each parked task with its last question (None if a kill took it before it was written)."""
    return [(task_id, last_question(paths.dir, task_id)) for task_id in parked]


def question_lines(paths: SessionPaths, parked: list[str], indent: str = "  ") -> list[str]:
    lines = []
    for task_id, asked in open_asks(paths, parked):
        said = f"(asked by the {asked.asked_by}) {asked.question}" if asked else "(the question was not recorded)"
        lines.append(f"{indent}PARKED {task_id} {said}")
        if asked and asked.context:
            lines.append(f"{indent}  context: {' '.join(asked.context.split())[:300]}")
        lines.append(f"{indent}  answer:  {answer_command(paths.id, task_id)}")
    return lines
