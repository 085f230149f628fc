"""CLI coding agents (Claude Code, Codex, aider, any command) as worker, evaluator and learner.

Every run is a fresh process (`agent_process.run_agent`) started as `presets.launch` says,
behind the session's sandbox: the worktree writable for the worker, read-only for the
evaluator and the learner, the agent's own config directory writable, nothing else. Its
stream becomes `agent_step` events as it runs and one `model_call` event at the end (tokens
and cost from the agent's own report, else the price table), so status, the report and the
spend cap count it. Its usage is also read as it streams (Claude's turns, Codex's
`turn.completed`, aider's `Tokens:`/`Cost:` lines, a `command` agent's usage lines), and the usage
files Copilot and Gemini write as they grow, on a timer, stdout or not: once that takes the session over its spend
or token cap, the agent's process group is killed and the run counted as far as it got. A run
that crashes, exits non-zero or times out raises `AgentFailed` (a rejected iteration); one that
ends on a usage limit raises `UsageLimited` (the session pauses).
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, TypeVar

from tilth.agents.accounting import Meter, Usage, call_cost
from tilth.agents.backends.agent_process import Finished, run_agent
from tilth.agents.backends.agent_stream import AgentReport, StreamReader, cut
from tilth.agents.backends.final_answer import (EVALUATOR_ENDING, LEARNER_ENDING, WORKER_ENDING, built_case,
                                           parse_verdict, parse_worker_answer, verdict_problem)
from tilth.agents.backends.presets import binary, check_command, launch
from tilth.agents.backends.qwen_stream import TURN_CAP_EXIT
from tilth.agents.protocol import AgentFailed, EvaluationJob, LearningJob, UsageLimited, WorkerJob
from tilth.agents.confinement import Confinement
from tilth.agents.sandbox import amend
from tilth.core.config import Settings
from tilth.core.errors import StopRequested
from tilth.store.events import EventLog, document
from tilth.store.learnings import parse_proposals
from tilth.store.ledger import Case, Question, Verdict

document({
    "agent_run": ("a CLI agent ran once; data: role, agent, command, exit_code, stopped (timeout|too much output|<cap> "
                  "reached|stopped at once: <why>|null), duration_ms, stdout_bytes, stderr_bytes, case, verdict or "
                  "answer (parsed|built|none), session (the agent's own session id), error, limit (a usage limit it "
                  "hit), log",
                  "role agent command exit_code stopped duration_ms stdout_bytes stderr_bytes case verdict answer session "
                  "error limit log"),
    "agent_started": ("a CLI agent was started and is running (`tilth status` and `tilth logs -f` say so until its "
                      "`agent_run`); data: role, agent, command", "role agent command"),
    "agent_step": ("one thing a CLI agent did while it ran; data: role, agent, kind (message|tool_use|tool_result|"
                   "command|file_change|error|retry|init), name, text (cut short; the whole stream is under agents/)",
                   "role agent kind name text"),
})

Answer = TypeVar("Answer")
ROLE_FOR_ACCOUNTING = {"worker": "worker", "evaluator": "evaluator", "learner": "self_improvement"}
LABELS = {"claude": "Claude Code", "codex": "Codex CLI", "aider": "aider", "command": "a command",
          "copilot": "Copilot CLI", "gemini": "Gemini CLI",
          "qwen": "Qwen Code", "opencode": "OpenCode"}


EXIT_MEANINGS = {("qwen", TURN_CAP_EXIT): "stopped at its turn cap (--max-session-turns in TILTH_QWEN_ARGS)"}
"""What an agent's own exit code says, in words, where it says more than a failure."""


@dataclass(frozen=True)
class Where:
    """One run's place: which task and attempt, the worktree, the journal, the sandbox."""

    task_id: str
    iteration: int
    worktree: Path
    events: EventLog
    sandbox: Confinement


class CliAgent:
    def __init__(self, name: str, settings: Settings, meter: Meter, role: str = "worker"):
        self.name, self.settings, self.meter = name, settings, meter
        if name == "command":
            check_command(role, settings)
        else:
            binary(name, settings)
        if name == "opencode":
            from tilth.agents.backends.opencode_cli import opencode_model

            opencode_model()  # refused at start, in one line, not at the first run

    def run(self, role: str, prompt: str, at: Where, parse: Callable[[str], Answer],
            attempt: str = "") -> tuple[Answer | None, str]:
        """The parsed answer (or None) and the text it was read from."""
        stem = f"{at.task_id}-{at.iteration}-{role}-{self.name}{attempt}"
        with tempfile.TemporaryDirectory(prefix="tilth-agent-") as scratch:
            prompt_file = Path(scratch) / "prompt.md"
            prompt_file.write_text(prompt)
            left = None if self.meter.spend_limit is None else self.meter.spend_limit - self.meter.cost_usd
            spec = launch(self.name, role, self.settings, prompt_file, at.sandbox, left)
            wrapper = amend(at.sandbox.wrapper, at.worktree, read_only=role != "worker", writable=spec.writable,
                            readable=([prompt_file] if spec.prompt_argument else []) + spec.readable)
            on_line, every_tick = self._stepper(role, at, spec.reader, spec.model)
            timeout, walled = self.settings.agent_timeout_s, False
            if self.meter.wall_deadline is not None and self.meter.wall_deadline - time.monotonic() < timeout:
                timeout, walled = max(0.1, self.meter.wall_deadline - time.monotonic()), True
            at.events.emit("agent_started", at.task_id, at.iteration, role=role, agent=self.name, command=spec.argv[0])
            try:
                done = run_agent(wrapper + spec.argv, at.worktree, spec.env,
                                 prompt_file if spec.stdin_is_prompt else Path(os.devnull), timeout,
                                 at.events.path.parent / "agents", stem, on_line, max_processes=at.sandbox.max_processes,
                                 plain_lines=spec.plain_output, every_tick=every_tick)
            except OSError as exc:
                raise AgentFailed(f"could not start the {self.name} agent {spec.argv[0]}: {exc.strerror or exc}") from None
        if walled and done.stopped == "timeout":
            done = replace(done, stopped="max_wall_clock_s reached")
        report = spec.finish(done.stdout, done.stderr, done.exit_code) if spec.finish is not None else \
            spec.reader.report()
        capped = None
        if self.name != "command" or _reported_usage(report):
            try:
                self._account(role, at, report, spec.model, done)
            except StopRequested as exc:  # a cap, or a stop at once: said after the run's own event
                capped = exc
        text = report.final_text if report.final_text is not None else ""
        failure = self._failure(report, done)
        answer = parse(text) if failure is None and report.limit is None else None
        at.events.emit("agent_run", at.task_id, at.iteration, role=role, agent=self.name, command=spec.argv[0],
                       exit_code=done.exit_code, stopped=done.stopped, duration_ms=done.duration_ms,
                       stdout_bytes=done.stdout_bytes, stderr_bytes=len(done.stderr),
                       **{"case" if role == "worker" else "verdict" if role == "evaluator" else "answer":
                          "parsed" if answer is not None else "none" if failure or report.limit else "built"},
                       session=report.session_id, error=report.error, log=f"agents/{stem}.stdout",
                       limit=None if report.limit is None else {
                           "message": report.limit.message,
                           "resets_at": report.limit.resets_at.isoformat() if report.limit.resets_at else None})
        if capped is not None:
            raise capped
        self.meter.stop_if_halted()  # its process group was killed for it (`_stepper`), usage reported or not
        if done.stopped == "max_wall_clock_s reached" and self.meter.check_caps is not None:
            self.meter.check_caps(at.task_id)
        if report.limit is not None:
            raise UsageLimited(f"{self.name}: {report.limit.message}", report.limit.resets_at)
        if failure is not None:
            raise AgentFailed(failure)
        return answer, text

    def _stepper(self, role: str, at: Where, reader: StreamReader, model: str | None
                 ) -> tuple[Callable[[dict[str, Any]], str | None], Callable[[], str | None] | None]:
        """Each line's steps as events, and a reason to kill the agent: the session must stop at once (its
        lease lost), or the usage read so far takes it over its spend or token cap. Checked at every line and,
        for the usage an agent writes to a file of its own (`reader.report()` reads it as it grows) and a
        stop at once, on a timer (None: nothing to check)."""
        watch = self.meter.spend_limit is not None or self.meter.token_limit is not None

        def over_cap() -> str | None:
            usage, name = self._usage(reader.report(), model)
            cap = self.meter.crossing(call_cost(self.settings, name, usage)[0], usage.tokens)
            return None if cap is None else f"{cap} reached"

        def stop_now() -> str | None:
            if self.meter.halted is not None and (why := self.meter.halted()) is not None:
                return f"stopped at once: {why}"
            return over_cap() if watch else None

        def on_line(event: dict[str, Any]) -> str | None:
            for step in reader.feed(event):
                at.events.emit("agent_step", at.task_id, at.iteration, role=role, agent=self.name, kind=step.kind,
                               name=step.name, text=step.text)
            return stop_now()
        return on_line, stop_now if watch or self.meter.halted is not None else None

    def _usage(self, report: AgentReport, model: str | None) -> tuple[Usage, str]:
        usage = Usage.model_validate({"prompt_tokens": report.prompt_tokens, "completion_tokens": report.completion_tokens,
                                      "cached_tokens": report.cached_tokens,
                                      "cache_write_tokens": report.cache_write_tokens, "cost": report.cost_usd})
        return usage, report.model or model or self.name

    def _failure(self, report: AgentReport, done: Finished) -> str | None:
        who = f"the {self.name} agent"
        if done.stopped and done.stopped.startswith("max_"):
            return f"{who} was stopped ({done.stopped}); it and every process it started were killed"
        if done.stopped:
            limit = f"{self.settings.agent_timeout_s:g} s" if done.stopped == "timeout" else "the output limit"
            return f"{who} was stopped ({done.stopped}, {limit}); it and every process it started were killed"
        if done.exit_code != 0 or report.is_error:
            said = report.error or (done.stderr or done.stdout)[-300:]
            meaning = EXIT_MEANINGS.get((self.name, done.exit_code))
            head = f"{who} {meaning} (exit code {done.exit_code})" if meaning else \
                f"{who} exited with code {done.exit_code}"
            return head + (f": {cut(said, 300)}" if said.strip() else "")
        return None

    def _account(self, role: str, at: Where, report: AgentReport, model: str | None, done: Finished) -> None:
        usage, name = self._usage(report, model)
        cost, source = call_cost(self.settings, name, usage)
        reason = "usage_limit" if report.limit else "error" if report.is_error else done.stopped or "end"
        self.meter.record(at.events, ROLE_FOR_ACCOUNTING[role], name, at.task_id, at.iteration, usage, cost, source,
                          done.duration_ms, reason, backend=self.name)


def _reported_usage(report: AgentReport) -> bool:
    """A `command` agent's run is counted when it printed a usage line."""
    return any(value is not None for value in (report.prompt_tokens, report.completion_tokens, report.cost_usd))


class CliWorker:
    def __init__(self, name: str, settings: Settings, meter: Meter):
        self.agent = CliAgent(name, settings, meter)

    def work(self, job: WorkerJob) -> Case | Question | None:
        at = Where(job.task.id, job.iteration, job.worktree, job.events, job.sandbox)
        answer, text = self.agent.run("worker", job.prompt + WORKER_ENDING, at, parse_worker_answer)
        return answer if answer is not None else built_case(text)


class CliEvaluator:
    """A read-only CLI agent judging the case; an unreadable verdict gets one retry with the reason."""

    def __init__(self, name: str, settings: Settings, meter: Meter):
        self.agent = CliAgent(name, settings, meter, "evaluator")
        self.settings = settings

    def evaluate(self, job: EvaluationJob) -> Verdict:
        at = Where(job.task.id, job.iteration, job.worktree, job.events, job.sandbox)
        prompt, problem = job.prompt + EVALUATOR_ENDING, ""
        for attempt in range(1 + min(1, self.settings.verdict_retries)):
            try:
                verdict, text = self.agent.run("evaluator", prompt, at, parse_verdict, "-retry" if attempt else "")
            except AgentFailed as exc:
                return Verdict(verdict="reject", category="agent_failed", concern=f"The evaluator failed: {exc}",
                               next_step="Nothing to change for this; the evaluation runs again on the next attempt.")
            if verdict is not None:
                return verdict.model_copy(update={"evaluator": None, "panel": []})
            problem = verdict_problem(text)
            prompt = (job.prompt + EVALUATOR_ENDING + f"\n\nYour previous answer could not be read: {problem}. "
                      "Answer again, ending with the one JSON verdict in a ```json block.")
        return Verdict(verdict="reject", category="parse_failed", concern=f"The verdict could not be parsed: {problem}",
                       next_step="Re-run the evaluation.")


class CliLearner:
    def __init__(self, name: str, settings: Settings, meter: Meter):
        self.agent = CliAgent(name, settings, meter)

    def propose(self, job: LearningJob) -> list[str]:
        if job.worktree is None:
            return []
        at = Where(job.task.id, job.iterations, job.worktree, job.events, job.sandbox)
        _, text = self.agent.run("learner", job.prompt + LEARNER_ENDING, at, lambda _: None)
        return parse_proposals(text)

