"""`tilth calibrate`: how far the configured evaluator can be trusted. It judges every fixture of
`cli/calibration_fixtures.py` twice, the correct change (iteration 1) and the subtly wrong one
(iteration 2), each in a scratch repository, and the run reports its false-accept rate (wrong
changes accepted), false-reject rate (correct changes refused), cost and time per verdict.

A `needs_human` verdict counts as not accepting; an evaluator failure is counted apart and left
out of the rates. The scripted backend decides by fixture id and iteration like any task."""

from __future__ import annotations

import tempfile
import time
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

from tilth.agents.accounting import Meter
from tilth.agents.backends.chat import ProviderError
from tilth.agents.confinement import UNCONFINED
from tilth.agents.backends.registry import make_backend
from tilth.agents.protocol import AgentFailed, Backend, EvaluationJob, UsageLimited
from tilth.cli.calibration_fixtures import FIXTURES
from tilth.core.config import Settings
from tilth.git.gitops import describe_diff, scratch_repo, stage_all, staged_diff, write_files
from tilth.run.context import case_block, task_block
from tilth.store.events import EventLog
from tilth.store.ledger import Case, CriterionEvidence
from tilth.store.prd import Task
from tilth.store.session import BackendChoice
from tilth.views.figures import money

VARIANTS = ("correct", "wrong")
ASK = ("Decide whether the change meets every acceptance criterion of the task. Check the diff itself: "
       "the worker's case may claim more than it did.")


@dataclass
class Judged:
    fixture: str
    flaw: str
    verdicts: dict[str, str] = field(default_factory=dict)
    """variant -> accept | reject | needs_human | error: <why>"""


@dataclass
class Calibration:
    backend: str
    judged: list[Judged]
    cost_usd: float
    seconds: float
    model_calls: int

    def _count(self, variant: str, accepted: bool) -> tuple[int, int]:
        said = [j.verdicts[variant] for j in self.judged if not j.verdicts[variant].startswith("error")]
        return sum((v == "accept") == accepted for v in said), len(said)

    @property
    def false_accepts(self) -> tuple[int, int]:
        return self._count("wrong", True)

    @property
    def false_rejects(self) -> tuple[int, int]:
        return self._count("correct", False)

    @property
    def verdicts(self) -> int:
        return sum(not v.startswith("error") for j in self.judged for v in j.verdicts.values())

    @property
    def errors(self) -> int:
        return sum(v.startswith("error") for j in self.judged for v in j.verdicts.values())


def calibrate(choice: BackendChoice, settings: Settings, only: list[str] | None = None) -> Calibration:
    meter = Meter()
    backend = make_backend(choice, settings, meter)
    fixtures = [f for f in FIXTURES if not only or f["id"] in only]
    judged, began = [], time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tilth-calibrate-") as scratch:
        events = EventLog(Path(scratch) / "events.jsonl")
        for fixture in fixtures:
            one = Judged(fixture["id"], fixture["flaw"])
            for iteration, variant in enumerate(VARIANTS, 1):
                one.verdicts[variant] = _judge(backend, fixture, variant, iteration, Path(scratch), events)
            judged.append(one)
    return Calibration(backend.label, judged, meter.cost_usd, time.monotonic() - began, meter.model_calls)


def _judge(backend: Backend, fixture: dict[str, Any], variant: str, iteration: int, scratch: Path, events: EventLog) -> str:
    worktree = scratch / f"{fixture['id']}-{variant}"
    repo = scratch_repo(worktree, fixture["files"])
    write_files(worktree, fixture[variant])
    stage_all(repo)
    diff = staged_diff(repo)
    task = Task(id=fixture["id"], title=fixture["title"], description=fixture["description"],
                acceptance_criteria=fixture["criteria"])
    case = Case(summary=f"Done: {fixture['title']}.",
                criteria=[CriterionEvidence(criterion=c, evidence="see the diff") for c in fixture["criteria"]])
    prompt = "\n\n".join([ASK, task_block(task), case_block(case), "The diff:\n" + (diff.patch or "(none)")]) + "\n"
    job = EvaluationJob("calibrate", task, iteration, worktree, prompt, case, diff.patch or "", describe_diff(diff),
                        [], events, [], UNCONFINED)  # fixture files in a scratch directory, nothing of a session
    try:
        return backend.evaluator.evaluate(job).verdict
    except (ProviderError, AgentFailed, UsageLimited) as exc:
        return f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def _rate(pair: tuple[int, int]) -> str:
    n, of = pair
    return f"{n}/{of} ({100 * n / of:.1f}%)" if of else "0/0 (-)"


def render(c: Calibration) -> str:
    rows = [("fixture", "flaw", "correct change", "wrong change")]
    rows += [(j.fixture, j.flaw, j.verdicts["correct"], j.verdicts["wrong"]) for j in c.judged]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"calibrate: {c.backend}", *("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip()
                                          for r in rows)]
    per = c.verdicts or 1
    lines += [f"False accepts: {_rate(c.false_accepts)} (a subtly wrong change accepted)",
              f"False rejects: {_rate(c.false_rejects)} (a correct change refused)",
              f"Per verdict:   {money(c.cost_usd / per)}, {c.seconds / per:.2f} s "
              f"({c.verdicts} verdicts, {c.model_calls} model calls, {money(c.cost_usd)} in all)"]
    if c.errors:
        lines.append(f"Errors:        {c.errors} verdict(s) not given (left out of the rates)")
    return "\n".join(lines) + "\n"


def as_json(c: Calibration) -> dict[str, Any]:
    fa, fr = c.false_accepts, c.false_rejects
    return {"backend": c.backend, "false_accepts": fa[0], "wrong_judged": fa[1], "false_rejects": fr[0],
            "correct_judged": fr[1], "verdicts": c.verdicts, "errors": c.errors, "cost_usd": c.cost_usd,
            "seconds": c.seconds, "model_calls": c.model_calls,
            "fixtures": [{"id": j.fixture, "flaw": j.flaw, **j.verdicts} for j in c.judged]}
