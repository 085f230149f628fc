"""`sessions/<id>/baseline.json`: the session's checks and verify commands as they ran once on the
base commit, before the first task. Written once (atomically) and never rewritten, so a resumed
session compares against the same baseline. A check or verify that failed here is held against it
(`held_against`): the failing tests it names here too are pre-existing, never this session's doing."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field, ValidationError

from tilth.core.clock import iso
from tilth.core.errors import BadInput
from tilth.store.jsonio import write_atomic
from tilth.store.ledger import CommandRun, VerifyResult

BASELINE = "baseline.json"


class BaselineCheck(BaseModel):
    command: str
    exit_code: int | None
    """None when the command timed out."""
    failing_ids: list[str] | None = None
    """The failing test ids read from its output (`agents/failing_tests.py`); None when it names none."""
    run_id: str | None = None
    """Its script artifact under the session's `runs/`, when one was written."""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


class Baseline(BaseModel):
    commit: str
    at: str = Field(default_factory=iso)
    checks: list[BaselineCheck] = Field(default_factory=list)
    verifies: dict[str, list[VerifyResult]] = Field(default_factory=dict)
    """Task id -> its criteria's verify commands on the base commit."""
    checks_s: float | None = None
    """The checks' wall time on the base commit, run alone (nothing else of the session ran then): what
    parallel tasks' checks are held against for the time they lost to each other (`run/lane_limits.Cores`)."""

    def check(self, command: str) -> BaselineCheck | None:
        return next((c for c in self.checks if c.command == command), None)

    def verify(self, task_id: str, criterion: str, command: str) -> VerifyResult | None:
        return next((v for v in self.verifies.get(task_id, []) if (v.criterion, v.command) == (criterion, command)),
                    None)

    @property
    def failing_before(self) -> list[BaselineCheck]:
        return [c for c in self.checks if not c.passed]


Run = TypeVar("Run", bound=CommandRun)


def held_against(run: Run, before: BaselineCheck | CommandRun | None) -> Run:
    """The run, marked with how it failed on the base commit: `failed_at_base`, and `failing_before`,
    the failing tests both runs name (None when either names none: nothing to compare)."""
    if run.passed or before is None or before.passed:
        return run
    shared = None if run.failing_ids is None or before.failing_ids is None else \
        sorted(set(run.failing_ids) & set(before.failing_ids))
    return run.model_copy(update={"failed_at_base": True, "failing_before": shared})


def baseline_path(session_dir: Path) -> Path:
    return session_dir / BASELINE


def load_baseline(session_dir: Path) -> Baseline | None:
    """The recorded baseline; None when none was recorded; BadInput when the file is damaged."""
    path = baseline_path(session_dir)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    try:
        return Baseline.model_validate_json(data)
    except ValidationError as exc:
        raise BadInput(f"{path} is damaged ({str(exc).splitlines()[0]}); move it aside to record a new baseline "
                       "(only while no task has run)") from None


def save_baseline(session_dir: Path, baseline: Baseline) -> None:
    write_atomic(baseline_path(session_dir), baseline.model_dump_json(indent=2).encode() + b"\n")
