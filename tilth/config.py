"""Settings: defaults on the model, then $TILTH_HOME/config.toml, then TILTH_* env vars."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tilth.errors import BadInput


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_iterations_per_task: int = Field(5, ge=1, le=100)
    """Worker+evaluator rounds a task gets (per run) before it becomes a FAILED placeholder."""
    continue_after_failure: bool = False
    """After a FAILED placeholder, go on with later tasks instead of stopping the session."""
    journal_lines: int = Field(30, ge=0)
    """How many recent progress lines each fresh worker context sees."""
    ledger_entries: int = Field(5, ge=0)
    """How many of the task's previous verdicts the evaluator (and a retrying worker) sees."""


def env_name(field: str) -> str:
    return "TILTH_" + field.upper()


def load_settings(home: Path) -> Settings:
    values: dict[str, object] = {}
    config_file = home / "config.toml"
    if config_file.is_file():
        try:
            values.update(tomllib.loads(config_file.read_text()))
        except tomllib.TOMLDecodeError as exc:
            raise BadInput(f"{config_file}: not valid TOML ({exc}); fix it and retry") from None
    for field in Settings.model_fields:
        if env_name(field) in os.environ:
            values[field] = os.environ[env_name(field)]
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "?"
        source = env_name(field) if env_name(field) in os.environ else f"{config_file} key {field}"
        raise BadInput(f"{source}: {error['msg']}; fix the setting and retry") from None
