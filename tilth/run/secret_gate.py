"""A staged change that adds a secret never lands on the branch.

Before every task commit (accepted, FAILED or PARKED placeholder) the lines the staged diff adds
are scanned with the detectors redaction uses (`store/redaction.secrets_in`: tilth's keys, the
`secret_patterns`, detect-secrets). Each secret found is replaced by `[redacted]` in its file in
the worktree and the file is staged again, so neither the commit nor anything under TILTH_HOME
keeps it; an attempt whose diff added one is rejected (`secret_added`) with the file, line and
kind, never the secret. The worker's next attempt sees that concern and the redacted file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pygit2

from tilth.git.gitops import changed_lines, stage_all, staged_diff, unstage
from tilth.store.events import EventLog, document
from tilth.store.ledger import Verdict
from tilth.store.redaction import MARK, secrets_in

document({"secret_redacted": ("the staged change added secrets: each was replaced by [redacted] in its worktree file "
                              "and restaged before any commit; data: found (path, line, kind of each; never the "
                              "secret), unchanged (paths whose file could not be rewritten: left out of the index)",
                              "found unchanged")})


@dataclass(frozen=True)
class Added:
    path: str
    line: int
    kind: str

    def where(self) -> str:
        return f"{self.path}:{self.line} ({self.kind})"


def scan(diff: pygit2.Diff) -> tuple[list[Added], dict[str, set[str]]]:
    """Each secret the diff adds (path, line, kind) and, per path, the secret values themselves. A
    value the file already had (on a line the diff removes: a line edited around it) is not added."""
    added: dict[str, list[tuple[int, str]]] = {}
    removed: dict[str, str] = {}
    for path, sign, number, text in changed_lines(diff):
        if sign == "+":
            added.setdefault(path, []).append((number, text if text.endswith("\n") else text + "\n"))
        else:
            removed[path] = removed.get(path, "") + text
    found: list[Added] = []
    values: dict[str, set[str]] = {}
    for path, lines in added.items():
        text = "".join(t for _, t in lines)
        for start, end, kind in secrets_in(text):
            if text[start:end] in removed.get(path, ""):
                continue
            number = lines[text.count("\n", 0, start)][0]
            if (new := Added(path, number, kind)) not in found:
                found.append(new)
            values.setdefault(path, set()).add(text[start:end])
    return found, values


def withhold(repo: pygit2.Repository, worktree: Path, events: EventLog, task_id: str,
             iteration: int) -> list[Added]:
    """After staging: the secrets the staged change adds, each replaced in its worktree file and
    restaged (a file that cannot be rewritten is left out of the index instead)."""
    found, values = scan(staged_diff(repo))
    if not found:
        return []
    unchanged = [path for path, secrets in values.items() if not _rewrite(worktree, path, secrets)]
    stage_all(repo)
    if unchanged:
        unstage(repo, unchanged)
    events.emit("secret_redacted", task_id, iteration, found=[vars(a) for a in found], unchanged=unchanged)
    return found


def _rewrite(worktree: Path, path: str, secrets: set[str]) -> bool:
    """Replace each secret in the file, never through a symlink nor outside the worktree."""
    target = worktree / path
    try:
        if target.is_symlink() or not target.resolve().is_relative_to(worktree.resolve()):
            return False
        fd = os.open(target, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return False
    with os.fdopen(fd, "r+b") as f:
        data = original = f.read()
        for secret in sorted(secrets, key=len, reverse=True):
            data = data.replace(secret.encode("utf-8", errors="surrogateescape"), MARK)
        if data == original:
            return False
        f.seek(0)
        f.write(data)
        f.truncate()
    return True


def rejection(found: list[Added]) -> Verdict:
    shown = ", ".join(a.where() for a in found[:10]) + (f", and {len(found) - 10} more" if len(found) > 10 else "")
    return Verdict(verdict="reject", category="secret_added",
                   concern=f"The change adds what looks like a secret: {shown}. tilth replaced each with [redacted] "
                           "in the working tree; a secret must never be committed.",
                   next_step="Read keys, tokens and passwords from the environment or a file outside the repository "
                             "at run time; never write one into the repository, its tests or its docs.")
