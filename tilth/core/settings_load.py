"""Settings read in: the defaults, then $TILTH_HOME/config.toml, then TILTH_* env vars, each value's source kept.

The one setting renamed so far (`continue_after_failure`, now `stop_on_failure`) is translated here,
for config.toml, the environment and (through `legacy_stop`) the settings an older session recorded.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from tilth.core.config import Settings, env_name
from tilth.core.errors import BadInput


def _env_value(field: str, raw: str) -> object:
    if field in ("checks", "secret_patterns"):
        return [line for line in raw.splitlines() if line.strip()]
    if field in ("context_files", "agent_pass_env", "sandbox_expose", "evaluators", "notify", "protected_paths",
                 "agent_host_ports"):
        return [name.strip() for name in raw.split(",") if name.strip()]
    return raw


def load_settings_with_sources(home: Path) -> tuple[Settings, dict[str, str]]:
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    config_file = home / "config.toml"
    if config_file.exists() and not config_file.is_file():
        raise BadInput(f"{config_file} is not a file; remove it or make it a TOML file of settings, and retry")
    if config_file.is_file():
        try:
            values.update(tomllib.loads(config_file.read_text(encoding="utf-8")))
        except OSError as exc:
            raise BadInput(f"{config_file}: cannot be read ({exc.strerror or exc}); fix its permissions and retry") \
                from None
        except UnicodeDecodeError:
            raise BadInput(f"{config_file}: not UTF-8 text; save it as UTF-8 and retry") from None
        except tomllib.TOMLDecodeError as exc:
            raise BadInput(f"{config_file}: not valid TOML ({' '.join(str(exc).split())}); fix it and retry") from None
        sources.update({key: str(config_file) for key in values})
    _translate_legacy(values, sources, str(config_file))
    for field in Settings.model_fields:
        if env_name(field) in os.environ:
            values[field] = _env_value(field, os.environ[env_name(field)])
            sources[field] = f"env {env_name(field)}"
    if env_name(LEGACY_CONTINUE) in os.environ and env_name("stop_on_failure") not in os.environ:
        values[LEGACY_CONTINUE] = os.environ[env_name(LEGACY_CONTINUE)]
        _translate_legacy(values, sources, f"env {env_name(LEGACY_CONTINUE)}")
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "?"
        source = sources.get(field, f"{config_file}")
        shown = ".".join(str(part) for part in error["loc"]) if len(error["loc"]) > 1 else field
        shown = shown if shown.isprintable() else repr(shown)
        message = " ".join(str(error["msg"]).split()).removeprefix("Value error, ")
        raise BadInput(f"{source}: {shown}: {message}; fix the setting and retry") from None
    return settings, sources


LEGACY_CONTINUE = "continue_after_failure"
"""The setting `stop_on_failure` replaced (its opposite), still read from config.toml, the
environment and the settings recorded with an older session."""


def legacy_stop(value: object, source: str) -> bool:
    try:
        return not TypeAdapter(bool).validate_python(value)
    except ValidationError:
        raise BadInput(f"{source}: {LEGACY_CONTINUE}: not a boolean ({value!r}); fix the setting (better: replace "
                       "it with stop_on_failure) and retry") from None


def _translate_legacy(values: dict[str, object], sources: dict[str, str], source: str) -> None:
    """`continue_after_failure = X` becomes `stop_on_failure = not X`, unless stop_on_failure is set there too."""
    if LEGACY_CONTINUE not in values:
        return
    legacy = values.pop(LEGACY_CONTINUE)
    sources.pop(LEGACY_CONTINUE, None)
    from_env = source.startswith("env ")
    if "stop_on_failure" not in values or from_env:
        values["stop_on_failure"] = legacy_stop(legacy, source)
        sources["stop_on_failure"] = f"{source}={legacy}: deprecated, use {env_name('stop_on_failure')}" if from_env \
            else f"{source}: {LEGACY_CONTINUE} = {legacy}, deprecated: use stop_on_failure"


def load_settings(home: Path) -> Settings:
    return load_settings_with_sources(home)[0]
