"""What bounds a followed pull request's follow-up work: the session's own caps, and a count per pull request.

Every follow-up task (a CI fix, a review batch, a conflict or a check the rebase broke) is made by `add_followup`
and run by `Bounded.run`, so each is counted once in pr.json (`followups`) and no agent starts once a bound is
reached: the session's spend, token or wall-clock cap as `tilth resume` would run it (the session's recorded
settings, with what this shell sets over them), or `pr_max_followups` tasks on this PR. A reached bound raises
`OutOfBounds`, and the PR waits for a person with a question naming it. Re-running a failed CI job, rebasing
without a conflict and re-checking cost no model call and are not bounded here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from tilth.agents.accounting import Caps, Meter
from tilth.core.config import Settings, env_name
from tilth.core.errors import TilthError
from tilth.store.home import SessionPaths
from tilth.store.pr_record import PrRecord, save_pr
from tilth.store.prd import add_tasks
from tilth.store.prd_peek import peek_plan
from tilth.store.rollup import load_rollup
from tilth.store.session import SessionRecord


class OutOfBounds(TilthError):
    """A bound stops follow-up work; the message is the question the PR waits with."""


def resume_settings(paths: SessionPaths, record: SessionRecord) -> Settings:
    """The settings `tilth resume <id> --foreground` from this process runs the session with."""
    from tilth.actions.resuming import shell_overrides
    from tilth.core.settings_load import load_settings_with_sources
    from tilth.core.travel import with_session_view

    settings, sources = load_settings_with_sources(paths.home)
    return with_session_view(settings, {**record.settings, **shell_overrides(settings, sources, own_shell=True)})


def cap_reached(paths: SessionPaths, record: SessionRecord) -> str:
    """The session cap that stops any further agent work on it, in words ("" when none has been reached)."""
    rollup = load_rollup(paths.events)
    reached = Caps.session_cap_reached(resume_settings(paths, record), Meter.from_rollup(rollup),
                                       rollup.clock.seconds() or 0.0)
    if reached is None:
        return ""
    cap, limit, value = reached
    return (f"the session's {cap} is reached ({value:g} of {limit:g}), so no agent takes the follow-up work; raise "
            f"it ({env_name(cap)} or config.toml) and `tilth follow {record.id} --again`")


@dataclass(frozen=True)
class Bounded:
    paths: SessionPaths
    record: SessionRecord
    pr: PrRecord
    limit: int
    """pr_max_followups."""

    def add_followup(self, spec: dict[str, Any], prefix: str, mark: str) -> str:
        """The follow-up task whose description carries `mark`: found in the plan (made before a restart), or
        added now when every bound allows one more; its id, recorded in pr.json."""
        task_id = self.made(mark)
        if not task_id:
            if len(self.pr.followups) >= self.limit:
                raise OutOfBounds(f"{len(self.pr.followups)} follow-up tasks were made for PR #{self.pr.number} "
                                  f"(pr_max_followups: {self.limit}); look at {self.pr.url}, then push, or raise "
                                  f"pr_max_followups and `tilth follow {self.record.id} --again`")
            self.ensure_under_caps()
            if not str(spec["description"]).rstrip().endswith(mark):
                spec = {**spec, "description": f"{spec['description']}\n\n{mark}"}
            task_id = add_tasks(self.paths.prd, [spec], prefix=prefix)[0]
        if task_id not in self.pr.followups:
            self.pr.followups.append(task_id)
            save_pr(self.paths.dir, self.pr)
        return task_id

    def made(self, mark: str) -> str:
        """The plan's task that ends with `mark` ("" when none does). Only the end counts: a mark inside the forge's
        words quoted above it (a log line can say anything) never passes for a task already made."""
        return next((t.id for t in peek_plan(self.paths.prd) if t.description.rstrip().endswith(mark)), "")

    def ensure_under_caps(self) -> None:
        if question := cap_reached(self.paths, self.record):
            raise OutOfBounds(question)

    def run(self, run_session: Callable[[str], int]) -> Callable[[str], int]:
        """`run_session`, started only while the session is under its caps."""
        def bounded(session_id: str) -> int:
            self.ensure_under_caps()
            return run_session(session_id)
        return bounded
