"""`tilth daemon unit`: a systemd user unit that keeps the supervisor running."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def unit_text(home: Path) -> str:
    path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    return f"""\
# tilth supervisor for TILTH_HOME={home}
# Install: save as ~/.config/systemd/user/tilth.service, then
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
# SIGTERM goes to the supervisor alone; it forwards it to the sessions so each finishes
# its iteration and stops cleanly. An iteration can take minutes.
KillMode=mixed
TimeoutStopSec=900

[Install]
WantedBy=default.target
"""
