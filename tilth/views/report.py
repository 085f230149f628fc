"""Human-readable lines for a session running in the foreground."""

from __future__ import annotations

import sys
from typing import Any


def line_for(event: dict[str, Any]) -> str | None:
    kind, task, it, data = event["type"], event["task"], event["iter"], event["data"]
    if kind == "session_started":
        return f"running with backend: {data['backend']}"
    if kind == "sandbox" and data["unconfined"]:
        return "WARNING: the agent's commands run UNCONFINED (no sandbox); set TILTH_SANDBOX=bwrap to require one"
    if kind == "task_started":
        return f"[{task}] started"
    if kind == "verdict":
        concern = f" - {data['concern']}" if data.get("concern") and data["verdict"] != "accept" else ""
        category = f" ({data['category']})" if data.get("category") else ""
        return f"[{task}] attempt {it}: {data['verdict']}{category}{concern}"
    if kind == "task_done":
        return f"[{task}] done: commit {data['sha'][:7]}"
    if kind == "task_failed":
        return f"[{task}] FAILED placeholder {data['sha'][:7]}: {data['reason']}"
    if kind == "placeholder_unwound":
        return f"[{task}] unwound FAILED placeholder {data['sha'][:7]}; retrying from its edits"
    if kind == "accepted_committed":
        return f"[{task}] recovered an accepted attempt: commit {data['sha'][:7]}"
    if kind == "task_requeued":
        return f"[{task}] was interrupted; retrying with its edits kept"
    if kind == "model_attempt" and data["outcome"] != "ok":
        return f"[{task}] {data['role']} model call attempt {data['attempt']}: {data['outcome']}, retrying in {data['wait_s']}s"
    if kind == "cap_reached":
        return f"cap reached: {data['cap']} ({data['value']} >= {data['limit']})"
    if kind == "session_report":
        return "\n" + data["text"].rstrip()
    if kind == "session_end":
        return f"session {data['state']}" + (f": {data['reason']}" if data.get("reason") else "")
    return None


def print_event(event: dict[str, Any]) -> None:
    text = line_for(event)
    if text is not None:
        print(text, file=sys.stdout, flush=True)
