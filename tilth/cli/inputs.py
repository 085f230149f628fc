"""What a command's arguments name, resolved before anything is created: the repository (`--repo`,
default the one holding the current directory), the plan (`--prd`: a file, or a directory holding
prd.json), the `--check` commands (none blank) and a number of seconds. Each refusal is one BadInput line."""

from __future__ import annotations

from tilth.core.errors import BadInput

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: `tilth --help` imports this module and pays for nothing more
if TYPE_CHECKING:
    from pathlib import Path


def repository(given: str | None) -> Path:
    """`--repo` as given, else the work tree of the git repository holding the current directory."""
    from pathlib import Path

    if given:
        return Path(given).expanduser()
    from tilth.git.worktrees import open_source_repo

    here = Path.cwd()
    try:
        repo = open_source_repo(here)
    except BadInput as exc:
        if "is not a git repository" not in str(exc):
            raise
        raise BadInput(f"no --repo given and {here} is not inside a git repository; pass --repo PATH "
                       "(the git repository to work on) or run tilth inside it") from None
    return Path(repo.workdir)


def plan_file(given: Path) -> Path:
    """`--prd DIR` means DIR/prd.json when DIR holds one (as `tilth prep` writes it); anything else as given."""
    if given.is_dir() and (given / "prd.json").is_file():
        return given / "prd.json"
    return given


def checks(given: list[str]) -> list[str]:
    """The `--check` commands; a blank one is refused (it would run nothing and count as a pass)."""
    for number, command in enumerate(given, 1):
        if not command.strip():
            raise BadInput(f"--check #{number} is empty; give the command to run (e.g. --check \"pytest -q\") "
                           "or leave the option out")
    return given


def seconds(given: float | None, option: str, least: float = 0.0) -> float | None:
    """A `--timeout`-like option: absent, or a finite number of seconds of at least `least` (nan and inf refused)."""
    import math

    if given is not None and not (math.isfinite(given) and given >= least):
        raise BadInput(f"{option} {given:g}: give a finite number of seconds, at least {least:g}")
    return given
