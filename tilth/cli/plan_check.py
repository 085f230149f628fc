"""`tilth plan check`: a plan's errors (what `tilth start` refuses: exit 2) and warnings (a plan
that runs but is likely to go badly: exit 0).

Errors are `store/prd.parse_plan`'s, the same as `tilth start`: a missing or empty field, a
criterion object that is not `{"text": ..., "verify": ...}` (blank text or command, another key), a
duplicate id, a `depends_on` naming the task itself or an unknown id, a dependency cycle.

Warnings, one line each:
- a vague criterion: it uses a word that judges rather than observes (works, correct, good,
  done, proper, ...) and names nothing a reviewer can observe (a number, a `code` span or a
  quoted string, a path or file name, or an observing verb: returns, prints, exits, raises,
  shows, contains, passes, fails, ...); also a criterion of one word; a criterion with a `verify`
  command is never vague (tilth runs the command);
- two tasks with the same title (case and spacing ignored);
- a task too large for one fresh context: more than `MAX_CRITERIA` criteria, or a description
  over `MAX_DESCRIPTION` characters (split it);
- a dependency on a task that comes later in the plan (allowed: the task waits, but the order
  in the file is then not the order of the run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tilth.store.prd import Task

MAX_CRITERIA = 8
MAX_DESCRIPTION = 2000

VAGUE = frozenset("""works work working worked good fine ok okay correct correctly properly proper nice clean
cleanly better done complete completed finished handled robust robustly well appropriate appropriately
reasonable acceptable expected intended right""".split())
OBSERVING = frozenset("""return returns returned print prints printed output outputs exit exits raise raises
raised show shows shown display displays contain contains pass passes passed fail fails respond responds
write writes create creates list lists equal equals match matches log logs reject rejects accept accepts
run runs render renders emit emits send sends count counts""".split())
_OBSERVABLE = re.compile(r"\d|`|\"[^\"]+\"|“[^”]+”|(?<!\w)'[^']+'(?!\w)|/|\b\w+\.[A-Za-z]{1,5}\b")
_WORD = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class Lint:
    task_id: str
    text: str

    def __str__(self) -> str:
        return f"warning: {self.task_id}: {self.text}"


def vague(criterion: str) -> bool:
    words = [w.lower() for w in _WORD.findall(criterion)]
    if _OBSERVABLE.search(criterion):
        return False
    if len(words) <= 1:
        return True
    return not any(w in OBSERVING for w in words) and any(w in VAGUE for w in words)


def lint(tasks: list[Task]) -> list[Lint]:
    warnings: list[Lint] = []
    titles: dict[str, str] = {}
    position = {t.id: i for i, t in enumerate(tasks)}
    for i, task in enumerate(tasks):
        for n, (criterion, verify) in enumerate(((c.text, c.verify) for c in task.criteria), 1):
            if not verify and vague(criterion):
                warnings.append(Lint(task.id, f"criterion {n} is vague ({criterion!r}): say what a reviewer can "
                                                  "observe (a command and its output, a file, a value)"))
        key = " ".join(task.title.lower().split())
        if key in titles:
            warnings.append(Lint(task.id, f"same title as {titles[key]} ({task.title!r})"))
        else:
            titles[key] = task.id
        if len(task.acceptance_criteria) > MAX_CRITERIA:
            warnings.append(Lint(task.id, f"{len(task.acceptance_criteria)} criteria, more than {MAX_CRITERIA}: "
                                              "too large for one task; split it"))
        if len(task.description) > MAX_DESCRIPTION:
            warnings.append(Lint(task.id, f"description of {len(task.description):,} characters, more than "
                                              f"{MAX_DESCRIPTION:,}: too large for one task; split it"))
        later = [dep for dep in task.depends_on if position[dep] > i]
        if later:
            verb = "comes" if len(later) == 1 else "come"
            warnings.append(Lint(task.id, f"depends on {', '.join(later)}, which {verb} later in the plan: "
                                              "it waits for them"))
    return warnings
