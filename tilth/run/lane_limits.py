"""What holds a parallel task's lane back: `files` globs that overlap a running lane's, and the
`max_agent_lanes` slots every session of one `$TILTH_HOME` shares (a flock on a file each, held for
the lane's life, so a killed runner's slots free themselves)."""

from __future__ import annotations

import fcntl
from fnmatch import fnmatch
from pathlib import Path
from typing import IO


def overlaps(a: list[str], b: list[str]) -> bool:
    """Two tasks' `files` globs may name a common path (conservative: literal prefixes that nest count)."""
    def prefix(glob: str) -> str:
        cut = min((glob.find(c) for c in "*?[" if c in glob), default=len(glob))
        return glob[:cut]

    return any(fnmatch(x, y) or fnmatch(y, x) or (
        (prefix(x) != x or prefix(y) != y) and (prefix(x).startswith(prefix(y)) or prefix(y).startswith(prefix(x))))
        for x in a for y in b)


class Slots:
    """`max_agent_lanes` lane slots shared by every session of one `$TILTH_HOME`: a flock on a file each."""

    def __init__(self, home: Path, ceiling: int):
        self.dir, self.ceiling = home / "lanes" / ".slots", ceiling

    def take(self) -> IO[str] | None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for k in range(self.ceiling):
            handle = open(self.dir / f"{k}.lock", "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return handle
            except BlockingIOError:
                handle.close()
        return None
