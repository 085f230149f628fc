"""The stall breaker: a task rejected for the same reason again and again stops early and parks
with a question built from the repeated concern, instead of burning every attempt of every run.

An attempt repeats the one before it when both are rejections of the same category and either
their concerns say the same thing (compared without case, punctuation, numbers and paths'
differences below `SIMILAR`) or the worker's diff is byte for byte the previous attempt's.
`stall_after` repeats in a row (the ledger's, so across resumes) park the task.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from tilth.store.events import EventLog, document
from tilth.store.ledger import STALL_QUESTION, LedgerEntry, Verdict

document({"task_stalled": ("a task was rejected for the same reason `count` times in a row and parks with a question; "
                           "data: count, category, concern, same (concern|diff: what repeated)",
                           "count category concern same")})

SIMILAR = 0.8
"""SequenceMatcher ratio of two normalised concerns from which they say the same thing."""
STALLED = STALL_QUESTION


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^a-z]+", " ", text.lower()).split())


def same_concern(a: str, b: str) -> bool:
    left, right = _normal(a), _normal(b)
    return left == right or SequenceMatcher(None, left, right).ratio() >= SIMILAR


def repeats(verdict: Verdict, diff_sha: str | None, previous: LedgerEntry, previous_diff_sha: str | None) -> str | None:
    """What this rejection repeats of the previous attempt's (`concern` or `diff`), or None."""
    if verdict.verdict != "reject" or previous.verdict.verdict != "reject":
        return None
    if verdict.category != previous.verdict.category:
        return None
    if same_concern(verdict.concern, previous.verdict.concern):
        return "concern"
    return "diff" if previous_diff_sha is not None and diff_sha == previous_diff_sha else None


def stalled_verdict(task_id: str, verdict: Verdict, count: int) -> Verdict:
    """The parking verdict: the repeated concern as a question for a person."""
    said = " ".join(verdict.concern.split())
    # quoted, so a concern without a final stop (or cut at its limit) never runs into the question
    quoted = f'"{said[:1500]}..."' if len(said) > 1500 else f'"{said}"'
    concern = (quoted if said[-1:] in (".", "!", "?") else quoted + ".") if said else "(no concern given)."
    question = (f"{task_id} was rejected {count} times in a row for the same reason ({verdict.category}): {concern} "
                "What should change? Answer with a hint or a narrower scope (tilth answer), or take the task out "
                "of the plan (tilth plan edit).")
    return Verdict(verdict="needs_human", category=STALLED, concern=verdict.concern, evidence=verdict.evidence,
                   next_step=verdict.next_step, question=question)


def break_stall(diffs: dict[int, str], stall_after: int, events: EventLog, task_id: str, iteration: int,
                verdict: Verdict, entries: list[LedgerEntry], diff_sha: str) -> Verdict:
    """The verdict, or a parking one once `stall_after` rejections in a row repeat each other.
    `diffs`: this task's attempts' diffs (sha1) in this run, by iteration; this one's is added."""
    diffs[iteration] = diff_sha
    if stall_after < 2:
        return verdict
    current_sha: str | None = diff_sha
    count, current, what = 1, verdict, None
    for previous in reversed(entries):
        same = repeats(current, current_sha, previous, diffs.get(previous.iter))
        if same is None:
            break
        count, current, current_sha, what = count + 1, previous.verdict, diffs.get(previous.iter), what or same
        if count >= stall_after:
            events.emit("task_stalled", task_id, iteration, count=count, category=verdict.category,
                        concern=verdict.concern, same=what)
            return stalled_verdict(task_id, verdict, count)
    return verdict
