"""Every setting's scope, declared once (`SCOPES`, `scope_of`), and what follows from it: what
`tilth start` records in session.json, what every later run puts in force over its own settings,
what a dispatched session's worker decides itself, and the keys a session needs, by name only.

A new setting must be listed in exactly one of the scope tuples below; `tests/test_settings_scopes.py`
fails until it is, and docs/settings.md (generated from the settings, `core/settings_doc.py`) shows it.
"""

from __future__ import annotations

import os

from pydantic import ValidationError

from tilth.core.config import SECRET_FIELDS, Settings, env_name
from tilth.core.errors import BadInput
from tilth.core.settings_load import LEGACY_CONTINUE, legacy_stop

SCOPES = {
    "session": "recorded in session.json by `tilth start` (and `tilth resume`); every run of the session "
               "uses the recorded value, on any machine",
    "machine": "recorded at start, but the machine that runs the session decides: a dispatched session's "
               "worker puts its own value in force (what confines the agent, which programs run, where keys go)",
    "process": "each process reads its own (environment, config.toml); never recorded with a session",
    "secret": "never written anywhere; a session records only which ones it uses, by name",
    "supervisor": "the supervisor's own, read when it starts; never recorded with a session",
}
"""What each scope means, as `tilth config` and docs/settings.md say it."""

SESSION_FIELDS = (
    "fallback_after_s",
    "max_iterations_per_task", "stop_on_failure", "journal_lines", "journal_chars", "ledger_entries", "ledger_chars",
    "context_files", "conventions_chars", "plan_chars", "kb_index_chars", "seed_chars", "human_notes_chars",
    "answers_chars", "diff_chars", "summary_recent_tasks", "summary_learnings", "summary_table_rows",
    "self_improvement", "worker_model", "evaluator_model", "prep_model", "stream", "worker_tool_choice",
    "evaluator_tool_choice", "worker_max_steps", "evaluator_max_steps", "verdict_retries", "max_tokens",
    "request_timeout", "max_retries", "retry_base_delay", "retry_max_delay", "evaluator_policy", "agent_timeout_s",
    "usage_limit_backoff_s", "usage_limit_backoff_max_s", "script_runs_keep", "tool_timeout", "checks",
    "max_spend_usd", "max_wall_clock_s", "max_evaluator_calls_per_task", "prices", "max_attempts_per_task_total",
    "stall_after", "max_tokens_total", "final_review", "final_review_tasks", "verify_timeout_s", "protected_paths",
    "parallel_tasks",
)
"""What the task list needs to run the same way anywhere: models, budgets, caps, checks, prices."""

SUPERVISOR_FIELDS = ("max_parallel_sessions", "stop_grace_s", "auto_resume_attempts", "auto_resume_backoff_s",
                     "auto_resume_backoff_max_s", "requeue_forgotten", "follow_pr")
"""Settings of the supervisor itself."""

LOCAL_FIELDS = ("notify", "dispatch", "pr_reviewers", "follow_poll_s", "pr_max_followups")
"""Settings each process takes from its own environment and config.toml (scope `process`), never
recorded with a session: notification URLs carry tokens; the broker and remote are each machine's."""

MACHINE_FIELDS = ("sandbox", "agent_network", "agent_host_ports", "base_url", "evaluator_base_url", "preflight", "worker_backend",
                  "evaluator_backend", "evaluators", "worker_command", "evaluator_command", "claude_bin", "codex_bin",
                  "aider_bin", "claude_args", "codex_args", "aider_args", "agent_pass_env", "secret_patterns",
                  "sandbox_expose", "agent_max_processes", "max_agent_lanes", "lane_min_free_mb",
                  "check_slots",
                  "copilot_bin", "copilot_args", "gemini_bin", "gemini_args",
                  "qwen_bin", "qwen_args", "opencode_bin", "opencode_args",
                  "worker_fallback", "evaluator_fallback")
"""Recorded with a session, but a dispatched session's worker puts its own in force: what confines
the agent, which programs run and which endpoints get the keys are the worker machine's to decide,
never the word of whoever wrote the session's files (`machine_view`)."""


def scope_of(field: str) -> str:
    """The one scope of a setting (a setting listed in no scope raises: declare it above)."""
    for scope, fields in (("session", SESSION_FIELDS), ("machine", MACHINE_FIELDS), ("process", LOCAL_FIELDS),
                          ("secret", SECRET_FIELDS), ("supervisor", SUPERVISOR_FIELDS)):
        if field in fields:
            return scope
    raise KeyError(f"setting {field!r} has no scope: list it in one of the scope tuples of core/travel.py")


def machine_view(settings: Settings) -> dict[str, object]:
    """This machine's own values of `MACHINE_FIELDS`, to put over a dispatched session's record."""
    return settings.model_dump(mode="json", include=set(MACHINE_FIELDS))


def travelling_fields() -> list[str]:
    return [f for f in Settings.model_fields if f not in SECRET_FIELDS and f not in SUPERVISOR_FIELDS
            and f not in LOCAL_FIELDS]


def session_view(settings: Settings) -> dict[str, object]:
    """What a session records at `start` (and `resume`) and every later run uses; never a key."""
    return settings.model_dump(mode="json", include=set(travelling_fields()))


AGENT_KEY_VARIABLES = {
    "claude": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
    "codex": ("OPENAI_API_KEY", "CODEX_API_KEY"),
    "aider": ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"),
    "copilot": ("COPILOT_PROVIDER_API_KEY", "COPILOT_PROVIDER_BEARER_TOKEN", "COPILOT_GITHUB_TOKEN"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "qwen": ("OPENAI_API_KEY",),
    "opencode": ("OPENAI_API_KEY",),
}
"""The credentials each CLI agent reads from its environment (a login on disk needs none)."""


def agent_key_variables(settings: Settings) -> list[str]:
    """The credential variables of the CLI agents in use, plus `agent_pass_env` (for `command`)."""
    backends = {settings.worker_backend, *settings.evaluator_backends(), settings.worker_fallback,
                settings.evaluator_fallback}
    names = {name for backend in backends if backend is not None for name in AGENT_KEY_VARIABLES.get(backend, ())}
    return sorted(names | set(settings.agent_pass_env))


def keys_in_use(settings: Settings) -> list[str]:
    """The keys a session started with, by name only, so a runner without them can say so: key
    settings (`api_key`) and the CLI agents' credential variables (`ANTHROPIC_API_KEY`) set here."""
    return [field for field in SECRET_FIELDS if getattr(settings, field)] + \
        [name for name in agent_key_variables(settings) if os.environ.get(name)]


def key_variable(key: str) -> str:
    """The environment variable that gives a recorded key: `TILTH_API_KEY` for `api_key`."""
    return env_name(key) if key in SECRET_FIELDS else key


def with_session_view(settings: Settings, recorded: dict[str, object]) -> Settings:
    """This process's settings (its keys, the supervisor's own fields) with the session's
    recorded ones in force; a recorded value this version no longer knows is ignored."""
    fields = set(travelling_fields())
    if LEGACY_CONTINUE in recorded and "stop_on_failure" not in recorded:  # a session started before the change
        recorded = {**recorded, "stop_on_failure": legacy_stop(recorded[LEGACY_CONTINUE], "the session's settings")}
    merged = {**settings.model_dump(), **{k: v for k, v in recorded.items() if k in fields}}
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise BadInput(f"the session's recorded settings are invalid ({error['loc'][0] if error['loc'] else '?'}: "
                       f"{error['msg']}); fix session.json or resume from a shell with valid settings") from None
