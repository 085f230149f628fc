"""Damage in the user's repository, told in one line: which loose objects are damaged, found
with zlib (libgit2 1.9 loops forever on a loose object cut short, and does not always name
the object it could not read)."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

from tilth.git.gitcli import GitFailed

SHA = re.compile(r"\b[0-9a-f]{40}\b")


def inflates_whole(file: Path) -> bool:
    """The loose object file holds `<type> <size>\\0` and `size` bytes in a complete zlib stream."""
    inflater = zlib.decompressobj()
    head, size, total = b"", None, 0
    try:
        with open(file, "rb") as f:
            while chunk := f.read(1 << 16):
                out = inflater.decompress(chunk)
                if size is None:
                    head += out
                    if b"\0" not in head:
                        continue
                    header, out = head.split(b"\0", 1)
                    size = int(header.split(b" ")[1])
                total += len(out)
            total += len(inflater.flush())
    except (OSError, zlib.error, ValueError, IndexError):
        return False
    return inflater.eof and size is not None and total == size


def damaged_loose_objects(objects: Path, limit: int = 5) -> list[str]:
    """Loose objects that do not inflate whole. For an error path only: it reads every loose object."""
    damaged = []
    for file in sorted(objects.glob("[0-9a-f][0-9a-f]/*")):
        if len(file.name) == 38 and not inflates_whole(file):
            damaged.append(file.parent.name + file.name)
            if len(damaged) >= limit:
                break
    return damaged


def git_failure(exc: Exception, where: str | Path, then: str, objects: Path | None = None) -> GitFailed:
    """One line for a libgit2 failure and what to do; when libgit2 named no object, the damaged
    loose objects in `objects` are named instead."""
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if not SHA.search(detail) and objects is not None and objects.is_dir():
        found = damaged_loose_objects(objects)
        if found:
            detail += f" (damaged loose object{'s' if len(found) > 1 else ''}: {', '.join(found)})"
    return GitFailed(f"git failed in {where}: {detail}; `git fsck` there shows whether an object is damaged; "
                     f"repair it, then {then}")
