"""What proved a task or explains its end, read from the session's files: each acceptance criterion
with what its verify command did on the last attempt (`CriterionProof`, `proofs`), the checks that already
failed on the base commit (`failing_before`), the ledger's attempts and rejections (`verdicts`), the checks of
each attempt (`last_checks`; by command: `check_runs`), each rejection in words (`rejected`), a failure's
recorded reason (`failure_reasons`) and who asked a stop (`stopped_by`). `views/tally.py` puts them together per task."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilth.agents.failing_tests import how_it_failed
from tilth.core.errors import BadInput
from tilth.store.baseline import Baseline, load_baseline
from tilth.store.home import SessionPaths
from tilth.store.ledger import Verdict, VerifyResult, read_entries
from tilth.store.prd import Criterion
from tilth.store.progress import read_progress


@dataclass(frozen=True)
class CriterionProof:
    """One acceptance criterion and what proved it on the task's last attempt."""

    text: str
    command: str | None
    """Its verify command; None when it rests on the evaluator's judgement alone."""
    exit_code: int | None = None
    ran: bool = False
    """The command ran on the last attempt (False: not yet, or that attempt was refused before it)."""
    passed_at_base: bool = False
    """It also exited 0 on the base commit, before any task: its pass proves nothing this session did."""
    failed: str = ""
    """How it failed, its failing tests named and held against the base commit (`failing_tests.how_it_failed`)."""

    @property
    def mark(self) -> str:
        if self.command is None:
            return "·"
        return ("✓" if self.exit_code == 0 else "✗") if self.ran else "?"

    @property
    def status(self) -> str:
        if self.command is None:
            return "no command: the evaluator's judgement"
        if not self.ran:
            return f"`{self.command}` not run on the last attempt"
        return f"`{self.command}` " + (self.failed or ("timed out" if self.exit_code is None
                                                       else f"exit {self.exit_code}")) + (
            " (it exited 0 on the base commit too: it proves nothing new)" if self.passed_at_base else "")


@dataclass(frozen=True)
class CheckShown:
    """One check on a task's last attempt, as the report and the PR description name it."""

    command: str
    exit_code: int | None
    failed_before: bool = False
    """It failed on the base commit too (`baseline.json`): not blamed on the task."""

    @property
    def said(self) -> str:
        status = "timed out" if self.exit_code is None else f"exit {self.exit_code}"
        mark = "✓" if self.exit_code == 0 else "✗"
        return f"{mark} `{self.command}` {status}" + (
            " (it failed on the base commit too: not blamed)" if self.failed_before and self.exit_code != 0 else "")


SHOWN_REJECTIONS = 5
"""Rejections named per task (the last ones; the ledger has every one)."""
CONCERN_CHARS = 300


def rejected(paths: SessionPaths, task_id: str) -> tuple[str, ...]:
    """`attempt 1: verify_failed: <concern>` for each rejected attempt (the last `SHOWN_REJECTIONS`,
    after a count of the earlier ones), concerns cut at `CONCERN_CHARS`."""
    said = []
    for entry in read_entries(paths.ledger_dir, task_id):
        verdict = entry.verdict
        if verdict.accepted or verdict.verdict == "needs_human":
            continue
        concern = " ".join(verdict.concern.split())
        concern = concern if len(concern) <= CONCERN_CHARS else concern[:CONCERN_CHARS - 3] + "..."
        said.append(f"attempt {entry.iter}: {verdict.category or 'unspecified'}: {concern or '(no concern given)'}")
    earlier = len(said) - SHOWN_REJECTIONS
    return tuple(([f"{earlier} earlier rejection{'s' if earlier > 1 else ''} (the ledger has them)"]
                  if earlier > 0 else []) + said[-SHOWN_REJECTIONS:])


def check_runs(events: list[dict[str, Any]], baseline: Baseline | None) -> dict[tuple[Any, Any], tuple[CheckShown, ...]]:
    """Each check of the last checks run of each (task, attempt), by command."""
    failing = {c.command for c in baseline.failing_before} if baseline is not None else set()
    last = {}
    for event in events:
        if event["type"] == "checks_run":
            last[(event.get("task"), event.get("iter"))] = tuple(
                CheckShown(str(r.get("command")), r.get("exit_code"), r.get("command") in failing)
                for r in event["data"].get("results", []) if isinstance(r, dict))
    return last


def failure_reasons(paths: SessionPaths) -> dict[str, str]:
    return {line.task: line.outcome.removeprefix("failed:") for line in read_progress(paths.progress)
            if line.outcome.startswith("failed:")}


def verdicts(paths: SessionPaths, task_id: str) -> tuple[int, Verdict | None, tuple[str, ...], list[VerifyResult]]:
    """Attempts, the last verdict, the category of each rejection, the last attempt's verifies."""
    entries = read_entries(paths.ledger_dir, task_id)
    if not entries:
        return 0, None, (), []
    rejected = tuple(e.verdict.category if e.verdict.category not in ("", "none") else "unspecified"
                     for e in entries if not e.verdict.accepted and e.verdict.verdict != "needs_human")
    return len(entries), entries[-1].verdict, rejected, entries[-1].verifies


def stop_event(event: dict[str, Any]) -> bool:
    """An event a stop writes, with `by` (`cli`, `dashboard`) when it knows who asked: the `acted`
    event of a person's stop (written before the runner is signalled), `session_stopped`, `session_end`."""
    data = event.get("data") or {}
    return event["type"] in ("session_stopped", "session_end") or (event["type"] == "acted"
                                                                   and data.get("action") == "stop")


def stopped_by(events: list[dict[str, Any]]) -> str | None:
    """Who asked the last stop (`cli`, `dashboard`), when the stop's event says."""
    for event in reversed(events):
        if event["type"] == "session_started":
            return None  # a stop before this run's start is not why it ended
        by = (event.get("data") or {}).get("by") if stop_event(event) else None
        if isinstance(by, str) and by:
            return by
    return None


def proofs(criteria: list[Criterion], verifies: list[VerifyResult],
            at_base: list[VerifyResult]) -> tuple[CriterionProof, ...]:
    ran = {(v.criterion, v.command): v for v in verifies}
    passed_before = {(v.criterion, v.command) for v in at_base if v.passed}
    return tuple(CriterionProof(c.text, c.verify, ran[key].exit_code if (key := (c.text, c.verify)) in ran else None,
                                key in ran, key in passed_before,
                                how_it_failed(ran[key]) if key in ran and not ran[key].passed else "")
                 for c in criteria)


def read_baseline(paths: SessionPaths) -> Baseline | None:
    try:
        return load_baseline(paths.dir)
    except BadInput:
        return None


def failing_before(baseline: Baseline | None) -> tuple[str, ...]:
    if baseline is None:
        return ()
    return tuple(f"`{c.command}` ({'timed out' if c.exit_code is None else f'exit {c.exit_code}'}"
                 + (f": {', '.join(c.failing_ids[:5])}" + (", ..." if len(c.failing_ids) > 5 else "")
                    if c.failing_ids else "") + f" at {baseline.commit[:7]})" for c in baseline.failing_before)


def last_checks(events: list[dict[str, Any]]) -> dict[tuple[Any, Any], tuple[int, int]]:
    """(passed, failed) of the last checks run of each (task, attempt)."""
    last = {}
    for event in events:
        if event["type"] == "checks_run":
            codes = [r.get("exit_code") for r in event["data"].get("results", [])]
            last[(event.get("task"), event.get("iter"))] = (sum(code == 0 for code in codes),
                                                             sum(code != 0 for code in codes))
    return last
