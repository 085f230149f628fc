"""Creating a session: validate everything first, then create branch, worktree and
session dir, undoing all of it if any step fails, so bad input leaves nothing behind.

A kill -9 cannot leave half a session either: before the branch exists, the staging dir
`sessions/.creating-<id>/` records what is about to be made and is locked for the creator's
life (store/creating.py); the session dir is that dir renamed once complete. The next
`tilth start` reclaims any staging dir whose creator is gone (`reclaim_interrupted`).
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Callable

import pygit2

from tilth.agents.accounting import Meter
from tilth.agents.backends.registry import make_backend
from tilth.agents.preflight import preflight
from tilth.agents.pricing import check_priced
from tilth.agents.sandbox import resolve_mode
from tilth.core.clock import iso, utc_now
from tilth.core.config import Settings
from tilth.core.diskspace import is_disk_full, no_space
from tilth.core.errors import BadInput, DiskFull, TilthError
from tilth.core.faults import checkpoint
from tilth.core.travel import keys_in_use, session_view
from tilth.git.worktree_git import worktree_name
from tilth.git.gitops import GitError
from tilth.git.worktrees import (check_checkout, check_writable, create_worktree, open_source_repo, reclaim_worktree,
                                 remove_worktree,
                                 resolve_commit)
from tilth.store.creating import CreationIntent, Staging, begin, claim_orphans
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths, check_session_id, ensure_home, session_paths, tilth_home
from tilth.store.jsonio import write_atomic, write_json
from tilth.store.prd import load_plan
from tilth.store.seed_meta import FILE_NAME as SEED_META, read_seed_bytes
from tilth.store.session import BackendChoice, SessionRecord, record_json

document({"session_created": ("the session dir, branch and worktree were created; data: base, branch", "base branch")})


def new_session_id() -> str:
    return utc_now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def create_session(repo_path: Path, prd_file: Path, session_id: str | None, base_rev: str | None,
                   backend: BackendChoice, settings: Settings, checks: Sequence[str] = (),
                   notify: Callable[[str], None] | None = None, seed_dir: Path | None = None,
                   home: Path | None = None, progress: Callable[[str], None] | None = None) -> SessionPaths:
    """`notify` gets one line per interrupted creation reclaimed on the way; `progress` a line before a
    slow check (the model endpoints' preflight). The `tilth prep` record (seed-meta.json) is taken from
    `seed_dir`, where it must be, else from beside the plan if there."""
    plan_bytes = prd_file.read_bytes() if prd_file.is_file() else None
    if plan_bytes is None:
        raise BadInput(f"plan file {prd_file} does not exist; pass --prd a prd.json")
    load_plan(prd_file)
    seed_bytes = seed_meta_bytes(prd_file, seed_dir)
    paths = session_paths(check_session_id(session_id or new_session_id()), home or tilth_home())
    if paths.dir.exists():
        raise BadInput(f"session {paths.id!r} already exists under {paths.home}; choose another --id")
    scenario_bytes = None
    if backend.scenario:
        scenario_path = Path(backend.scenario)
        if not scenario_path.is_file():
            raise BadInput(f"scenario file {scenario_path} does not exist; pass --scenario an existing file")
        scenario_bytes = scenario_path.read_bytes()
    make_backend(backend, settings, Meter())
    unpriced_notes = check_priced(settings) if backend.name != "scripted" else []
    resolve_mode(settings.sandbox, settings.agent_network)
    if scenario_bytes is not None:
        backend = BackendChoice(name=backend.name, scenario=str(paths.scenario))
    repo = open_source_repo(repo_path)
    check_writable(repo)
    if base_rev is None:
        check_checkout(repo)
    base = resolve_commit(repo, base_rev or "HEAD")
    if backend.name in ("openai", "agents") and settings.preflight:
        unpriced_notes = [*preflight(settings, progress), *unpriced_notes]
    for line in unpriced_notes:  # said once the start is sure to go ahead, never beside a refusal
        if notify is not None:
            notify(line)
    branch = f"session/{paths.id}"

    ensure_home(paths.home)
    for line in reclaim_interrupted(paths.home):
        if notify is not None:
            notify(line)
    now = iso()
    record = SessionRecord(
        id=paths.id, repo=str(Path(repo.workdir).resolve()), base_commit=str(base.id), branch=branch,
        worktree=str(paths.worktree), backend=backend, created=now, updated=now, checks=list(checks),
        settings=session_view(settings), keys=keys_in_use(settings),
    )
    intent = CreationIntent(id=paths.id, repo=str(Path(repo.path).resolve()), branch=branch,
                            worktree_name=worktree_name(paths.id), worktree=str(paths.worktree), base=str(base.id))
    try:
        staging = begin(paths.home, intent)
        make(paths, repo, base, staging, record, plan_bytes, scenario_bytes, seed_bytes)
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFull(f"{no_space(exc, paths.home)} and run the start again (nothing was created)") from None
        raise
    return paths


def make(paths: SessionPaths, repo: pygit2.Repository, base: pygit2.Commit, staging: Staging, record: SessionRecord,
         plan_bytes: bytes, scenario_bytes: bytes | None, seed_bytes: bytes | None = None) -> None:
    """Branch and worktree, then the session's files in the staging dir, then the rename that makes
    the session exist. Any failure undoes it all, the staging dir (the record of what to undo) last."""
    intent = staging.intent
    assert intent is not None, "a staging dir this start made records what it makes"
    try:
        create_worktree(repo, intent.branch, base, intent.worktree_name, paths.worktree)
    except BaseException:
        staging.discard()
        raise
    try:
        checkpoint("after_worktree", paths.id)
        write_atomic(staging.dir / "prd.json", plan_bytes)
        if scenario_bytes is not None:
            write_atomic(staging.dir / "scenario.json", scenario_bytes)
        if seed_bytes is not None:
            write_atomic(staging.dir / SEED_META, seed_bytes)
        (staging.dir / "ledger").mkdir()
        (staging.dir / "progress.txt").touch()
        write_json(staging.dir / "session.json", record_json(record))
        EventLog(staging.dir / "events.jsonl").emit("session_created", base=intent.base, branch=intent.branch)
        checkpoint("before_session_dir", paths.id)
        staging.complete(paths.dir)
    except BaseException:
        shutil.rmtree(paths.dir, ignore_errors=True)
        remove_worktree(repo, intent.branch, intent.worktree_name, paths.worktree)
        staging.discard()
        raise


def seed_meta_bytes(prd_file: Path, seed_dir: Path | None) -> bytes | None:
    """The validated seed-meta.json to copy into the session: `seed_dir`'s (required there), else the
    one beside the plan, else none."""
    if seed_dir is None:
        return read_seed_bytes(prd_file.parent / SEED_META)
    if not seed_dir.is_dir():
        raise BadInput(f"--seed {seed_dir} is not a directory; pass the directory `tilth prep` wrote")
    data = read_seed_bytes(seed_dir / SEED_META)
    if data is None:
        raise BadInput(f"--seed {seed_dir} holds no {SEED_META}; pass the directory `tilth prep` wrote")
    return data


def reclaim_interrupted(home: Path) -> list[str]:
    """Undo every creation whose creator died (its staging dir is unlocked); one line each."""
    lines = []
    for staging in claim_orphans(home):
        intent = staging.intent
        try:
            done = reclaim_worktree(Path(intent.repo), intent.branch, intent.worktree_name, Path(intent.worktree),
                                    intent.base) if intent else []
        except (OSError, GitError, TilthError) as exc:
            staging.lock.release()
            lines.append(f"could not reclaim the interrupted creation of session {staging.session_id} "
                         f"({staging.dir}): {exc}; remove it by hand")
            continue
        staging.discard()
        what = "; ".join(done) if done else "nothing had been created in git"
        lines.append(f"reclaimed an interrupted `tilth start` of session {staging.session_id}: {what}")
    return lines
