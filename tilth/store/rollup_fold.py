"""What summary.json holds and how one event changes it: `fold(rollup, event)`, pure, no I/O.

The roll-up is the facts `tilth status` shows (state, current task, per-task status, verdicts,
totals, running time, caps), so it answers without re-reading the journal; `store/rollup.py`
folds the log through `fold`, saves the result and reads it back. No pydantic here: the types are
stdlib dataclasses, which `rollup.read_saved` checks field by field. A field missing from a saved
file takes its default (so a field added later reads from an older file as its default; one whose
default could be wrong for an older file needs VERSION raised).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tilth.store.calls import Counted, Totals, is_dollars

VERSION = 7
CONCERN_CHARS = 500
OUTSIDE_RUN = {"session_created", "session_queued", "session_launched", "session_crashed", "session_stopped", "acted",
               "session_unpaused", "doctor_repaired", "doctor_crashed"}
"""Written by `tilth start`, `tilth stop`, a person's action (`acted`), `tilth doctor --fix` or the supervisor, never by
a runner: they do not extend a run (a crash noticed an hour later did not run for that hour, nor did a run paused by a
usage limit run while it waited). `views/tally.running_seconds` too."""
STATES = {"session_created": "created", "session_queued": "queued", "session_started": "running",
          "session_crashed": "crashed", "session_stopped": "stopped", "session_unpaused": "queued",
          "doctor_crashed": "crashed"}


@dataclass
class Waiting:
    """A model call or a CLI agent run in flight (or a retry's wait), as its start event said."""

    on: str
    """`model`, `retry` (waiting out the backoff before attempt `attempt`) or `agent`."""
    role: str
    name: str
    """The model, or the agent (`claude`, `codex`, ...)."""
    since: str
    attempt: int = 1
    iteration: int | None = None


WAIT_ENDS = {"session_started", "session_end", "session_crashed", "session_stopped", "task_started", "task_done",
             "task_failed", "task_parked", "question_parked", "task_requeued"}
"""Events after which nothing the journal said was in flight still is."""


@dataclass
class TaskRoll(Totals):
    """A task's facts; its tokens and cost are `Totals` of its model calls."""

    status: str = "pending"
    """As events tell it: in_progress, done, failed, requeued, or a status set by reconciliation."""
    iteration: int | None = None
    attempts: int | None = None
    """Attempts made: the iteration of the last verdict, or of the last worker turn that made its case
    (an attempt a cap or a stop cut off before its verdict was still made)."""
    verdict: str | None = None
    category: str | None = None
    concern: str | None = None
    """Whitespace-flattened, at most CONCERN_CHARS."""
    question: str | None = None
    """The question the last verdict parked the task with (`task_parked`), as flattened as the concern."""
    sha: str | None = None
    evaluator_calls: int = 0
    wall_s: float = 0.0
    """Running time while it was the current task, spans closed so far."""


@dataclass
class Clock:
    """What `views/tally.running_seconds` needs, so elapsed time is known without the log."""

    closed_s: float = 0.0
    open_since: str | None = None
    last_ts: str | None = None
    ran: bool = False

    def seconds(self, now: datetime | None = None) -> float | None:
        total = self.closed_s
        if self.open_since is not None:
            try:
                total += ((now or _ts(self.last_ts)) - _ts(self.open_since)).total_seconds()
            except ValueError:
                pass
        return max(0.0, total) if self.ran else None


@dataclass
class Lanes:
    """Parallel tasks as the journal tells them, every run's (a killed one's too): lanes started, landings
    refused by a conflict (`merge_conflict`) and the redos they and failed merged checks caused (`verdict`
    events with `redo`)."""

    started: int = 0
    conflicts: int = 0
    redos: int = 0


@dataclass
class Rollup:
    version: int = VERSION
    log_offset: int = 0
    log_fingerprint: str = ""
    events: int = 0
    state: str | None = None
    current_task: str | None = None
    iteration: int | None = None
    task_since: str | None = None
    """When the current task's running span began; None once it ended."""
    tasks: dict[str, TaskRoll] = field(default_factory=dict)
    totals: Totals = field(default_factory=Totals)
    clock: Clock = field(default_factory=Clock)
    caps: dict[str, float | None] = field(default_factory=dict)
    """The limits in force, as the last run recorded them (`session_started` data.caps)."""
    caps_reached: dict[str, dict[str, Any]] = field(default_factory=dict)
    waiting: dict[str, Waiting] = field(default_factory=dict)
    """What each task (by id; `""` for none) waits on right now: a model call, a retry, a CLI agent run."""
    stopped_by: str | None = None
    """Who asked this run's last stop (`cli`, `dashboard`), when its event said; None after a new start."""
    auto_resume_attempts: int | None = None
    """The most auto-resumes in a row the supervisor allows, as the latest `session_crashed` or
    `session_auto_resumed` said (`tilth status`: `auto-resume 2/3`); None before any said it."""
    lanes: Lanes = field(default_factory=lambda: Lanes())
    backend_costs: dict[str, float] = field(default_factory=dict)
    """Dollars by the backend that made each model call (`model_call` data.backend), for a session a
    fallback played in."""
    fallbacks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """By role, the last time its fallback took over (`agent_fallback`: primary, fallback, reason, since,
    until) and whether its primary took the turns again since (`back`)."""


def _ts(ts: str | None) -> datetime:
    return datetime.fromisoformat(str(ts).replace("Z", "+00:00"))


def _span(since: str | None, until: str | None) -> float:
    try:
        return (_ts(until) - _ts(since)).total_seconds() if since and until else 0.0
    except ValueError:  # a damaged timestamp adds nothing rather than hiding the session
        return 0.0


def _close_task(r: Rollup, until: str | None) -> None:
    if r.task_since is not None and r.current_task in r.tasks:
        r.tasks[r.current_task].wall_s += _span(r.task_since, until)
    r.task_since = None


def _run_clock(r: Rollup, kind: str, ts: str) -> None:
    """The same steps as `running_seconds`, one event at a time."""
    c = r.clock
    if kind == "session_started":
        _close_task(r, c.last_ts)
        if c.open_since is not None:
            c.closed_s += _span(c.open_since, c.last_ts)
        c.open_since, c.ran = ts, True
    elif kind == "session_end" and c.open_since is not None:
        _close_task(r, ts)
        c.closed_s += _span(c.open_since, ts)
        c.open_since = None
    c.last_ts = ts


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else str(value)


def fold(r: Rollup, event: dict[str, Any]) -> Rollup:
    """Add one event (already checked with `events.is_event`) to the roll-up; no I/O."""
    kind, ts, data = event["type"], event["ts"], event["data"]
    task = event["task"] if isinstance(event["task"], str) and event["task"] else None
    it = event["iter"] if type(event["iter"]) is int else None
    r.events += 1
    if kind not in OUTSIDE_RUN:
        _run_clock(r, kind, ts)
    if kind in STATES:
        r.state = STATES[kind]
    t = None
    if task is not None:
        t = r.tasks.get(task)
        if t is None:
            t = r.tasks[task] = TaskRoll()
        if it and (t.iteration is None or it > t.iteration):
            t.iteration = it
    if kind == "task_started":
        _close_task(r, ts)
        r.current_task, r.iteration, r.task_since = task, None, ts
        if t is not None:
            t.status = "in_progress"
    if task is not None and task == r.current_task and it:
        r.iteration = it
    if kind == "model_call":
        counted = Counted.from_event(data)
        r.totals.count(counted)
        if isinstance(data.get("backend"), str) and data["backend"]:
            r.backend_costs[data["backend"]] = r.backend_costs.get(data["backend"], 0.0) + counted.cost_usd
        if t is not None:
            t.count(counted)
            t.evaluator_calls += str(data.get("role") or "") == "evaluator"
    elif t is not None and kind == "verdict":
        concern = data.get("concern")
        t.attempts, t.verdict, t.category = it, _text(data.get("verdict", "")), _text(data.get("category"))
        t.concern = " ".join(concern.split())[:CONCERN_CHARS] if isinstance(concern, str) else None
        t.question = None
    elif t is not None and kind == "worker_done" and it and data.get("made_case") is True:
        t.attempts = max(t.attempts or 0, it)
    elif t is not None and kind in ("task_done", "task_failed", "accepted_committed"):
        t.status, t.sha = ("failed" if kind == "task_failed" else "done"), _text(data.get("sha"))
        if task == r.current_task:
            _close_task(r, ts)
    elif t is not None and kind in ("task_parked", "question_parked"):
        t.status, t.sha = "parked", _text(data.get("sha"))
        question = data.get("question")
        t.question = " ".join(question.split())[:CONCERN_CHARS] if isinstance(question, str) and question.strip() \
            else t.question
        if task == r.current_task:
            _close_task(r, ts)
    elif t is not None and kind == "task_answered":
        t.status = "pending"
    elif t is not None and kind in ("commit", "failed_commit", "parked_commit", "progress_restored"):
        t.sha = _text(data.get("sha"))
    elif t is not None and kind in ("task_requeued", "placeholder_unwound"):  # the latter: journals before placeholders stayed on top
        t.status = "requeued"
    elif kind == "status_reconciled" and isinstance(data.get("changes"), dict):
        for tid, status in data["changes"].items():
            r.tasks.setdefault(tid, TaskRoll()).status = str(status)
    elif kind == "session_started":
        r.caps_reached, r.stopped_by = {}, None
        if isinstance(data.get("caps"), dict):
            r.caps = {k: v for k, v in data["caps"].items() if v is None or is_dollars(v)}
    elif kind == "agent_fallback" and isinstance(data.get("role"), str):
        r.fallbacks[data["role"]] = {"primary": _text(data.get("primary")), "fallback": _text(data.get("fallback")),
                                     "reason": _text(data.get("reason")), "since": ts, "until": _text(data.get("until")),
                                     "back": False}
    elif kind == "agent_primary_again" and isinstance(data.get("role"), str) and data["role"] in r.fallbacks:
        r.fallbacks[data["role"]]["back"] = True
    elif kind == "cap_reached" and isinstance(data.get("cap"), str):
        r.caps_reached[data["cap"]] = {"limit": data.get("limit"), "value": data.get("value")}
    elif kind == "session_end" and isinstance(data.get("state"), str):
        r.state = data["state"]
    if (kind == "session_stopped" or (kind == "acted" and data.get("action") == "stop")) \
            and isinstance(data.get("by"), str) and data["by"]:
        r.stopped_by = data["by"]
    if kind == "lane_started":
        r.lanes.started += 1
    elif kind == "merge_conflict":
        r.lanes.conflicts += 1
    elif kind == "verdict" and type(data.get("redo")) is int and data["redo"] > 0:
        r.lanes.redos += 1
    track_waiting(r.waiting, kind, ts, task, it, data)
    if kind in ("session_crashed", "session_auto_resumed") and type(data.get("attempts")) is int:
        r.auto_resume_attempts = data["attempts"]
    return r


def track_waiting(waiting: dict[str, Waiting], kind: str, ts: str, task: str | None, it: int | None,
                  data: dict[str, Any]) -> None:
    """`waiting` (by task id) as a call, a retry's backoff or an agent run starts and ends."""
    key, attempt = task or "", data.get("attempt")
    attempt = attempt if type(attempt) is int and attempt > 0 else 1
    role = _text(data.get("role")) or ""
    if kind == "model_waiting":
        waiting[key] = Waiting("model", role, _text(data.get("model")) or "", ts, attempt, it)
    elif kind == "model_attempt":
        wait_s = data.get("wait_s")
        if data.get("outcome") != "ok" and isinstance(wait_s, (int, float)) and wait_s > 0:
            waiting[key] = Waiting("retry", role, _text(data.get("model")) or "", ts, attempt + 1, it)
        else:
            waiting.pop(key, None)
    elif kind == "agent_started":
        waiting[key] = Waiting("agent", role, _text(data.get("agent")) or "", ts, 1, it)
    elif kind == "agent_run":
        waiting.pop(key, None)
    elif kind in WAIT_ENDS:
        if kind.startswith("session_"):
            waiting.clear()
        else:
            waiting.pop(key, None)
