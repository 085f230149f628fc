"""`tilth --help`, `--version` and `tilth status` on a home without sessions start cheap:
building the argparse tree imports no library a command uses only when it runs (pydantic,
pygit2, the openai SDK, rich, watchfiles, apscheduler), and an empty `status` never loads the
session models. A heavy import creeping back into a command module's top fails here; the
wall time itself is measured by `python -m bench.cold_start`, not asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pydantic", "pydantic_core", "pygit2", "openai", "httpx", "rich", "watchfiles", "apscheduler",
         "tilth.store.session", "tilth.core.config")
"""Never imported by the commands below."""

PARSER_ONLY = HEAVY + ("orjson", "importlib.metadata")
"""Also not imported when the command is answered by argparse alone (`status` may read
daemon.lock with orjson; `--version` asks importlib.metadata)."""


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    env["TILTH_HOME"] = str(home)
    return env


def imported(home: Path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `python -X importtime -m tilth ARGS` (the real entry point) and return the modules it imported."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "tilth", *args], env=env_for(home),
                            capture_output=True, text=True, timeout=60)
    modules = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
               if line.startswith("import time:") and "|" in line}
    assert modules, result.stderr  # -X importtime said nothing: the check would see nothing either
    return result, modules


def heavy(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(f"{n}.") for n in names))


@pytest.mark.parametrize("args", [["--help"], ["logs", "-h"], ["daemon", "-h"], ["start", "-h"]],
                         ids=lambda a: " ".join(a))
def test_help_imports_no_command_library(tmp_path: Path, args: list[str]) -> None:
    result, modules = imported(tmp_path / "home", *args)
    assert result.returncode == 0, result.stderr
    assert "usage: tilth" in result.stdout
    assert not heavy(modules, PARSER_ONLY), f"`tilth {' '.join(args)}` imports {heavy(modules, PARSER_ONLY)}"


def test_version_imports_no_command_library(tmp_path: Path) -> None:
    result, modules = imported(tmp_path / "home", "--version")
    assert result.returncode == 0 and result.stdout.startswith("tilth "), result.stderr
    assert not heavy(modules, HEAVY), heavy(modules, HEAVY)


@pytest.mark.parametrize("layout", ["no home", "no sessions dir", "empty sessions dir", "only a creation"])
@pytest.mark.parametrize("json", [False, True], ids=["table", "json"])
def test_status_without_sessions_skips_the_session_models(tmp_path: Path, layout: str, json: bool) -> None:
    home = tmp_path / "home"
    if layout != "no home":
        home.mkdir()
    if layout in ("empty sessions dir", "only a creation"):
        (home / "sessions").mkdir()
    if layout == "only a creation":  # a dot-dir under sessions/ is never a session
        (home / "sessions" / ".creating-s1").mkdir()
    result, modules = imported(home, "status", *(["--json"] if json else []))
    assert result.returncode == 0, result.stderr
    assert not heavy(modules, HEAVY), heavy(modules, HEAVY)

    # The short cut says exactly what the full view says about no sessions.
    from tilth.cli.main import supervisor_line
    from tilth.views.status import render_table

    expected = "[]" if json else render_table([], supervisor_line(home, []))
    assert result.stdout == f"{expected}\n"


def test_the_check_sees_a_heavy_import(tmp_path: Path) -> None:
    """`tilth config` needs the settings model: the same parse must find pydantic there."""
    result, modules = imported(tmp_path / "home", "config")
    assert result.returncode == 0, result.stderr
    assert {"pydantic", "tilth.core.config"} <= set(heavy(modules, HEAVY))
