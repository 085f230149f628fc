"""The `openai` backend: a worker and an evaluator, each a tool-use loop against any
OpenAI-compatible Chat Completions endpoint, each starting from a fresh context."""

from __future__ import annotations

import orjson
from pydantic import ValidationError

from tilth.agents.accounting import Meter
from tilth.agents.backends.chat import ChatClient, ModelReply, ToolCall
from tilth.agents.backends.tool_loop import Done, answer_calls, tool_loop
from tilth.agents.backends.tool_specs import EVALUATOR_TOOLS, WORKER_TOOLS
from tilth.agents.backends.toolbox import Toolbox, parse_arguments
from tilth.agents.protocol import EvaluationJob, LearningJob, WorkerJob
from tilth.core.config import Settings
from tilth.core.errors import ToolError
from tilth.store.learnings import parse_proposals
from tilth.store.ledger import Case, Question, Verdict
from tilth.store.script_runs import runs_dir

WORKER_SYSTEM = (
    "You are a careful software engineer working in a git repository. Do exactly the task you are given, "
    "using the tools to read, edit and run things. Keep changes focused on the task. When every acceptance "
    "criterion is met, call submit_case with a summary and concrete evidence for each criterion "
    "(commands you ran and what they printed, files and lines). If the task cannot go on without a person's "
    "decision, call needs_human with the question instead."
)
EVALUATOR_SYSTEM = (
    "You are an independent reviewer. Decide whether the change meets every acceptance criterion of the task. "
    "Verify claims against the diff and the files instead of trusting the case. Reject with a precise concern "
    "and next step when anything is missing, untested, half-finished, beyond scope or against the spec. "
    "Finish by calling submit_verdict."
)
NUDGE = "Continue using the tools. When every acceptance criterion is met, call submit_case."


def forced_tool(policy: str, step: int) -> str:
    """The tool_choice for this step: `auto`/`required`, or the step-th forced name (last repeats)."""
    names = [name.strip() for name in policy.split(",") if name.strip()] or ["auto"]
    return names[min(step, len(names) - 1)]


class OpenAIWorker:
    def __init__(self, settings: Settings, meter: Meter):
        self.settings, self.meter = settings, meter

    def work(self, job: WorkerJob) -> Case | Question | None:
        chat = ChatClient("worker", self.settings, self.meter, job.events)
        tools = Toolbox(job.worktree, "worker", job.events, self.settings.tool_timeout, read_only=False,
                        notes=job.notes, sandbox=job.sandbox, hooks=job.hooks,
                        runs=runs_dir(job.events.path.parent), keep_runs=self.settings.script_runs_keep)
        messages = [{"role": "system", "content": WORKER_SYSTEM}, {"role": "user", "content": job.prompt}]

        def ask(step: int) -> ModelReply:
            choice = forced_tool(self.settings.worker_tool_choice, step)
            return chat.complete(messages, WORKER_TOOLS, job.task.id, job.iteration, choice)

        def handle(call: ToolCall, step: int, thought: str | None) -> str | Done[Case | Question]:
            if call.name not in ("submit_case", "needs_human"):
                return tools.run(call, job.task.id, job.iteration, thought)
            model: type[Case] | type[Question] = Case if call.name == "submit_case" else Question
            try:
                return Done(model.model_validate(parse_arguments(call)))
            except (ToolError, ValidationError) as exc:
                what = "case" if model is Case else "question"
                return f"error: the {what} was not accepted as written: {' '.join(str(exc).split())[:500]}"

        done = tool_loop(messages, self.settings.worker_max_steps, ask, handle, NUDGE)
        return None if done is None else done.value


def _verdict_from_text(text: str | None) -> Verdict:
    """Small models sometimes answer with the verdict as JSON text instead of a tool call."""
    if not text or "{" not in text:
        raise ValueError("no submit_verdict call and no verdict JSON in the reply")
    return Verdict.model_validate(orjson.loads(text[text.index("{"): text.rindex("}") + 1]))


class OpenAIEvaluator:
    def __init__(self, settings: Settings, meter: Meter):
        self.settings, self.meter = settings, meter

    def evaluate(self, job: EvaluationJob) -> Verdict:
        chat = ChatClient("evaluator", self.settings, self.meter, job.events)
        tools = Toolbox(job.worktree, "evaluator", job.events, self.settings.tool_timeout, read_only=True,
                        sandbox=job.sandbox)
        messages = [{"role": "system", "content": EVALUATOR_SYSTEM}, {"role": "user", "content": job.prompt}]
        failures: list[str] = []
        for step in range(self.settings.evaluator_max_steps):
            choice = forced_tool(self.settings.evaluator_tool_choice, step)
            reply = chat.complete(messages, EVALUATOR_TOOLS, job.task.id, job.iteration, choice)
            verdict_calls = [c for c in reply.tool_calls if c.name == "submit_verdict"]
            other_calls = [c for c in reply.tool_calls if c.name != "submit_verdict"]
            if other_calls and not verdict_calls:
                answer_calls(messages, reply, other_calls, step,
                             lambda call, _, thought: tools.run(call, job.task.id, job.iteration, thought))
                continue
            try:
                if verdict_calls:
                    return Verdict.model_validate(parse_arguments(verdict_calls[0]))
                return _verdict_from_text(reply.content)
            except (ToolError, ValidationError, ValueError) as exc:
                failures.append(" ".join(str(exc).split())[:300])
            if len(failures) > self.settings.verdict_retries:
                break
            retry = (f"Your verdict could not be parsed: {failures[-1]}. Call submit_verdict with verdict "
                     "(accept|reject|needs_human), category, concern, evidence (a list), next_step and, with "
                     "needs_human, question.")
            answer_calls(messages, reply, reply.tool_calls, step, lambda *_: f"error: {failures[-1]}")
            messages.append({"role": "user", "content": retry})
        reason = failures[-1] if failures else f"no verdict within {self.settings.evaluator_max_steps} steps"
        return Verdict(verdict="reject", category="parse_failed", concern=f"The verdict could not be parsed: {reason}",
                       next_step="Re-run the evaluation.")


class OpenAILearner:
    """The self-improvement step: one tool-less call to the worker model."""

    def __init__(self, settings: Settings, meter: Meter):
        self.settings, self.meter = settings, meter

    def propose(self, job: LearningJob) -> list[str]:
        chat = ChatClient("self_improvement", self.settings, self.meter, job.events)
        reply = chat.complete([{"role": "user", "content": job.prompt}], [], job.task.id, job.iterations)
        return parse_proposals(reply.content)
