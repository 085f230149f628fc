"""What a pull request's facts mean: every condition at once, one state from them, and each in words.

All conditions are found together so one never hides another; the state is the first that decides, in
`ORDER`. The checks that count are the ones the base branch's protection requires, or every check when it
requires none. Green is all of them passed on the current head with at least one and nothing else open: a
PR in conflict gets no CI at all, so "0 checks" is never green.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilth.git.forge import Check, PullFacts

ORDER = ("merged", "closed", "needs_person", "conflicted", "ci_failing", "changes_requested", "behind",
         "waiting_checks", "green")
WORDS = {
    "waiting_checks": "waiting for its checks",
    "ci_failing": "CI failing",
    "changes_requested": "changes requested",
    "behind": "behind its base",
    "conflicted": "in conflict with its base",
    "green": "green: every check passed on its head; merging is yours",
    "merged": "merged",
    "closed": "closed without merging",
    "needs_person": "waiting for you",
}


@dataclass(frozen=True)
class Reading:
    state: str
    conditions: tuple[str, ...]
    failing: tuple[Check, ...]

    def signature(self, condition: str, head: str) -> str:
        """What an action on `condition` answered: the head, and for CI the failing checks."""
        if condition == "ci_failing":
            return f"{head}:" + ",".join(sorted(failure_key(self.failing).split(",")))
        return head


def failure_key(failing: tuple[Check, ...]) -> str:
    """A distinct failure: the names of the checks failing, whatever the head."""
    return ",".join(sorted({c.name for c in failing}))


def read(facts: PullFacts, parked: bool) -> Reading:
    found: list[str] = []
    if facts.state == "MERGED":
        found.append("merged")
    elif facts.state == "CLOSED":
        found.append("closed")
    if parked:
        found.append("needs_person")
    if facts.mergeable == "CONFLICTING" or facts.merge_state == "DIRTY":
        found.append("conflicted")
    counted = tuple(c for c in facts.checks if c.required) or facts.checks
    failing = tuple(c for c in counted if c.failed)
    if failing:
        found.append("ci_failing")
    if facts.review_decision == "CHANGES_REQUESTED":
        found.append("changes_requested")
    if facts.merge_state == "BEHIND":
        found.append("behind")
    if not counted or not all(c.passed or c.failed for c in counted) or facts.mergeable == "UNKNOWN":
        found.append("waiting_checks")
    if not found:
        found.append("green")
    return Reading(min(found, key=ORDER.index), tuple(sorted(found, key=ORDER.index)), failing)


def in_words(state: str, number: int, fixes: int, question: str = "") -> str:
    fixed = f"; {fixes} follow-up fix{'es' if fixes != 1 else ''} pushed" if fixes else ""
    asked = f": {question}" if state == "needs_person" and question else ""
    return f"PR #{number} {WORDS.get(state, state)}{asked}{fixed}"


FOLLOWUP_PREFIXES = ("CI-", "RV-", "BASE-")
"""The follow-up tasks `tilth follow` adds: a CI failure, a batch of review comments, a conflict with the base."""


def followups(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan's follow-up tasks, in plan order (each task as `tilth status --json` shows it)."""
    return [t for t in tasks if str(t.get("id", "")).startswith(FOLLOWUP_PREFIXES)]


def pr_words(pr: dict[str, Any]) -> str:
    """`tilth status --json`'s `pr` in words: `PR #1 CI failing; 1 follow-up fix pushed`."""
    return in_words(str(pr.get("state", "")), int(pr.get("number", 0)), int(pr.get("fixes", 0)),
                    str(pr.get("question") or ""))
