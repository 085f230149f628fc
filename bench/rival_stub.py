"""Zero-latency scripted model for the *other* tilth (AlteredCraft's, PyPI `tilth` 0.2.0).

That harness speaks the OpenAI Chat Completions wire format through the `openai` SDK
(`client.chat.completions.create`, non-streaming, `tools=[...]`), so the stub is our own
`tests/fake_openai.py` server with a handler that plays its two roles:

- worker (model `worker`): the first turn of a task calls `write_file` with
  `out/<task id>.txt`; once that tool result is in the history it calls
  `submit_case(summary, ac_coverage=[{criterion, addressed_by}])`.
- evaluator (model `evaluator`, offered only `submit_verdict`): calls
  `submit_verdict(verdict="accept", rejection_category=None, concern, evidence=[],
  next_step=None)`.

The task id is read from the worker prompt's `**ID:** T-NNN` line. Every request is
stamped (wall clock, role, task id, step) in `RivalStub.log`, which lets the driver
cross-check the rival's own event timestamps.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_openai import FakeOpenAI, call, reply  # noqa: E402

WORKER_MODEL = "worker"
EVALUATOR_MODEL = "evaluator"
_TASK_ID = re.compile(r"^\*\*ID:\*\* (T-\d+)\s*$", re.M)
_EVAL_TASK_ID = re.compile(r"^# Task to evaluate: (T-\d+)", re.M)


def task_file(task_id: str) -> str:
    """The one file a task's worker writes, relative to the worktree."""
    return f"out/{task_id}.txt"


def task_content(task_id: str) -> str:
    return f"task {task_id}\n"


def _user_text(messages: list[dict]) -> str:
    for m in messages:
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"]
    return ""


class RivalStub:
    """`with RivalStub() as stub:` serves at `stub.base_url`; `stub.log` holds
    `(time.time(), role, task_id, step)` per chat request."""

    def __init__(self) -> None:
        self.server = FakeOpenAI()
        self.log: list[tuple[float, str, str | None, str]] = []
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def __enter__(self) -> RivalStub:
        self.server.__enter__()
        self.server.set_handler(self.handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)

    def _stamp(self, role: str, task_id: str | None, step: str) -> None:
        with self._lock:
            self.log.append((time.time(), role, task_id, step))

    def handle(self, body: dict):
        self.server.requests.clear()  # the stub needs no request history; keep memory flat
        messages = body.get("messages") or []
        tool_names = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
        if body.get("model") == EVALUATOR_MODEL or tool_names == {"submit_verdict"}:
            m = _EVAL_TASK_ID.search(_user_text(messages))
            self._stamp("evaluator", m.group(1) if m else None, "verdict")
            return reply(tool_calls=[call("submit_verdict", verdict="accept", rejection_category=None,
                                          concern="The file exists with the expected content.",
                                          evidence=[], next_step=None)])
        m = _TASK_ID.search(_user_text(messages))
        if m is None:
            raise ValueError("worker prompt has no '**ID:** T-NNN' line")
        task_id = m.group(1)
        if not any(msg.get("role") == "tool" for msg in messages):
            self._stamp("worker", task_id, "write")
            return reply(tool_calls=[call("write_file", path=task_file(task_id), content=task_content(task_id))])
        self._stamp("worker", task_id, "submit")
        return reply(tool_calls=[call(
            "submit_case", summary=f"Wrote {task_file(task_id)}.",
            ac_coverage=[{"criterion": f"{task_file(task_id)} exists",
                          "addressed_by": f"{task_file(task_id)} — new file"}])])
