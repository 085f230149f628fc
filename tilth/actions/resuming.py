"""A person continues a stopped, crashed, failed or waiting session this machine has (`resume_here`, the
local half of `resume_session`; a dispatched session is queued again for a worker,
`remote.Dispatched.resume`): the settings the person's shell sets (`by="cli"`; a dashboard's process
environment is not the person's, so from there none) or, with `reload_settings`, every current one replace
the recorded ones, and the session is handed to the supervisor (`tilth run --resume` reconciles with the
branch and retries the failed tasks from their placeholders)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from tilth.actions.acted import Acted, changeable, record_act
from tilth.store.home import SessionPaths

if TYPE_CHECKING:
    from tilth.core.config import Settings


def resume_here(home: Path, session_id: str, *, by: str, reload_settings: bool = False,
                foreground: bool = False) -> Acted:
    """With `foreground` (the CLI's `--foreground`) the settings are recorded but the session is not
    handed over: the caller runs it in its own process."""
    from tilth.core.settings_load import load_settings_with_sources
    from tilth.core.travel import keys_in_use
    from tilth.daemon.transitions import record_settings

    paths, record = changeable(home, session_id)
    if record.state == "done":
        refuse_finished(paths)
    settings, sources = load_settings_with_sources(paths.home)
    warnings: list[str] = []
    if not foreground:
        from tilth.actions.handing import supervisor_sees_keys

        warnings = supervisor_sees_keys(paths.home, settings)
    own_shell = by == "cli"
    shell = shell_overrides(settings, sources, own_shell, reload_settings)
    backend = "openai" if own_shell and "base_url" in sources else None
    changed = record_settings(paths, shell, keys_in_use(settings), backend, by=by)
    if changed:
        warnings.append(f"session {paths.id}: this shell's settings replace the recorded {', '.join(changed)}")
    events = ["settings_recorded"] if changed else []
    if foreground:
        events.append(record_act(paths, "resume", by))
        return Acted(paths.id, f"session {paths.id} resumes in this process", tuple(events), (), tuple(warnings))
    from tilth.actions.handing import hand_over

    what, *more = hand_over(paths, "resume", resume=True, by=by)  # refused while a process runs it
    events += ["session_queued", record_act(paths, "resume", by)]
    return Acted(paths.id, what, tuple(events), tuple(more), tuple(warnings))


def shell_overrides(settings: Settings, sources: Mapping[str, object], own_shell: bool,
                    reload_settings: bool = False) -> dict[str, Any]:
    """The settings a resume records over the session's: what the person's own shell sets (env or
    config.toml), or with `reload_settings` every current one; never a key nor a process's own."""
    from tilth.core.travel import travelling_fields

    return {name: value for name, value in settings.model_dump(mode="json").items()
            if ((own_shell and name in sources) or reload_settings) and name in travelling_fields()}


def refuse_finished(paths: SessionPaths) -> None:
    """A done session runs again only for tasks added to its plan since (a resume would otherwise run
    its final review and spend again on nothing)."""
    from tilth.core.errors import BadInput
    from tilth.store.prd_peek import peek_plan

    try:
        left = [t.id for t in peek_plan(paths.prd) if t.status in ("pending", "in_progress")]
    except BadInput:
        return  # an unreadable plan: the run says what is wrong with it
    if not left:
        raise BadInput(f"session {paths.id} is done: every task of its plan is done, so there is nothing to resume; "
                       f"add tasks to {paths.prd} to run them in it, or start a new session")
