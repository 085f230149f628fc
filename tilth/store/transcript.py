"""sessions/<id>/transcript.md: the human-readable record of a session, in the step-block style
of a session file (seed 003), appended as the run goes so it can be read mid-run.

    # tilth session <id>
    - id / started_at / backends / repo / branch          (header, once)
    ## Run resumed at <ISO>                                 (each later run)
    ## T-1 · <title> · attempt 1
    ### Step 1
    - at: <ISO>
    - thought:      a fenced text block: the model's (or agent's) own words, or (empty)
    - action:       a fenced JSON block: the tool call, command or edit
    - execution_result:  a fenced text block, bounded
    ### Case        the worker's case
    ### Verdict     the evaluator's verdict (each member of a panel)
    ### Outcome     the task's commit, or its FAILED placeholder
    ## Final
    - status: SUCCESS|FAILED|STOPPED|PAUSED|CRASHED
    - ended_at: <ISO>
    ### Message     the end-of-session report

Fences are longer than any run of backticks inside them, so content cannot close a block.
Every write is one flushed, redacted append (`jsonio.append_line`); nothing reads this file back.
"""

from __future__ import annotations

import re
from pathlib import Path

from tilth.store.jsonio import append_line
from tilth.store.ledger import Case, Verdict

RESULT_CHARS = 2000
STATUS = {"done": "SUCCESS", "failed": "FAILED", "stopped": "STOPPED", "paused": "PAUSED", "waiting": "WAITING", "crashed": "CRASHED"}


def transcript_path(session_dir: Path) -> Path:
    return session_dir / "transcript.md"


def fence(text: str, lang: str = "text") -> str:
    ticks = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def bounded(text: str, limit: int = RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters ...]"


class Transcript:
    def __init__(self, path: Path):
        self.path = path

    def _write(self, text: str) -> None:
        append_line(self.path, text.encode(), sync=False)

    def header(self, session_id: str, at: str, backends: str, repo: str, branch: str) -> None:
        if self.path.exists() and self.path.stat().st_size:
            self._write(f"\n## Run resumed at {at}\n\n- backends: {backends}\n")
            return
        self._write(f"# tilth session {session_id}\n\n- id: {session_id}\n- started_at: {at}\n"
                    f"- backends: {backends}\n- repo: {repo}\n- branch: {branch}\n")

    def attempt(self, task_id: str, title: str, iteration: int) -> None:
        self._write(f"\n## {task_id} · {title} · attempt {iteration}\n")

    def step(self, number: int, at: str, thought: str | None, action: object, result: str | None) -> None:
        import orjson

        action_text = action if isinstance(action, str) else orjson.dumps(action, option=orjson.OPT_INDENT_2).decode()
        self._write(f"\n### Step {number}\n\n- at: {at}\n- thought:\n{fence(thought or '(empty)')}\n"
                    f"- action:\n{fence(action_text, 'json')}\n"
                    f"- execution_result:\n{fence(bounded(result or '(none)'))}\n")

    def case(self, case: Case | None) -> None:
        if case is None:
            self._write("\n### Case\n\n(the worker ended without a case)\n")
            return
        rows = "".join(f"- {c.criterion}: {c.evidence}\n" for c in case.criteria)
        doubts = "".join(f"- uncertain: {u}\n" for u in case.uncertainties)
        built = "\n(built by tilth from the end of the agent's output)\n" if case.built_from_output else ""
        self._write(f"\n### Case\n\n{fence(case.summary)}\n{rows}{doubts}{built}")

    def verdict(self, verdict: Verdict) -> None:
        self._write("\n### Verdict\n\n" + _verdict_lines(verdict)
                    + "".join(f"- {member.evaluator}: " + _verdict_lines(member)[2:] for member in verdict.panel))

    def outcome(self, text: str) -> None:
        self._write(f"\n### Outcome\n\n{text}\n")

    def final(self, state: str, at: str, message: str) -> None:
        self._write(f"\n## Final\n\n- status: {STATUS.get(state, state.upper())}\n- ended_at: {at}\n\n"
                    f"### Message\n\n{fence(message)}\n")


def _verdict_lines(v: Verdict) -> str:
    head = v.verdict + (f" ({v.category})" if v.category and not v.accepted else "")
    lines = [f"- {head}" + (f": {v.concern}" if v.concern else "")]
    lines += [f"  - evidence: {e}" for e in v.evidence]
    lines += [f"  - next step: {v.next_step}"] if v.next_step else []
    lines += [f"  - question for a person: {v.question}"] if v.question else []
    return "\n".join(lines) + "\n"
