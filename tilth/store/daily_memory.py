"""Daily memory: `$TILTH_HOME/memory/YYYY-MM-DD.md` (local date), one line per task outcome across
every session, so a person reads a day's work in one file.

Created on first write with `# Memory YYYY-MM-DD` and a blank line (written whole to a temp file
and hard-linked into place, so of two sessions creating it at once one wins and the other
appends: one header, never a line above it). Then per outcome, in one flushed, fsynced write
(`jsonio.append_line`: O_APPEND, so lines of concurrent sessions never interleave):

    - [HH:MM:SS] [OK|FAIL] [<model or agent>] task: <session>/<task id> <title> | result: <message>

`<message>`: for OK the accepted case's summary, for FAIL the last verdict's concern, whitespace
normalised and cut to MESSAGE_CHARS. `<model or agent>`: `agent_label`.

Exactly one line per outcome, a kill -9 included: each session keeps `sessions/<id>/memory.noted`,
the task commits (shas, one per line) whose line is written; the runner writes the line and then
notes the sha. A run's reconciliation (`run/recovery.py`) writes the line of each task commit on the
branch not yet noted (a kill came between the outcome and its line), unless a day file since the
commit already holds that outcome's line (a kill between the line and its note). A session that
never had this file (older than it) notes its existing commits without lines. A FAILED placeholder
unwound by `tilth resume` keeps its line: it was an outcome; the retry's outcome gets its own.

Pydantic-free at import: `tilth digest` reads the day files.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from tilth.core.clock import local_now
from tilth.store.jsonio import append_line, fsync_dir, naming, write_atomic

DIR_NAME = "memory"
NOTED = "memory.noted"
MESSAGE_CHARS = 400
LINE = re.compile(r"^- \[(\d\d:\d\d:\d\d)\] \[(OK|FAIL)\] \[([^\]]*)\] task: ([^/\s]+)/(\S+) (.*?) \| result: (.*)$")
CLI_AGENTS = ("claude", "codex", "aider", "command", "copilot", "gemini")


def memory_dir(home: Path) -> Path:
    return home / DIR_NAME


def day_path(home: Path, day: date) -> Path:
    return memory_dir(home) / f"{day.isoformat()}.md"


def compact(text: str | None, limit: int = MESSAGE_CHARS) -> str:
    return " ".join((text or "").split())[:limit]


def agent_label(backend: str, worker_backend: str | None, worker_model: str | None) -> str:
    """`scripted` for the scripted backend; the CLI agent's name for a CLI worker; else the
    worker model's name (the `openai` backend)."""
    if backend == "scripted":
        return "scripted"
    if worker_backend in CLI_AGENTS:
        return worker_backend
    return worker_model or worker_backend or backend


def entry_line(when: datetime, ok: bool, agent: str, session: str, task_id: str, title: str, message: str) -> str:
    return (f"- [{when.strftime('%H:%M:%S')}] [{'OK' if ok else 'FAIL'}] [{compact(agent, 80).replace(']', ')')}] "
            f"task: {session}/{task_id} {compact(title, 200)} | result: {compact(message)}")


def _ensure_day_file(path: Path, day: date) -> None:
    if path.exists():
        return
    with naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(f"# Memory {day.isoformat()}\n\n".encode())
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)  # atomic, and refuses an existing file: one header however many race
            except FileExistsError:
                pass
        finally:
            Path(tmp).unlink(missing_ok=True)
        fsync_dir(path.parent)


def append(home: Path, ok: bool, agent: str, session: str, task_id: str, title: str, message: str,
           now: datetime | None = None) -> str:
    """Append one outcome's line to the day's file (created with its header first); the line."""
    when = now or local_now()
    path = day_path(home, when.date())
    _ensure_day_file(path, when.date())
    line = entry_line(when, ok, agent, session, task_id, title, message)
    append_line(path, line.encode())
    return line


@dataclass(frozen=True)
class Entry:
    at: datetime
    """Local time, naive (the file's date and the line's time)."""
    ok: bool
    agent: str
    session: str
    task_id: str
    title: str
    message: str


def read_day(home: Path, day: date) -> list[Entry]:
    """The day file's lines that have the entry shape; anything else is skipped."""
    try:
        text = day_path(home, day).read_text(errors="replace")
    except OSError:
        return []
    found = []
    for raw in text.splitlines():
        m = LINE.match(raw)
        if m is None:
            continue
        at = datetime.combine(day, datetime.strptime(m[1], "%H:%M:%S").time())
        found.append(Entry(at, m[2] == "OK", m[3], m[4], m[5], m[6], m[7]))
    return found


def read_since(home: Path, since: datetime) -> list[Entry]:
    """Every entry at or after `since` (aware or naive local), oldest first."""
    local = (since.astimezone().replace(tzinfo=None) if since.tzinfo else since).replace(microsecond=0)
    found: list[Entry] = []
    for path in sorted(memory_dir(home).glob("????-??-??.md")):
        try:
            day = date.fromisoformat(path.stem)
        except ValueError:
            continue
        if day >= local.date():
            found.extend(e for e in read_day(home, day) if e.at >= local)
    return found


def noted_path(session_dir: Path) -> Path:
    return session_dir / NOTED


def noted(session_dir: Path) -> set[str] | None:
    """The commits whose outcome line is written; None when the session has no such record yet."""
    try:
        return {line.strip() for line in noted_path(session_dir).read_text().splitlines() if line.strip()}
    except FileNotFoundError:
        return None


def note(session_dir: Path, shas: list[str]) -> None:
    """Record commits as noted (an empty list creates the record)."""
    path = noted_path(session_dir)
    if not shas:
        if not path.exists():
            write_atomic(path, b"")
        return
    append_line(path, "\n".join(shas).encode())


def outcome_message(ledger_dir: Path, task_id: str, ok: bool) -> str:
    """The accepted case's summary (OK) or the last verdict's concern (FAIL), from the ledger."""
    from tilth.store.ledger import read_entries  # pydantic: only a runner writes memory lines

    entries = read_entries(ledger_dir, task_id)
    if not entries:
        return ""
    last = entries[-1]
    if ok:
        accepted = next((e for e in reversed(entries) if e.verdict.accepted), last)
        return accepted.case.summary if accepted.case else ""
    return last.verdict.concern


def note_outcome(session_dir: Path, home: Path, session: str, task_id: str, title: str, ok: bool, sha: str,
                 agent: str, now: datetime | None = None) -> str | None:
    """A task's outcome (its commit `sha`) as the day's line, once: the line, or None when that
    commit was already noted."""
    seen = noted(session_dir)
    if seen is not None and sha in seen:
        return None
    line = append(home, ok, agent, session, task_id, title,
                  outcome_message(session_dir / "ledger", task_id, ok), now)
    note(session_dir, [sha])
    return line


def has_line(home: Path, session: str, task_id: str, ok: bool, since: datetime) -> bool:
    """A line for this outcome of the task at or after `since` (a commit's time)."""
    return any(e.session == session and e.task_id == task_id and e.ok == ok for e in read_since(home, since))
