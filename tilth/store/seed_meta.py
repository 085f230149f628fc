"""seed-meta.json: what the `tilth prep` interview left beside the plan it wrote.

`prep` writes it next to prd.json; `tilth start` copies it into the session dir at creation,
and each worker prompt then shows its curated slice (TL;DR, scope notes, blockers, open
questions; `run/context.py`). The rest (model, times, tokens, goal, repository) is the
interview's bookkeeping, an audit trail no agent sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from tilth.core.errors import BadInput
from tilth.store.jsonio import load_json, write_atomic

FILE_NAME = "seed-meta.json"
MAX_BYTES = 1_000_000


def _lines(value: object) -> object:
    """A list of strings; one string (a model's habit) becomes a list of one, blanks are dropped."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        return [item.strip() for item in value if not isinstance(item, str) or item.strip()]
    return value


Lines = Annotated[list[str], BeforeValidator(_lines)]


class SeedMeta(BaseModel):
    """The interview's record; unknown keys are kept (a later prep may add bookkeeping)."""

    model_config = ConfigDict(extra="allow")

    interviewer_model: str
    """The model that ran the interview."""
    started_at: str
    """UTC ISO time the interview began."""
    ended_at: str
    """UTC ISO time the plan was submitted."""
    tokens: int = Field(ge=0)
    """Tokens the interview's model calls used (a lower bound when `tokens_known` is false)."""
    tokens_known: bool = True
    """Every call reported a usable token count."""
    tldr: str = ""
    """The plan in a few sentences."""
    open_questions: Lines = Field(default_factory=list)
    """Questions left unanswered: asked without an answer, or raised by the model."""
    blockers: Lines = Field(default_factory=list)
    """What may stop the work (missing access, decisions only a person can make)."""
    scope_notes: Lines = Field(default_factory=list)
    """What is in and out of scope, and assumptions made."""
    goal: str = ""
    """The goal `tilth prep` was given."""
    repo: str = ""
    """The repository interviewed (its working tree, read-only)."""
    head: str | None = None
    """The commit the repository's HEAD pointed at."""
    model_calls: int = Field(0, ge=0)
    """Model calls the interview made."""
    questions: int = Field(0, ge=0)
    """Questions the model asked the person."""
    answered_by: str = ""
    """Who answered: `terminal`, `answers file`, or `nobody` (`--no-questions`)."""


def seed_meta_path(directory: Path) -> Path:
    return directory / FILE_NAME


def parse_seed_meta(data: bytes, source: str) -> SeedMeta:
    """Validate seed-meta.json; BadInput naming the file and the first problem."""
    raw = load_json(data, source, dict, "a JSON object", "fix or remove the file and retry")
    try:
        return SeedMeta.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "(the object)"
        raise BadInput(f"{source}: field {field}: {' '.join(str(error['msg']).split())}; "
                       "fix or remove the file and retry") from None


def read_seed_bytes(path: Path) -> bytes | None:
    """The file's bytes, validated; None when there is none. BadInput when it is unreadable or invalid."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_BYTES:
        raise BadInput(f"{path} is larger than {MAX_BYTES // 1000:,} kB; it is not a seed-meta.json tilth wrote")
    parse_seed_meta(data, str(path))
    return data


def load_seed_meta(path: Path) -> SeedMeta | None:
    """The record, or None when the file does not exist."""
    data = read_seed_bytes(path)
    return None if data is None else parse_seed_meta(data, str(path))


def write_seed_meta(path: Path, meta: SeedMeta) -> None:
    write_atomic(path, orjson.dumps(meta.model_dump(mode="json"), option=orjson.OPT_INDENT_2) + b"\n")
