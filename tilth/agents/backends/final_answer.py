"""What a CLI agent is asked to end with, and how its answer is read back.

A worker ends by printing its case (or, when only a person can decide how to go on, its
question: `{"needs_human": {"question": "...", "context": "..."}}`), an evaluator its verdict
(`needs_human` with a `question` likewise), each as one JSON object. Both
are read leniently: the last fenced JSON block that validates, else the last bare JSON object
with the expected key. An agent's final text is its own, so nothing here trusts it further
than the pydantic models do.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from tilth.store.ledger import Case, Question, Verdict

WORKER_ENDING = (
    "\n\nWhen you have finished (or cannot go further), end your reply by printing exactly one JSON object, "
    "in a ```json fenced block, with your case: "
    '{"summary": "...", "criteria": [{"criterion": "<each acceptance criterion>", "evidence": "<what shows it '
    'is met: commands run and their output, files and lines>"}], "uncertainties": ["..."]}. '
    "Leave your changes uncommitted. If the task cannot go on without a person's decision (which API to keep, a "
    "missing credential, an ambiguous criterion), print instead "
    '{"needs_human": {"question": "<one question a person can answer>", "context": "<what you found, the '
    'options>"}}: the task waits for the answer and your edits are kept for the retry.'
)
EVALUATOR_ENDING = (
    "\n\nYou are an independent reviewer: do not change any file. Decide whether the change meets every "
    "acceptance criterion; verify the case's claims against the diff and the files instead of trusting it. "
    "End your reply by printing exactly one JSON object, in a ```json fenced block, with your verdict: "
    '{"verdict": "accept" or "reject", "category": "<one word: acceptance_gap, weak_test, half_finished, '
    'scope_creep, spec_violation, ...>", "concern": "<what is wrong, when rejecting>", "evidence": ["<what you '
    'checked>"], "next_step": "<what the worker should do next, when rejecting>"}. Only when the criteria '
    'cannot be judged without a person\'s decision: {"verdict": "needs_human", "question": "<one question>", '
    '"concern": "<why>"}.'
)
LEARNER_ENDING = "\n\nDo not change any file; answer in text only."
FENCED = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL)
TAIL_CHARS = 2000
SCAN_CHARS = 256 * 1024
MAX_CANDIDATES = 200

Model = TypeVar("Model", bound=BaseModel)


def parse_case(text: str) -> Case | None:
    return _last(text, Case, "summary")


class _Asking(BaseModel):
    needs_human: Question


def parse_worker_answer(text: str) -> Case | Question | None:
    """The worker's case; failing that, its question. A case wins: a worker that made one is judged."""
    if (case := parse_case(text)) is not None:
        return case
    asking = _last(text, _Asking, "needs_human")
    return asking.needs_human if asking is not None else None


def parse_verdict(text: str) -> Verdict | None:
    return _last(text, Verdict, "verdict")


def verdict_problem(text: str) -> str:
    """Why no verdict could be read from `text`, for the one retry."""
    blocks = FENCED.findall(text[-SCAN_CHARS:])
    if not text.strip():
        return "the reply was empty"
    if not blocks and '"verdict"' not in text:
        return "no JSON object with a \"verdict\" was found"
    for block in reversed(blocks):
        try:
            Verdict.model_validate(orjson.loads(block.strip()))
        except orjson.JSONDecodeError as exc:
            return f"the JSON block is not valid JSON ({exc})"
        except ValidationError as exc:
            return "the JSON block is not a valid verdict (" + " ".join(str(exc).split())[:300] + ")"
    return "no JSON object with a valid \"verdict\" was found"


def built_case(output: str) -> Case:
    tail = output[-TAIL_CHARS:].strip() or "(no output)"
    return Case(summary=f"(The agent printed no case; this is the end of its output.)\n{tail}",
                uncertainties=["no case could be parsed from the agent's output"], built_from_output=True)


def _last(text: str, model: type[Model], key: str) -> Model | None:
    text = text[-SCAN_CHARS:]
    for block in reversed(FENCED.findall(text)):
        if (found := _valid(block.strip(), model)) is not None:
            return found
    decoder = json.JSONDecoder()
    for start in [m.start() for m in re.finditer(r"\{", text)][::-1][:MAX_CANDIDATES]:
        try:
            candidate, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(candidate, dict) and key in candidate and (found := _valid(candidate, model)) is not None:
            return found
    return None


def _valid(raw: str | dict[str, Any], model: type[Model]) -> Model | None:
    try:
        return model.model_validate(orjson.loads(raw) if isinstance(raw, str) else raw)
    except (orjson.JSONDecodeError, ValidationError):
        return None
