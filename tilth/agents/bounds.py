"""What one command (a bash call, a check, a CLI agent run) may spend besides time: its output,
read through pipes as it arrives and cut at `MAX_OUTPUT_BYTES`, and the number of its processes
at once (`agent_max_processes`).

Output: stdout and stderr are pipes read by tilth while the command runs (`Output`); the read that
takes the total past the cap is cut at the cap, so what tilth keeps (and writes to a log) never
exceeds it, and the caller stops the command as `too much output` at that moment. Only the
command's first process is waited for: once it exits the caller kills the group and `drain`
takes what is already in the pipes without waiting for end of file, so a background child
holding the output open cannot stall the call.

Processes (`ProcessLimit`): where tilth can make a pids cgroup (cgroup v2 with the pids controller
enabled for its cgroup's children, or the cgroup v1 pids hierarchy; in practice as root), each
command runs in a fresh one with `pids.max`, and everything left in it is killed when the command
ends. Otherwise RLIMIT_NPROC is set on the command: it counts every task of the user, so it
is set to what the user had when tilth ran its first command plus the limit. The kernel never
applies it to uid 0, capabilities dropped or not, so root without a pids cgroup has no process
bound (`in_force` says which is in force). Joining a cgroup costs one RCU grace period per
command (a few ms; more on a loaded machine); `bench/sandbox_cost.py` measures it.
"""

from __future__ import annotations

import atexit
import errno
import itertools
import os
import resource
import select
import shutil
import signal
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Callable

MAX_OUTPUT_BYTES = 50_000_000
"""stdout and stderr together, per command."""
DEFAULT_MAX_PROCESSES = 512
"""As `core/config.Settings.agent_max_processes`, for a caller given no setting."""
READ_BYTES = 65536
CGROUP_PREFIX = "tilth-"
_serial = itertools.count()
_removing: list[Path] = []
_removing_lock = threading.Lock()
"""Cgroups of ended commands, killed, not yet removable: retried at each command's end (and, left by
a tilth process that died, removed by the next one to probe)."""

Sink = Callable[[bytes], "str | None"]
"""Takes a chunk of output; a reason it returns (a cap crossed) stops the command at once."""
Tick = Callable[[], "str | None"]
"""Called every `TICK_S` while the command runs, output or not; a reason it returns stops the command."""
TICK_S = 0.1


class Output:
    """A command's stdout and stderr through pipes, handed to `sinks` as they arrive, at most `cap`
    bytes together. Give `child_ends` to the process, then call `started()`."""

    def __init__(self, sinks: tuple[Sink, Sink], cap: int = MAX_OUTPUT_BYTES):
        self.sinks, self.cap = sinks, cap
        self.total = 0
        self.over = False
        self.stop_reason: str | None = None
        """What a sink asked to stop for (it returned a reason): `wait` returns it at once."""
        ours, theirs = zip(os.pipe(), os.pipe())  # ((out_r, err_r), (out_w, err_w))
        self.open: dict[int, int] = {fd: i for i, fd in enumerate(ours)}
        self.child_ends: tuple[int, int] = theirs
        self._child_ends_open = True

    def started(self) -> None:
        """Close the child's ends here, so end of file comes when the command's side closes."""
        if self._child_ends_open:
            self._child_ends_open = False
            for fd in self.child_ends:
                os.close(fd)

    def wait(self, pid: int, timeout: float, tick: Tick | None = None) -> str | None:
        """Read until the process exits (None), the output passes the cap ("too much output"), the
        timeout ("timeout") or `tick` gives a reason. The process is left unreaped, so its pid (= the
        group id) is not reused."""
        pidfd = os.pidfd_open(pid)
        try:
            deadline = time.monotonic() + timeout
            next_tick = time.monotonic() + TICK_S
            while (remaining := deadline - time.monotonic()) > 0:
                if tick is not None:
                    remaining = min(remaining, max(0.0, next_tick - time.monotonic()))
                ready = select.select([pidfd, *self.open], [], [], remaining)[0]
                for fd in ready:
                    if fd != pidfd and not self._read(fd):
                        return "too much output"
                if tick is not None and time.monotonic() >= next_tick:
                    next_tick = time.monotonic() + TICK_S
                    if (said := tick()) and self.stop_reason is None:
                        self.stop_reason = said
                if self.stop_reason is not None:
                    return self.stop_reason
                if pidfd in ready:
                    return None
            return "timeout"
        finally:
            os.close(pidfd)

    def drain(self) -> bool:
        """Take what is already in the pipes, without waiting for their writers; False when it
        passes the cap."""
        for fd in list(self.open):
            os.set_blocking(fd, False)
            try:
                while fd in self.open:
                    if not self._read(fd):
                        return False
            except BlockingIOError:
                pass
        return True

    def close(self) -> None:
        self.started()
        for fd in list(self.open):
            os.close(fd)
        self.open.clear()

    def _read(self, fd: int) -> bool:
        """One read from `fd` to its sink; False once the total passes the cap."""
        chunk = os.read(fd, READ_BYTES)
        if not chunk:
            del self.open[fd]
            os.close(fd)
            return True
        room = self.cap - self.total
        self.total += len(chunk)
        if len(chunk) > room:
            self.over = True
            if room > 0:
                self.sinks[self.open[fd]](chunk[:room])
            return False
        said = self.sinks[self.open[fd]](chunk)
        if isinstance(said, str) and self.stop_reason is None:
            self.stop_reason = said
        return True


def collected() -> tuple[bytearray, Sink]:
    """A buffer and the sink that appends to it."""
    buffer = bytearray()
    return buffer, buffer.extend


class ProcessLimit:
    """At most `max_processes` processes of one command at once (None or 0: no limit). Start the
    command as `[*prefix, *argv]` with `preexec` as its preexec_fn; call `end()` once it is over.

    The prefix is a small program that joins the cgroup (`sh`) or sets RLIMIT_NPROC (`prlimit`) and
    execs the command: a preexec_fn would make Python fork its whole process instead of vfork, which
    costs far more than one exec. Only without `prlimit` is the rlimit set in a preexec_fn."""

    def __init__(self, max_processes: int | None = DEFAULT_MAX_PROCESSES):
        self.max = max_processes or 0
        self.cgroup: Path | None = None
        self.prefix: list[str] = []
        self.preexec: Callable[[], None] | None = None
        if not self.max:
            return
        if (base := pids_cgroup_base()) is not None and (cgroup := _make_cgroup(base, self.max)) is not None:
            self.cgroup = cgroup
            self.prefix = ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(cgroup / "cgroup.procs")]
        else:
            # RLIMIT_NPROC counts every task (thread) of the user: what it has now is not the command's.
            self.rlimit = user_tasks() + self.max
            if prlimit := _prlimit():
                self.prefix = [prlimit, f"--nproc={self.rlimit}:{self.rlimit}", "--"]
            else:
                self.preexec = self._set_rlimit

    def _set_rlimit(self) -> None:
        resource.setrlimit(resource.RLIMIT_NPROC, (self.rlimit, self.rlimit))

    def end(self) -> None:
        """Kill whatever is left in the cgroup (a process that left the group or the sandbox's
        namespace included) and remove it."""
        if self.cgroup is not None:
            _kill_all(self.cgroup)
            with _removing_lock:
                _removing.append(self.cgroup)  # removed once its processes have finished dying
            self.cgroup = None
        _remove_dead()


@lru_cache(maxsize=1)
def user_tasks() -> int:
    """The tasks (threads) of this process's real uid, as RLIMIT_NPROC counts them, when first
    asked: scanning /proc takes milliseconds, too long to repeat for every command."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                count += int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[17])
        except (OSError, IndexError, ValueError):
            pass
    return count


@lru_cache(maxsize=1)
def _prlimit() -> str | None:
    return shutil.which("prlimit")


def in_force(max_processes: int | None) -> str:
    """How `max_processes` is enforced for this process's commands: `cgroup`, `rlimit`, `off` (no
    limit set), or `unbounded` (root without a pids cgroup: RLIMIT_NPROC never binds uid 0)."""
    if not max_processes:
        return "off"
    if pids_cgroup_base() is not None:
        return "cgroup"
    return "unbounded" if os.getuid() == 0 else "rlimit"


@lru_cache(maxsize=1)
def pids_cgroup_base() -> Path | None:
    """The cgroup under which tilth can make pids-limited children, or None: tried once per process."""
    for base in _candidates():
        probe = _make_cgroup(base, 1)
        if probe is not None:
            _empty(probe)
            _remove_stale(base)
            return base
    return None


def _candidates() -> list[Path]:
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        membership = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in membership:
        _, controllers, path = line.split(":", 2)
        for mount in mounts:
            fields = mount.split()
            dash = fields.index("-")
            fstype, options = fields[dash + 1], fields[dash + 3].split(",")
            v2 = controllers == "" and fstype == "cgroup2"
            v1 = "pids" in controllers.split(",") and fstype == "cgroup" and "pids" in options
            if v1 or v2:
                found.append(Path(fields[4]) / path.lstrip("/"))
    return found


def _make_cgroup(base: Path, max_processes: int) -> Path | None:
    cgroup = base / f"{CGROUP_PREFIX}{os.getpid()}-{next(_serial)}"
    try:
        cgroup.mkdir()
    except OSError:
        return None
    try:
        (cgroup / "pids.max").write_text(str(max_processes))
        return cgroup
    except OSError:
        _empty(cgroup)
        return None


def _kill_all(cgroup: Path) -> None:
    """SIGKILL every process in the cgroup until none is left unsignalled (one that was already
    signalled can fork no more)."""
    signalled: set[int] = set()
    while True:
        if (cgroup / "cgroup.kill").exists():
            _write(cgroup / "cgroup.kill", "1")
        try:
            fresh = [pid for pid in map(int, (cgroup / "cgroup.procs").read_text().split()) if pid not in signalled]
        except (OSError, ValueError):
            return
        if not fresh:
            return
        for pid in fresh:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        signalled.update(fresh)


def _remove_dead() -> None:
    """Remove the cgroups of ended commands whose killed processes have all exited (lanes end their
    commands from several threads at once: one of them takes each cgroup)."""
    with _removing_lock:
        for cgroup in list(_removing):
            try:
                cgroup.rmdir()
            except OSError as exc:
                if exc.errno == errno.EBUSY:
                    continue
            _removing.remove(cgroup)


@atexit.register
def _remove_all(patience: float = 1.0) -> None:
    for cgroup in list(_removing):
        _empty(cgroup, patience)
        _removing.remove(cgroup)


def _empty(cgroup: Path, patience: float = 5.0) -> None:
    """Kill everything in the cgroup and remove it, waiting up to `patience` for the processes to exit."""
    give_up = time.monotonic() + patience
    while True:
        _kill_all(cgroup)
        try:
            cgroup.rmdir()
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > give_up:
                return
        time.sleep(0.005)


def _remove_stale(base: Path) -> None:
    """Remove the cgroups a tilth process that died (kill -9) left behind."""
    for entry in base.glob(f"{CGROUP_PREFIX}*"):
        owner = entry.name[len(CGROUP_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not _alive(int(owner)):
            _empty(entry, patience=0)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError:
        pass
