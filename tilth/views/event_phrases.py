"""The phrases a readable line is made of, from one event's data: a tool call's summary (its
arguments parsed even when the journal kept only their start), a command's exit status, a check's
or verify command's outcome, and the wording of the longer events (baseline, final review, scripted
step, agent run, crash auto-resume, learnings). `views/readable.Readable` picks them per event type."""

from __future__ import annotations

import re
from typing import Any

import orjson

from tilth.views.figures import plural, short

ARGUMENT_CHARS = 100
TOOL_ARGUMENTS = {"bash": ("command",), "read_file": ("path",), "write_file": ("path",), "edit_file": ("path",),
                  "list_files": ("pattern",), "grep": ("pattern", "path"), "note_write": ("name",),
                  "note_read": ("name",)}
STRING_FIELD = re.compile(r'"(\w+)"\s*:\s*"((?:[^"\\]|\\.)*)')


def _arguments(raw: str) -> dict[str, str]:
    try:
        parsed = orjson.loads(raw or "{}")
        if isinstance(parsed, dict):
            return {k: v if isinstance(v, str) else orjson.dumps(v).decode() for k, v in parsed.items()}
    except orjson.JSONDecodeError:
        pass
    # The event keeps only the first 500 characters of the arguments, so a long call is no
    # longer valid JSON; its leading string fields (the path, the command) are still readable.
    found: dict[str, str] = {}
    for key, value in STRING_FIELD.findall(raw or ""):
        try:
            found.setdefault(key, orjson.loads(f'"{value}"'))
        except orjson.JSONDecodeError:
            found.setdefault(key, value)
    return found


def tool_summary(name: str, raw_args: str) -> str:
    """`bash: pytest -q`, `write_file hello.py`, `grep TODO src`."""
    keys = TOOL_ARGUMENTS.get(name)
    args = _arguments(raw_args)
    detail = " ".join(args[k] for k in keys if args.get(k)) if keys else raw_args
    if not detail or detail == "{}":
        return name
    return f"{name}{': ' if name == 'bash' else ' '}{short(detail, ARGUMENT_CHARS)}"


def short_sha(data: dict[str, Any], key: str = "sha") -> str:
    return str(data.get(key) or "?")[:7]


EXIT_FOOTER = re.compile(r"\[exit code (-?\d+)\]\s*$")
"""A bash result's last line (agents/tools/shell.bash_text), for journals written before `exit_code` was recorded."""


def command_status(data: dict[str, Any]) -> str | None:
    """`exit 0`, `exit 2`, `stopped (timeout)` for a bash call that ran; None for other tools."""
    if data.get("stopped"):
        return f"stopped ({data['stopped']})"
    if isinstance(data.get("exit_code"), int):
        return f"exit {data['exit_code']}"
    if data.get("name") == "bash" and (found := EXIT_FOOTER.search(str(data.get("result") or ""))):
        return f"exit {found[1]}"
    return None


def check_line(result: dict[str, Any]) -> str:
    return f"check {short(result.get('command'), ARGUMENT_CHARS)}: {_outcome(result.get('exit_code'))}"


def _outcome(code: object) -> str:
    return "pass" if code == 0 else "FAIL (timed out)" if code is None else f"FAIL (exit {code})"


def verify_line(result: dict[str, Any]) -> str:
    return (f"verify {short(result.get('command'), ARGUMENT_CHARS)}: {_outcome(result.get('exit_code'))}"
            f" ({short(result.get('criterion'), ARGUMENT_CHARS)})")


def baseline_line(data: dict[str, Any]) -> str:
    checks, verifies = data.get("checks") or [], data.get("verifies") or []
    failing = [short(c.get("command"), ARGUMENT_CHARS) for c in checks + verifies if c.get("exit_code") != 0]
    return (f"baseline on the base commit {short_sha(data, 'commit')}: {plural(len(checks), 'check')}, "
            f"{plural(len(verifies), 'verify command')}; " + (f"already failing: {', '.join(failing)}" if failing else "all pass"))


def final_review_lines(data: dict[str, Any]) -> list[str]:
    if data.get("error"):
        return [f"final review of {short_sha(data, 'head')} not done: {short(data['error'])}"]
    findings = data.get("findings") or []
    head = f"final review of {short_sha(data, 'head')}: " + (plural(len(findings), "finding") if findings else "no findings")
    head += f" ({short(data['concern'])})" if data.get("concern") and not findings else ""
    added = data.get("tasks_added") or []
    head += f"; follow-up tasks added: {', '.join(added)}" if added else ""
    return [head] + [f"  - {short(f)}" for f in findings]


def scripted_line(data: dict[str, Any]) -> str:
    parts = [f"wrote {', '.join(data['written'])}"] if data.get("written") else []
    parts += [f"deleted {', '.join(data['deleted'])}"] if data.get("deleted") else []
    parts += [f"ran {short(c, ARGUMENT_CHARS)} (exit {code})"
              for c, code in zip(data.get("commands") or [], data.get("exit_codes") or [])]
    return "scripted step: " + ("; ".join(parts) or "no changes")


def agent_run_line(d: dict[str, Any]) -> str:
    ending = f"stopped ({d['stopped']})" if d.get("stopped") else f"exit {d.get('exit_code')}"
    answer = next((f", {kind} {d[kind]}" for kind in ("case", "verdict") if d.get(kind)), "")
    limit = f", usage limit: {short((d.get('limit') or {}).get('message'))}" if d.get("limit") else ""
    role = f"{d['role']} " if d.get("role") and d.get("role") != "worker" else ""
    who = d.get("command") if d.get("agent") in (None, "command") else d["agent"]
    return (f"{role}agent {who}: {ending}, {d.get('duration_ms', 0) / 1000:.1f}s"
            f"{answer}{limit}; output in {d.get('log')}")


def auto_resume_note(data: dict[str, Any]) -> str:
    """What the supervisor will do about a crash: `; auto-resume 2/3 at 12:00:03`, or that it gave up."""
    outcome, done = data.get("auto_resume"), data.get("auto_resumes")
    done = done if type(done) is int else 0
    of = f"/{data['attempts']}" if type(data.get("attempts")) is int else ""
    if outcome == "at":
        at = str(data.get("auto_resume_at") or "")
        return f"; auto-resume {done + 1}{of} at {at[11:19] if len(at) >= 19 else at or '?'}"
    if outcome == "gave_up":
        return f"; auto-resume gave up after {done} attempt{'' if done == 1 else 's'} (`tilth resume` continues it)"
    return ""


def auto_resumed_line(data: dict[str, Any]) -> str:
    """The supervisor resumed a crashed session by itself: which attempt of how many, after what wait."""
    of = f"/{data['attempts']}" if type(data.get("attempts")) is int else ""
    wait = data.get("backoff_s")
    waited = f", after a {wait:g}s backoff" if type(wait) in (int, float) else ""
    return f"auto-resumed ({data['attempt']}{of}{waited}): queued as `tilth resume` would"


def learnings_line(data: dict[str, Any]) -> str | None:
    if data.get("error"):
        return f"self-improvement step failed: {short(data['error'])}"
    count = data.get("count") or 0
    return f"proposed {count} learning{'' if count == 1 else 's'} (`tilth learnings`)" if count else None
