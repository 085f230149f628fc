"""The `command` worker: any CLI coding agent, one fresh process per iteration.

`TILTH_WORKER_BACKEND=command` with `TILTH_WORKER_COMMAND='my-agent --prompt-file {prompt_file}'`
(split like a shell line; `{prompt_file}` becomes a file holding the prompt, which also
arrives on stdin). The process starts in the worktree, in its own process group, behind the
same sandbox as the `bash` tool, with the agent environment (no tilth settings, no provider
keys) plus the variables named in `TILTH_AGENT_PASS_ENV`, whose values are registered for
redaction. `TILTH_AGENT_TIMEOUT_S` bounds the run; the whole group is killed at the end
either way.

The prompt is the fresh context every worker gets, plus how to end: print one JSON object
with the case. It is read leniently (the last fenced JSON block, else the last bare object
with a `summary`); an agent that prints none still gets evaluated, with a case built from
the tail of its output that says so. A run that exits non-zero or times out is
`AgentFailed`: a rejected iteration with the reason, never a crash of tilth. stdout and
stderr are kept whole (redacted) under `sessions/<id>/agents/`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

import orjson
from pydantic import ValidationError

from tilth.agents.protocol import AgentFailed, WorkerJob
from tilth.agents.tools.shell import agent_env, kill_group, wait_for_exit
from tilth.core.config import Settings
from tilth.store.events import document
from tilth.store.jsonio import write_atomic
from tilth.store.ledger import Case
from tilth.store.redaction import register_secret

document({"agent_run": "a CLI agent ran one iteration; data: role, command, exit_code, stopped (timeout|too much "
                       "output|null), duration_ms, stdout_bytes, stderr_bytes, case (parsed|built|none), log"})

ENDING = (
    "\n\nWhen you have finished (or cannot go further), end your reply by printing exactly one JSON object, "
    "in a ```json fenced block, with your case: "
    '{"summary": "...", "criteria": [{"criterion": "<each acceptance criterion>", "evidence": "<what shows it '
    'is met: commands run and their output, files and lines>"}], "uncertainties": ["..."]}. '
    "Leave your changes uncommitted."
)
FENCED = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL)
TAIL_CHARS = 2000
SCAN_BYTES = 256 * 1024
MAX_CANDIDATES = 200


def parse_case(output: str) -> Case | None:
    """The last fenced JSON block that is a case, else the last bare JSON object with a summary."""
    text = output[-SCAN_BYTES:]
    for block in reversed(FENCED.findall(text)):
        if (case := _case(block.strip())) is not None:
            return case
    decoder = json.JSONDecoder()
    for start in [m.start() for m in re.finditer(r"\{", text)][::-1][:MAX_CANDIDATES]:
        try:
            candidate, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(candidate, dict) and "summary" in candidate and (case := _case(candidate)) is not None:
            return case
    return None


def _case(raw: str | dict) -> Case | None:
    try:
        return Case.model_validate(orjson.loads(raw) if isinstance(raw, str) else raw)
    except (orjson.JSONDecodeError, ValidationError):
        return None


def built_case(output: str) -> Case:
    tail = output[-TAIL_CHARS:].strip() or "(no output)"
    return Case(summary=f"(The agent printed no case; this is the end of its output.)\n{tail}",
                uncertainties=["no case could be parsed from the agent's output"])


class CommandWorker:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.argv = shlex.split(settings.worker_command or "")

    def work(self, job: WorkerJob) -> Case | None:
        logs = job.events.path.parent / "agents"
        stem = f"{job.task.id}-{job.iteration}-worker"
        with tempfile.TemporaryDirectory(prefix="tilth-agent-") as scratch:
            prompt_file = Path(scratch) / "prompt.md"
            prompt_file.write_text(job.prompt + ENDING)
            argv = [part.replace("{prompt_file}", str(prompt_file)) for part in self.argv]
            # The sandbox's /tmp is private: the prompt file is bound in read-only at the same path.
            wrapper = _with_file(list(job.sandbox), prompt_file)
            code, stopped, out, err, took = self._run(wrapper + argv, job.worktree, prompt_file)
        write_atomic(logs / f"{stem}.stdout", out.encode())
        write_atomic(logs / f"{stem}.stderr", err.encode())
        case = parse_case(out) if not stopped and code == 0 else None
        job.events.emit("agent_run", job.task.id, job.iteration, role="worker", command=self.argv[0],
                        exit_code=code, stopped=stopped, duration_ms=took, stdout_bytes=len(out),
                        stderr_bytes=len(err), case="parsed" if case else "none" if stopped or code else "built",
                        log=f"agents/{stem}.stdout")
        if stopped:
            limit = f"{self.settings.agent_timeout_s:g} s" if stopped == "timeout" else "the output limit"
            raise AgentFailed(f"the agent {self.argv[0]} was stopped ({stopped}, {limit}); it and every "
                              "process it started were killed")
        if code != 0:
            tail = " ".join((err or out)[-300:].split())
            raise AgentFailed(f"the agent {self.argv[0]} exited with code {code}" + (f": {tail}" if tail else ""))
        return case or built_case(out)

    def _run(self, argv: list[str], cwd: Path, prompt_file: Path) -> tuple[int, str | None, str, str, int]:
        env = agent_env()
        for name in self.settings.agent_pass_env:
            if name in os.environ:
                env[name] = os.environ[name]
                register_secret(os.environ[name])
        started = time.monotonic()
        with open(prompt_file, "rb") as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=stdin, stdout=out, stderr=err,
                                        start_new_session=True)
            except OSError as exc:
                raise AgentFailed(f"could not start the agent {argv[0]}: {exc.strerror}") from None
            try:
                stopped = wait_for_exit(proc, out, self.settings.agent_timeout_s)
            finally:
                kill_group(proc.pid)
                code = proc.wait()
            out.seek(0)
            err.seek(0)
            text, errors = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        return code, stopped, text, errors, int((time.monotonic() - started) * 1000)


def _with_file(wrapper: list[str], path: Path) -> list[str]:
    """The sandbox argv with `path` bound read-only, inserted before its final options."""
    if not wrapper:
        return wrapper
    at = wrapper.index("--die-with-parent") if "--die-with-parent" in wrapper else len(wrapper)
    return wrapper[:at] + ["--ro-bind", str(path), str(path)] + wrapper[at:]
