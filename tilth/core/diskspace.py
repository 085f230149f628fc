"""Telling a full disk (ENOSPC) or an exhausted quota (EDQUOT) apart from other OSErrors, and
saying where space must be freed."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
# libgit2 reports the path only inside its message: "could not write to '<path>': ...".
QUOTED_PATH = re.compile(r"'(/[^']+)'")


def is_disk_full(exc: BaseException) -> bool:
    """ENOSPC/EDQUOT, also from libgit2, whose OSErrors carry only a message."""
    if not isinstance(exc, OSError):
        return False
    if exc.errno in NO_SPACE:
        return True
    return any(os.strerror(code) in str(exc) for code in NO_SPACE)


def failed_path(exc: OSError) -> Path | None:
    if exc.filename:
        return Path(os.fsdecode(exc.filename))
    found = QUOTED_PATH.search(str(exc))
    return Path(found.group(1)) if found else None


def mount_point(path: Path) -> Path:
    """The mount point of the filesystem holding `path` (or the nearest existing parent)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def no_space(exc: OSError, fallback: Path | None = None) -> str:
    """`no space left on device writing <path>; free space on <mount>` (quota: the same, worded so)."""
    what = "disk quota exceeded" if exc.errno == errno.EDQUOT or os.strerror(errno.EDQUOT) in str(exc) \
        else "no space left on device"
    path = failed_path(exc)
    if path is not None:
        return f"{what} writing {path}; free space on {mount_point(path)}"
    if fallback is not None:
        return f"{what} under {fallback}; free space on {mount_point(fallback)}"
    return f"{what}; free space on the filesystem tilth was writing to"
