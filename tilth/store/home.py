"""Where things live under TILTH_HOME (default ~/.tilth)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from glob import escape as glob_escape
from pathlib import Path

from tilth.core.diskspace import is_disk_full
from tilth.core.errors import BadInput, DiskFull

SESSION_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def tilth_home() -> Path:
    return Path(os.environ.get("TILTH_HOME") or Path.home() / ".tilth").expanduser().absolute()


def check_session_id(session_id: str) -> str:
    if not SESSION_ID_PATTERN.match(session_id) or session_id.endswith((".lock", ".")) or ".." in session_id:
        raise BadInput(
            f"invalid session id {session_id!r}: use letters, digits, '.', '_' or '-' (max 64), "
            "not ending in '.lock'"
        )
    return session_id


@dataclass(frozen=True)
class SessionPaths:
    """Every harness-owned path of one session. The worktree is deliberately elsewhere."""

    home: Path
    id: str

    def __post_init__(self) -> None:
        check_session_id(self.id)  # so `dir` and `worktree` never leave `sessions/` and `worktrees/`

    @property
    def dir(self) -> Path:
        return self.home / "sessions" / self.id

    @property
    def worktree(self) -> Path:
        return self.home / "worktrees" / self.id

    @property
    def agent_home(self) -> Path:
        """The home directory the session's agent commands see (`agents/confinement.py`)."""
        return self.home / "agent-homes" / self.id

    def lane_home(self, task_id: str) -> Path:
        """A lane's own private home (`<id>+<task>`: `+` is in no id), so two lanes running at once
        never share one; removed with the lane."""
        return under(self.home / "agent-homes", f"{self.id}+{task_id}")

    def lane_homes(self) -> list[Path]:
        """Every lane home of this session there is (a killed run's included)."""
        root = self.home / "agent-homes"
        return sorted(root.glob(f"{glob_escape(self.id)}+*")) if root.is_dir() else []

    @property
    def session_json(self) -> Path:
        return self.dir / "session.json"

    @property
    def prd(self) -> Path:
        return self.dir / "prd.json"

    @property
    def progress(self) -> Path:
        return self.dir / "progress.txt"

    @property
    def ledger_dir(self) -> Path:
        return self.dir / "ledger"

    @property
    def events(self) -> Path:
        return self.dir / "events.jsonl"

    @property
    def prompts(self) -> Path:
        """The full prompts (`store/prompts.py`), referred to by `prompt_assembled` events."""
        return self.dir / "prompts.jsonl"

    @property
    def rollup(self) -> Path:
        """summary.json: events.jsonl folded for `tilth status` (`store/rollup.py`)."""
        return self.dir / "summary.json"

    @property
    def lock(self) -> Path:
        return self.dir / "session.lock"

    @property
    def scenario(self) -> Path:
        return self.dir / "scenario.json"

    @property
    def reserve(self) -> Path:
        """Ballast a run keeps so that, on a full disk, deleting it leaves room to record the stop."""
        return self.dir / ".reserve"


def ensure_home(home: Path) -> None:
    """Create TILTH_HOME's two directories, or say plainly why it cannot be used. What tilth creates
    is its user's alone (0700): sessions hold prompts, diffs and spend, worktrees the user's code, and
    another local user must not list them even when TILTH_HOME itself was made open."""
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
        home.mkdir(mode=0o700, exist_ok=True)
        for name in ("sessions", "worktrees"):
            (home / name).mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFull(f"TILTH_HOME {home} cannot be used: {exc.strerror}; free space there and try "
                           "again (nothing was created)") from None
        raise BadInput(f"TILTH_HOME {home} cannot be used ({exc.strerror}); set TILTH_HOME to a writable "
                       "directory") from None


def under(root: Path, *parts: str) -> Path:
    """`root / parts`, refused (BadInput) unless it stays inside `root`: every path tilth builds from
    an id it was given goes through here."""
    path = root.joinpath(*parts)
    if any(part in ("", ".", "..") or "/" in part or "\0" in part for part in parts) \
            or not os.path.abspath(path).startswith(os.path.abspath(root) + os.sep):
        raise BadInput(f"refused path {'/'.join(parts)!r}: it does not stay inside {root}")
    return path


def session_paths(session_id: str, home: Path | None = None) -> SessionPaths:
    return SessionPaths(home or tilth_home(), check_session_id(session_id))


def all_session_ids(home: Path | None = None) -> list[str]:
    root = (home or tilth_home()) / "sessions"
    if not root.is_dir():
        return []
    # Dot-dirs are not sessions: `.creating-<id>` is a creation in progress (or an interrupted one).
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".") and (p / "session.json").is_file())
