"""What a model's tokens cost: `[prices.<model>]` in config.toml first, else the price library
(pydantic's genai-prices, its bundled data only: nothing is fetched at run time, its auto-update is
never started); and which configured models have no price at all.

Token counts follow the OpenAI convention: `prompt` includes the `cached` (read from the provider's
prompt cache) and `cache_write` tokens, each priced at its own rate; a config price without a
`cached_prompt` or `cache_write` rate charges those at the prompt rate. genai-prices is asked
only about a model not in `[prices]`, once per process, in a child process (`price_library.py`),
so its table never stays in a session's memory and the read-only commands never load it; the
child hands back the model's price sheet (tiers and time-of-day prices included) and each call is
priced here from its own usage, at the tier its prompt tokens fall in, as the library would.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, time
from typing import Any

import orjson

from tilth.agents import price_library
from tilth.agents.price_library import MILLION, sheet_here
from tilth.core.clock import utc_now
from tilth.core.config import PRESETS, Price, Settings
from tilth.core.errors import BadInput



@dataclass(frozen=True)
class Tokens:
    """One call's tokens as priced: prompt includes cached and cache_write."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    cache_write: int = 0


@dataclass(frozen=True)
class Rates:
    """USD per million tokens of each kind (and per call), and where they came from: `config`, or
    `genai-prices` with the provider and model it matched. `tiers`: (start, rates) for calls whose
    prompt tokens exceed start, every token of such a call at that tier's rates."""

    prompt: float
    completion: float
    cached_prompt: float
    cache_write: float
    source: str
    per_call: float = 0.0
    tiers: tuple[tuple[int, Rates], ...] = ()

    def at(self, prompt_tokens: int) -> Rates:
        """The rates a call of `prompt_tokens` (cached and cache-write ones included) is charged at."""
        return next((rates for start, rates in reversed(self.tiers) if prompt_tokens > start), self)

    def cost(self, tokens: Tokens) -> float:
        rates = self.at(tokens.prompt)
        cached = min(tokens.cached, tokens.prompt)
        written = min(tokens.cache_write, tokens.prompt - cached)
        fresh = tokens.prompt - cached - written
        return (fresh * rates.prompt + cached * rates.cached_prompt + written * rates.cache_write
                + tokens.completion * rates.completion) / MILLION + rates.per_call

    def describe(self) -> str:
        """One line: the rates, each tier's, and where they came from."""
        def four(r: Rates) -> str:
            extra = f", ${r.per_call:g} a call" if r.per_call else ""
            return (f"${r.prompt:g} prompt / ${r.cached_prompt:g} cached / ${r.cache_write:g} cache write / "
                    f"${r.completion:g} completion per million tokens{extra}")
        tiers = "".join(f"; above {start:,} prompt tokens {four(r)}" for start, r in self.tiers)
        return f"{four(self)}{tiers} ({self.source})"


@dataclass(frozen=True)
class Sheet:
    """genai-prices' prices for one model: each `Rates` with the UTC time of day it applies in
    (None: always), the first that applies winning (`price_library` explains the layout)."""

    prices: tuple[tuple[tuple[time, time] | None, Rates], ...]

    @classmethod
    def from_json(cls, sheet: dict[str, Any]) -> Sheet:
        source = f"genai-prices: {sheet['provider']} {sheet['model']}"

        def rates(values: list[float], tiers: list[tuple[int, list[float]]]) -> Rates:
            prompt, completion, cached, written, per_call = map(float, values[:5])
            return Rates(prompt, completion, cached, written, source, per_call,
                         tuple((int(start), rates(more, [])) for start, more in tiers))

        return cls(tuple((None if entry["window"] is None else
                          (time.fromisoformat(entry["window"][0]), time.fromisoformat(entry["window"][1])),
                          rates(entry["rates"], entry["tiers"])) for entry in sheet["prices"]))

    def at(self, moment: datetime | None = None) -> Rates:
        now = (moment or utc_now()).astimezone(UTC).time()
        for window, rates in self.prices:
            if window is None or _within(now, *window):
                return rates
        return self.prices[-1][1]


def _within(now: time, start: time, end: time) -> bool:
    return (start <= now or now < end) if end < start else start <= now < end


def rates_for(settings: Settings, model: str, base_url: str | None = None) -> Rates | None:
    """The model's rates now: `[prices]` overrides the library; None when neither knows it."""
    price: Price | None = settings.prices.get(model)
    if price is not None:
        return Rates(price.prompt, price.completion,
                     price.prompt if price.cached_prompt is None else price.cached_prompt,
                     price.prompt if price.cache_write is None else price.cache_write, "config.toml [prices]")
    key = (model, provider_url(base_url))
    if model and key not in _LIBRARY:
        look_up([key, *library_keys(settings)])  # one child for every model the session uses
    return library_rates(*key)


def library_keys(settings: Settings) -> list[tuple[str, str | None]]:
    """(model, provider URL) of each configured model `[prices]` does not price: what the library is asked."""
    return [(model, provider_url(url)) for model, url, _ in configured_models(settings) if model not in settings.prices]


def provider_url(base_url: str | None) -> str | None:
    """The endpoint as the library is told it (a preset's name becomes its URL)."""
    return PRESETS.get(base_url or "", base_url or "") or None


_LIBRARY: dict[tuple[str, str | None], Sheet | None] = {}
"""genai-prices' sheets so far in this process, by (model, provider URL)."""


def library_rates(model: str, base_url: str | None = None) -> Rates | None:
    """genai-prices' rates for the model now (`price_library.sheet_here` says how it is found)."""
    if not model:
        return None
    look_up([(model, base_url)])
    sheet = _LIBRARY[(model, base_url)]
    return None if sheet is None else sheet.at()


def look_up(keys: list[tuple[str, str | None]]) -> None:
    """Ask genai-prices once for every (model, provider URL) not asked yet, in a child process
    (`agents/price_library.py`: the library's table never stays in this one); when the child
    cannot answer, here."""
    todo = list(dict.fromkeys(key for key in keys if key[0] and key not in _LIBRARY))
    if not todo:
        return
    try:
        # -I: neither the current directory nor PYTHON* variables decide what this child imports; run
        # by path, so the child is this very file whichever tilth the interpreter has installed
        done = subprocess.run([sys.executable, "-I", price_library.__file__], input=orjson.dumps(todo),
                              capture_output=True, timeout=120, check=True, cwd="/")
        answers = orjson.loads(done.stdout)
        if not (isinstance(answers, list) and len(answers) == len(todo)):
            raise ValueError(f"{len(todo)} models asked, {done.stdout[:200]!r} answered")
        sheets = [None if answer is None else Sheet.from_json(answer) for answer in answers]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError, IndexError):
        sheets = [None if (found := sheet_here(model, url)) is None else Sheet.from_json(found) for model, url in todo]
    for key, sheet in zip(todo, sheets):
        _LIBRARY[key] = sheet


def configured_models(settings: Settings) -> list[tuple[str, str | None, str]]:
    """(model, endpoint, how to name it) of every model a session's agents will be charged for by
    tokens. Claude Code and aider report their own cost; a `command` agent reports its usage lines
    (with their `cost`, or a `model` priced here at run time)."""
    found: list[tuple[str, str | None, str]] = []
    roles = [("worker", settings.worker_backend)] + [("evaluator", name) for name in settings.evaluator_backends()]
    for role, backend in roles:
        if backend == "openai":
            url, _, model = settings.endpoint(role)
            if model:  # none set: `tilth start` asks for one first
                found.append((model, url, f"TILTH_{role.upper()}_MODEL"))
        elif backend == "codex":
            from tilth.agents.backends.presets import codex_model

            found.append((codex_model(settings) or "", None, "-m in TILTH_CODEX_ARGS"))
        elif backend == "copilot":
            from tilth.agents.backends.copilot_cli import copilot_model

            found.append((copilot_model(settings) or "", None, "--model in TILTH_COPILOT_ARGS or COPILOT_MODEL"))
        elif backend == "gemini":
            from tilth.agents.backends.gemini_cli import gemini_model

            found.append((gemini_model(settings) or "", None, "-m in TILTH_GEMINI_ARGS or GEMINI_MODEL"))
    first: dict[str, tuple[str, str | None, str]] = {}
    for entry in found:
        first.setdefault(entry[0], entry)
    return list(first.values())


def unpriced(settings: Settings) -> list[tuple[str, str]]:
    """(model, how it is named) of the configured models neither `[prices]` nor the library prices."""
    models = configured_models(settings)
    look_up(library_keys(settings))
    return [(model, named) for model, url, named in models if not model or rates_for(settings, model, url) is None]


def rate_lines(settings: Settings) -> list[str]:
    """`price: ...` per configured model: the rates in force now, each tier's, and where they came from."""
    lines = []
    for model, url, named in configured_models(settings):
        rates = rates_for(settings, model, url) if model else None
        if rates is not None:
            lines.append(f"price: model {model!r} ({named}): {rates.describe()}")
    return lines


def check_priced(settings: Settings) -> list[str]:
    """Before a session is created: with a spend cap every configured model must have a price
    (BadInput naming the first that has none and how to price it); without one, a line per
    unpriced model saying its spend is unknown."""
    missing = unpriced(settings)
    if missing and settings.max_spend_usd is not None:
        model, named = missing[0]
        shown = f"model {model!r} ({named})" if model else f"the model {named} would name"
        raise BadInput(f"max_spend_usd is set but {shown} has no price, so the cap could not count it: "
                       f"{how_to_price(model, named)}, or unset max_spend_usd; nothing was created")
    return [f"spend is unknown for model {model!r} ({named}): it has no price; {how_to_price(model, named)}"
            if model else f"spend is unknown for the model {named} would name: name it and price it"
            for model, named in missing]


def how_to_price(model: str, named: str) -> str:
    if not model:
        return f"name the model ({named}) and price it in config.toml"
    return f"add [prices.\"{model}\"] with prompt and completion (USD per million tokens) to config.toml"
