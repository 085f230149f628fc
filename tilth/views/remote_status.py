"""A dispatched session as the broker holds it, in words: `tilth status`'s lines for one session
(`one_lines`) and for every one the broker lists (`listing_lines`), and the pieces the dashboard shows
too (`tasks_of`, `questions_of`, `progress_of`, `current_of`). The broker's state hashes come in as plain
dicts; anything in them is untrusted text, shown, never used as a path or a command."""

from __future__ import annotations

from typing import Any

LIVE = ("running", "paused", "crashed")
"""The broker states in which a session has a current task; an ended one has none."""


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def tasks_of(state: dict[str, Any]) -> list[dict[str, str]]:
    """Each task the broker lists (id, title, status as text); an entry of another shape is left out."""
    listed = state.get("tasks")
    return [{"id": _text(t.get("id")), "title": _text(t.get("title")), "status": _text(t.get("status")) or "?"}
            for t in (listed if isinstance(listed, list) else []) if isinstance(t, dict) and _text(t.get("id"))]


def questions_of(state: dict[str, Any]) -> list[dict[str, str]]:
    """Each open question the broker lists (task, question as text)."""
    listed = state.get("questions")
    return [{"task": _text(q.get("task")), "question": _text(q.get("question"))}
            for q in (listed if isinstance(listed, list) else []) if isinstance(q, dict) and _text(q.get("task"))]


def progress_of(state: dict[str, Any]) -> tuple[int, int]:
    """(done, tasks) from the `<done>/<tasks>` the broker holds; (0, 0) when it says nothing usable."""
    done, _, total = _text(state.get("progress")).partition("/")
    if not (done.isdigit() and total.isdigit()):
        return 0, 0
    return int(done), int(total)


def current_of(state: dict[str, Any]) -> str:
    """The task in progress; none once the session no longer runs."""
    return _text(state.get("current")) if state.get("state") in LIVE else ""


def one_lines(state: dict[str, Any], session_id: str) -> list[str]:
    """`tilth status <id>` of a dispatched session."""
    lines = [f"session {session_id}: {state.get('state')} ({state.get('progress', '?')} done), "
             f"dispatched" + (f", on {state['worker']}" if state.get("worker") else "")]
    if state.get("reason"):
        lines.append(f"reason   {state['reason']}")
    lines += [f"branch   {state.get('branch', '')} on {state.get('remote', '')}"]
    lines += [f"  {t['status']:<11} {t['id']}: {t['title']}" for t in tasks_of(state)]
    for q in questions_of(state):
        lines += [f"question {q['task']} {q['question']}",
                  f"  answer:  tilth answer {session_id} {q['task']} \"<your answer>\""]
    return lines


def listing_lines(states: list[dict[str, Any]], lost: list[dict[str, Any]], down: str | None) -> list[str]:
    """The lines `tilth status` appends for the broker's sessions (none when it has none); a state
    marked `recorded` is a finished session only the remote's record has, `lost` the unfinished ones."""
    if down:
        return [f"dispatched: {down}"]
    if not states and not lost:
        return []
    return ["dispatched sessions (broker):"] + [
        f"  {s['id']}  {s.get('state', '?'):<8} {s.get('progress', '?'):>5}  {current_of(s) or '-':<8} "
        f"{s.get('worker') or '-'}" + (f"  {s['reason']}" if s.get("state") == "refused" else "")
        + ("  (from the remote's record: the broker forgot it; `tilth resume --forgotten` registers it, "
           "nothing runs)" if s.get("recorded") else "")
        for s in states] + [forgotten_line(s) for s in lost]


def forgotten_line(lost: dict[str, Any]) -> str:
    i = lost["id"]
    if lost.get("worker"):
        return (f"  {i}  forgotten  {lost.get('state')} on the remote ({lost.get('progress', '?')} done), held by "
                f"{lost['worker']}: it carries on, and the broker lists it again at its next step")
    if lost.get("reason"):
        return f"  {i}  forgotten  on the remote, not in the broker, its record not trusted ({lost['reason']})"
    return (f"  {i}  forgotten  {lost.get('state')} on the remote ({lost.get('progress', '?')} done), not in the "
            f"broker: `tilth resume {i}` queues it again (`tilth resume --forgotten`: every such session)")
