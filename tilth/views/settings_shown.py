"""The settings as `tilth config` shows them: each value (keys masked), where it came from and its scope."""

from __future__ import annotations

from typing import Callable

from tilth.core.config import PRESETS, SECRET_FIELDS, Settings
from tilth.core.faults import PAUSE_ENV, pause_point


def mask(secret: str | None) -> str:
    if not secret:
        return "(unset)"
    return f"{secret[:3]}...{secret[-4:]}" if len(secret) > 12 else "****"


def describe(settings: Settings, sources: dict[str, str], scope_of: Callable[[str], str] | None = None) -> list[str]:
    """`field = value  (source) [scope]` lines with keys masked, for `tilth config`."""
    lines = []
    for field in Settings.model_fields:
        scope = f" [{scope_of(field)}]" if scope_of else ""
        lines.append(f"{field} = {shown_value(settings, field)}  ({sources.get(field, 'default')}){scope}")
    panel = settings.evaluator_backends()
    judges = f"evaluators {' + '.join(panel)} ({settings.evaluator_policy} must accept)" if len(panel) > 1 \
        else f"evaluator {panel[0]}"
    lines.append(f"in force: worker {settings.worker_backend}, {judges}")
    if pause_point():
        lines.append(f"WARNING: {PAUSE_ENV}={pause_point()} is set (a test switch): a foreground run from "
                     "this shell pauses at that point until signalled; the supervisor never passes it on")
    return lines


def shown_value(settings: Settings, field: str) -> str:
    """A setting's value as `tilth config` shows it: keys masked, notification URLs not shown."""
    value = getattr(settings, field)
    if field in SECRET_FIELDS:
        return mask(value)
    if field == "notify":
        return f"{len(value)} URL(s), not shown (they carry tokens)" if value else "[]"
    if field in ("base_url", "evaluator_base_url") and value in PRESETS:
        return f"{value} -> {PRESETS[value]}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v.prompt}/{v.completion} per Mtok" for k, v in value.items()) or "{}"
    return repr(value) if isinstance(value, list) else str(value)
