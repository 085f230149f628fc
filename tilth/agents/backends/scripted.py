"""The `scripted` backend: replays a scenario file instead of calling a model.

FOR TESTS AND THE OFFLINE DEMO ONLY: no model is involved and the work it "does" is
whatever the scenario says. Everywhere it runs it is labelled as such.

Scenario file (JSON):
    {"tasks": {"T-1": [<step for iteration 1>, <step for iteration 2>, ...]},
     "default": [<steps for tasks not listed>]}
A step: {"write": {path: content}, "delete": [path], "run": [shell command],
         "notes": {name: text}, "case": {...} | null,
         "needs_human": {"question": ..., "context": ...} | null,
         "verdict": {"verdict": "accept"|"reject"|"needs_human", "question": ..., ...}, "learnings": [text]}
Iteration n uses step n (the last step repeats). The session's final review is the task
`final-review`; unless the scenario lists it, it accepts (labelled as scripted). `{task}` in
paths and content is replaced by the task id. Commands run in the worktree with TILTH_TASK and TILTH_ITER set,
confined exactly like a model's `bash` calls (same sandbox, same stripped environment).
"""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import BaseModel, Field, ValidationError

from tilth.agents.protocol import FINAL_REVIEW_ID, Backend, EvaluationJob, LearningJob, WorkerJob
from tilth.agents.tools.shell import run_command
from tilth.core.errors import BadInput
from tilth.core.faults import checkpoint
from tilth.store.events import document
from tilth.store.ledger import Case, CriterionEvidence, Question, Verdict
from tilth.store.session import BackendChoice

LABEL = "scripted (test/demo backend: replays a scenario file, no model is called)"

document(
    {
        "scripted_step": ("the scripted worker applied a scenario step: files written/deleted, commands run",
                          "written deleted commands exit_codes"),
    }
)


class ScriptedStep(BaseModel):
    write: dict[str, str] = Field(default_factory=dict)
    delete: list[str] = Field(default_factory=list)
    run: list[str] = Field(default_factory=list)
    notes: dict[str, str] = Field(default_factory=dict)
    """Scratch notes the worker writes (as its note_write tool would)."""
    learnings: list[str] = Field(default_factory=list)
    """What the self-improvement step proposes after the task ends at this step."""
    case: Case | None = Field(default_factory=lambda: Case(summary=""))
    """None makes the worker end its turn without a case; an empty summary is filled in."""
    needs_human: Question | None = None
    """The worker ends its turn asking a person this instead of making a case (the task parks)."""
    verdict: Verdict = Field(default_factory=lambda: Verdict(verdict="accept"))


def _default_steps() -> list[ScriptedStep]:
    return [ScriptedStep(write={"scripted/{task}.md": "Scripted output for task {task}.\n"})]


class Scenario(BaseModel):
    tasks: dict[str, list[ScriptedStep]] = Field(default_factory=dict)
    default: list[ScriptedStep] = Field(default_factory=_default_steps)

    def step(self, task_id: str, iteration: int) -> ScriptedStep:
        steps = self.tasks.get(task_id) or self.default or _default_steps()
        return steps[min(iteration, len(steps)) - 1]


def load_scenario(path: Path) -> Scenario:
    try:
        return Scenario.model_validate(orjson.loads(path.read_bytes()))
    except OSError as exc:
        raise BadInput(f"cannot read scenario {path}: {exc.strerror}") from None
    except (orjson.JSONDecodeError, ValidationError) as exc:
        raise BadInput(f"scenario {path} is invalid: {str(exc).splitlines()[0]}") from None


def _inside(worktree: Path, relative: str) -> Path:
    target = (worktree / relative).resolve()
    if not target.is_relative_to(worktree.resolve()):
        raise BadInput(f"scenario path {relative!r} leaves the worktree")
    return target


class ScriptedWorker:
    def __init__(self, scenario: Scenario):
        self.scenario = scenario

    def work(self, job: WorkerJob) -> Case | Question | None:
        step = self.scenario.step(job.task.id, job.iteration)

        def fill(text: str) -> str:
            return text.replace("{task}", job.task.id)

        for relative, content in step.write.items():
            target = _inside(job.worktree, fill(relative))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(fill(content))
        for relative in step.delete:
            _inside(job.worktree, fill(relative)).unlink(missing_ok=True)
        for name, text in step.notes.items():
            job.notes.write(fill(name), fill(text))
        env = {**job.sandbox.env, "TILTH_TASK": job.task.id, "TILTH_ITER": str(job.iteration)}
        exit_codes = [run_command(command, job.worktree, env=env, wrapper=job.sandbox.wrapper,
                                  max_processes=job.sandbox.max_processes).exit_code for command in step.run]
        job.events.emit(
            "scripted_step", job.task.id, job.iteration,
            written=sorted(step.write), deleted=step.delete, commands=step.run, exit_codes=exit_codes,
        )
        checkpoint("worker", job.task.id)
        if step.needs_human is not None:
            return step.needs_human
        if step.case is None:
            return None
        if step.case.summary:
            return step.case
        criteria = [CriterionEvidence(criterion=c, evidence="scripted scenario") for c in job.task.criterion_texts]
        return Case(summary=f"Scripted change for {job.task.id}: {job.task.title}", criteria=criteria)


UNSCRIPTED_REVIEW = Verdict(verdict="accept", concern="scripted backend: the scenario scripts no final review, "
                                                      "so it accepts without looking (no model reviewed the session)")


class ScriptedEvaluator:
    def __init__(self, scenario: Scenario):
        self.scenario = scenario

    def evaluate(self, job: EvaluationJob) -> Verdict:
        if job.task.id == FINAL_REVIEW_ID and FINAL_REVIEW_ID not in self.scenario.tasks:
            return UNSCRIPTED_REVIEW  # `default` steps script the plan's tasks, not the review
        return self.scenario.step(job.task.id, job.iteration).verdict


class ScriptedLearner:
    def __init__(self, scenario: Scenario):
        self.scenario = scenario

    def propose(self, job: LearningJob) -> list[str]:
        return self.scenario.step(job.task.id, max(job.iterations, 1)).learnings


def scripted_backend(choice: BackendChoice) -> Backend:
    scenario = load_scenario(Path(choice.scenario)) if choice.scenario else Scenario()
    return Backend("scripted", LABEL, ScriptedWorker(scenario), ScriptedEvaluator(scenario), ScriptedLearner(scenario))
