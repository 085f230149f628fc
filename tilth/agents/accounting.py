"""What model calls cost, and the caps that stop a session before it costs too much.

Totals are rebuilt from events.jsonl when a run starts (so spend is bounded across resumes)
and kept incrementally after that. Spend and token caps are checked after every model call (and
against a CLI agent's usage as it streams), the others between iterations and between tasks; a
tripped cap stops the session cleanly with state `stopped`, resumable once raised.

A provider's usage report is not trusted blindly (`Usage`, a pydantic model):

- A token count must be a non-negative integer; an integral float (`12.0`) is accepted.
  A negative number, a fraction, NaN/inf, a bool, a string, a dict or null is unusable: the
  count is dropped (None), never counted as a number, and named in `problems`
  (`prompt_tokens=-5 is negative`, `prompt_tokens='12' is not a number`). A missing or null
  `usage` is `usage missing`; a missing prompt or completion count is `<name> missing`.
- Usage is *known* only when prompt and completion counts are both usable. A missing or
  unusable total is then their sum; a usable total below their sum is a problem and the sum
  is counted. A usable total without usable parts is kept, but the usage stays unknown.
- Tokens counted for a call are the larger of its usable total and the sum of its usable
  parts: a lower bound when the usage is unknown, never less than what was validly reported.
- A provider-reported `cost` (OpenRouter's extra usage field) must be a finite number >= 0;
  anything else is dropped and named (`cost=-5.0 is negative`), and the price table is used
  as if no cost had been reported. A bad cost alone does not make the token usage unknown.
- Cost: the provider's figure if usable; else the price table when both counts are known;
  else (unknown usage, a price set) a floor: the usable counts at their prices plus the rest
  of a usable total at the cheaper missing rate, with `cost_source` `unknown`. No price set:
  0 with `cost_source` `unknown`. So an unusable value can only leave spend too low by the
  part nobody reported, never lower it below what was validly reported.

The `model_call` event says all this (`usage_known`, `usage_problem`, `cost_source`), and
`Meter.from_events` re-reads events the same way, old ones and damaged ones included.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ModelWrapValidatorHandler, \
    ValidationError, model_validator

from tilth.agents.pricing import Tokens, rates_for
from tilth.core.config import Settings
from tilth.core.errors import StopRequested
from tilth.store.calls import Counted, Totals, model_calls
from tilth.store.events import EventLog, document
from tilth.store.rollup_fold import Rollup

document(
    {
        "model_call": ("one completed model request; data: role, model, prompt_tokens (input, cached and "
                       "cache-write ones included), cached_tokens (read from the provider's prompt cache), "
                       "cache_write_tokens (written to it), completion_tokens, "
                       "total_tokens (each a count, or null when the provider's figure was missing or unusable), "
                       "usage_known (false when the prompt or completion count was missing or unusable: the "
                       "session's tokens and cost are then lower bounds), usage_problem (what was dropped and why, "
                       "e.g. 'usage missing', 'prompt_tokens=-5 is negative', 'cost=-1.0 is negative'; null when "
                       "nothing was), latency_ms, cost_usd, cost_source (provider|price_table|unknown; price_table: "
                       "[prices] in config.toml, else genai-prices at the tier the call's prompt tokens fall in, cached and "
                       "cache-write tokens at their own rates; "
                       "with unknown usage and a price set, cost_usd is a floor priced from the usable counts), "
                       "finish_reason, backend (the backend that made it: `openai` for tilth's own loop, else the "
                       "CLI agent's name)",
                       "backend role model prompt_tokens cached_tokens cache_write_tokens completion_tokens total_tokens "
                       "usage_known usage_problem latency_ms cost_usd cost_source finish_reason"),
        "cap_reached": ("a spend, token, wall-clock or evaluator-call cap stopped the session; data: cap, limit, value",
                        "cap limit value"),
    }
)

COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")
CENT_FRACTION = 1e-9
"""Spend within this of the cap has reached it: ten $0.10 calls add up to 0.9999999999999999 in floats."""
CACHE_COUNTS = ("cached_tokens", "cache_write_tokens")
"""Parts of prompt_tokens, when the provider says; a missing or unusable one is 0 (priced at the prompt rate)."""


class CapReached(StopRequested):
    """A configured cap tripped; the session stops as it would on SIGTERM."""


def _integral_float(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


TokenCount = Annotated[int, BeforeValidator(_integral_float), Field(strict=True, ge=0)]
Dollars = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _reason(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "is not a number"
    if value < 0:
        return "is negative"
    if not math.isfinite(value):
        return "is not finite"
    if isinstance(value, float):
        return "is not a whole number"
    return "is not a number"


class Usage(BaseModel):
    """One call's usage as far as the provider's report can be trusted: whatever does not
    validate is None here and named in `problems` (counts) or `cost_problem`. Validating a
    provider's report never raises."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: TokenCount | None = None
    completion_tokens: TokenCount | None = None
    total_tokens: TokenCount | None = None
    cached_tokens: TokenCount | None = None
    cache_write_tokens: TokenCount | None = None
    cost: Dollars | None = None
    """USD the provider reported for the call, if it did (OpenRouter's `usage.cost`)."""
    problems: tuple[str, ...] = ()
    cost_problem: str | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _distrust(cls, data: Any, handler: ModelWrapValidatorHandler[Usage]) -> Usage:
        if isinstance(data, Usage):
            return data
        if not isinstance(data, Mapping):
            problem = "usage missing" if data is None else f"usage={_show(data)} is not an object"
            return handler({"problems": (problem,)})
        given = {k: data[k] for k in (*COUNTS, *CACHE_COUNTS, "cost") if data.get(k) is not None}
        dropped: dict[str, str] = {}
        try:
            trial = handler(given)
        except ValidationError as exc:
            bad = {error["loc"][0] for error in exc.errors() if error["loc"] and error["loc"][0] in given}
            dropped = {name: f"{name}={_show(given[name])} {_reason(given.pop(name))}" for name in sorted(bad)}
            trial = handler(given)
        prompt, completion, total = (getattr(trial, name) for name in COUNTS)
        problems = [dropped.get(name) or f"{name} missing" for name in COUNTS[:2] if getattr(trial, name) is None]
        problems += [dropped[name] for name in ("total_tokens", *CACHE_COUNTS) if name in dropped]
        if prompt is not None and completion is not None:
            if total is not None and total < prompt + completion:
                problems.append(f"total_tokens={total} is less than prompt+completion={prompt + completion}")
                total = None
            if total is None:
                total = prompt + completion
        cached, written = trial.cached_tokens, trial.cache_write_tokens
        if prompt is not None and (cached or 0) + (written or 0) > prompt:
            problems.append(f"cached_tokens+cache_write_tokens={(cached or 0) + (written or 0)} is more than "
                            f"prompt_tokens={prompt}")
            cached = written = None
        return handler({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total,
                        "cached_tokens": cached, "cache_write_tokens": written,
                        "cost": trial.cost, "problems": tuple(problems), "cost_problem": dropped.get("cost")})

    @property
    def known(self) -> bool:
        """Prompt and completion counts are both usable (so the total is too)."""
        return self.prompt_tokens is not None and self.completion_tokens is not None

    @property
    def tokens(self) -> int:
        """Tokens to count: exact when known, otherwise a lower bound."""
        return max(self.total_tokens or 0, (self.prompt_tokens or 0) + (self.completion_tokens or 0))

    @property
    def problem(self) -> str | None:
        parts = [*self.problems, *([self.cost_problem] if self.cost_problem else [])]
        return "; ".join(parts) or None


def call_cost(settings: Settings, model: str, usage: Usage, base_url: str | None = None) -> tuple[float, str]:
    """(USD, cost_source); see the module docstring for the floor used when usage is unknown."""
    if usage.cost is not None:
        return usage.cost, "provider"
    rates = rates_for(settings, model, base_url)
    if rates is None:
        return 0.0, "unknown"
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    priced = rates.cost(Tokens(prompt or 0, completion or 0, usage.cached_tokens or 0, usage.cache_write_tokens or 0))
    if usage.known:
        return priced, "price_table"
    rest = max(0, (usage.total_tokens or 0) - (prompt or 0) - (completion or 0))
    tier = rates.at(prompt or 0)
    cheapest = min(rate for rate, n in ((tier.prompt, prompt), (tier.completion, completion)) if n is None)
    return priced + rest * cheapest / 1_000_000, "unknown"


@dataclass
class Meter(Totals):
    """Running totals for one session, as `store/calls.Totals` counts them, and what the caps
    need besides: evaluator calls per task and the limits a running call is held to."""

    evaluator_calls: Counter[str] = field(default_factory=Counter)
    after_record: Callable[[str | None], None] | None = field(default=None, repr=False, compare=False)
    """Called with the task id after every recorded call (`Caps` checks spend and tokens there)."""
    spend_limit: float | None = None
    token_limit: int | None = None
    wall_deadline: float | None = None
    """`time.monotonic()` at which the session's running time reaches its wall-clock cap (a CLI agent
    run is killed there)."""
    check_caps: Callable[[str | None], None] | None = field(default=None, repr=False, compare=False)
    """Every cap (`Caps.check`), for a CLI agent run the wall clock stopped."""
    halted: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)
    """Why the session must stop at once (`StopFlag.urgent`: its dispatched worker lost it), else None:
    asked before and after every model call and on a CLI agent's every streamed line."""

    def stop_if_halted(self) -> None:
        if self.halted is not None and (why := self.halted()) is not None:
            raise StopRequested(why)

    def crossing(self, cost_usd: float, tokens: int) -> str | None:
        """The cap (`max_spend_usd`, `max_tokens_total`) that a running call's `cost_usd` and `tokens`,
        not yet recorded, take the session to; None while under every cap."""
        if self.spend_limit is not None and self.cost_usd + cost_usd >= self.spend_limit - CENT_FRACTION:
            return "max_spend_usd"
        if self.token_limit is not None and self.tokens + tokens >= self.token_limit:
            return "max_tokens_total"
        return None

    @classmethod
    def from_rollup(cls, rollup: Rollup) -> Meter:
        """The same totals as `from_events` over the log the roll-up folded."""
        return cls(**dataclasses.asdict(rollup.totals),
                   evaluator_calls=Counter({k: r.evaluator_calls for k, r in rollup.tasks.items() if r.evaluator_calls}))

    @classmethod
    def from_events(cls, events: list[dict[str, Any]]) -> Meter:
        meter = cls()
        for event, counted in model_calls(events):
            data = event["data"] if isinstance(event.get("data"), Mapping) else {}
            meter.add(str(data.get("role") or ""), event.get("task"), counted)
        return meter

    def add(self, role: str, task_id: str | None, counted: Counted) -> None:
        self.count(counted)
        if role == "evaluator" and task_id:
            self.evaluator_calls[task_id] += 1

    def record(self, events: EventLog, role: str, model: str, task_id: str | None, iteration: int, usage: Usage,
               cost: float, cost_source: str, latency_ms: int, finish_reason: str | None,
               backend: str | None = None) -> None:
        data = dict(role=role, model=model, prompt_tokens=usage.prompt_tokens, cached_tokens=usage.cached_tokens,
                    cache_write_tokens=usage.cache_write_tokens, completion_tokens=usage.completion_tokens,
                    total_tokens=usage.total_tokens, usage_known=usage.known, usage_problem=usage.problem,
                    latency_ms=latency_ms, cost_usd=cost, cost_source=cost_source, finish_reason=finish_reason)
        if backend is not None:
            data["backend"] = backend
        with events.run_lock:  # parallel tasks' lanes record into one meter (`RunLock` 2)
            self.add(role, task_id, Counted.from_event(data))  # counted as the journal line will be read back
        events.emit("model_call", task_id, iteration, **data)
        if self.after_record is not None:
            self.after_record(task_id)
        self.stop_if_halted()


class Caps:
    """The session's bounds. Spend and tokens are checked after every recorded model call (a CLI
    agent's running usage as it streams: `Meter.crossing`), wall clock (the session's running time
    over all its runs) and evaluator calls between attempts and tasks, and the wall clock also ends
    a CLI agent run at the cap; a tripped cap raises `CapReached` (the session stops, resumable)."""

    NAMES = ("max_spend_usd", "max_tokens_total", "max_wall_clock_s", "max_evaluator_calls_per_task")

    @classmethod
    def limits(cls, settings: Settings) -> dict[str, float | None]:
        """The limits in force, recorded with `session_started` so `tilth status` can show them."""
        return {name: getattr(settings, name) for name in cls.NAMES}

    @classmethod
    def bounds_line(cls, settings: Settings) -> str:
        """The bounds in force, in one line for `tilth start`."""
        s = settings
        parts = [f"spend ${s.max_spend_usd:g}" if s.max_spend_usd is not None else "no spend cap",
                 *([f"{s.max_tokens_total:,} tokens"] if s.max_tokens_total is not None else []),
                 *([f"{s.max_wall_clock_s:g} s wall clock"] if s.max_wall_clock_s is not None else []),
                 *([f"{s.max_evaluator_calls_per_task} evaluator calls a task"]
                   if s.max_evaluator_calls_per_task is not None else []),
                 f"{s.max_iterations_per_task} attempts a task a run, {s.max_attempts_per_task_total} in all"]
        unbounded = "" if s.max_spend_usd is not None or s.max_tokens_total is not None else \
            " (nothing bounds what this night spends: set TILTH_MAX_SPEND_USD or TILTH_MAX_TOKENS_TOTAL)"
        return "bounds: " + ", ".join(parts) + unbounded

    def __init__(self, settings: Settings, meter: Meter, events: EventLog, ran_before_s: float = 0.0):
        """`ran_before_s`: the session's running time in its earlier runs (the roll-up's clock), which
        the wall-clock cap counts too."""
        self.settings = settings
        self.meter = meter
        self.events = events
        self.started = time.monotonic() - ran_before_s
        self.told: set[str] = set()
        meter.spend_limit, meter.token_limit = settings.max_spend_usd, settings.max_tokens_total
        meter.after_record, meter.check_caps = self.check_usage, self.check
        if settings.max_wall_clock_s is not None:
            meter.wall_deadline = self.started + settings.max_wall_clock_s

    @staticmethod
    def session_cap_reached(s: Settings, m: Meter, ran_s: float | None) -> tuple[str, float, float] | None:
        """The first of the session's own caps (spend, tokens, and with `ran_s` its running time over all its
        runs) that its totals have reached: (cap, limit, value); None while under each. What `check` trips on,
        and what `tilth follow` asks before it gives a pull request's follow-up work to an agent."""
        if s.max_spend_usd is not None and m.cost_usd >= s.max_spend_usd - CENT_FRACTION:
            return "max_spend_usd", s.max_spend_usd, round(m.cost_usd, 6)
        if s.max_tokens_total is not None and m.tokens >= s.max_tokens_total:
            return "max_tokens_total", s.max_tokens_total, m.tokens
        if ran_s is not None and s.max_wall_clock_s is not None and ran_s >= s.max_wall_clock_s:
            return "max_wall_clock_s", s.max_wall_clock_s, round(ran_s, 1)
        return None

    def check_usage(self, task_id: str | None = None) -> None:
        """Spend and tokens only: after every model call."""
        if reached := self.session_cap_reached(self.settings, self.meter, None):
            self._trip(task_id, *reached)

    def check(self, task_id: str | None = None) -> None:
        s = self.settings
        if reached := self.session_cap_reached(s, self.meter, time.monotonic() - self.started):
            self._trip(task_id, *reached)
        if (s.max_evaluator_calls_per_task is not None and task_id
                and self.meter.evaluator_calls[task_id] >= s.max_evaluator_calls_per_task):
            self._trip(task_id, "max_evaluator_calls_per_task", s.max_evaluator_calls_per_task,
                       self.meter.evaluator_calls[task_id])

    def _trip(self, task_id: str | None, cap: str, limit: float, value: float) -> None:
        if cap not in self.told:
            self.told.add(cap)
            self.events.emit("cap_reached", task_id, cap=cap, limit=limit, value=value)
        raise CapReached(f"{cap} reached ({value} >= {limit}); raise it (TILTH_{cap.upper()}) and resume")
