"""proposed-learnings.md: what the self-improvement step proposes after each task.

Appended under `## From <id> — <title>`; never written into the project's AGENTS.md —
the user reads the proposals and promotes what they want by hand.
"""

from __future__ import annotations

import re
from pathlib import Path

from tilth.store.jsonio import append_line

HEADING = re.compile(r"^## From (\S+) — (.*)$")


def append_learnings(path: Path, task_id: str, title: str, learnings: list[str]) -> None:
    bullets = "\n".join(f"- {' '.join(item.split())}" for item in learnings if item.strip())
    if bullets:
        append_line(path, f"\n## From {task_id} — {' '.join(title.split())}\n{bullets}".encode())


def read_learnings(path: Path) -> list[tuple[str, str]]:
    """(task id, learning) pairs, oldest first."""
    if not path.is_file():
        return []
    pairs, task_id = [], ""
    for line in path.read_text(errors="replace").splitlines():
        heading = HEADING.match(line)
        if heading:
            task_id = heading.group(1)
        elif line.startswith("- ") and task_id:
            pairs.append((task_id, line[2:].strip()))
    return pairs


def parse_proposals(text: str | None, limit: int = 5) -> list[str]:
    """Bullets from a model's reply; `NONE` (or nothing) means nothing durable was found."""
    if not text or text.strip().upper().startswith("NONE"):
        return []
    items = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", line).strip()
             for line in text.splitlines() if re.match(r"^\s*(?:[-*•]|\d+[.)])\s+\S", line)]
    return [item[:300] for item in items if item][:limit]
