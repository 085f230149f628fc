"""The network the agent's commands get with `agent_network = on`: the internet, not the host.

Each command runs in a network namespace of its own process's making (`Netbox`), never the
host's: the namespace has its own loopback (a project's test suite that starts a server on an
ephemeral port and connects to it works as on the host), and abstract unix sockets are per
network namespace, so the host's (D-Bus, X11, the session bus of a desktop) are out of reach.
Outbound traffic leaves through a user-mode helper attached once to the namespace:

- `pasta` (passt): TCP/UDP to the internet through host sockets; `--no-map-gw` so the gateway
  address does not lead to the host; only the ports named (`agent_host_ports`, and the loopback
  endpoint a CLI agent is given) are forwarded from the namespace's loopback to the host's.
- `slirp4netns` (when pasta does not work here): outbound only, `--disable-host-loopback`; it
  cannot forward single ports, so the named host ports are unreachable with it.
- `host` (neither works here): the host's network as it is, said by `tilth doctor` and the
  `sandbox` event; the host's loopback services and abstract sockets are then reachable.

Cost: attaching a helper takes 25-70 ms (pasta measured here), too much for every command; so a
tilth process makes one namespace per set of forwarded ports and keeps it for its life (a `cat`
holding it, whose stdin is a pipe only this process writes: when the process dies, the holder
reads end of file, the namespace goes, the helper quits with it). Each command enters it through
`nsenter` before bubblewrap (~1 ms). The namespace is owned by a user namespace of the same user
mapped to itself (`unshare --map-current-user`): the helper, dropping its capabilities, can join
it, and a command inside is the same uid as before, root included.

`agent_network = off` never uses this: bubblewrap's own `--unshare-net` (only its loopback).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field

METHODS = ("pasta", "slirp4netns", "host")
PASTA_OPTIONS = ["--quiet", "--config-net", "--no-map-gw", "-t", "none", "-u", "none", "-U", "none",
                 "--no-dhcp", "--no-ndp", "--no-dhcpv6", "--no-ra"]


@dataclass
class Netbox:
    """One network namespace of this process, held by `holder`, served by `method`'s helper."""

    method: str
    ports: tuple[int, ...]
    holder: subprocess.Popen[bytes] | None = None
    helper: subprocess.Popen[bytes] | None = None
    """slirp4netns, or the shell that stops pasta (which detaches itself) when its pipe ends."""
    keep: list[int] = field(default_factory=list)
    """The write ends of the holder's stdin and of slirp4netns' exit pipe: closed, they end."""

    @property
    def prefix(self) -> list[str]:
        """What enters the namespace before bubblewrap (nothing for `host`)."""
        if self.holder is None:
            return []
        return ["nsenter", "--preserve-credentials", "--user", "--net", f"--target={self.holder.pid}"]

    def close(self) -> None:
        for fd in self.keep:  # the holder's cat and pasta's watcher end with their pipes
            os.close(fd)
        self.keep = []
        for child in (self.holder, self.helper):
            if child is not None:
                if child is self.holder or self.method == "slirp4netns":
                    child.kill()
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()


_boxes: dict[tuple[int, ...], Netbox] = {}
_failed: dict[str, str] = {}
"""Why a method did not work here (the first time it was tried), for `tilth doctor`."""
_lock = threading.Lock()


def netbox(ports: tuple[int, ...] = ()) -> Netbox:
    """This process's namespace forwarding `ports` to the host's loopback, made on first use with the
    strongest method that works here."""
    ports = tuple(sorted(set(ports)))
    with _lock:
        known = _boxes.get(ports)
        if known is not None and (known.holder is None or known.holder.poll() is None):
            return known
        box = _make(ports)
        _boxes[ports] = box
        return box


def method_in_force(ports: tuple[int, ...] = ()) -> str:
    return netbox(ports).method


def describe(ports: tuple[int, ...] = ()) -> str:
    """One line on the agent network here, for `tilth doctor`."""
    box = netbox(ports)
    why = "; ".join(f"{m} did not work: {w}" for m, w in _failed.items())
    said = {"pasta": "its own network namespace through pasta: the internet, not the host's loopback (only "
                     f"{', '.join(map(str, box.ports)) or 'no'} port(s) forwarded) nor its abstract sockets",
            "slirp4netns": "its own network namespace through slirp4netns: the internet, not the host's loopback "
                           "(no port forwarded: agent_host_ports cannot be honoured) nor its abstract sockets",
            "host": "the HOST's network: services on the host's loopback and its abstract sockets are reachable "
                    "(install passt or slirp4netns)"}[box.method]
    return f"agent_network = on: {box.method}, {said}" + (f" ({why})" if why else "")


def _make(ports: tuple[int, ...]) -> Netbox:
    for method in METHODS[:-1]:
        if method in _failed or not (shutil.which(method) and shutil.which("unshare") and shutil.which("nsenter")):
            _failed.setdefault(method, "not installed")
            continue
        try:
            return _attach(method, ports)
        except (OSError, subprocess.SubprocessError, RuntimeError) as e:
            _failed[method] = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
    return Netbox("host", ports)


def _attach(method: str, ports: tuple[int, ...]) -> Netbox:
    read, keep = os.pipe()
    try:
        holder = subprocess.Popen(["unshare", "--user", "--map-current-user", "--net", "--", "sh", "-c",
                                   "echo made && exec cat >/dev/null"], stdin=read, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, start_new_session=True)
    finally:
        os.close(read)
    box = Netbox(method, ports, holder, keep=[keep])
    try:
        if holder.stdout is None or holder.stdout.readline() != b"made\n":
            raise RuntimeError(f"unshare failed: {holder.stderr.read().decode(errors='replace') if holder.stderr else ''}")
        holder.stdout.close()
        _pasta(holder.pid, ports, box) if method == "pasta" else _slirp(holder.pid, box)
        check = subprocess.run([*box.prefix, "ip", "-o", "link", "show", "up"], capture_output=True, text=True,
                               timeout=10)
        if check.returncode != 0 or len(check.stdout.splitlines()) < 2:
            raise RuntimeError(f"no interface up in the namespace: {check.stderr.strip()}")
    except BaseException:
        box.close()
        raise
    atexit.register(box.close)
    return box


WATCH_PASTA = ('d=$1; shift; pasta "$@" -P "$d/pid" || exit 1; echo ready; read _; '
               'kill "$(cat "$d/pid")"; rm -rf "$d"')
"""pasta detaches itself and, holding the namespace open, outlives it: this shell stops it once its
stdin (a pipe only tilth writes) ends, also when tilth is killed."""


def _pasta(pid: int, ports: tuple[int, ...], box: Netbox) -> subprocess.Popen[bytes]:
    runas = ["--runas", "0"] if os.geteuid() == 0 else []
    forward = ",".join(map(str, ports)) or "none"
    read, keep = os.pipe()
    try:
        watcher = subprocess.Popen(["sh", "-c", WATCH_PASTA, "sh", tempfile.mkdtemp(prefix="tilth-pasta-"),
                                    *PASTA_OPTIONS, "-T", forward, *runas, str(pid)], stdin=read,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    finally:
        os.close(read)
    box.keep.append(keep)
    box.helper = watcher
    if watcher.stdout is None or watcher.stdout.readline() != b"ready\n":
        said = watcher.stderr.read().decode(errors="replace") if watcher.stderr else ""
        raise RuntimeError(" ".join(line for line in said.splitlines() if "syslog" not in line) or "pasta failed")
    watcher.stdout.close()
    return watcher


def _slirp(pid: int, box: Netbox) -> subprocess.Popen[bytes]:
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    try:
        helper = subprocess.Popen(["slirp4netns", "--configure", "--disable-host-loopback", "--ready-fd",
                                   str(ready_w), "--exit-fd", str(exit_r), "--userns-path", f"/proc/{pid}/ns/user",
                                   str(pid), "tap0"], pass_fds=(ready_w, exit_r), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, start_new_session=True)
    finally:
        os.close(ready_w)
        os.close(exit_r)
    try:
        if os.read(ready_r, 1) != b"1":
            helper.kill()
            raise RuntimeError(helper.stderr.read().decode(errors="replace") if helper.stderr else "not ready")
    finally:
        os.close(ready_r)
    box.keep.append(exit_w)
    box.helper = helper
    return helper
