"""What the dashboard shows, gathered from the read-only views: session summaries
(`views/status_data.py`: peeks and the roll-up, never the whole journal), each task's ledger
(`store/ledger.read_entries`), the branch's commits and one commit's diff (`git/gitcli.py`),
and the session's own text files (report.md, transcript.md).

Every read is of one session, by a validated id, and every failure of one session (a damaged
session.json, a directory removed mid-read, a repository gone) is that session's one line, never
an error of the page.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tilth.core.errors import BadInput, TilthError
from tilth.store.home import SessionPaths, all_session_ids, session_paths

if TYPE_CHECKING:
    from tilth.store.session_record import SessionRecord
    from tilth.actions.place import Here
    from tilth.actions.remote import Dispatched

SHA = re.compile(r"^[0-9a-f]{4,40}$")
TEXT_FILES = ("report.md", "transcript.md")
TEXT_BYTES = 512 << 10
"""Only the end of a longer text file is shown."""
DIFF_BYTES = 2 << 20


class NotFound(Exception):
    """No such session, commit or file: a 404, with the reason."""


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def place_of(home: Path, session_id: str) -> Here | Dispatched:
    """The session a valid id names, this machine's or one the broker knows (`actions/place.locate`);
    NotFound with the one line why not (a bad id, an unreachable broker, no such session)."""
    from tilth.actions.place import locate

    try:
        place = locate(home, session_id)
    except TilthError as exc:
        raise NotFound(one_line(exc)) from None
    if not place.known:
        raise NotFound(f"no session {session_id!r}")
    return place


def paths_of(home: Path, session_id: str) -> SessionPaths:
    """The session's paths, for an id that is valid and names a session directory."""
    try:
        paths = session_paths(session_id, home)
    except BadInput as exc:
        raise NotFound(one_line(exc)) from None
    if not paths.session_json.is_file():
        raise NotFound(f"no session {session_id!r}")
    return paths


def summary(paths: SessionPaths) -> dict[str, Any]:
    """`tilth status <id> --json`'s summary, or {id, error} with the one line that says why not."""
    from tilth.views.status_data import session_summary

    try:
        return session_summary(paths)
    except (TilthError, OSError, ValueError) as exc:
        return {"id": paths.id, "error": one_line(exc)}


def overview(home: Path) -> list[dict[str, Any]]:
    """Every session's summary, newest first; a session that cannot be read is its one error line."""
    try:
        ids = all_session_ids(home)
    except OSError:
        return []
    shown = [summary(session_paths(i, home)) for i in ids]
    return sorted(shown, key=lambda s: (s.get("created") or "", s["id"]), reverse=True)


@dataclass(frozen=True)
class Attempt:
    iteration: int
    ts: str
    summary: str
    criteria: list[tuple[str, str]]
    verdict: str
    category: str
    concern: str
    next_step: str
    panel: list[tuple[str, str, str, str]]
    """(evaluator, verdict, category, concern) of each member of an evaluator panel."""


def ledger(paths: SessionPaths, task_ids: list[str]) -> dict[str, list[Attempt]]:
    """Each task's evaluated attempts, in order (tasks never evaluated are left out)."""
    from tilth.store.ledger import read_entries

    shown = {}
    for tid in task_ids:
        try:
            entries = read_entries(paths.ledger_dir, tid)
        except (OSError, ValueError):
            continue
        attempts = []
        for e in entries:
            case, v = e.case, e.verdict
            attempts.append(Attempt(
                iteration=e.iter, ts=e.ts, summary=case.summary if case else "(no case: the worker ended its turn)",
                criteria=[(c.criterion, c.evidence) for c in case.criteria] if case else [],
                verdict=v.verdict, category=v.category, concern=v.concern, next_step=v.next_step,
                panel=[(m.evaluator or "?", m.verdict, m.category, m.concern) for m in v.panel]))
        if attempts:
            shown[tid] = attempts
    return shown


def ledger_stamp(paths: SessionPaths) -> tuple[tuple[str, int, int], ...]:
    """Changes whenever a ledger file does."""
    try:
        with os.scandir(paths.ledger_dir) as entries:
            return tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in entries))
    except OSError:
        return ()


def _record(paths: SessionPaths) -> SessionRecord:
    from tilth.store.session import load_session

    return load_session(paths)


def commits(paths: SessionPaths) -> list[dict[str, str]]:
    """The commits on session/<id> since its base, oldest first; none when the branch or repo is gone."""
    from tilth.git import gitcli

    try:
        record = _record(paths)
        if not Path(record.repo).is_dir():
            return []
        return gitcli.log_records(record.repo, record.base_commit, record.branch)
    except (TilthError, OSError, ValueError):
        return []


@dataclass(frozen=True)
class CommitDiff:
    sha: str
    text: str
    truncated: bool


def commit_diff(paths: SessionPaths, sha: str) -> CommitDiff:
    """`git show` of one commit of session/<id> (only those: any other sha is NotFound)."""
    from tilth.git import gitcli

    sha = sha.lower()
    if not SHA.match(sha):
        raise NotFound(f"{sha!r} is not a commit id")
    try:
        record = _record(paths)
        if not Path(record.repo).is_dir():
            raise NotFound(f"the session's repository {record.repo} is gone")
        listed = gitcli.run(record.repo, "rev-list", f"{record.base_commit}..refs/heads/{record.branch}", "--",
                            check=False)
    except TilthError as exc:
        raise NotFound(one_line(exc)) from None
    matches = [full for full in listed.stdout.split() if full.startswith(sha)]
    if listed.returncode != 0 or len(matches) != 1:
        raise NotFound(f"no commit {sha} on {record.branch}")
    shown = gitcli.run(record.repo, "-c", "core.quotePath=false", "show", "--no-color", "--no-ext-diff",
                       "--no-textconv", "--stat", "--patch", "--format=fuller", matches[0], "--", check=False)
    if shown.returncode != 0:
        raise NotFound(f"commit {sha} cannot be read: {gitcli.telling_line(shown.stderr)}")
    text = shown.stdout
    return CommitDiff(matches[0], text[:DIFF_BYTES], len(text) > DIFF_BYTES)


def text_file(paths: SessionPaths, name: str) -> str | None:
    """The end of sessions/<id>/<name> (report.md, transcript.md), None when absent; never a file
    outside the session dir, symlinks included."""
    if name not in TEXT_FILES:
        raise NotFound(f"no such file {name!r}")
    path = paths.dir / name
    try:
        if not path.resolve().is_relative_to(paths.dir.resolve()):
            return None
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - TEXT_BYTES))
            data = f.read(TEXT_BYTES)
    except OSError:
        return None
    text = data.decode("utf-8", "replace")
    return text if size <= TEXT_BYTES else f"[... the first {size - TEXT_BYTES:,} bytes are not shown ...]\n" + text


def file_stamp(paths: SessionPaths, name: str) -> tuple[int, int] | None:
    try:
        st = (paths.dir / name).stat()
        return st.st_size, st.st_mtime_ns
    except OSError:
        return None


ATTENTION_STATES = ("waiting", "paused", "failed", "crashed")
"""A session in one of these states waits on a person (an answer, a resume, a look at why)."""
NIGHT_S = 24 * 3600


def _age_s(ts: str | None, now: float) -> float | None:
    from tilth.core.clock import parse_utc

    moment = parse_utc(ts) if ts else None
    return None if moment is None else max(0.0, now - moment.timestamp())


def needs_you(home: Path, summaries: list[dict[str, Any]], now: float | None = None) -> dict[str, Any]:
    """What waits on the person, from the summaries: every open question (session, task, its title,
    who asked, the text, how long it has waited), the sessions waiting, paused, failed or crashed
    (or stopped by a cap) with their reason, and the spend of the sessions active in the last 24 hours."""
    from tilth.core.clock import wall
    from tilth.store.answers import last_question

    now = wall() if now is None else now
    questions, attention = [], []
    spend, lower_bound, active = 0.0, False, 0
    for s in summaries:
        if "error" in s:
            attention.append({"session": s["id"], "state": "unreadable", "reason": s["error"]})
            continue
        titles = {t["id"]: t["title"] for t in s.get("tasks") or []}
        for q in s.get("questions") or []:
            if q.get("answered"):
                continue
            asked = last_question(session_paths(s["id"], home).dir, q["task"])
            questions.append({"session": s["id"], "task": q["task"], "title": titles.get(q["task"], ""),
                              "asked_by": q.get("asked_by"), "question": q.get("question"),
                              "context": q.get("context") or "", "waited_s": _age_s(asked.at if asked else None, now)})
        capped = s.get("state") == "stopped" and any(c.get("reached") for c in (s.get("caps") or {}).values())
        if s.get("state") in ATTENTION_STATES or capped:  # a cap's stop waits on a person: raise it, resume
            attention.append({"session": s["id"], "state": s["state"], "reason": s.get("reason") or "",
                              "paused_until": s.get("paused_until")})
        touched = file_stamp(session_paths(s["id"], home), "events.jsonl")
        if touched is not None and now - touched[1] / 1e9 <= NIGHT_S:
            active += 1
            spend += s.get("cost_usd") or 0.0
            lower_bound = lower_bound or bool(s.get("cost_is_lower_bound"))
    questions.sort(key=lambda q: -(q["waited_s"] or 0))
    return {"questions": questions, "attention": attention,
            "spend": {"usd": round(spend, 6), "lower_bound": lower_bound, "sessions": active}}


def task_details(paths: SessionPaths) -> list[dict[str, Any]]:
    """Each task's description and criteria (a criterion with a command shows it); none when the plan
    cannot be read (the tasks table says why)."""
    from tilth.store.prd import load_plan

    try:
        plan = load_plan(paths.prd)
    except (TilthError, OSError, ValueError):
        return []
    return [{"id": t.id, "title": t.title, "description": t.description,
             "criteria": [c.text + (f"\n\n`verify: {c.verify}`" if c.verify else "") for c in t.criteria]}
            for t in plan]
