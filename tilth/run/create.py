"""Creating a session: validate everything first, then create branch, worktree and
session dir, undoing all of it if any step fails, so bad input leaves nothing behind."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from tilth.agents.accounting import Meter
from tilth.agents.protocol import make_backend
from tilth.agents.sandbox import resolve_mode
from tilth.core.clock import iso, utc_now
from tilth.core.config import Settings
from tilth.core.errors import BadInput
from tilth.git.gitops import check_checkout, create_worktree, open_source_repo, remove_worktree, resolve_commit
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths, check_session_id, ensure_home, session_paths, tilth_home
from tilth.store.jsonio import fsync_dir, write_atomic, write_json
from tilth.store.prd import load_plan
from tilth.store.session import BackendChoice, SessionRecord

document({"session_created": "the session dir, branch and worktree were created; data: base, branch"})


def new_session_id() -> str:
    return utc_now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def worktree_name(session_id: str) -> str:
    return f"tilth-{session_id}"


def create_session(repo_path: Path, prd_file: Path, session_id: str | None, base_rev: str | None,
                   backend: BackendChoice, settings: Settings, checks: list[str] = ()) -> SessionPaths:
    plan_bytes = prd_file.read_bytes() if prd_file.is_file() else None
    if plan_bytes is None:
        raise BadInput(f"plan file {prd_file} does not exist; pass --prd a prd.json")
    load_plan(prd_file)
    paths = session_paths(check_session_id(session_id or new_session_id()), tilth_home())
    if paths.dir.exists():
        raise BadInput(f"session {paths.id!r} already exists under {paths.home}; choose another --id")
    scenario_bytes = None
    if backend.scenario:
        scenario_path = Path(backend.scenario)
        if not scenario_path.is_file():
            raise BadInput(f"scenario file {scenario_path} does not exist; pass --scenario an existing file")
        scenario_bytes = scenario_path.read_bytes()
    make_backend(backend, settings, Meter())
    resolve_mode(settings.sandbox, settings.agent_network)
    if scenario_bytes is not None:
        backend = BackendChoice(name=backend.name, scenario=str(paths.scenario))
    repo = open_source_repo(repo_path)
    if base_rev is None:
        check_checkout(repo)
    base = resolve_commit(repo, base_rev or "HEAD")
    branch = f"session/{paths.id}"

    ensure_home(paths.home)
    staging = paths.dir.with_name(f".creating-{paths.id}")
    shutil.rmtree(staging, ignore_errors=True)
    create_worktree(repo, branch, base, worktree_name(paths.id), paths.worktree)
    try:
        now = iso()
        record = SessionRecord(
            id=paths.id, repo=str(Path(repo.workdir).resolve()), base_commit=str(base.id), branch=branch,
            worktree=str(paths.worktree), backend=backend, created=now, updated=now, checks=list(checks),
        )
        staging.mkdir(parents=True)
        write_atomic(staging / "prd.json", plan_bytes)
        if scenario_bytes is not None:
            write_atomic(staging / "scenario.json", scenario_bytes)
        (staging / "ledger").mkdir()
        (staging / "progress.txt").touch()
        write_json(staging / "session.json", record.model_dump(mode="json"))
        staging.rename(paths.dir)
        fsync_dir(paths.dir.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(paths.dir, ignore_errors=True)
        remove_worktree(repo, branch, worktree_name(paths.id), paths.worktree)
        raise
    EventLog(paths.events).emit("session_created", base=str(base.id), branch=branch)
    return paths
