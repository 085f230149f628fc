"""Every setting has one declared scope, `tilth config` shows it, docs/settings.md is generated from
the settings, and `tilth config <id>` / `tilth resume --reload-settings` show and replace what a
session recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import task
from tilth.core.config import Settings
from tilth.core.settings_doc import reference
from tilth.core.travel import SCOPES, machine_view, scope_of, session_view

ROOT = Path(__file__).resolve().parent.parent


def test_every_setting_has_exactly_one_scope():
    from tilth.core import travel
    from tilth.core.config import SECRET_FIELDS

    groups = [travel.SESSION_FIELDS, travel.MACHINE_FIELDS, travel.LOCAL_FIELDS, SECRET_FIELDS,
              travel.SUPERVISOR_FIELDS]
    for field in Settings.model_fields:
        assert sum(field in group for group in groups) == 1, f"{field}: declare its scope once in core/travel.py"
        assert scope_of(field) in SCOPES
    listed = {f for group in groups for f in group}
    assert listed <= set(Settings.model_fields), f"scopes name settings that do not exist: {listed - set(Settings.model_fields)}"


def test_what_a_session_records_is_its_session_and_machine_settings_never_a_key_or_a_process_one():
    recorded = session_view(Settings(api_key="sk-secret-value", notify=["json://x"]))
    assert {scope_of(f) for f in recorded} == {"session", "machine"}
    assert "api_key" not in recorded and "notify" not in recorded and "max_parallel_sessions" not in recorded
    assert {scope_of(f) for f in machine_view(Settings())} == {"machine"}


def test_docs_settings_md_is_generated_from_the_settings():
    text = (ROOT / "docs" / "settings.md").read_text()
    assert text == reference(), "docs/settings.md is stale: python -m tilth.core.settings_doc > docs/settings.md"
    assert "| `max_spend_usd` | `TILTH_MAX_SPEND_USD` |" in text and "| machine |" in text


@pytest.mark.slow
def test_config_shows_scopes_and_a_sessions_recorded_settings(sandbox):
    shown = sandbox.tilth("config", env={"TILTH_MAX_SPEND_USD": "3.5"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "max_spend_usd = 3.5  (env TILTH_MAX_SPEND_USD) [session]" in lines
    assert "sandbox = auto  (default) [machine]" in lines and "max_parallel_sessions = 2  (default) [supervisor]" in lines
    assert any(line.startswith("api_key = ") and line.endswith("[secret]") for line in lines)

    assert sandbox.start("s1", [task("T-1")], {}, env={"TILTH_JOURNAL_LINES": "7"}).returncode == 0
    recorded = sandbox.tilth("config", "s1", env={"TILTH_JOURNAL_LINES": "9"})
    assert recorded.returncode == 0, recorded.stderr
    assert "journal_lines = 7  [session]  (now 9)" in recorded.stdout.splitlines()
    assert "1 differ from the current configuration (journal_lines)" in recorded.stdout
    same = sandbox.tilth("config", "s1", env={"TILTH_JOURNAL_LINES": "7"})
    assert "all match the current configuration" in same.stdout


@pytest.mark.slow
def test_resume_reload_settings_takes_the_current_configuration(sandbox):
    scenario = {"tasks": {"T-1": [{"verdict": {"verdict": "reject", "category": "acceptance_gap", "concern": "x",
                                               "next_step": "y"}}]}}
    env = {"TILTH_JOURNAL_LINES": "7", "TILTH_MAX_ITERATIONS_PER_TASK": "1"}
    assert sandbox.start("s1", [task("T-1")], scenario, env=env).returncode == 1
    record = sandbox.session_dir("s1") / "session.json"
    assert json.loads(record.read_text())["settings"]["journal_lines"] == 7
    (sandbox.home / "config.toml").write_text("journal_lines = 11\n")
    kept = sandbox.tilth("resume", "s1", "--foreground", env={"TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    assert json.loads(record.read_text())["settings"]["journal_lines"] == 11, kept.stderr  # config.toml sets it
    (sandbox.home / "config.toml").unlink()
    plain = sandbox.tilth("resume", "s1", "--foreground", env={"TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    assert json.loads(record.read_text())["settings"]["journal_lines"] == 11, "a default never replaces a recorded value"
    reloaded = sandbox.tilth("resume", "s1", "--foreground", "--reload-settings",
                             env={"TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    assert json.loads(record.read_text())["settings"]["journal_lines"] == 30, (plain.stderr, reloaded.stderr)
    assert "journal_lines" in reloaded.stderr


def test_a_resume_from_a_shell_without_the_setting_runs_with_the_recorded_value(sandbox):
    reject = {"verdict": {"verdict": "reject", "category": "acceptance_gap", "concern": "x", "next_step": "y"}}
    scenario = {"tasks": {"T-1": [reject, reject, reject, {"write": {"a.txt": "a\n"}}]}}
    first = sandbox.start("s1", [task("T-1")], scenario, env={"TILTH_MAX_ITERATIONS_PER_TASK": "1"})
    assert first.returncode == 1 and len(sandbox.ledger("s1", "T-1")) == 1, first.stdout + first.stderr
    again = sandbox.tilth("resume", "s1", "--foreground")  # the default here would be 5 attempts
    assert again.returncode == 1, again.stdout + again.stderr
    assert len(sandbox.ledger("s1", "T-1")) == 2, "one attempt a run, as the session recorded"
