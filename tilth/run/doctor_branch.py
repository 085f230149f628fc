"""`tilth doctor`'s checks against the branch (`run/doctor.py` runs them): the branch is where
tilth left it, the worktree stands on it, and the records (prd.json statuses, progress.txt lines,
the ledger) agree with its task commits, by the rules `recovery.reconcile` applies."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pygit2

from tilth.agents.verify import blocks
from tilth.core.errors import BadInput
from tilth.git.commits import TaskCommit, read_task_commit
from tilth.git.gitops import branch_tip, chain_from, commit_at, descends_from
from tilth.git.shelf import shelved
from tilth.views.figures import plural
from tilth.git.worktrees import common_dir, registered_worktree, worktree_head
from tilth.git.worktree_git import command_line, session_git_dir, worktree_name
from tilth.run.doctor_findings import DUPLICATES_SUFFIX, OK, PERSON, PROBLEM, Diagnosis
from tilth.store.answers import is_answered
from tilth.store.events import read_events
from tilth.store.ledger import read_entries
from tilth.store.prd import TaskStatus, load_plan
from tilth.store.progress import read_progress


def last_task_commit(d: Diagnosis) -> tuple[str, str] | None:
    """tilth's newest task commit as its journal and progress.txt name it: (sha, where named)."""
    for event in reversed(read_events(d.paths.events)):
        kind, sha = event["type"], event["data"].get("sha")
        if (kind == "commit" or kind.endswith("_commit")) and isinstance(sha, str):
            return sha, f"its {kind} event"
    lines = read_progress(d.paths.progress)
    return (lines[-1].commit, f"progress.txt's last line ({lines[-1].task})") if lines else None


def holds(repo: pygit2.Repository, tip: str, sha: str) -> bool:
    """The branch holds `sha`, or `sha` is a placeholder a resume or an answer unwound (its parent is held)."""
    commit = commit_at(repo, sha)
    if commit is None:
        return False
    if descends_from(repo, tip, str(commit.id)):
        return True
    made = read_task_commit(commit)
    return made is not None and (made.failed or made.parked) and bool(commit.parents) \
        and descends_from(repo, tip, str(commit.parents[0].id))


def put_back(d: Diagnosis, sha: str) -> str:
    record = d.session
    if (Path(record.worktree) / ".git").exists():
        return command_line(session_git_dir(record.repo, record.id), Path(record.worktree), "reset", "--keep", sha)
    return f"git -C {record.repo} update-ref refs/heads/{record.branch} {sha}"


def check_branch(d: Diagnosis, repo: pygit2.Repository) -> None:
    record = d.session
    branch, base = record.branch, record.base_commit
    d.tip = tip = branch_tip(repo, branch)
    last = last_task_commit(d)
    if tip is None:
        target = last[0] if last and commit_at(repo, last[0]) is not None else base
        d.add(PERSON, f"{branch} is gone from {record.repo}: run git -C {record.repo} branch {branch} {target}")
        return
    if not descends_from(repo, tip, base):
        target = last[0] if last and commit_at(repo, last[0]) is not None else base
        d.add(PERSON, f"{branch} no longer contains its base {base[:12]} (it is at {tip[:7]}; moved by hand?): "
                      f"run {put_back(d, target)}")
        return
    if last is not None and not holds(repo, tip, last[0]):
        found = commit_at(repo, last[0])
        target = str(found.id) if found is not None else last[0]
        d.add(PERSON, f"{branch} was moved by hand: it is at {tip[:7]} and no longer contains {last[0][:7]}, tilth's "
                      f"last task commit ({last[1]}): run {put_back(d, target)}")
        return
    d.branch_ok = True
    chain = chain_from(repo, tip, base)
    read = [read_task_commit(c) for c in chain]
    d.commits = [c for c in reversed(read) if c is not None]
    on_shelf = [made for _, sha in shelved(repo, record.id) if (made := read_task_commit(repo[sha].peel(pygit2.Commit))) is not None
                and made.sha not in {c.sha for c in d.commits}]
    if on_shelf and d.holder is None:
        d.add(PROBLEM, f"{plural(len(on_shelf), 'placeholder')} of a killed run wait on the shelf "
                       f"(refs/tilth/shelf/{record.id}/): --fix puts them back on top of {branch}, as tilth resume "
                       "would", "reconcile", "shelved placeholders put back on top of the branch")
    d.commits += on_shelf
    for commit, made in zip(chain, read):
        if made is not None:
            break
        d.loose.append(str(commit.id)[:7])
    held = f" and tilth's last task commit {last[0][:7]}" if last else ""
    d.add(OK, f"{branch} is at {tip[:7]}: it holds its base{held}")


def check_worktree(d: Diagnosis, repo: pygit2.Repository) -> None:
    record = d.session
    path, name, branch = Path(record.worktree), worktree_name(record.id), record.branch
    if path.exists() and not (path / ".git").exists():
        d.worktree_blocked = True
        d.add(PERSON, f"{path} is not a git worktree (its .git is gone): move it aside (mv {path} {path}.old), then "
                      f"tilth doctor {record.id} --fix checks the worktree out again from {branch}")
        return
    if not path.exists():
        tip = d.tip or "?"  # known once the branch is
        if d.branch_ok:
            d.add(PROBLEM, f"the worktree {path} is gone: --fix checks it out again from {branch} ({tip[:7]})",
                  "worktree", f"the worktree {path} recreated from {branch} at {tip[:7]}, registered as {name}")
        else:
            d.add(PERSON, f"the worktree {path} is gone: once {branch} is back, tilth doctor {record.id} --fix "
                          "recreates it")
        return
    registered = registered_worktree(repo, name)
    if registered is None or Path(registered).resolve() != path.resolve():
        d.worktree_blocked = True
        d.add(PERSON, f"the worktree {path} is not registered with {record.repo} as {name} (git worktree list): "
                      f"run git -C {record.repo} worktree repair {path} (if its registration is gone, move it aside: "
                      f"mv {path} {path}.old, and tilth doctor {record.id} --fix checks it out again)")
        return
    head = worktree_head(session_git_dir(record.repo, record.id))
    if head != f"ref: refs/heads/{branch}":
        d.worktree_blocked = True
        d.add(PERSON, f"the worktree's HEAD is {head or '(unreadable)'}, not {branch}: run "
                      f"{command_line(session_git_dir(record.repo, record.id), path, 'checkout', branch)}")
        return
    d.worktree_ok = True
    d.add(OK, f"the worktree {path} is registered and on {branch}")


def check_git_locks(d: Diagnosis, repo: pygit2.Repository) -> None:
    if d.holder is not None:  # a live runner's git writes take these locks
        return
    admin = session_git_dir(d.session.repo, d.session.id)
    stale = [p for p in (admin / "index.lock", admin / "HEAD.lock",
                         common_dir(repo) / "refs" / "heads" / f"{d.session.branch}.lock") if p.exists()]
    if stale:
        names = ", ".join(str(p) for p in stale)
        d.add(PROBLEM, f"stale git lock file(s) a killed writer left: {names}: --fix removes them", "git_locks",
              f"stale git lock file(s) removed: {names}")
    else:
        d.add(OK, "no stale git lock files")


def kind_of(c: TaskCommit) -> str:
    return "PARKED placeholder" if c.parked else "FAILED placeholder" if c.failed else "commit"


def wanted_status(c: TaskCommit, status: TaskStatus, tip: str, answered: bool) -> TaskStatus:
    """reconcile's rule (`recovery._retrying`): the latest commit decides (done, failed, parked),
    except a placeholder below the tip while the plan says pending, in_progress or parked (a
    retry), and a PARKED one at the tip whose question `tilth answer` answered (pending)."""
    if c.placeholder and c.sha != tip and status in (TaskStatus.pending, TaskStatus.in_progress, TaskStatus.parked):
        return status
    if c.parked and c.sha == tip and status == TaskStatus.pending and answered:
        return status
    return TaskStatus.parked if c.parked else TaskStatus.failed if c.failed else TaskStatus.done


def check_statuses(d: Diagnosis) -> None:
    sid = d.paths.id
    if d.loose and d.holder is None:
        d.add(PROBLEM, f"{d.session.branch} has {len(d.loose)} commit(s) without tilth trailers on top "
                       f"({', '.join(d.loose)}): --fix folds them into the worktree's uncommitted changes, as tilth "
                       "resume would", "reconcile",
              f"{len(d.loose)} commit(s) without tilth trailers folded into the worktree's uncommitted changes")
    try:
        plan = load_plan(d.paths.prd)
    except BadInput as exc:
        d.add(PERSON, f"{exc}: run tilth plan edit {sid}")
        return
    latest = {c.task_id: c for c in d.commits}
    found = False
    for task in plan:
        c, status = latest.get(task.id), task.status
        if c is None:
            if status in (TaskStatus.done, TaskStatus.failed, TaskStatus.parked):
                found = True
                d.add(PERSON, f"{task.id}: prd.json says {status.value} but {d.session.branch} has no commit for it: "
                              f"if it should run, set it pending with tilth plan edit {sid}")
            elif status == TaskStatus.in_progress and d.holder is None:
                found = True
                d.add(PROBLEM, f"{task.id}: prd.json says in_progress but no runner works on it: --fix commits its "
                               "accepted attempt, parks it on its unanswered question or puts it back to pending "
                               "(its edits kept), as tilth resume would", "reconcile",
                      f"{task.id}: interrupted task recovered as tilth resume would (committed if its last verdict "
                      "accepted, parked if it asked a question, else pending with its edits kept)")
            continue
        want = wanted_status(c, status, d.tip or "", c.parked and is_answered(d.paths.dir, task.id))
        if want != status:
            found = True
            d.add(PROBLEM, f"{task.id}: prd.json says {status.value}, the branch has its {kind_of(c)} {c.sha[:7]}: "
                           f"--fix sets {want.value}", "statuses",
                  f"{task.id}: prd.json said {status.value}, the branch has its {kind_of(c)} {c.sha[:7]} -> "
                  f"{want.value}")
    if not found:
        d.add(OK, f"prd.json statuses match the branch ({len(latest)} task(s) with a commit)")


def check_progress(d: Diagnosis) -> None:
    lines = read_progress(d.paths.progress)
    counts = Counter(line.commit for line in lines)
    found = False
    for c in d.commits:
        if c.first[:7] not in counts:  # a re-applied placeholder's line names it as first made
            found = True
            d.add(PROBLEM, f"{c.task_id}: progress.txt has no line for its {kind_of(c)} {c.sha[:7]}: --fix writes it "
                           "from the commit's trailers", "progress",
                  f"{c.task_id}: progress.txt line for {c.first[:7]} ({c.outcome}) written from the commit's trailers")
    for sha, n in counts.items():
        if n > 1:
            found = True
            d.add(PROBLEM, f"progress.txt has {n} lines for commit {sha}: --fix moves the repeats to "
                           f"progress.txt{DUPLICATES_SUFFIX}", "progress_dups",
                  f"progress.txt: {n - 1} repeated line(s) for {sha} moved to progress.txt{DUPLICATES_SUFFIX}")
    if not found:
        d.add(OK, f"progress.txt has one line per task outcome on the branch ({len(d.commits)})")


def check_ledger(d: Diagnosis) -> None:
    """Each done or failed commit's Tilth-Iterations names an evaluated iteration in the ledger (a
    parked task may have asked before any verdict). Nothing derives a lost verdict: a person looks."""
    found = False
    for c in d.commits:
        if c.parked:
            continue
        entries = {e.iter: e for e in read_entries(d.paths.ledger_dir, c.task_id)}
        entry = entries.get(c.iterations)
        where = d.paths.ledger_dir / f"{c.task_id}.jsonl"
        if entry is None:
            found = True
            d.add(PERSON, f"{c.task_id}: {where} has no entry for iteration {c.iterations}, which its {kind_of(c)} "
                          f"{c.sha[:7]} names (Tilth-Iterations): the verdict is not derivable from git; the commit "
                          "stays the record, compare with git show " + c.sha[:7])
        elif not c.failed and not entry.verdict.accepted:
            found = True
            d.add(PERSON, f"{c.task_id}: {where} says iteration {c.iterations} was rejected, yet its commit "
                          f"{c.sha[:7]} says done: look at git show {c.sha[:7]}")
        elif not c.failed and (failing := [v for v in entry.verifies if blocks(v)]):
            found = True
            d.add(PERSON, f"{c.task_id}: {where} says iteration {c.iterations}'s verify "
                          + ", ".join(f"`{v.command}` ({v.status})" for v in failing)
                          + f" failed, yet its commit {c.sha[:7]} says done: look at git show {c.sha[:7]}")
    if not found:
        d.add(OK, "the ledger has the verdict of every task commit's last iteration")
