"""Handing a session's branch to a human: push it, describe it, open the PR (or print where
to open one). tilth never merges; the branch is reviewed like any pull request.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import quote, urlsplit

from tilth.core.errors import BadInput
from tilth.git import gitcli
from tilth.store.home import SessionPaths
from tilth.store.jsonio import write_atomic
from tilth.store.session import SessionRecord
from tilth.views.proof import proof_lines
from tilth.views.endreport import commit_count, headline
from tilth.views.figures import plural, spend
from tilth.views.reasons import task_outcome
from tilth.views.tally import SessionTally, money, resume_command, tally, token_count

PR_BODY = "pr.md"
DEFAULT_BASE = "main"


def require_branch(record: SessionRecord) -> str:
    gitcli.require_repo(record.repo)
    tip = gitcli.branch_tip(record.repo, record.branch)
    if tip is None:
        raise BadInput(f"branch {record.branch} is gone from {record.repo} (the session was cleansed, reset, "
                       f"or the branch deleted by hand); see `tilth status {record.id}`")
    return tip


# --- push -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pushed:
    remote: str
    branch: str
    sha: str
    pushed: bool
    """False when the remote already had this tip."""
    rewrote: str | None = None
    """The old tip a rewrite replaced (pushed with `--force-with-lease` against it)."""

    def describe(self) -> str:
        if self.rewrote:
            return (f"pushed {self.branch} ({self.sha[:7]}) to {self.remote}, rewritten: it replaces {self.rewrote[:7]} "
                    f"(--force-with-lease against it; {REWRITTEN_WHY})")
        if self.pushed:
            return f"pushed {self.branch} ({self.sha[:7]}) to {self.remote}"
        return f"{self.remote} already has {self.branch} at {self.sha[:7]}"


REWRITTEN_WHY = ("placeholders stay above the task commits: a retried task's placeholder left the branch for its "
                 "one commit, and a task commit landed below the placeholders")


def push(record: SessionRecord, remote: str) -> Pushed:
    """Pushed plainly when the remote's tip is in the branch's history; a branch tilth rewrote since
    (a retry, a task commit below the placeholders) with `--force-with-lease` against the tip tilth
    last pushed there (else the one the remote has now), never a plain force."""
    tip = require_branch(record)
    _, push_url = gitcli.remote_urls(record.repo, remote)
    there = gitcli.remote_tip(record.repo, push_url, record.branch)
    if there == tip:
        return Pushed(remote, record.branch, tip, pushed=False)
    recorded = gitcli.pushed_ref(record.id, remote)
    lease = None
    if there is not None and not gitcli.contains(record.repo, tip, there):
        lease = gitcli.ref_target(record.repo, recorded) or there
    gitcli.push_branch(record.repo, remote, record.branch, lease)
    gitcli.set_ref(record.repo, recorded, tip)
    return Pushed(remote, record.branch, tip, pushed=True, rewrote=lease)


# --- where to open the PR ---------------------------------------------------------------

@dataclass(frozen=True)
class WebRepo:
    host: str
    """As a browser reaches it: `github.com`, `gitlab.example.com:8443`."""
    path: str
    """`owner/name`, or `group/subgroup/name` on GitLab."""


SCP_LIKE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>[^/].*)$")
URL_SCHEMES = {"https", "http", "ssh", "git", "git+ssh", "ssh+git"}


def parse_remote_url(url: str) -> WebRepo | None:
    """The web location behind a remote URL (https, ssh:// or scp-like `git@host:o/r.git`);
    None for local paths and anything else."""
    url = url.strip()
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme not in URL_SCHEMES or not parts.hostname:
            return None
        host = parts.hostname
        if parts.scheme in ("https", "http") and parts.port:
            host = f"{host}:{parts.port}"
        path = parts.path
    elif match := SCP_LIKE.match(url):
        host, path = match["host"], match["path"]
    else:
        return None
    path = path.strip("/").removesuffix(".git").strip("/")
    return WebRepo(host.lower(), path) if "/" in path else None


def compare_url(web: WebRepo, base: str, branch: str) -> str | None:
    """The page that opens a PR (GitHub) or merge request (GitLab) from `branch` into `base`."""
    b, h = quote(base, safe="/"), quote(branch, safe="/")
    if "github" in web.host:
        return f"https://{web.host}/{web.path}/compare/{b}...{h}?expand=1"
    if "gitlab" in web.host:
        return (f"https://{web.host}/{web.path}/-/merge_requests/new"
                f"?merge_request[source_branch]={h}&merge_request[target_branch]={b}")
    return None


def default_base(record: SessionRecord) -> str:
    """The branch checked out in the source repo, unless that is a session branch."""
    current = gitcli.current_branch(record.repo)
    return current if current and not current.startswith("session/") else DEFAULT_BASE


# --- the description --------------------------------------------------------------------

def _cell(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def pr_title(t: SessionTally) -> str:
    failed = f" ({t.failed} failed)" if t.failed else ""
    return f"tilth: {plural(len(t.tasks), 'task')} from session {t.id}{failed}"


def pr_body(t: SessionTally, rewrote: str | None = None) -> str:
    """The PR description: a rewrite of the pushed branch and unfinished work first, then one table row
    per task, then totals."""
    lines: list[str] = []
    if rewrote:
        lines += [f"**The branch was rewritten** since it was pushed at `{rewrote[:7]}` (pushed with "
                  f"`--force-with-lease` against that tip): {REWRITTEN_WHY}, so each task is one commit.", ""]
    failed = [task for task in t.tasks if task.outcome == "failed"]
    parked = [task for task in t.tasks if task.outcome == "parked"]
    unfinished = [task for task in t.tasks if task.outcome not in ("done", "failed", "parked")]
    if failed:
        lines.append(f"**{plural(len(failed), 'task')} failed.** {'Each' if len(failed) > 1 else 'It'} left a "
                     "`FAILED (<task>)` placeholder commit "
                     f"above the task commits holding its partial work; `{resume_command(t.id)}` retries it from "
                     "those edits and replaces the placeholder with the task's one commit (the branch is rewritten).")
        lines.append("")
        lines += [f"- **{task.id}** {_cell(task.title, 120)}: {_cell(task.reason, 500)}" for task in failed]
        lines.append("")
    if parked:
        lines.append(f"**{plural(len(parked), 'task')} waiting for an answer.** {'Each' if len(parked) > 1 else 'It'} "
                     "left a `PARKED (<task>)` "
                     f"placeholder commit holding its partial work and the question; `tilth answer {t.id} <task> "
                     "\"...\"` lets it go on.")
        lines.append("")
        lines += [f"- **{task.id}** {_cell(task.title, 120)}" for task in parked]
        lines.append("")
    if unfinished:
        names = ", ".join(f"{task.id} ({task_outcome(task.outcome, t.state)})" for task in unfinished)
        lines.append(f"**Not finished yet:** {names}. Continue with `{resume_command(t.id)}`.")
        lines.append("")
    if t.reason:
        lines.append(f"**{_cell(headline(t), 400)}**")
        lines.append("")
    lines += [f"Tasks from tilth session `{t.id}` on `{t.branch}` (base `{t.base_commit[:7]}`), "
              f"{commit_count(t)}.", ""]
    lines.append("| task | title | outcome | attempts | last verdict | tokens | cost |")
    lines.append("|---|---|---|---|---|---|---|")
    for task in t.tasks:
        outcome = f"**{task.outcome}**" if task.outcome == "failed" else task_outcome(task.outcome, t.state)
        lines.append(f"| {task.id} | {_cell(task.title, 80)} | {outcome} | {task.iterations} | "
                     f"{_cell(task.last_words) or '-'} | {task.tokens:,} | "
                     f"{money(task.cost_usd, task.cost_is_lower_bound)} |")
    lines.append("")
    if proof := proof_lines(t):
        lines += [*proof, ""]
    lines.append(f"**Totals:** {t.done}/{len(t.tasks)} tasks done, {t.failed} failed; "
                 f"{plural(t.iterations, 'attempt')}; {token_count(t.tokens, t.unknown_usage_calls, ' tokens')}; "
                 f"{spend(t.cost_usd, t.cost_is_lower_bound, t.unpriced_calls)}.")
    return "\n".join(lines) + "\n"


# --- opening it -------------------------------------------------------------------------

@dataclass(frozen=True)
class Opened:
    pushed: Pushed
    base: str
    body_file: Path
    via_gh: bool
    compare_url: str | None
    """Set when gh is absent and the remote is GitHub- or GitLab-like."""
    pr_url: str = ""
    """What `gh pr create` printed last (the PR's URL), for `tilth follow`."""


def open_pr(paths: SessionPaths, record: SessionRecord, base: str | None, remote: str, web: bool,
            echo: Callable[[str], None] = lambda line: None) -> Opened:
    """Push if needed, write the description to the session dir, then `gh pr create`, or
    (gh absent) return the compare URL for the user to open."""
    fetch_url, _ = gitcli.remote_urls(record.repo, remote)
    pushed = push(record, remote)
    echo(pushed.describe())
    base = base or default_base(record)
    facts = tally(paths)
    body_file = paths.dir / PR_BODY
    write_atomic(body_file, pr_body(facts, pushed.rewrote).encode())
    gh = shutil.which("gh")
    location = parse_remote_url(fetch_url)
    url = compare_url(location, base, record.branch) if location else None
    if gh is None:
        return Opened(pushed, base, body_file, via_gh=False, compare_url=url)
    args = [gh, "pr", "create", "--head", record.branch, "--base", base, "--title", pr_title(facts),
            "--body-file", str(body_file)] + (["--web"] if web else [])
    done = subprocess.run(args, cwd=record.repo, stdout=subprocess.PIPE, text=True, errors="replace")
    code, said = done.returncode, done.stdout.strip().splitlines()
    for line in said:
        echo(line)
    if code != 0:
        by_hand = f" at {url}" if url else ""
        raise gitcli.GitFailed(f"`gh pr create` failed (exit {code}); {pushed.branch} is pushed, open the PR by "
                               f"hand{by_hand} with the description in {body_file}")
    return Opened(pushed, base, body_file, via_gh=True, compare_url=None, pr_url=said[-1] if said else "")


# --- reading the branch -----------------------------------------------------------------

def log_lines(record: SessionRecord) -> list[str]:
    """One line per commit base..branch: short sha, task, iterations, outcome, subject."""
    require_branch(record)
    rows = gitcli.log_records(record.repo, record.base_commit, record.branch)
    if not rows:
        return [f"no commits on {record.branch} since its base {record.base_commit[:7]}"]
    cells = [(r["sha"], r["Tilth-Task"] or "-", f"iter={r['Tilth-Iterations'] or '-'}",
              r["Tilth-Outcome"] or ("done" if r["Tilth-Task"] else "-"), r["subject"]) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    return ["  ".join([*(c[i].ljust(widths[i]) for i in range(4)), c[4]]) for c in cells]


def show_diff(record: SessionRecord) -> int:
    require_branch(record)
    return gitcli.show_diff(record.repo, record.base_commit, record.branch)
