"""Why, in words: one sentence for a person from an outcome's code and the last verdict (`failed
after 2 attempts: the evaluator found an acceptance criterion not met: "..."`), and from a
session's end reason (`stopped by `tilth stop``). Every report a person reads (status, the end
report, the PR body, notifications, the digest, the dashboard) says why through these; the codes
stay in `--json` and the events."""

from __future__ import annotations

from tilth.views.figures import plural, short

FOUND = {
    "acceptance_gap": "the evaluator found an acceptance criterion not met",
    "weak_test": "the evaluator found the tests too weak",
    "half_finished": "the evaluator found the change half finished",
    "scope_creep": "the evaluator found changes beyond the task",
    "spec_violation": "the evaluator found the change against the specification",
    "other": "the evaluator rejected it",
    "check_failed": "a check failed",
    "verify_failed": "a criterion's verify command failed",
    "tests_weakened": "the change weakened tests",
    "protected_path": "the change touched a protected path",
    "secret_added": "the change added a secret",
    "no_change": "the attempt changed nothing",
    "agent_failed": "the worker's agent failed",
    "no_case": "the worker ended its turn without making its case",
    "parse_failed": "the evaluator's answer could not be read",
    "asked_before": "the same question came again after it was answered",
    "stalled": "the attempts kept meeting the same rejection",
    "evaluator_question": "the evaluator asked a question",
}
"""What each rejection category means, said as what was found."""

CONCERN_CHARS = 300


def rejection(category: str | None, concern: str | None, limit: int = CONCERN_CHARS) -> str:
    """`the evaluator found the tests too weak: "no test covers the empty input"`."""
    found = FOUND.get(category or "", f"it was rejected ({category.replace('_', ' ')})"
                      if category and category != "none" else "it was rejected")
    said = " ".join(str(concern or "").split())
    return found + (f': "{short(said, limit)}"' if said else "")


def task_failure(attempts: int, category: str | None, concern: str | None, limit: int = CONCERN_CHARS) -> str:
    """Why a task failed: `failed after 2 attempts: <what the last rejection found>: "<concern>"`."""
    return f"failed after {plural(attempts, 'attempt')}: {rejection(category, concern, limit)}"


STOP_BY = {"cli": "by `tilth stop`", "dashboard": "from the dashboard"}


def stopped(by: str | None = None) -> str:
    """`stopped by `tilth stop``, `stopped from the dashboard`, or `stopped on request` when nobody said who
    (a signal: `tilth stop`, Ctrl-C, a shutdown)."""
    return "stopped " + (STOP_BY.get(by, f"by {by}") if by else "on request")


def session_end(state: str, reason: str | None, by: str | None = None) -> str:
    """A session's end reason as a person reads it: a plain stop says who stopped it, the rest
    (caps, full disks, failed tasks, whose words are already sentences) as recorded."""
    text = (reason or "").strip()
    if state == "stopped" and text in ("", "stop requested", "stopped"):
        return stopped(by)
    return text


def verdict_words(verdict: str | None, category: str | None, concern: str | None, limit: int = CONCERN_CHARS) -> str:
    """A last verdict as a person reads it: `accepted`, `rejected: the evaluator found ...: "..."`,
    `waits for an answer: "..."` (`figures.verdict_label` is the same verdict with its codes)."""
    if verdict == "accept":
        return "accepted"
    if verdict == "needs_human":
        said = " ".join(str(concern or "").split())
        return "waits for an answer" + (f': "{short(said, limit)}"' if said else "")
    return f"rejected: {rejection(category, concern, limit)}" if verdict else ""


def task_outcome(outcome: str, session_state: str) -> str:
    """A task's outcome as a report shows it: an `in_progress` one in a session that no longer runs
    was `stopped`, `crashed` or `paused` in the middle (else `interrupted`), never still going."""
    if outcome != "in_progress" or session_state in ("running", "queued"):
        return outcome
    return session_state if session_state in ("stopped", "crashed", "paused") else "interrupted"
