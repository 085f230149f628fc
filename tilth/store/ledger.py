"""ledger/<task_id>.jsonl: one entry per evaluator call, the evaluator's memory of a task."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from tilth.core.clock import iso_ms
from tilth.store.jsonio import append_jsonl, read_jsonl


def _without_defaults(data: dict, **defaults: object) -> dict:
    """Ledger lines carry the panel and CLI fields only when they say something."""
    return {k: v for k, v in data.items() if k not in defaults or v != defaults[k]}


class CriterionEvidence(BaseModel):
    criterion: str
    evidence: str


class Case(BaseModel):
    """The worker's argument that the task is done, criterion by criterion."""

    summary: str
    criteria: list[CriterionEvidence] = Field(default_factory=list)
    uncertainties: list[str] = Field(default_factory=list)
    built_from_output: bool = False
    """A CLI agent printed no case: this one was made by tilth from the end of its output."""

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict:
        return _without_defaults(handler(self), built_from_output=False)


class Verdict(BaseModel):
    """The evaluator's decision; only `accept` lets a task become a commit."""

    verdict: Literal["accept", "reject"]
    category: str = ""
    """Why, in one word: acceptance_gap, weak_test, half_finished, scope_creep, spec_violation, no_case, ..."""
    concern: str = ""
    evidence: list[str] = Field(default_factory=list)
    next_step: str = ""
    evaluator: str | None = None
    """Which evaluator of a panel said this (`claude`, `openai`, ...); None for a lone evaluator."""
    panel: list[Verdict] = Field(default_factory=list)
    """The decision of an evaluator panel carries every member's own verdict."""

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict:
        return _without_defaults(handler(self), evaluator=None, panel=[])

    @property
    def accepted(self) -> bool:
        return self.verdict == "accept"


class LedgerEntry(BaseModel):
    ts: str = Field(default_factory=iso_ms)
    iter: int
    diff_summary: str
    case: Case | None
    """None when the worker ended its turn without making a case."""
    verdict: Verdict


def ledger_path(ledger_dir: Path, task_id: str) -> Path:
    return ledger_dir / f"{task_id}.jsonl"


def append_entry(ledger_dir: Path, task_id: str, entry: LedgerEntry) -> None:
    append_jsonl(ledger_path(ledger_dir, task_id), entry.model_dump(mode="json"))


def read_entries(ledger_dir: Path, task_id: str) -> list[LedgerEntry]:
    entries = []
    for row in read_jsonl(ledger_path(ledger_dir, task_id)):
        try:
            entries.append(LedgerEntry.model_validate(row))
        except ValidationError:
            continue
    return entries
