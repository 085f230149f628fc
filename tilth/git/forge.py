"""The forge a session's pull request lives on, read and acted on through the `gh` CLI only, as typed facts.

gh runs with a small environment (its own credentials and proxy variables, never tilth's keys), no prompt,
no pager, no colour, a time limit, and `--repo HOST/OWNER/NAME` so it never guesses from a checkout. What the
forge says (check names, log text, comment bodies, URLs) is data: it is returned as text, never used as a
path, a command or a URL tilth follows; the only thing taken from a URL is a run's number (digits).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tilth.core.errors import TilthError

GH_TIMEOUT_S = 120
LOG_LINES = 40
"""The last lines of each failing job's log a follow-up task quotes."""
LOG_LINE_CHARS = 300
PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN",
              "GITHUB_ENTERPRISE_TOKEN", "GH_HOST", "GH_CONFIG_DIR", "XDG_CONFIG_HOME", "HTTP_PROXY", "HTTPS_PROXY",
              "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR")
QUIET_ENV = {"GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1", "NO_COLOR": "1", "CLICOLOR": "0",
             "GH_PAGER": "cat", "PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
PR_FIELDS = "number,url,state,headRefOid,baseRefName,mergeable,mergeStateStatus,reviewDecision,statusCheckRollup,reviews"
RUN_IN_URL = re.compile(r"/actions/runs/(\d{1,19})(?:/|$)")
FAILED_TEST = re.compile(r"(?:FAILED|ERROR|FAIL:?)\s+([\w./-]+(?:::[\w\[\]./-]+)+)")

THREADS_QUERY = """query ReviewThreads($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) { pullRequest(number: $number) {
    reviewThreads(first: 100) { nodes { id isResolved isOutdated path
      comments(first: 50) { nodes { id author { login } body } } } } } } }"""
REQUIRED_QUERY = """query RequiredChecks($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) { pullRequest(number: $number) { commits(last: 1) { nodes { commit { oid
    statusCheckRollup { contexts(first: 100) { nodes { __typename
      ... on CheckRun { name isRequired(pullRequestNumber: $number) }
      ... on StatusContext { context isRequired(pullRequestNumber: $number) } } } } } } } } } }"""
"""Which checks the base branch's protection requires of this PR (`gh pr view --json` does not say)."""
REPLY_MUTATION = """mutation ThreadReply($thread: ID!, $body: String!) {
  addPullRequestReviewThreadReply(input: {pullRequestReviewThreadId: $thread, body: $body}) { comment { id } } }"""


class ForgeFailed(TilthError):
    """gh failed or answered something unreadable; the message is one line."""


@dataclass(frozen=True)
class ForgeRepo:
    host: str
    owner: str
    name: str

    @property
    def spec(self) -> str:
        return f"{self.host}/{self.owner}/{self.name}"


SCP_LIKE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>[^/].*)$")
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def forge_repo(remote_url: str) -> ForgeRepo | None:
    """The `HOST/OWNER/NAME` behind a remote URL (http(s), ssh:// or scp-like); None for anything else."""
    url = remote_url.strip()
    if "://" in url:
        parts = urlsplit(url)
        host, path = parts.hostname or "", parts.path
    elif m := SCP_LIKE.match(url):
        host, path = m["host"], m["path"]
    else:
        return None
    bits = path.strip("/").removesuffix(".git").split("/")
    if not host or len(bits) != 2 or not all(NAME.match(b) for b in bits):
        return None
    return ForgeRepo(host.lower(), bits[0], bits[1])


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    """COMPLETED, IN_PROGRESS, QUEUED, ... (a status context's state is mapped onto these)."""
    conclusion: str
    """SUCCESS, FAILURE, ... or "" while it runs."""
    url: str
    run_id: int | None
    required: bool = False
    """Required by the base branch's protection (when none is, every check counts)."""

    @property
    def failed(self) -> bool:
        return self.status == "COMPLETED" and self.conclusion in ("FAILURE", "TIMED_OUT", "CANCELLED",
                                                                   "STARTUP_FAILURE", "ACTION_REQUIRED", "ERROR")

    @property
    def passed(self) -> bool:
        return self.status == "COMPLETED" and self.conclusion in ("SUCCESS", "NEUTRAL", "SKIPPED")


@dataclass(frozen=True)
class Review:
    author: str
    state: str
    body: str
    commit: str


@dataclass(frozen=True)
class PullFacts:
    number: int
    url: str
    state: str
    """OPEN, MERGED or CLOSED."""
    head: str
    base: str
    mergeable: str
    """MERGEABLE, CONFLICTING or UNKNOWN (GitHub has not computed it yet)."""
    merge_state: str
    """mergeStateStatus: CLEAN, BEHIND, DIRTY, BLOCKED, UNSTABLE, UNKNOWN, ..."""
    review_decision: str
    checks: tuple[Check, ...]
    reviews: tuple[Review, ...]


@dataclass(frozen=True)
class Comment:
    """One comment of a review thread, by its own author: a thread's comments may come from different people."""
    id: str
    author: str
    body: str


@dataclass(frozen=True)
class Thread:
    id: str
    path: str
    resolved: bool
    outdated: bool
    comments: tuple[Comment, ...]


@dataclass(frozen=True)
class FailedJob:
    job: str
    steps: tuple[str, ...]
    last_lines: tuple[str, ...]
    test_ids: tuple[str, ...]


def gh_env(tmp: Path) -> dict[str, str]:
    """gh's environment: its own credentials and proxies from ours, nothing else; its caches under `tmp`."""
    tmp.mkdir(parents=True, exist_ok=True)
    kept = {k: v for k, v in os.environ.items() if k in PASSED_ENV}
    return {**kept, **QUIET_ENV, "TMPDIR": str(tmp)}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _check(node: dict[str, Any]) -> Check:
    if node.get("__typename") == "StatusContext":
        state = _text(node.get("state")).upper()
        status = "COMPLETED" if state in ("SUCCESS", "FAILURE", "ERROR") else "IN_PROGRESS"
        url = _text(node.get("targetUrl"))
        return Check(_text(node.get("context")), status, state if status == "COMPLETED" else "", url, None)
    url = _text(node.get("detailsUrl"))
    run = RUN_IN_URL.search(urlsplit(url).path) if url else None
    return Check(_text(node.get("name")), _text(node.get("status")).upper(), _text(node.get("conclusion")).upper(),
                 url, int(run[1]) if run else None)


def _login(node: Any) -> str:
    return _text(node.get("login")) if isinstance(node, dict) else ""


class Forge:
    def __init__(self, repo: ForgeRepo, tmp: Path, gh: str = "gh"):
        self.repo, self.tmp, self.gh = repo, tmp, gh

    def run(self, *args: str) -> str:
        try:
            done = subprocess.run([self.gh, *args], env=gh_env(self.tmp), capture_output=True, text=True,
                                  errors="replace", timeout=GH_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise ForgeFailed("gh is not on PATH (`tilth follow` reads the pull request through it)") from None
        except subprocess.TimeoutExpired:
            raise ForgeFailed(f"`gh {args[0]} {args[1]}` gave no answer within {GH_TIMEOUT_S}s") from None
        if done.returncode != 0:
            said = " ".join(done.stderr.split())[-300:]
            raise ForgeFailed(f"`gh {args[0]} {args[1]}` failed (exit {done.returncode}): {said!r}")
        return done.stdout

    def _json(self, *args: str) -> Any:
        out = self.run(*args)
        try:
            return json.loads(out)
        except ValueError:
            raise ForgeFailed(f"`gh {args[0]} {args[1]}` answered something that is not JSON") from None

    def pull_request(self, number: int) -> PullFacts:
        data = self._json("pr", "view", str(number), "--repo", self.repo.spec, "--json", PR_FIELDS)
        if not isinstance(data, dict):
            raise ForgeFailed(f"`gh pr view {number}` answered no pull request")
        checks = tuple(_check(n) for n in data.get("statusCheckRollup") or [] if isinstance(n, dict))
        reviews = tuple(Review(_login(r.get("author")), _text(r.get("state")), _text(r.get("body")),
                               _text((r.get("commit") or {}).get("oid")))
                        for r in data.get("reviews") or [] if isinstance(r, dict))
        head = _text(data.get("headRefOid"))
        if checks:
            required = self.required_checks(number, head)
            checks = tuple(replace(c, required=c.name in required) for c in checks)
        return PullFacts(int(data.get("number") or number), _text(data.get("url")), _text(data.get("state")).upper(),
                         head, _text(data.get("baseRefName")),
                         _text(data.get("mergeable")).upper(), _text(data.get("mergeStateStatus")).upper(),
                         _text(data.get("reviewDecision")).upper(), checks, reviews)

    def required_checks(self, number: int, head: str) -> set[str]:
        """The names of the checks required on `head` (none when the forge answers for another head, which
        makes every check count, as when no protection requires any)."""
        data = self._json("api", "graphql", "--hostname", self.repo.host, "-f", f"query={REQUIRED_QUERY}",
                          "-F", f"owner={self.repo.owner}", "-F", f"name={self.repo.name}", "-F", f"number={number}")
        try:
            [node] = data["data"]["repository"]["pullRequest"]["commits"]["nodes"]
            commit = node["commit"]
            contexts = (commit.get("statusCheckRollup") or {}).get("contexts", {}).get("nodes") or []
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ForgeFailed(f"the required checks of #{number} could not be read") from None
        if commit.get("oid") != head:
            return set()
        return {_text(c.get("name") or c.get("context")) for c in contexts
                if isinstance(c, dict) and c.get("isRequired") is True}

    def review_threads(self, number: int) -> list[Thread]:
        data = self._json("api", "graphql", "--hostname", self.repo.host, "-f", f"query={THREADS_QUERY}",
                          "-F", f"owner={self.repo.owner}", "-F", f"name={self.repo.name}", "-F", f"number={number}")
        try:
            nodes = data["data"]["repository"]["pullRequest"]["reviewThreads"]["nodes"]
        except (KeyError, TypeError):
            raise ForgeFailed(f"the review threads of #{number} could not be read") from None
        threads = []
        for node in nodes:
            if not isinstance(node, dict):
                continue
            comments = tuple(Comment(_text(c.get("id")), _login(c.get("author")), _text(c.get("body")))
                             for c in ((node.get("comments") or {}).get("nodes") or []) if isinstance(c, dict))
            threads.append(Thread(_text(node.get("id")), _text(node.get("path")), bool(node.get("isResolved")),
                                  bool(node.get("isOutdated")), comments))
        return threads

    def reply(self, thread_id: str, body: str) -> str:
        """The id of the comment posted ("" if the answer does not say)."""
        data = self._json("api", "graphql", "--hostname", self.repo.host, "-f", f"query={REPLY_MUTATION}",
                          "-f", f"thread={thread_id}", "-f", f"body={body}")
        try:
            return _text(data["data"]["addPullRequestReviewThreadReply"]["comment"]["id"])
        except (KeyError, TypeError):
            return ""

    def permission(self, login: str) -> str:
        """admin, maintain, write, triage, read or none."""
        if not NAME.match(login):
            return "none"
        data = self._json("api", "--hostname", self.repo.host,
                          f"repos/{self.repo.owner}/{self.repo.name}/collaborators/{login}/permission")
        return _text(data.get("permission")) if isinstance(data, dict) else "none"

    def rerun_failed(self, run_id: int) -> None:
        self.run("run", "rerun", str(run_id), "--failed", "--repo", self.repo.spec)

    def failed_log(self, run_id: int) -> list[FailedJob]:
        """Each failing job of a run: its failed steps, the last lines of their log, the failing test ids."""
        out = self.run("run", "view", str(run_id), "--log-failed", "--repo", self.repo.spec)
        return failed_jobs(out)


def failed_jobs(log: str) -> list[FailedJob]:
    """`gh run view --log-failed` lines (`job<TAB>step<TAB>text`) grouped by job, bounded."""
    jobs: dict[str, tuple[list[str], list[str]]] = {}
    for line in log.splitlines():
        job, _, rest = line.partition("\t")
        step, _, text = rest.partition("\t")
        steps, lines = jobs.setdefault(job, ([], []))
        if step not in steps:
            steps.append(step)
        lines.append(text)
    found = []
    for job, (steps, lines) in jobs.items():
        ids = list(dict.fromkeys(m[1] for text in lines for m in FAILED_TEST.finditer(text)))
        tail = tuple(text[:LOG_LINE_CHARS] for text in lines[-LOG_LINES:])
        found.append(FailedJob(job, tuple(steps), tail, tuple(ids[:50])))
    return found


def pr_number(url: str) -> int | None:
    """The number at the end of a pull request's URL, as `gh pr create` prints it."""
    m = re.search(r"/pull/(\d{1,9})\s*$", url.strip())
    return int(m[1]) if m else None
