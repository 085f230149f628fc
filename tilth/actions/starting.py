"""`start_session`: a person starts a session from a plan (a prd.json file; converting other plan forms is
the CLI's `tilth import`): created from `repo` and handed to the supervisor (at `start_at`, or now), or
created to run in the caller's process (`foreground`), or dispatched to a worker through the broker."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from tilth.actions.acted import Acted, check_by, record_act
from tilth.core.errors import BadInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tilth.core.config import Settings
    from tilth.store.session import BackendChoice


def start_session(home: Path, plan: Path, *, repo: str | Path | None, backend: BackendChoice, by: str = "cli",
                  session_id: str | None = None, base: str | None = None, checks: Sequence[str] = (),
                  seed: Path | None = None, start_at: str | None = None, dispatch: bool = False,
                  foreground: bool = False, settings: Settings | None = None,
                  progress: Callable[[str], None] | None = None) -> Acted:
    """`repo`: the git repository (dispatched: the remote every worker reaches, default `[dispatch]
    remote`); `settings`: the caller's, else those of `home`."""
    check_by(by)
    if settings is None:
        from tilth.core.settings_load import load_settings

        settings = load_settings(home)
    said: list[str] = []
    if dispatch:
        return _dispatched(plan, repo, backend, session_id, base, checks, seed, settings, said)
    if repo is None:
        raise BadInput("no repository: pass the git repository to work on")
    warnings: list[str] = []
    if not foreground:
        from tilth.actions.handing import supervisor_sees_keys

        warnings = supervisor_sees_keys(home, settings)
    from tilth.run.create import create_session

    paths = create_session(Path(repo).expanduser(), plan, session_id, base, backend, settings, list(checks),
                           notify=said.append, seed_dir=seed, home=home, progress=progress)
    events = [record_act(paths, "start", by)]
    if foreground:
        return Acted(paths.id, f"session {paths.id} created; it runs in this process", tuple(events),
                     warnings=(*said, *warnings))
    from tilth.actions.handing import hand_over

    what, *more = hand_over(paths, "start", resume=False, by=by, start_at=start_at)
    return Acted(paths.id, what, (*events, "session_queued"), tuple(more), (*said, *warnings))


def _dispatched(plan: Path, repo: str | Path | None, backend: BackendChoice, session_id: str | None,
                base: str | None, checks: Sequence[str], seed: Path | None, settings: Settings,
                said: list[str]) -> Acted:
    from tilth.dispatch.submit import start_dispatched

    if settings.dispatch is None:
        raise BadInput("dispatching needs a [dispatch] section in config.toml (broker_url, remote); see "
                       "docs/dispatch.md")
    remote = str(repo) if repo else settings.dispatch.remote
    paths = start_dispatched(remote, plan, session_id, base, backend, settings, list(checks), seed, said.append)
    return Acted(paths.id, f"session {paths.id} dispatched to queue {settings.dispatch.queue!r} (remote {remote}); "
                           "a `tilth worker` runs it",
                 more=(f"  follow it:    tilth logs {paths.id} -f", f"  wait for it:  tilth wait {paths.id}"),
                 warnings=tuple(said), dispatched=True)
