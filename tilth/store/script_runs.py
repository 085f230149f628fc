"""Script artifacts: `sessions/<id>/runs/run-<runId>/`, one per command an agent's `bash` tool or
a check ran, so a person can read afterwards exactly what ran and what it printed.

    script.sh    the command, as `bash -c` ran it
    stdout.log   its whole stdout, redacted (stdout and stderr together at most bounds.MAX_OUTPUT_BYTES,
                 where the command is stopped)
    stderr.log   its whole stderr, the same
    result.json  {"ok", "runId", "runDir", "scriptPath", "exitCode", "timedOut", "durationMs",
                  "stdout", "stderr"}: stdout/stderr here are the last RESULT_CHARS characters only

`runId` is `YYYYMMDD-HHMMSS-<6 hex>` (UTC). A run dir is built as `.run-<runId>.tmp` and renamed
into place once all four files are written (each with `jsonio.write_atomic`, which redacts), so a
`run-*` dir always holds all four; a staging dir a kill -9 left behind is removed by the next
`record`. tilth writes these outside the sandbox; the command never sees them.

Retention (`script_runs_keep`): after each new run the oldest `run-*` dirs beyond `keep` go.
`keep = 0` writes no artifact at all (nothing would be kept): the command runs as before and its
events carry no run id.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from tilth.core.clock import utc_now
from tilth.store.jsonio import fsync_dir, write_atomic, write_json

DIR_NAME = "runs"
PREFIX = "run-"
STAGING = ".run-"
RESULT_CHARS = 4000
DEFAULT_KEEP = 500
"""As `core/config.Settings.script_runs_keep`, for a caller given no setting."""
KEYS = ("ok", "runId", "runDir", "scriptPath", "exitCode", "timedOut", "durationMs", "stdout", "stderr")


def runs_dir(session_dir: Path) -> Path:
    return session_dir / DIR_NAME


def new_run_id(now: datetime | None = None) -> str:
    return f"{(now or utc_now()).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Finished:
    """What a command did, as tools/shell.py measured it; the output whole."""

    command: str
    exit_code: int
    timed_out: bool
    stopped: bool
    """Stopped by the harness (timeout, too much output): never ok."""
    duration_ms: int
    stdout: bytes
    stderr: bytes


def _tail(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")[-RESULT_CHARS:]


WRITING = threading.Lock()
"""One run dir written (and pruned) at a time: parallel tasks' lanes record from threads of one runner,
and `prune` removes a staging dir it does not know is another thread's."""


def record(runs: Path, run: Finished, keep: int = DEFAULT_KEEP) -> str | None:
    """Write the run's dir, then apply retention; the run id (None when `keep` is 0)."""
    if keep <= 0:
        return None
    with WRITING:
        return _record(runs, run, keep)


def _record(runs: Path, run: Finished, keep: int) -> str:
    runs.mkdir(parents=True, exist_ok=True)
    while True:
        run_id = new_run_id()
        final = runs / f"{PREFIX}{run_id}"
        staging = runs / f"{STAGING}{run_id}.tmp"
        if not final.exists():
            try:
                staging.mkdir()
                break
            except FileExistsError:
                continue
    try:
        script = run.command if run.command.endswith("\n") else run.command + "\n"
        write_atomic(staging / "script.sh", script.encode("utf-8", errors="surrogateescape"))
        write_atomic(staging / "stdout.log", run.stdout)
        write_atomic(staging / "stderr.log", run.stderr)
        write_json(staging / "result.json", {
            "ok": run.exit_code == 0 and not run.stopped, "runId": run_id, "runDir": str(final),
            "scriptPath": str(final / "script.sh"), "exitCode": run.exit_code, "timedOut": run.timed_out,
            "durationMs": run.duration_ms, "stdout": _tail(run.stdout), "stderr": _tail(run.stderr),
        })
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(runs)
    prune(runs, keep)
    return run_id


def list_runs(runs: Path) -> list[Path]:
    """The complete run dirs, oldest first (by the run id's time, then the dir's mtime)."""
    if not runs.is_dir():
        return []
    found = []
    for entry in os.scandir(runs):
        if entry.name.startswith(PREFIX) and entry.is_dir(follow_symlinks=False):
            found.append((entry.name[len(PREFIX):len(PREFIX) + 15], entry.stat(follow_symlinks=False).st_mtime_ns,
                          entry.name))
    return [runs / name for _, _, name in sorted(found)]


def prune(runs: Path, keep: int) -> list[str]:
    """Delete the oldest run dirs beyond `keep`, and any staging dir left by a killed writer (one
    writer per session: the runner holding the session lock, which is the caller); the names removed."""
    removed = []
    for entry in os.scandir(runs) if runs.is_dir() else ():
        if entry.name.startswith(STAGING) and entry.name.endswith(".tmp"):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.name)
    complete = list_runs(runs)
    for old in complete[:max(0, len(complete) - keep)]:
        shutil.rmtree(old, ignore_errors=True)
        removed.append(old.name)
    return removed


def load_result(run_dir: Path) -> dict[str, Any] | None:
    """A run's result.json, or None when it is missing or not an object."""
    try:
        value = orjson.loads((run_dir / "result.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None
