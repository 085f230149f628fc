"""A pull request whose base moved: the session branch replayed onto the PR's own base, re-checked, pushed
with `--force-with-lease` against the exact head the PR had; or a conflict sized and resolved by a task.

Behind or conflicted, the same steps, each recorded in `sessions/<id>/rebase.json` (atomically) before the
next, so a restart picks up where it stopped and acts on nothing twice:

1. `replayed`: the PR's base ref fetched (`refs/tilth/base/<id>`), the conflicts sized (`git merge-tree`): a
   conflict in meaning (a file deleted, renamed or binary on one side) or larger than `MAX_PATHS` paths or
   `MAX_HUNKS` conflict regions parks the PR with a question; else the branch's commits are cherry-picked one by
   one onto the base (authors, messages and trailers kept; a conflicting path keeps the base's side).
2. `moved`: the session branch and worktree at the result, under the session lock.
3. `task` (when needed): a follow-up task, run by the session's own worker and evaluator, re-applies the
   session's change to the conflicting paths on top of the base, or fixes a check the rebase broke.
   Otherwise the checks and the done tasks' verify commands run on the result, confined as the runner runs
   them; one failing that did not fail on the base commit makes that task instead of a push.
4. `checked`: pushed with the lease; the journal removed. A refused lease (someone pushed to the PR meanwhile)
   pushes nothing and parks the PR.
Never a merge commit; tilth never merges.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from tilth.agents.check_bundle import CheckBundle
from tilth.agents.confinement import session_confinement
from tilth.agents.sandbox import resolve_mode
from tilth.cli.follow_bounds import Bounded
from tilth.core.faults import checkpoint
from tilth.core.settings_load import load_settings
from tilth.git import gitcli
from tilth.git.forge import PullFacts
from tilth.git.rebase_trees import commits_since, conflicts, fetch_base, move, replay
from tilth.git.worktree_git import session_git_dir
from tilth.store.baseline import load_baseline
from tilth.store.events import EventLog, document
from tilth.store.home import SessionPaths
from tilth.store.jsonio import write_atomic
from tilth.store.lock import SessionLock
from tilth.store.pr_record import PrRecord
from tilth.store.prd_peek import peek_plan
from tilth.store.session import SessionRecord

JOURNAL = "rebase.json"
TASK_PREFIX = "BASE-"
MAX_PATHS = 5
MAX_HUNKS = 12
"""Beyond these a conflict is not a task for an agent: the PR waits for a person."""
MARK = "Rebase of: "
DIFF_LINES = 200

document({
    "pr_rebased": ("the session branch was replayed onto the pull request's moved base, re-checked and pushed with "
                   "--force-with-lease against the PR's old head; data: number, old, new, base, base_sha, task",
                   "number old new base base_sha task"),
})

Park = Callable[[str], None]


def follow_base(paths: SessionPaths, record: SessionRecord, pr: PrRecord, facts: PullFacts, events: EventLog,
                said: list[str], run_session: Callable[[str], int], bounds: Bounded, park: Park) -> None:
    journal = load_journal(paths.dir)
    if journal is None or journal["old"] != facts.head:
        tip = gitcli.branch_tip(record.repo, record.branch)
        if tip != facts.head:
            park(f"the PR's head {facts.head[:7]} is not {record.branch}'s tip {(tip or 'none')[:7]} (someone pushed "
                 f"to one of them), so tilth does not rebase it; bring them together and `tilth follow` again")
            return
        journal = replayed(paths, record, pr, facts, park)
        if journal is None:
            return
    if journal["step"] == "replayed":
        with SessionLock(paths.lock, record.id, role="cli"):
            move(session_git_dir(record.repo, record.id), record.worktree, record.branch, journal["old"], journal["new"])
        step(paths, journal, "moved")
    if journal["step"] == "moved":
        task = follow_up_task(paths, record, pr, journal, events, bounds)
        step(paths, journal, "task" if task else "checked", task=task)
    if journal["step"] == "task":
        status = task_status(paths, journal["task"])
        if status in ("pending", "in_progress"):
            run_session(record.id)
            status = task_status(paths, journal["task"])
        if status != "done":
            park(f"the rebase's follow-up task {journal['task']} ended {status or 'missing'}; see `tilth status "
                 f"{record.id}`")
            return
        step(paths, journal, "checked")
    checkpoint("pr_rebase_push", "")
    new = gitcli.branch_tip(record.repo, record.branch) or journal["new"]
    try:
        gitcli.push_branch(record.repo, pr.remote, record.branch, lease=journal["old"])
    except gitcli.GitFailed as refused:
        drop_journal(paths.dir)
        park(f"the rebased branch was not pushed: {refused}")
        return
    gitcli.set_ref(record.repo, gitcli.pushed_ref(record.id, pr.remote), new)
    drop_journal(paths.dir)
    events.emit("pr_rebased", number=pr.number, old=journal["old"], new=new, base=journal["base"],
                base_sha=journal["base_sha"], task=journal.get("task", ""))
    said.append(f"rebased {record.branch} onto {journal['base']} ({journal['base_sha'][:7]}) and pushed {new[:7]} "
                f"with --force-with-lease against {journal['old'][:7]}")


def replayed(paths: SessionPaths, record: SessionRecord, pr: PrRecord, facts: PullFacts,
             park: Park) -> dict[str, Any] | None:
    base_sha = fetch_base(record.repo, pr.remote, facts.base, record.id)
    found = conflicts(record.repo, facts.head, base_sha)
    if found.in_meaning or len(found.paths) > MAX_PATHS or found.hunks > MAX_HUNKS:
        what = "; ".join(found.in_meaning[:3]) or f"{len(found.paths)} paths, {found.hunks} conflict regions"
        park(f"the PR conflicts with {facts.base} ({base_sha[:7]}) beyond what tilth hands to an agent ({what}); "
             f"resolve it and push, then `tilth follow` again")
        return None
    commits = commits_since(record.repo, base_sha, facts.head)
    new, conflicted = replay(record.repo, paths.dir / "rebase-worktree", base_sha, commits)
    journal: dict[str, Any] = {"old": facts.head, "base": facts.base, "base_sha": base_sha, "new": new,
                               "conflicts": list(conflicted), "step": "replayed", "task": ""}
    save_journal(paths.dir, journal)
    return journal


def follow_up_task(paths: SessionPaths, record: SessionRecord, pr: PrRecord, journal: dict[str, Any],
                   events: EventLog, bounds: Bounded) -> str:
    """The task that resolves the conflicts or fixes what the rebase broke ("" when nothing needs one)."""
    mark = f"{MARK}{journal['old']}:{journal['base_sha']}"
    if bounds.made(mark):
        return bounds.add_followup({}, TASK_PREFIX, mark)
    if journal["conflicts"]:
        spec = resolve_task(record, pr, journal)
    else:
        failing = recheck(paths, record, events)
        if not failing:
            return ""
        spec = broken_task(pr, journal, failing)
    return bounds.add_followup(spec, TASK_PREFIX, mark)


def recheck(paths: SessionPaths, record: SessionRecord, events: EventLog) -> list[str]:
    """The checks and the done tasks' verify commands on the rebased worktree, confined as the runner runs them:
    the commands failing that did not fail on the session's base commit."""
    settings = load_settings(paths.home)
    mode = record.sandbox or resolve_mode(settings.sandbox, settings.agent_network)
    bundle = replace(CheckBundle.of_run(settings, record, session_confinement(mode, paths, record, settings)),
                     baseline=load_baseline(paths.dir))
    failing = [c.command for c in bundle.run(events, None, 0) if not c.passed and not c.failed_at_base]
    for task in peek_plan(paths.prd):
        if task.status == "done":
            failing += [v.command for v in bundle.verify(task, events, None, emit=False)
                        if not v.passed and not v.failed_at_base]
    return list(dict.fromkeys(failing))


def resolve_task(record: SessionRecord, pr: PrRecord, journal: dict[str, Any]) -> dict[str, Any]:
    paths_ = journal["conflicts"]
    ours = diff(record.repo, f"{journal['base_sha']}...{journal['old']}", paths_)
    theirs = diff(record.repo, f"{journal['old']}...{journal['base_sha']}", paths_)
    lines = [f"Pull request #{pr.number} was rebased onto its base {journal['base']!r} at {journal['base_sha']}. "
             f"These paths conflicted and now hold the base's version: {', '.join(paths_)}.",
             "Re-apply this session's change to them on top of the base's, keeping both intents.", "",
             "The session's change to them (before the rebase):", fenced(ours), "",
             "The base's change to them since the session branched:", fenced(theirs)]
    return {"title": f"Resolve the conflicts of PR #{pr.number} with {journal['base']}"[:200],
            "description": "\n".join(lines),
            "acceptance_criteria": [f"{p} carries this session's change and the base's" for p in paths_]}


def broken_task(pr: PrRecord, journal: dict[str, Any], failing: list[str]) -> dict[str, Any]:
    lines = [f"Pull request #{pr.number} was rebased onto its base {journal['base']!r} at {journal['base_sha']}; "
             "on the result these commands fail that passed before:", *[f"- `{c}`" for c in failing]]
    return {"title": f"Fix what the rebase of PR #{pr.number} onto {journal['base']} broke"[:200],
            "description": "\n".join(lines), "acceptance_criteria": [f"`{c}` passes" for c in failing]}


def diff(repo: str, span: str, paths_: list[str]) -> str:
    text = gitcli.run(repo, "diff", "--no-color", "--no-ext-diff", span, "--", *paths_).stdout.splitlines()
    return "\n".join(text[:DIFF_LINES] + ([f"... ({len(text) - DIFF_LINES} more lines)"] if len(text) > DIFF_LINES
                                          else []))


def fenced(text: str) -> str:
    longest = max((len(run) for run in text.replace("`", "`\0").split("\0") if run.endswith("`")), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}diff\n{text}\n{fence}"


def task_status(paths: SessionPaths, task_id: str) -> str:
    return next((t.status for t in peek_plan(paths.prd) if t.id == task_id), "")


def journal_path(session_dir: Path) -> Path:
    return session_dir / JOURNAL


def load_journal(session_dir: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads(journal_path(session_dir).read_bytes())
    except (FileNotFoundError, ValueError):
        return None
    return raw if isinstance(raw, dict) and isinstance(raw.get("old"), str) else None


def save_journal(session_dir: Path, journal: dict[str, Any]) -> None:
    write_atomic(journal_path(session_dir), json.dumps(journal, indent=2).encode())


def step(paths: SessionPaths, journal: dict[str, Any], name: str, task: str = "") -> None:
    journal["step"] = name
    if task:
        journal["task"] = task
    save_journal(paths.dir, journal)


def drop_journal(session_dir: Path) -> None:
    journal_path(session_dir).unlink(missing_ok=True)
