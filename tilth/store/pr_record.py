"""`sessions/<id>/pr.json`: the session's pull request as tilth last saw it and what it has done about it.

Written atomically after each poll and before each action it records, so a restart acts on nothing twice:
`acted` holds one signature per condition (the facts an action answered: a head, the failing checks), `reruns`
the workflow runs re-run once, `fixes` the follow-up tasks made per distinct failure. Read without pydantic
(strict type checks: anything odd is one line naming the file).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tilth.core.errors import BadInput
from tilth.store.jsonio import write_atomic

PR_FILE = "pr.json"
STATES = ("waiting_checks", "ci_failing", "changes_requested", "behind", "conflicted", "green", "merged", "closed",
          "needs_person")


@dataclass
class PrRecord:
    number: int
    url: str
    repo: str
    """HOST/OWNER/NAME, as gh's `--repo` takes it."""
    remote: str = "origin"
    state: str = "waiting_checks"
    head: str = ""
    base: str = ""
    conditions: list[str] = field(default_factory=list)
    """Every condition the last poll found, the state being the first that decides."""
    fixes: dict[str, int] = field(default_factory=dict)
    """Follow-up tasks made per distinct failure (its checks' names)."""
    reruns: list[int] = field(default_factory=list)
    acted: dict[str, str] = field(default_factory=dict)
    question: str = ""
    """Why the PR waits for a person (needs_person)."""
    polled: str = ""
    reviews: dict[str, str] = field(default_factory=dict)
    """Each review item (`<thread>:<comment>`, `review:<hash>`; a bare thread id from an older tilth stands for
    the whole thread) made into a follow-up task: item -> task."""
    replied: list[str] = field(default_factory=list)
    """Review threads answered on the PR, once per batch: `<thread>@<task>` (a bare thread id from an older tilth:
    answered for its one batch)."""
    own_comments: list[str] = field(default_factory=list)
    """The ids of the comments tilth posted (its answers): never read as review comments."""
    unheeded: list[str] = field(default_factory=list)
    """Review comments from people without write access: shown to the person, never to an agent."""
    followups: list[str] = field(default_factory=list)
    """The follow-up tasks made for this PR (CI fixes, review batches, rebases), counted against pr_max_followups."""

    @property
    def followed(self) -> bool:
        return self.state not in ("merged", "closed")

    def shown(self) -> dict[str, Any]:
        """`tilth status --json`'s `pr`."""
        return {"number": self.number, "url": self.url, "state": self.state, "head": self.head,
                "fixes": sum(self.fixes.values())}


def pr_path(session_dir: Path) -> Path:
    return session_dir / PR_FILE


TYPES: dict[str, type | tuple[type, ...]] = {
    "number": int, "url": str, "repo": str, "remote": str, "state": str, "head": str, "base": str,
    "conditions": list, "fixes": dict, "reruns": list, "acted": dict, "question": str, "polled": str,
    "reviews": dict, "replied": list, "unheeded": list, "own_comments": list, "followups": list}


def load_pr(session_dir: Path) -> PrRecord | None:
    path = pr_path(session_dir)
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError:
        raise BadInput(f"{path} is not JSON") from None
    if not isinstance(raw, dict) or any(k in raw and not isinstance(raw[k], t) for k, t in TYPES.items()) \
            or not all(k in raw for k in ("number", "url", "repo")) or raw.get("state", "waiting_checks") not in STATES:
        raise BadInput(f"{path} is not a pull request record tilth wrote")
    return PrRecord(**{k: raw[k] for k in TYPES if k in raw})


def save_pr(session_dir: Path, record: PrRecord) -> None:
    write_atomic(pr_path(session_dir), json.dumps(asdict(record), indent=2).encode())
