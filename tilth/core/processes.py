"""Processes by pid: a process group killed whole, and what `/proc/<pid>/stat` says of one."""

from __future__ import annotations

import os
import signal


def kill_group(pid: int) -> bool:
    """SIGKILL the process and, when it leads its own group, everything it started; False when
    there is no such process."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def proc_stat(pid: int) -> tuple[str, int] | None:
    """The kernel's state letter (Z: a zombie, dead) and the parent pid of `pid`; None when there
    is no such process. Read after the last `)`, since the command name may hold any character."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) < 2 or not fields[1].isdigit():
        return "?", 0
    return fields[0], int(fields[1])
