"""A staged change that adds a secret never lands on the branch.

Before every task commit (accepted, FAILED or PARKED placeholder) the staged diff is scanned with
the detectors redaction uses (`store/redaction.secrets_in`: tilth's keys, the `secret_patterns`,
detect-secrets): the lines it adds, the base64 and hex blobs in them decoded (`store/encoded.py`),
and the paths of the files it adds. Each secret found is replaced by `[redacted]` in the worktree:
in its file's text, or in its file's name (the file is renamed, `notes-[redacted].txt`), and the
change is staged again, so neither the commit nor anything under TILTH_HOME keeps it. A file that
cannot be rewritten or renamed (a symlink, a name already taken) is left out of the index instead.
The attempt is rejected (`secret_added`) naming the file (by its redacted name), line and kind,
never the secret; the worker's next attempt sees that concern and the redacted file.

The one rule: what a model is shown is what is committed. Tool results are redacted with the same
detectors, so a `list_files` that showed `notes-[redacted].txt` names the file the commit has.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pygit2

from tilth.git.gitops import changed_lines, stage_all, staged_diff, unstage
from tilth.store.events import EventLog, document
from tilth.store.ledger import Verdict
from tilth.store.redaction import MARK, secrets_in

document({"secret_redacted": ("the staged change added secrets: each was replaced by [redacted] in its worktree file "
                              "or file name and restaged before any commit; data: found (path, line, kind of each; "
                              "never the secret; line 0: in the file's name), unchanged (paths whose file could not "
                              "be rewritten or renamed: left out of the index)",
                              "found unchanged")})

NAME_LINE = 0
"""`Added.line` of a secret in a file's path."""


@dataclass(frozen=True)
class Added:
    path: str
    """The file as it is committed: its name redacted when the secret was in it."""
    line: int
    kind: str

    def where(self) -> str:
        if self.line == NAME_LINE:
            return f"the file name {self.path} ({self.kind})"
        return f"{self.path}:{self.line} ({self.kind})"


@dataclass
class Scanned:
    found: list[Added]
    values: dict[str, set[str]]
    """Per path, the secret values in its added lines."""
    names: dict[str, str]
    """Per added path with a secret in it, the path with each replaced by `[redacted]`."""


def scan(repo: pygit2.Repository, diff: pygit2.Diff) -> Scanned:
    """Each secret the diff adds (path, line, kind), the values themselves and the renames. A value
    the file already had (on a line the diff removes: a line edited around it) is not added, nor a
    secret in a directory name the branch already has."""
    names = _names(repo, diff)
    added: dict[str, list[tuple[int, str]]] = {}
    removed: dict[str, str] = {}
    for path, sign, number, text in changed_lines(diff):
        if sign == "+":
            added.setdefault(path, []).append((number, text if text.endswith("\n") else text + "\n"))
        else:
            removed[path] = removed.get(path, "") + text
    found = [Added(new, NAME_LINE, kind) for new, kind in names.values()]
    values: dict[str, set[str]] = {}
    for path, lines in added.items():
        text = "".join(t for _, t in lines)
        for start, end, kind in sorted(secrets_in(text, encoded=True)):
            if text[start:end] in removed.get(path, ""):
                continue
            number = lines[text.count("\n", 0, start)][0]
            if (new := Added(names.get(path, (path, ""))[0], number, kind)) not in found:
                found.append(new)
            values.setdefault(path, set()).add(text[start:end])
    return Scanned(found, values, {old: new for old, (new, _) in names.items()})


def _names(repo: pygit2.Repository, diff: pygit2.Diff) -> dict[str, tuple[str, str]]:
    """Per path the diff adds with a secret in it: the path redacted, and the first secret's kind."""
    paths = [d.new_file.path for d in diff.deltas if d.status == pygit2.enums.DeltaStatus.ADDED]
    if not paths:
        return {}
    tree = repo.head.peel(pygit2.Commit).tree
    joined = "\n".join(paths)
    lines = [0]
    for path in paths:
        lines.append(lines[-1] + len(path) + 1)
    spans: dict[int, list[tuple[int, int, str]]] = {}
    for start, end, kind in sorted(secrets_in(joined, encoded=True)):
        index = max(i for i, at in enumerate(lines[:-1]) if at <= start)
        path, offset = paths[index], lines[index]
        start, end = start - offset, min(end - offset, len(path))
        component = path.find("/", end)
        if component >= 0 and path[:component] in tree:
            continue  # a directory the branch already has: the user's own name
        spans.setdefault(index, []).append((start, end, kind))
    renamed = {}
    for index, found in spans.items():
        path, parts, at = paths[index], [], 0
        for start, end, _kind in found:
            if end <= at:
                continue
            parts += [path[at:max(start, at)], MARK.decode()]
            at = end
        renamed[path] = ("".join(parts) + path[at:], found[0][2])
    return renamed


def withhold(repo: pygit2.Repository, worktree: Path, events: EventLog, task_id: str,
             iteration: int) -> list[Added]:
    """After staging: the secrets the staged change adds, each replaced in its worktree file (its
    text, its name) and restaged (a file that cannot be rewritten or renamed is left out of the index)."""
    return screened(repo, worktree, events, task_id, iteration)[0]


def screened(repo: pygit2.Repository, worktree: Path, events: EventLog, task_id: str,
             iteration: int) -> tuple[list[Added], pygit2.Diff]:
    """`withhold`, and the staged diff once it is done: the one it scanned when nothing was withheld
    (the index is as it was), else the diff of the restaged index."""
    diff = staged_diff(repo)
    scanned = scan(repo, diff)
    if not scanned.found:
        return [], diff
    unchanged = [path for path, secrets in scanned.values.items() if not _rewrite(worktree, path, secrets)]
    for old, new in scanned.names.items():
        if old not in unchanged and not _rename(worktree, old, new):
            unchanged.append(old)
    stage_all(repo)
    if unchanged:
        unstage(repo, unchanged)
    events.emit("secret_redacted", task_id, iteration, found=[vars(a) for a in scanned.found],
                unchanged=[scanned.names.get(path, path) for path in unchanged])
    return scanned.found, staged_diff(repo)


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


def _rename(worktree: Path, old: str, new: str) -> bool:
    """Move the file at `old` to `new` (both worktree-relative), every directory on either way a real
    one (never a symlink), `new` not taken; then the directories `old` leaves empty are removed."""
    old_parts, new_parts = old.split("/"), new.split("/")
    if any(part in ("", ".", "..") for part in new_parts) or not _real_dirs(worktree, old_parts[:-1]):
        return False
    for depth in range(1, len(new_parts)):
        directory = worktree.joinpath(*new_parts[:depth])
        if not os.path.lexists(directory):
            try:
                directory.mkdir()
            except OSError:
                return False
        if not _real_dirs(worktree, new_parts[:depth]):
            return False
    if os.path.lexists(worktree / new):
        return False
    try:
        os.rename(worktree / old, worktree / new)
    except OSError:
        return False
    for depth in range(len(old_parts) - 1, 0, -1):
        if old_parts[:depth] == new_parts[:depth]:
            break
        try:
            os.rmdir(worktree.joinpath(*old_parts[:depth]))
        except OSError:
            break
    return True


def _real_dirs(worktree: Path, parts: list[str]) -> bool:
    """Each leading path of `parts` under the worktree is a directory and not a symlink."""
    for depth in range(1, len(parts) + 1):
        try:
            if not stat.S_ISDIR(os.lstat(worktree.joinpath(*parts[:depth])).st_mode):
                return False
        except OSError:
            return False
    return True


def rejection(found: list[Added]) -> Verdict:
    shown = ", ".join(a.where() for a in found[:10]) + (f", and {len(found) - 10} more" if len(found) > 10 else "")
    return Verdict(verdict="reject", category="secret_added",
                   concern=f"The change adds what looks like a secret: {shown}. tilth replaced each with [redacted] "
                           "in the working tree (in a file name: the file was renamed, or left out of the commit "
                           "when it could not be); a secret must never be committed.",
                   next_step="Read keys, tokens and passwords from the environment or a file outside the repository "
                             "at run time; never write one into the repository, its tests or its docs.")
