"""The `tilth prep` interview: one tool loop in which the model reads the repository
(read-only), asks the person questions and submits a plan.

The tools are the evaluator's read-only file tools over the repository's working tree,
`ask_user` (answered by whatever `answer` callback the command gives: the terminal, an
answers file, or nobody) and `submit_plan`. A submitted plan is checked the way `tilth start`
checks one (`store/prd.parse_plan`), after a check of its own that names every task without
acceptance criteria; a refused submission goes back to the model as an `error: ...` tool
result, at most `PLAN_ATTEMPTS` times. The loop makes at most `max_steps` model calls.
Terminal I/O and files are the command's (`cli/cmd_prep.py`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import orjson

from tilth.agents.accounting import Meter
from tilth.agents.backends.chat import ChatClient, ModelReply, ProviderError, ToolCall
from tilth.agents.backends.tool_loop import Done, tool_loop
from tilth.agents.confinement import UNCONFINED
from tilth.agents.backends.tool_specs import PREP_TOOLS
from tilth.agents.backends.toolbox import RESULT_CHARS, Toolbox, parse_arguments
from tilth.agents.protocol import UsageLimited
from tilth.core.config import Settings
from tilth.core.errors import BadInput, TilthError, ToolError
from tilth.store.events import EventLog
from tilth.store.prd import parse_plan

ROLE = "prep"
NO_ANSWER = "(no answer: recorded as an open question)"
PLAN_ATTEMPTS = 3
"""Refused `submit_plan` calls before the interview gives up."""
LISTING_CHARS = 3000

SYSTEM = (
    "You are planning a change to a software repository together with the person who wants it. "
    "Learn how the repository is built, laid out and tested with read_file, list_files and grep (read-only). "
    "Ask the person with ask_user, one question per call and only a few in all, what the code cannot tell you: "
    "intent, priorities, constraints, what is out of scope. An answer reading '" + NO_ANSWER + "' means you "
    "decide sensibly and say so in scope_notes. Finish by calling submit_plan with: tasks in the order they "
    "should be done, each one commit's worth of work, with a specific description (files, functions, commands) "
    "and acceptance criteria that are concrete and checkable (a command to run and what it must print, a "
    "behaviour a test asserts, a file and what it must contain); where a command the repository already "
    "supports proves a criterion (its test runner on a named test, a script, a grep), give that criterion as "
    "{\"text\": ..., \"verify\": \"<shell command that exits 0 when it holds>\"}: tilth runs it itself; "
    "tldr, the plan in two to four sentences; "
    "scope_notes (what is in and out of scope, assumptions made); blockers (what may stop the work); "
    "open_questions (what is still undecided)."
)
NUDGE = "Continue: read the repository, ask with ask_user if you must, and finish by calling submit_plan."


class MissingCriteria(ToolError):
    """A submitted plan has tasks without acceptance criteria; `labels` names them."""

    def __init__(self, labels: list[str]):
        super().__init__(f"every task needs concrete, checkable acceptance criteria; {len(labels)} task(s) have "
                         f"none: {', '.join(labels)}. Call submit_plan again with criteria for them.")
        self.labels = labels


class Warned(ToolError):
    """A valid plan sent back once with warnings; not a refusal (the same plan is accepted next)."""


class InterviewFailed(TilthError):
    """The model never submitted an acceptable plan, or its endpoint failed; nothing was written."""

    exit_code = 3


@dataclass
class Exchange:
    question: str
    answer: str | None
    """None: nobody answered; the question became an open question."""


@dataclass
class Plan:
    tasks: list[dict[str, Any]]
    """The tasks as they will be written to prd.json (valid under `parse_plan`)."""
    tldr: str
    scope_notes: list[str]
    blockers: list[str]
    open_questions: list[str]


def _lines(value: object) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [" ".join(str(item).split()) for item in value if str(item).strip()]


def task_label(task: object, index: int) -> str:
    if not isinstance(task, dict):
        return f"#{index + 1}"
    task_id = str(task.get("id") or "").strip() or f"#{index + 1}"
    title = " ".join(str(task.get("title") or "").split())
    return f"{task_id} ({title[:60]})" if title else task_id


def has_criteria(task: dict[str, Any]) -> bool:
    criteria = task.get("acceptance_criteria")
    return isinstance(criteria, list) and any(
        isinstance(c, str) and c.strip() or isinstance(c, dict) and str(c.get("text") or "").strip() for c in criteria)


def tasks_without_criteria(tasks: Sequence[object]) -> list[str]:
    """The label (`id (title)`) of every task with no acceptance criterion."""
    return [task_label(t, i) for i, t in enumerate(tasks) if not isinstance(t, dict) or not has_criteria(t)]


def normalise_tasks(raw: object) -> list[dict[str, Any]]:
    """What a model commonly gets almost right, made right: the task list sent as a JSON string, a
    missing id (`T-001`...), one criterion sent as a string. Every task starts `pending`."""
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ToolError("tasks must be a JSON array of task objects") from None
    if not isinstance(raw, list) or not raw:
        raise ToolError("tasks must be a non-empty array of task objects")
    tasks = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ToolError(f"task #{index + 1} is not an object with id, title, description and acceptance_criteria")
        task = dict(item)
        if not str(task.get("id") or "").strip():
            task["id"] = f"T-{index + 1:03d}"
        if isinstance(task.get("acceptance_criteria"), str):
            task["acceptance_criteria"] = [task["acceptance_criteria"]]
        if isinstance(task.get("acceptance_criteria"), list):  # a criterion object with no command is its text
            task["acceptance_criteria"] = [
                c["text"] if isinstance(c, dict) and set(c) <= {"text", "verify"} and isinstance(c.get("text"), str)
                and not str(c.get("verify") or "").strip() else c for c in task["acceptance_criteria"]]
        task.setdefault("description", "")
        task["status"] = "pending"
        tasks.append(task)
    return tasks


def check_plan(args: dict[str, Any]) -> Plan:
    """The submitted plan, or ToolError saying what to fix (every task lacking criteria named)."""
    tasks = normalise_tasks(args.get("tasks"))
    missing = tasks_without_criteria(tasks)
    if missing:
        raise MissingCriteria(missing)
    try:
        parse_plan(orjson.dumps(tasks), "the submitted plan")
    except BadInput as exc:
        raise ToolError(str(exc)) from None
    tldr = " ".join(str(args.get("tldr") or "").split())
    if not tldr:
        raise ToolError("tldr is empty; call submit_plan again with the plan in two to four sentences as tldr")
    return Plan(tasks, tldr, _lines(args.get("scope_notes")), _lines(args.get("blockers")),
                _lines(args.get("open_questions")))


@dataclass
class Interview:
    """One interview. `answer(question)` returns the person's answer, or None for none."""

    settings: Settings
    events: EventLog
    repo: Path
    answer: Callable[[str], str | None]
    max_steps: int = 40
    progress: Callable[[str], None] | None = None
    """Told one line per repository tool call (what the model is reading)."""
    waiting: Callable[[str], AbstractContextManager[None]] | None = None
    """Wrapped around each model call and told what is awaited: the person's sign of life while the model thinks."""
    review: Callable[[list[dict[str, Any]]], list[str]] | None = None
    """Warnings about a valid plan (vague criteria, tasks too large): sent back once, so the model
    may improve the plan or submit it again unchanged to keep it."""
    exchanges: list[Exchange] = field(default_factory=list)
    meter: Meter = field(default_factory=Meter)
    model_calls: int = 0
    reviewed: bool = False

    @property
    def model(self) -> str:
        return self.settings.endpoint(ROLE)[2]

    def run(self, goal: str, head: str | None = None) -> Plan:
        try:
            return self._loop(goal, head)
        except UsageLimited as exc:
            raise InterviewFailed(f"{exc}; run `tilth prep` again later; no plan was written") from None
        except ProviderError as exc:
            raise InterviewFailed(f"{str(exc).removesuffix(', then resume')}, then run `tilth prep` again; "
                                  "no plan was written") from None

    def _loop(self, goal: str, head: str | None) -> Plan:
        chat = ChatClient(ROLE, self.settings, self.meter, self.events)
        # Read-only file tools and no command: nothing for a sandbox to confine.
        tools = Toolbox(self.repo, ROLE, self.events, self.settings.tool_timeout, read_only=True, sandbox=UNCONFINED)
        listing = tools.workspace.list_files()
        if len(listing) > LISTING_CHARS:
            listing = listing[:LISTING_CHARS].rsplit("\n", 1)[0] + "\n[... more files: use list_files with a pattern]"
        opening = (f"The goal:\n{goal.strip()}\n\nThe repository" + (f" (HEAD {head[:12]})" if head else "") +
                   f" is the root of your file tools. Its files:\n{listing}")
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": opening}]
        refusals: list[ToolError] = []

        def ask(step: int) -> ModelReply:
            awaited = f"waiting on {self.model}, call {self.model_calls + 1}"
            with self.waiting(awaited) if self.waiting is not None else nullcontext():
                reply = chat.complete(messages, PREP_TOOLS, None, step + 1)
            self.model_calls += 1
            return reply

        def handle(call: ToolCall, step: int, thought: str | None) -> str | Done[Plan]:
            if call.name == "submit_plan":
                plan, result = self._submit(call, step + 1, thought)
                if not isinstance(plan, ToolError):
                    return Done(self._with_unanswered(plan))
                refusals.extend([] if isinstance(plan, Warned) else [plan])
                return result
            if call.name == "ask_user":
                return self._ask(call, step + 1, thought)
            if self.progress is not None:
                self.progress(_describe_call(call))
            return tools.run(call, None, step + 1, thought)

        def after_step() -> None:
            if len(refusals) >= PLAN_ATTEMPTS:
                self._give_up(refusals[-1])

        done = tool_loop(messages, self.max_steps, ask, handle, NUDGE, after_step)
        if done is not None:
            return done.value
        raise InterviewFailed(f"the model ({self.model}) made {self.max_steps} calls without submitting an "
                              "acceptable plan; no plan was written (raise --max-steps, or try a stronger model "
                              "with TILTH_PREP_MODEL)")

    def _submit(self, call: ToolCall, step: int, thought: str | None) -> tuple[Plan | ToolError, str]:
        """The plan, or the refusal (also the tool result the model gets)."""
        try:
            plan = check_plan(parse_arguments(call))
        except ToolError as exc:
            result = f"error: {exc}"
            self._record(call, step, False, result, thought)
            return exc, result
        result = f"accepted: {len(plan.tasks)} task(s)"
        if self.review is not None and not self.reviewed:
            self.reviewed = True
            warnings = self.review(plan.tasks)
            if warnings:
                result = ("not yet accepted, the plan has warnings:\n" + "\n".join(warnings) +
                          "\nCall submit_plan again with these fixed (criteria a reviewer can observe: a command "
                          "and its output, a file, a value), or with the same plan to keep it as it is.")
                self._record(call, step, False, result, thought)
                return Warned(result), result
        self._record(call, step, True, result, thought)
        return plan, result

    def _ask(self, call: ToolCall, step: int, thought: str | None) -> str:
        try:
            question = " ".join(str(parse_arguments(call).get("question") or "").split())
            if not question:
                raise ToolError("ask_user needs a question")
        except ToolError as exc:
            result = f"error: {exc}"
            self._record(call, step, False, result, thought)
            return result
        answer = self.answer(question)
        answer = answer.strip() if answer and answer.strip() else None
        self.exchanges.append(Exchange(question, answer))
        result = answer if answer is not None else NO_ANSWER
        self._record(call, step, True, result, thought)
        return result

    def _record(self, call: ToolCall, step: int, ok: bool, result: str, thought: str | None) -> None:
        self.events.emit("tool_call", None, step, role=ROLE, name=call.name, ok=ok, args=call.arguments[:500],
                         result_chars=len(result), result=result[:RESULT_CHARS],
                         thought=thought[:RESULT_CHARS] if thought else None)

    def _with_unanswered(self, plan: Plan) -> Plan:
        """Every question nobody answered joins the plan's open questions."""
        for exchange in self.exchanges:
            if exchange.answer is None and exchange.question not in plan.open_questions:
                plan.open_questions.append(exchange.question)
        return plan

    def _give_up(self, refusal: ToolError) -> None:
        """Refused too often: a plan whose tasks lack criteria is bad input (exit 2), named task by task."""
        if isinstance(refusal, MissingCriteria):
            raise BadInput(f"refusing to write a plan with tasks without acceptance criteria: "
                           f"{', '.join(refusal.labels)} (the model's plan was refused {PLAN_ATTEMPTS} times)")
        detail = " ".join(str(refusal).split())[:400]
        raise BadInput(f"refusing to write the model's plan, refused {PLAN_ATTEMPTS} times; last: {detail}")


def _describe_call(call: ToolCall) -> str:
    try:
        args = parse_arguments(call)
    except ToolError:
        args = {}
    shown = " ".join(f"{v}" for v in args.values() if isinstance(v, (str, int)))[:120]
    return f"{call.name} {shown}".rstrip()
