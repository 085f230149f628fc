"""Runs inside a mount namespace whose TILTH_HOME is a small tmpfs (see test_disk_full.py):
performs the steps of a spec, snapshotting after each `tilth` call what the test asserts on,
and prints the results as JSON. The tmpfs vanishes with the namespace, so every fact about
it must be gathered here.

Spec: {"home": path, "repo": path, "env": {...}, "steps": [
    {"fill_leaving": bytes} | {"unfill": true} | {"rm": path} | {"tilth": [args...]}]}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def fill(home: Path, leave: int) -> None:
    stat = os.statvfs(home)
    room = stat.f_bavail * stat.f_frsize - leave
    with open(home / "filler", "ab") as f:
        f.write(bytes(max(0, room)))


def events_of(path: Path, kind: str) -> list[dict]:
    found = []
    if path.is_file():
        for line in path.read_bytes().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("type") == kind:
                found.append(event.get("data"))
    return found


def snapshot(home: Path, repo: Path) -> dict:
    sessions = home / "sessions"
    admin = repo / ".git" / "worktrees"
    branches = subprocess.run(["git", "-C", str(repo), "branch", "--list", "--format=%(refname:short)", "session/*"],
                              capture_output=True, text=True, check=True).stdout.split()
    found = {}
    for directory in sorted(sessions.iterdir()) if sessions.is_dir() else []:
        record = directory / "session.json"
        found[directory.name] = {
            "state": json.loads(record.read_text())["state"] if record.is_file() else None,
            "reserve": (directory / ".reserve").is_file(),
            "ends": events_of(directory / "events.jsonl", "session_end"),
        }
    worktrees = home / "worktrees"
    return {"sessions": found, "worktrees": sorted(p.name for p in worktrees.iterdir()) if worktrees.is_dir() else [],
            "admin": sorted(p.name for p in admin.iterdir()) if admin.is_dir() else [], "branches": branches}


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    home, repo = Path(spec["home"]), Path(spec["repo"])
    env = {**os.environ, **spec["env"]}
    results = []
    for step in spec["steps"]:
        if "fill_leaving" in step:
            fill(home, step["fill_leaving"])
        elif "unfill" in step:
            (home / "filler").unlink(missing_ok=True)
        elif "rm" in step:
            Path(step["rm"]).unlink()
        else:
            proc = subprocess.run([sys.executable, "-m", "tilth", *step["tilth"]], env=env, capture_output=True,
                                  text=True, timeout=120, cwd=spec["cwd"])
            results.append({"args": step["tilth"], "rc": proc.returncode, "stdout": proc.stdout,
                            "stderr": proc.stderr, **snapshot(home, repo)})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
