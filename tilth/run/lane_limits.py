"""What holds a parallel task's lane back: `files` globs that overlap a running lane's, the
`max_agent_lanes` slots every session of one `$TILTH_HOME` shares (a flock on a file each, held for
the lane's life, so a killed runner's slots free themselves), and the run's `Cores`: at most as many
checks at once (a lane's and the merge queue's) as the machine gives this process cores
(`check_slots`, 0: `machine_cores`)."""

from __future__ import annotations

import fcntl
import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from fnmatch import fnmatch
from pathlib import Path
from typing import IO, Callable


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


def machine_cores(cgroup_root: Path = Path("/sys/fs/cgroup"), own: Path = Path("/proc/self/cgroup")) -> int:
    """The cores this process may use: its CPU affinity, lowered by a cgroup v2 `cpu.max` quota on its
    cgroup or any parent (rounded up: a quota of 1.5 cores is 2)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        line = next(x for x in own.read_text().splitlines() if x.startswith("0::"))
    except (OSError, StopIteration):
        return max(cores, 1)
    place = cgroup_root / line[3:].strip().lstrip("/")
    while True:
        try:
            quota, period = (place / "cpu.max").read_text().split()[:2]
            if quota != "max" and float(period) > 0:
                cores = min(cores, math.ceil(float(quota) / float(period)))
        except (OSError, ValueError):
            pass
        if place == cgroup_root or cgroup_root not in place.parents:
            break
        place = place.parent
    return max(cores, 1)


def check_ceiling(check_slots: int) -> int:
    """`check_slots` as set, or the machine's cores for 0."""
    return check_slots or machine_cores()


class Cores:
    """At most `ceiling` checks at once in one run: a lane's checks and verify commands and the merge
    queue's checks each hold one while they run (CPU-bound test suites would otherwise share the cores
    and each take longer, which costs more than lanes save). Who holds or waits (`asking`, by task), how
    long each task waited (`waited`) and how long it held one (`held_s`) are the scheduler's to read."""

    def __init__(self, ceiling: int, clock: Callable[[], float] = time.monotonic):
        self.ceiling = max(ceiling, 1)
        self.clock = clock
        self.free = threading.Condition()
        self.holding = 0
        self.most = 0
        """The most held at once (a test's witness)."""
        self.asking: dict[str, int] = {}
        self.waited: dict[str, float] = {}
        self.held_s: dict[str, float] = {}
        self.contended_s: dict[str, float] = {}
        """Per task, its checks' time beyond the same checks' time alone (`checked`)."""

    @contextmanager
    def held(self, key: str) -> Iterator[None]:
        asked = self.clock()
        with self.free:
            self.asking[key] = self.asking.get(key, 0) + 1
            while self.holding >= self.ceiling:
                self.free.wait()
            self.holding += 1
            self.most = max(self.most, self.holding)
            got = self.clock()
            self.waited[key] = self.waited.get(key, 0.0) + got - asked
        try:
            yield
        finally:
            with self.free:
                self.held_s[key] = self.held_s.get(key, 0.0) + self.clock() - got
                self.holding -= 1
                self.asking[key] -= 1
                if not self.asking[key]:
                    del self.asking[key]
                self.free.notify()

    def checked(self, key: str, seconds: float, alone_s: float | None) -> None:
        """A task's checks took `seconds` while holding a core; alone (the baseline's, on the base commit)
        they took `alone_s`: the excess is time lost to the checks beside it, never the task's own."""
        if alone_s is not None and self.ceiling > 1:
            with self.free:
                self.contended_s[key] = self.contended_s.get(key, 0.0) + max(seconds - alone_s, 0.0)

    def in_checks(self) -> set[str]:
        """The tasks holding or waiting for a core now."""
        with self.free:
            return set(self.asking)

