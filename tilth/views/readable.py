"""Readable lines for a session's events: the foreground run's output and `tilth logs`.

One line per meaningful step: each tool call with a short summary of its arguments (and,
when a pre_tool hook refused it, the hook's reason on the same line), each check with pass
or fail, each verdict, each commit. Bookkeeping (context channels loaded, successful HTTP
attempts, token accounting, hooks that let a call through) is folded out of the default
view; `Readable(everything=True)` gives every event a line. Events this module has no
wording for get a compact `type: key=value` line, so nothing new is ever invisible. The phrases
the longer lines are made of (tool summaries, exit statuses, check outcomes) are
`views/event_phrases.py`'s.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Callable

import orjson

from tilth.store.redaction import redact_text
from tilth.views.event_phrases import (agent_run_line, auto_resume_note, auto_resumed_line, baseline_line, check_line,
                                       command_status, final_review_lines, learnings_line, scripted_line, short_sha,
                                       tool_summary, verify_line)
from tilth.views.figures import plural, short, verdict_label
from tilth.store.rollup_fold import Waiting, track_waiting
from tilth.views.reasons import session_end, task_failure

TASK_LEVEL = {"task_started", "task_done", "task_failed", "placeholder_taken", "accepted_committed",
              "task_requeued", "progress_restored", "learnings_proposed", "task_parked", "task_answered",
              "question_parked"}
ANSWERED_BY = {"answer": " (tilth answer)", "cli": " (tilth answer)", "dashboard": " (answered on the dashboard)"}
"""Who answered a parked task (`task_answered`'s `by`; `answer` in journals written before tilth/actions)."""
NOTED_BY = {None: "with `tilth note`", "cli": "with `tilth note`", "dashboard": "on the dashboard"}
"""Where the notes a runner took were left (`notes_taken`'s `by`, one per note; none before it was recorded)."""


def _notes_taken(d: dict[str, Any]) -> str:
    by = d.get("by") if isinstance(d.get("by"), list) else [None]
    where = dict.fromkeys(NOTED_BY.get(b, "by someone unknown") if isinstance(b, (str, type(None))) else
                          "by someone unknown" for b in by or [None])
    return f"took {plural(d.get('count') or 0, 'note')} left {' and '.join(where)}"


def _where(event: dict[str, Any]) -> str:
    task, it = event.get("task"), event.get("iter")
    if not task:
        return ""
    return f"[{task}] " if it is None or event["type"] in TASK_LEVEL else f"[{task} #{it}] "


def _compact(event: dict[str, Any]) -> str:
    fields = " ".join(f"{k}={short(v if isinstance(v, str) else orjson.dumps(v).decode(), 60)}"
                      for k, v in event["data"].items())
    return f"{event['type']}: {fields}" if fields else event["type"]


class Readable:
    """Turns events, in order, into readable lines. It keeps a little state: the context
    channels loaded for a prompt (summarised when the prompt is assembled) and the pre_tool
    refusals waiting for the tool call they refused."""

    def __init__(self, everything: bool = False):
        self.everything = everything
        self.channels: dict[str, list[int]] = {}
        self.refusals: list[str] = []
        self.refused_at = ""
        self.stop_by: str | None = None
        self.waiting: dict[str, Waiting] = {}
        """What each task waits on as of the last event seen (`tilth logs -f`'s heartbeat says it)."""
        self.verdicts: dict[str, tuple[int, Any, Any]] = {}
        """Each task's last verdict seen (attempt, category, concern): a FAILED line says why from it."""
        self.wording: dict[str, Callable[[dict[str, Any]], str | list[str] | None]] = {
            "session_created": lambda d: f"created branch {d['branch']} from {short_sha(d, 'base')}",
            "session_queued": lambda d: f"queued for the supervisor ({d.get('reason')})"
                                        + (f", to start at {d['start_at']}" if d.get("start_at") else ""),
            "session_crashed": lambda d: f"session crashed: {short(d.get('reason'))}"
                                         + (f" (exit {d['exit_code']})" if d.get("exit_code") is not None else "")
                                         + auto_resume_note(d),
            "session_auto_resumed": auto_resumed_line,
            "model_waiting": lambda d: None,  # the heartbeat says it, once the wait is long enough to matter
            "agent_started": lambda d: f"{d.get('role')} {d.get('agent')} started",
            "session_stopped": lambda d: ("session stopped from the dashboard" if d.get("by") == "dashboard"
                                          else "session stopped by `tilth stop`")
                                         + (f" --now (runner pid {d.get('pid')} killed)" if d.get("now") else ""),
            "session_started": lambda d: f"running with backend: {d['backend']}"
                                         + (" (resumed)" if d.get("resume") else ""),
            "sandbox": lambda d: "WARNING: the agent's commands run UNCONFINED (no sandbox); "
                                 "set TILTH_SANDBOX=bwrap to require one" if d["unconfined"] else
                                 "WARNING: the agent's commands share the HOST's network (its loopback services "
                                 "are reachable); install passt or slirp4netns"
                                 if d.get("network_confinement") == "host" else None,
            "task_started": lambda d: "started",
            "memory_load": self._channel,
            "prompt_assembled": self._prompt,
            "model_attempt": lambda d: None if d["outcome"] == "ok" else
                f"{d['role']} model call attempt {d['attempt']}: {d['outcome']}, retrying in {d['wait_s']}s",
            "model_call": lambda d: None,
            "tool_call": self._tool,
            "hook_run": self._hook,
            "checks_run": lambda d: [check_line(r) for r in d.get("results", [])],
            "verifies_run": lambda d: [verify_line(r) for r in d.get("results", [])],
            "baseline_recorded": baseline_line,
            "baseline_skipped": lambda d: f"no baseline on the base commit ({short(d.get('reason'))}): "
                                          "every failing check blocks",
            "final_review": final_review_lines,
            "scripted_step": scripted_line,
            "worker_done": lambda d: None if d.get("made_case") else f"worker failed: {short(d['failed'])}"
                                     if d.get("failed") else f"worker asks a person: {short(d['asked'])}"
                                     if d.get("asked") else "worker ended its turn without making a case",
            "agent_run": agent_run_line,
            "agent_step": lambda d: f"{d.get('role')} {d.get('agent')} {d.get('kind')}"
                                    + (f" {d['name']}" if d.get("name") else "") + f": {short(d.get('text'))}",
            "session_paused": lambda d: f"paused until {d.get('until')} ({short(d.get('reason'))})"
                                        + ("; waiting here" if d.get("in_process") else "; the supervisor resumes it"),
            "pause_over": lambda d: "pause over; going on",
            "notes_taken": _notes_taken,
            "notify_sent": lambda d: f"notified ({d.get('trigger')})",
            "notify_failed": lambda d: f"notification failed ({d.get('trigger')}): {short(d.get('error'))}",
            "memory_restored": lambda d: f"daily memory line restored for commit {short_sha(d)}"
                                         + ("" if d.get("written") else " (it was already there)"),
            "verdict": lambda d: f"verdict: {verdict_label(d['verdict'], d.get('category'), d.get('concern'))}",
            "commit": lambda d: None,
            "failed_commit": lambda d: None,
            "task_done": lambda d: f"done: commit {short_sha(d)}",
            "task_failed": lambda d: f"FAILED placeholder {short_sha(d)}: {short(d['reason'])}",  # without its verdict
            "parked_commit": lambda d: None,
            "task_parked": lambda d: f"PARKED placeholder {short_sha(d)}: waits for an answer to {short(d.get('question'))}",
            "question_parked": lambda d: f"parked on recovery (its question was in the ledger): {short_sha(d)}",
            "task_answered": lambda d: "answered; pending again" + ANSWERED_BY.get(str(d.get("by")), ""),
            "task_stalled": lambda d: f"stalled: rejected {d.get('count')} times in a row for the same "
                                      f"{d.get('same')} ({d.get('category')}); it parks with a question",
            "attempts_used_up": lambda d: f"{d.get('attempts')} attempts over all runs (max_attempts_per_task_total "
                                          f"{d.get('limit')}): no more; raise TILTH_MAX_ATTEMPTS_PER_TASK_TOTAL and "
                                          "resume to give it more",
            "question_repeated": lambda d: f"the {d.get('asked_by')} asked an answered question again: rejected",
            "learnings_proposed": learnings_line,
            "head_repaired": lambda d: f"HEAD said {d.get('was')}; pointed back at {d.get('branch')}",
            "branch_repaired": lambda d: f"the branch had been moved (to {short_sha(d, 'was')}); set back to "
                                         f"{short_sha(d, 'restored')}, files kept",
            "worker_commits_folded": lambda d: f"folded {plural(len(d.get('shas') or []), 'commit')} the agent made "
                                               "into the task's changes",
            "nested_repo_skipped": lambda d: "left nested repositories out of the commit: "
                                             + short(", ".join(d["paths"])),
            "secret_redacted": lambda d: "the change added secrets, replaced by [redacted] before any commit: "
                                         + short(", ".join(map(_secret_at, d["found"]))),
            "left_out": lambda d: ("the kept partial work" if d.get("placeholder") == "partial" else
                                   f"the {str(d.get('placeholder')).upper()} placeholder")
            + " left out what the task may not keep: " + short(", ".join(d.get("refused") or [])),
            "stale_git_locks_removed": lambda d: f"removed stale git locks: {short(', '.join(d['paths']))}",
            "stale_temp_files_removed": lambda d: f"removed half-written temp files: {short(', '.join(d['files']))}",
            "progress_restored": lambda d: f"progress line restored from commit {short_sha(d)}",
            "status_reconciled": lambda d: "task statuses corrected from the branch: " + ", ".join(
                f"{k} {v}" for k, v in d["changes"].items()) if d.get("changes") else None,
            "placeholder_taken": lambda d: f"took its placeholder {short_sha(d)} off the branch; retrying from its edits",
            "placeholders_shelved": lambda d: None,
            "placeholders_raised": lambda d: None,
            "placeholders_lowered": lambda d: f"starts from the last task commit {str(d.get('floor'))[:7]}; the "
                                              "placeholders above it go back on top after its commit",
            "placeholder_reapplied": lambda d: f"placeholder back on top of the branch: {short_sha(d)}" + (
                f" (its work conflicts in {short(', '.join(d['kept_off']))}: kept off the branch under {d.get('ref')})"
                if d.get("kept_off") else ""),
            "accepted_committed": lambda d: f"recovered an accepted attempt: commit {short_sha(d)}",
            "task_requeued": lambda d: "was interrupted; retrying with its edits kept",
            "cap_reached": lambda d: f"cap reached: {d['cap']} ({d['value']} >= {d['limit']})",
            "session_end": self._end,
            "session_report": lambda d: d["text"].rstrip().splitlines(),
        }

    def lines(self, event: dict[str, Any]) -> list[str]:
        """The event's lines (none when it is folded away), secrets redacted."""
        out = []
        if self.refusals and not (event["type"] == "tool_call" or _is_pre_tool(event)):
            out.append(self.refused_at + "; ".join(self.refusals))  # the refused call's own line never came
            self.refusals = []
        if _is_pre_tool(event):
            self.refused_at = _where(event)
        wording = self.wording.get(event["type"])
        if isinstance(event.get("data"), dict):
            task = event["task"] if isinstance(event.get("task"), str) else None
            track_waiting(self.waiting, event["type"], event["ts"], task,
                          event["iter"] if type(event.get("iter")) is int else None, event["data"])
        try:
            text = wording(event["data"]) if wording else _compact(event)
            if event["type"] in ("verdict", "task_failed") and event.get("task"):
                text = self._failure(event, text)
            if event["type"] == "acted" and event["data"].get("action") == "stop":
                self.stop_by = event["data"].get("by")  # the end it asks for says who asked
        except (KeyError, TypeError, AttributeError):  # a journal written by another version of tilth
            text = _compact(event)
        if text is None and self.everything:
            text = _compact(event)
        texts = [] if text is None else [text] if isinstance(text, str) else text
        where = _where(event)
        out += [where + t if where and t else t for t in texts]
        return [redact_text(line) for line in out]

    def _failure(self, event: dict[str, Any], text: str | list[str] | None) -> str | list[str] | None:
        """A FAILED line says why in words, from the task's last verdict (the event has only its code)."""
        data = event["data"]
        if event["type"] == "verdict":
            self.verdicts[event["task"]] = (event.get("iter") or 0, data.get("category"), data.get("concern"))
            return text
        if (last := self.verdicts.get(event["task"])) is None:
            return text
        return f"FAILED placeholder {short_sha(data)}: {task_failure(*last)}"

    def _end(self, data: dict[str, Any]) -> str:
        said = session_end(data["state"], data.get("reason"), data.get("by") or self.stop_by)
        if said.split(" ", 1)[0] == data["state"]:
            return f"session {said}"
        return f"session {data['state']}" + (f": {said}" if said else "")

    def _channel(self, data: dict[str, Any]) -> None:
        counts = self.channels.setdefault(str(data.get("role")), [0, 0])
        counts[0] += bool(data.get("present"))
        counts[1] += bool(data.get("truncated"))
        return None

    def _prompt(self, data: dict[str, Any]) -> str:
        loaded, truncated = self.channels.pop(str(data.get("role")), [0, 0])
        cut = f", {truncated} truncated" if truncated else ""
        chars = data.get("prompt_chars")  # events before prompts.jsonl carried the text itself
        chars = chars if type(chars) is int else len(data.get("prompt") or "")
        return f"{data.get('role')} prompt: {loaded} channels{cut}, {chars:,} chars"

    def _hook(self, data: dict[str, Any]) -> str | None:
        name = Path(str(data.get("hook", "hook"))).name
        output = short(re.sub(r"^blocked:\s*", "", data.get("output") or ""))
        if data["outcome"] == "blocked":
            text = f"blocked by {name}" + (f": {output}" if output else "")
        elif data["outcome"] == "failed":
            text = f"hook {name} failed (exit {data.get('exit_code')})" + (f": {output}" if output else "")
        elif data.get("point") == "pre_tool":
            return None
        else:
            return f"hook {name}: ok"
        if data.get("point") == "pre_tool":
            self.refusals.append(text)
            return text if self.everything else None
        return text

    def _tool(self, data: dict[str, Any]) -> str:
        role = "" if data.get("role") in (None, "worker") else f"({data['role']}) "
        line = role + tool_summary(str(data.get("name")), str(data.get("args") or ""))
        if self.refusals:
            line += " -> " + "; ".join(self.refusals)
            self.refusals = []
        elif not data.get("ok"):
            line += " -> error"
        elif (status := command_status(data)) is not None:
            line += f" -> {status}"
        return line


def _is_pre_tool(event: dict[str, Any]) -> bool:
    return bool(event["type"] == "hook_run" and event["data"].get("point") == "pre_tool")


_foreground = Readable()


def print_event(event: dict[str, Any]) -> None:
    """The foreground run's output: the same lines as `tilth logs`, without timestamps."""
    lines = _foreground.lines(event)
    if lines and event["type"] == "session_report":
        lines = ["", *lines]
    for line in lines:
        print(line, file=sys.stdout, flush=True)


def _secret_at(found: dict[str, Any]) -> str:
    """`path:line (kind)`; line 0 is the file's name (`run/secret_gate.NAME_LINE`)."""
    return f"{found['path']}{':' + str(found['line']) if found['line'] else ' (its name)'} ({found['kind']})"
