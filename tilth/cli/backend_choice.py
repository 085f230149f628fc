"""Which backend a command runs a session with: `--backend`, else what the settings configure."""

from __future__ import annotations

import argparse
import os

from tilth.core.errors import BadInput

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (~5 ms of a cold start)
if TYPE_CHECKING:
    from tilth.core.config import Settings
    from tilth.store.session import BackendChoice


def configured_backend(settings: Settings) -> str | None:
    """A CLI agent in some role, or a model endpoint, means the real backend (`agents`, `openai`),
    for start, run and resume alike."""
    from tilth.core.config import CLI_BACKENDS

    if settings.worker_backend in CLI_BACKENDS or set(settings.evaluator_backends()) & set(CLI_BACKENDS):
        return "agents"
    return "openai" if settings.base_url else os.environ.get("TILTH_BACKEND")


def backend_choice(args: argparse.Namespace, settings: Settings) -> BackendChoice:
    from pathlib import Path

    from tilth.store.session import BackendChoice

    name = args.backend or configured_backend(settings)
    if not name:
        raise BadInput(
            "no model configured: set TILTH_BASE_URL and TILTH_WORKER_MODEL (see README), or pass "
            "--backend scripted [--scenario FILE] for an offline test run that calls no model"
        )
    scenario = str(Path(args.scenario).resolve()) if args.scenario else None
    return BackendChoice(name=name, scenario=scenario)
