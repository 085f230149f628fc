"""`tilth daemon unit|install|uninstall`: the systemd user unit that keeps the supervisor
running (started at login/boot, restarted after a crash), written to
`$XDG_CONFIG_HOME/systemd/user/tilth.service` and enabled with `systemctl --user`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tilth.daemon.control import running_pid
from tilth.store.jsonio import write_atomic

SERVICE = "tilth.service"
SYSTEMCTL_TIMEOUT = 60.0
INSTALL_STEPS = (["daemon-reload"], ["enable", "--now", SERVICE])
UNINSTALL_STEPS = (["disable", "--now", "--no-block", SERVICE], ["daemon-reload"])
"""--no-block: stopping the supervisor lets its sessions finish their iteration, which can take minutes."""


def unit_text(home: Path) -> str:
    path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    return f"""\
# tilth supervisor for TILTH_HOME={home}
# Install: `tilth daemon install`, or save as ~/.config/systemd/user/tilth.service, then
#   systemctl --user daemon-reload && systemctl --user enable --now tilth
# Settings (model, keys, max_parallel_sessions) belong in {home}/config.toml, not here.
[Unit]
Description=tilth supervisor ({home})

[Service]
Type=simple
ExecStart={Path(sys.executable).absolute()} -m tilth daemon --foreground
Environment=TILTH_HOME={home}
Environment=PATH={path}
Restart=on-failure
# A supervisor already running outside systemd makes this one exit at once (daemon.lock);
# systemd then tries again every 5 s and takes over when that one stops.
RestartSec=5
# SIGTERM goes to the supervisor alone; it forwards it to the sessions so each finishes
# its iteration and stops cleanly. An iteration can take minutes.
KillMode=mixed
TimeoutStopSec=900

[Install]
WantedBy=default.target
"""


def unit_path() -> Path:
    """~/.config/systemd/user/tilth.service, or under $XDG_CONFIG_HOME when set."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user" / SERVICE


def _by_hand(steps: tuple[list[str], ...]) -> str:
    return " && ".join(" ".join(["systemctl", "--user", *step]) for step in steps)


def _systemctl(steps: tuple[list[str], ...]) -> str | None:
    """Run `systemctl --user STEP` for each step; None when all succeeded, else what failed."""
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return "systemctl is not on PATH"
    for step in steps:
        shown = " ".join(["systemctl", "--user", *step])
        try:
            result = subprocess.run([systemctl, "--user", *step], stdin=subprocess.DEVNULL, capture_output=True,
                                    text=True, timeout=SYSTEMCTL_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`{shown}` failed ({exc})"
        if result.returncode != 0:
            said = next((line.strip() for line in (result.stderr + result.stdout).splitlines() if line.strip()), "")
            return f"`{shown}` failed (exit {result.returncode}{': ' + said if said else ''})"
    return None


def install(home: Path) -> tuple[bool, str]:
    """Write the unit, reload systemd and enable + start the service. (ok, one line); on a
    failure the written file stays and the line names the commands to run by hand."""
    path = unit_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, unit_text(home).encode())
    running = running_pid(home)
    failed = _systemctl(INSTALL_STEPS)
    if failed is None:
        note = "" if running is None else (f"; a supervisor was already running (pid {running}): if it was "
                                           f"started outside systemd, the service takes over once it stops "
                                           f"(`tilth daemon stop`)")
        return True, (f"wrote {path}; enabled and started {SERVICE} (the supervisor now comes back after a "
                      f"crash or a reboot; `systemctl --user status tilth` shows it){note}")
    return False, (f"wrote {path} (left in place), but {failed}; to enable it run by hand: "
                   f"{_by_hand(INSTALL_STEPS)}")


def uninstall() -> tuple[bool, str]:
    """Disable and stop the service, remove the unit, reload systemd. (ok, one line). When
    the disable fails the file stays, so the commands to run by hand still find it."""
    path = unit_path()
    if not path.exists():
        return True, f"no unit at {path}; nothing to uninstall"
    if shutil.which("systemctl") is None:
        path.unlink()
        return True, f"removed {path} (systemctl is not on PATH, so there was nothing to disable)"
    failed = _systemctl(UNINSTALL_STEPS[:1])
    if failed is not None:
        return False, (f"{failed}; {path} left in place; run by hand: {_by_hand(UNINSTALL_STEPS[:1])} && "
                       f"rm {path} && {_by_hand(UNINSTALL_STEPS[1:])}")
    path.unlink()
    failed = _systemctl(UNINSTALL_STEPS[1:])
    if failed is not None:
        return False, f"disabled {SERVICE} and removed {path}, but {failed}; run by hand: {_by_hand(UNINSTALL_STEPS[1:])}"
    return True, f"disabled and stopped {SERVICE}; removed {path}"
