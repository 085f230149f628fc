"""What a plan will cost, forecast from the receipts of earlier sessions in this TILTH_HOME.

Every finished task (done or failed) of a session that ran on a model (not the scripted backend)
is a receipt: its models and backends (`models_key`), its criteria count and description size,
and what it cost over every attempt and run. A plan is forecast only from receipts of the same
models and backends: each of its tasks draws a past task's cost, a past task weighing more the
closer its criteria count and description size are to this one's, and each draw of the whole
plan adds what a past session spent outside its tasks (the final review). The range is the 5th
to 95th percentile of `DRAWS` such sums (a fixed seed: the same history gives the same range),
the median their middle. Fewer than `MIN_RECEIPTS` receipts of these models is too little
history, and the forecast says so instead of guessing.
"""

from __future__ import annotations

import math
import random
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilth.core.errors import BadInput
from tilth.store.home import all_session_ids, session_paths
from tilth.store.prd_peek import peek_plan
from tilth.store.prd_record import Task
from tilth.store.rollup import load_rollup
from tilth.store.session_peek import peek_session

MIN_RECEIPTS = 5
DRAWS = 4000
LOW, HIGH = 0.05, 0.95
FINISHED = ("done", "failed")


@dataclass(frozen=True)
class Receipt:
    """One finished task of an earlier session."""

    session: str
    key: str
    criteria: int
    size: int
    cost_usd: float


@dataclass(frozen=True)
class History:
    receipts: list[Receipt]
    overheads: dict[str, list[float]]
    """Per models key: what each finished session spent outside its tasks (its final review)."""


@dataclass(frozen=True)
class Forecast:
    key: str
    tasks: int
    receipts: int
    sessions: int
    low: float | None = None
    median: float | None = None
    high: float | None = None

    @property
    def known(self) -> bool:
        return self.median is not None

    def line(self) -> str:
        if not self.known:
            return (f"forecast: too little history to forecast this plan ({self.receipts} finished "
                    f"task{'' if self.receipts == 1 else 's'} with {self.key} in this TILTH_HOME; "
                    f"{MIN_RECEIPTS} needed)")
        return (f"forecast: ${self.low:.2f}–${self.high:.2f} (median ${self.median:.2f}) for {self.tasks} "
                f"task{'' if self.tasks == 1 else 's'} with {self.key}, from {self.receipts} past tasks in "
                f"{self.sessions} session{'' if self.sessions == 1 else 's'}")

    def data(self) -> dict[str, Any]:
        return {"models": self.key, "tasks": self.tasks, "receipts": self.receipts, "sessions": self.sessions,
                "low_usd": _cents(self.low), "median_usd": _cents(self.median), "high_usd": _cents(self.high)}


def _cents(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def models_key(view: dict[str, Any]) -> str:
    """`worker openai gpt-4o-mini, evaluator openai gpt-4o` from a session's recorded settings (or
    the current ones, `travel.session_view`): the models and backends a receipt is comparable under."""
    def model(role: str, backend: str) -> str:
        if backend == "openai":
            named = view.get("evaluator_model") if role == "evaluator" else None
            return str(named or view.get("worker_model") or "")
        if backend == "codex":
            argv = shlex.split(str(view.get("codex_args") or ""))
            flags = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in ("-m", "--model")]
            return flags[-1] if flags else ""
        return ""

    worker = str(view.get("worker_backend") or "openai")
    evaluators = [str(b) for b in view.get("evaluators") or []] or [str(view.get("evaluator_backend") or "openai")]
    parts = [("worker", worker), *(("evaluator", b) for b in evaluators)]
    return ", ".join(" ".join(p for p in (role, backend, model(role, backend)) if p) for role, backend in parts)


def shape(task: Task) -> tuple[int, int]:
    """(criteria count, description size): what makes two tasks comparable."""
    return len(task.acceptance_criteria), len(task.title) + len(task.description)


def history(home: Path, leave_out: set[str] | None = None) -> History:
    """Every receipt under `home` (sessions in `leave_out` left out)."""
    receipts: list[Receipt] = []
    overheads: dict[str, list[float]] = {}
    for sid in all_session_ids(home):
        if sid in (leave_out or set()):
            continue
        paths = session_paths(sid, home)
        try:
            record = peek_session(paths)
            plan = {t.id: t for t in peek_plan(paths.prd)}
        except (BadInput, OSError, ValueError):
            continue  # a damaged session: `tilth doctor` says why
        if record.backend.name == "scripted":
            continue
        key = models_key(record.settings)
        rollup = load_rollup(paths.events)
        mine = 0.0
        for tid, roll in rollup.tasks.items():
            mine += roll.cost_usd
            if roll.status in FINISHED and tid in plan:
                criteria, size = shape(plan[tid])
                receipts.append(Receipt(sid, key, criteria, size, roll.cost_usd))
        if rollup.state in FINISHED:
            overheads.setdefault(key, []).append(max(0.0, rollup.totals.cost_usd - mine))
    return History(receipts, overheads)


def forecast(past: History, key: str, tasks: list[Task]) -> Forecast:
    """The plan's cost under `key` (its unfinished tasks), or a Forecast that is not `known`."""
    todo = [t for t in tasks if t.status not in FINISHED]
    same = [r for r in past.receipts if r.key == key]
    sessions = len({r.session for r in same})
    if len(same) < MIN_RECEIPTS:
        return Forecast(key, len(todo), len(same), sessions)
    rng = random.Random(0)
    costs = [r.cost_usd for r in same]
    draws = [rng.choices(costs, weights=_weights(same, shape(t)), k=DRAWS) for t in todo]
    extra = past.overheads.get(key) or [0.0]
    totals = sorted(sum(column) + rng.choice(extra) for column in zip(*draws)) if draws else \
        sorted(rng.choice(extra) for _ in range(DRAWS))

    def pick(q: float) -> float:
        return totals[min(len(totals) - 1, int(q * len(totals)))]

    return Forecast(key, len(todo), len(same), sessions, pick(LOW), pick(0.5), pick(HIGH))


def _weights(receipts: list[Receipt], like: tuple[int, int]) -> list[float]:
    criteria, size = like
    return [1.0 / ((1 + abs(r.criteria - criteria)) * (1 + abs(math.log1p(r.size) - math.log1p(size))))
            for r in receipts]
