"""A local GitHub for the tests that drive the real `gh` CLI (2.23): an HTTP server that is the HTTP proxy
of gh and git (`HTTP_PROXY`/`http_proxy` point at it), so it receives every request with its full URL.

Host `github.localhost`, which gh treats as plain HTTP: REST at `http://api.github.localhost/`, GraphQL at
`http://api.github.localhost/graphql`, git smart-HTTP at `http://github.localhost/OWNER/REPO.git`, served by
`git http-backend` (CGI) from a local bare repository. It speaks the parts gh uses for `gh pr create`,
`gh pr view --json` (PullRequestByNumber), `gh run rerun --failed`, `gh run view --log-failed` (the log a
zip of `<job>/<n>_<step>.txt`), `gh api graphql` (review threads, a thread's reply, the required checks) and `gh api` of the
collaborator permission; anything else is answered 501 and logged (`unknown`), so a test sees it.

CI is a function of the pushed commit: `ci(sha, attempt)` gives each job's conclusion, failed step and log
(the test reads the commit's files, so a fix that is pushed turns it green). A run is made the first time a
PR's head is read; `rerun-failed-jobs` asks `ci` again with the next attempt.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

HOST = "github.localhost"
API = f"api.{HOST}"
WHEN = "2026-01-01T00:00:00Z"


@dataclass
class Job:
    """One CI job's outcome as the test's `ci` decides it."""
    name: str
    conclusion: str = "success"
    """success | failure | None (still running)."""
    failed_step: str = "Run tests"
    log: str = ""


@dataclass
class Run:
    id: int
    head_sha: str
    attempt: int
    jobs: list[Job]
    job_ids: list[int]


VIEWER = "tilth-bot"
"""The login gh is authenticated as: the author of every reply posted through the fake."""


@dataclass
class Comment:
    id: str
    author: str
    body: str


@dataclass
class Thread:
    """A review thread opened by `author` with `body`; `say` adds a comment, as a reply through the API does."""
    id: str
    author: str
    body: str
    path: str = "README.md"
    resolved: bool = False
    outdated: bool = False
    comments: list[Comment] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.comments.insert(0, Comment(f"{self.id}_C1", self.author, self.body))

    def say(self, author: str, body: str) -> Comment:
        comment = Comment(f"{self.id}_C{len(self.comments) + 1}", author, body)
        self.comments.append(comment)
        return comment

    @property
    def replies(self) -> list[str]:
        """The bodies of the viewer's (tilth's) comments, in order."""
        return [c.body for c in self.comments if c.author == VIEWER]


@dataclass
class PullRequest:
    number: int
    head: str
    base: str
    title: str
    body: str
    state: str = "OPEN"
    mergeable: str = "MERGEABLE"
    review_decision: str = ""
    reviews: list[dict[str, Any]] = field(default_factory=list)
    threads: list[Thread] = field(default_factory=list)
    required: set[str] = field(default_factory=set)
    """The checks the base branch's protection requires (none: no protection, every check counts)."""


CI = Callable[[str, int], list[Job]]


def green(_sha: str, _attempt: int) -> list[Job]:
    return [Job("tests")]


class FakeGitHub:
    def __init__(self, root: Path, owner: str = "acme", name: str = "widgets", ci: CI = green):
        self.root, self.owner, self.name, self.ci = root, owner, name, ci
        self.bare = root / "github" / owner / f"{name}.git"
        self.bare.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(self.bare)], check=True)
        subprocess.run(["git", "-C", str(self.bare), "config", "http.receivepack", "true"], check=True)
        self.prs: dict[int, PullRequest] = {}
        self.runs: dict[int, Run] = {}
        self.permissions: dict[str, str] = {}
        self.requests: list[tuple[str, str, str]] = []
        """(method, url, GraphQL operation or "") of every request, in order."""
        self.unknown: list[str] = []
        self.lock = threading.RLock()
        self._ids = iter(range(1000, 10**9))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- what a test uses -------------------------------------------------------------------

    @property
    def proxy(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def clone_url(self) -> str:
        return f"http://{HOST}/{self.owner}/{self.name}.git"

    def env(self, home: Path) -> dict[str, str]:
        """What gh and git need to reach this server (gh's own config under `home`)."""
        return {"HTTP_PROXY": self.proxy, "http_proxy": self.proxy, "GH_TOKEN": "fake-token",
                "GH_HOST": HOST, "GH_CONFIG_DIR": str(home / "gh-config"), "GH_NO_UPDATE_NOTIFIER": "1",
                "NO_PROXY": "", "no_proxy": ""}

    def __enter__(self) -> FakeGitHub:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def tip(self, branch: str) -> str:
        out = subprocess.run(["git", "-C", str(self.bare), "rev-parse", "-q", "--verify", f"refs/heads/{branch}"],
                             capture_output=True, text=True)
        return out.stdout.strip()

    def file_at(self, sha: str, path: str) -> str | None:
        out = subprocess.run(["git", "-C", str(self.bare), "show", f"{sha}:{path}"], capture_output=True, text=True)
        return out.stdout if out.returncode == 0 else None

    def runs_of(self, sha: str) -> list[Run]:
        with self.lock:
            return [r for r in self.runs.values() if r.head_sha == sha]

    def calls(self, what: str) -> int:
        """How many requests named `what` (a GraphQL operation, or a part of a URL)."""
        return sum(1 for method, url, op in self.requests if what in (op, f"{method} {url}") or (not op and what in url))

    # --- state ------------------------------------------------------------------------------

    def _run_for(self, sha: str) -> Run:
        with self.lock:
            found = self.runs_of(sha)
            if found:
                return found[-1]
            jobs = self.ci(sha, 1)
            run = Run(next(self._ids), sha, 1, jobs, [next(self._ids) for _ in jobs])
            self.runs[run.id] = run
            return run

    def _rerun_failed(self, run: Run) -> None:
        with self.lock:
            run.attempt += 1
            fresh = {j.name: j for j in self.ci(run.head_sha, run.attempt)}
            run.jobs = [fresh.get(j.name, j) if j.conclusion == "failure" else j for j in run.jobs]

    def _rollup(self, pr: PullRequest, head: str) -> list[dict[str, Any]]:
        if not head:
            return []
        run = self._run_for(head)
        nodes = []
        for job, job_id in zip(run.jobs, run.job_ids):
            nodes.append({
                "__typename": "CheckRun", "name": job.name,
                "checkSuite": {"workflowRun": {"workflow": {"name": "CI"}}},
                "status": "COMPLETED" if job.conclusion else "IN_PROGRESS",
                "conclusion": (job.conclusion or "").upper(), "startedAt": WHEN, "completedAt": WHEN,
                "detailsUrl": f"https://{HOST}/{self.owner}/{self.name}/actions/runs/{run.id}/job/{job_id}"})
        return nodes

    def _merge_state(self, pr: PullRequest, head: str) -> str:
        if pr.mergeable == "CONFLICTING":
            return "DIRTY"
        base = self.tip(pr.base)
        behind = subprocess.run(["git", "-C", str(self.bare), "merge-base", "--is-ancestor", base, head]).returncode
        return "BEHIND" if base and head and behind else "CLEAN"

    def _pr_json(self, pr: PullRequest) -> dict[str, Any]:
        head = self.tip(pr.head)
        url = f"https://{HOST}/{self.owner}/{self.name}/pull/{pr.number}"
        return {
            "id": f"PR_{pr.number}", "number": pr.number, "url": url, "title": pr.title, "body": pr.body,
            "state": pr.state, "closed": pr.state != "OPEN", "isDraft": False,
            "headRefName": pr.head, "headRefOid": head, "baseRefName": pr.base,
            "mergeable": pr.mergeable, "mergeStateStatus": self._merge_state(pr, head),
            "reviewDecision": pr.review_decision,
            "reviews": {"nodes": pr.reviews, "pageInfo": {"hasNextPage": False, "endCursor": ""},
                        "totalCount": len(pr.reviews)},
            "statusCheckRollup": {"nodes": [{"commit": {"statusCheckRollup": {"contexts": {
                "nodes": self._rollup(pr, head), "pageInfo": {"hasNextPage": False, "endCursor": ""}}}}}]},
        }

    # --- GraphQL ----------------------------------------------------------------------------

    def _graphql(self, op: str, query: str, variables: dict[str, Any]) -> tuple[int, Any]:
        if op in ("PullRequestByNumber", "PullRequestForBranch"):
            if op == "PullRequestByNumber":
                pr = self.prs.get(int(variables["pr_number"]))
                found: Any = self._pr_json(pr) if pr else None
                if found is None:
                    return 200, {"data": {"repository": {"pullRequest": None}}, "errors": [
                        {"type": "NOT_FOUND", "message": "Could not resolve to a PullRequest"}]}
                return 200, {"data": {"repository": {"pullRequest": found}}}
            nodes = [self._pr_json(p) for p in self.prs.values() if p.head == variables.get("headRefName")]
            return 200, {"data": {"repository": {"pullRequests": {"nodes": nodes}}}}
        if op == "PullRequestStatusChecks":
            pr = self.prs[int(str(variables["id"]).removeprefix("PR_"))]
            checks = self._pr_json(pr)["statusCheckRollup"]
            for node in checks["nodes"][0]["commit"]["statusCheckRollup"]["contexts"]["nodes"]:
                node["isRequired"] = True
            return 200, {"data": {"node": {"statusCheckRollup": checks}}}
        if op == "RepositoryInfo" or op == "RepositoryNetwork" or "repo_000" in query:
            return 200, {"data": self._repository_info(query)}
        if op == "UserCurrent":
            return 200, {"data": {"viewer": {"login": VIEWER}}}
        if op == "PullRequestCreate":
            return 200, {"data": {"createPullRequest": {"pullRequest": self._create(variables["input"])}}}
        if op == "RequiredChecks":
            pr = self.prs[int(variables["number"])]
            head = self.tip(pr.head)
            contexts = [{"__typename": "CheckRun", "name": n["name"], "isRequired": n["name"] in pr.required}
                        for n in self._rollup(pr, head)]
            return 200, {"data": {"repository": {"pullRequest": {"commits": {"nodes": [{"commit": {
                "oid": head, "statusCheckRollup": {"contexts": {"nodes": contexts}}}}]}}}}}
        if op == "ReviewThreads":
            pr = self.prs[int(variables["number"])]
            return 200, {"data": {"repository": {"pullRequest": {"reviewThreads": {"nodes": [
                {"id": t.id, "isResolved": t.resolved, "isOutdated": t.outdated, "path": t.path,
                 "comments": {"nodes": [{"id": c.id, "author": {"login": c.author}, "body": c.body}
                                        for c in t.comments]}} for t in pr.threads]}}}}}
        if op == "ThreadReply":
            for pr in self.prs.values():
                for t in pr.threads:
                    if t.id == variables["thread"]:
                        posted = t.say(VIEWER, variables["body"])
                        return 200, {"data": {"addPullRequestReviewThreadReply": {"comment": {"id": posted.id}}}}
            return 200, {"errors": [{"message": "no such thread"}]}
        self.unknown.append(f"graphql {op}: {query[:300]}")
        return 501, {"message": f"fake GitHub does not know {op}"}

    def _repository_info(self, query: str) -> dict[str, Any]:
        repo = {"id": "R_1", "name": self.name, "owner": {"login": self.owner}, "hasIssuesEnabled": True,
                "description": "", "hasWikiEnabled": False, "viewerPermission": "WRITE",
                "defaultBranchRef": {"name": "main"}, "parent": None, "mergeCommitAllowed": True,
                "rebaseMergeAllowed": True, "squashMergeAllowed": True, "isPrivate": False}
        aliases = re.findall(r"(repo_\d+):\s*repository", query)
        if aliases:
            return {**{alias: repo for alias in aliases}, "viewer": {"login": VIEWER}}
        return {"repository": repo}

    def _create(self, given: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            number = len(self.prs) + 1
            head = str(given["headRefName"]).split(":")[-1]
            pr = PullRequest(number, head, str(given["baseRefName"]), str(given.get("title", "")),
                             str(given.get("body", "")))
            self.prs[number] = pr
        return {"id": f"PR_{number}", "number": number,
                "url": f"https://{HOST}/{self.owner}/{self.name}/pull/{number}"}

    # --- REST -------------------------------------------------------------------------------

    def _rest(self, method: str, path: str) -> tuple[int, Any]:
        prefix = f"/repos/{self.owner}/{self.name}"
        if path == "/user":
            return 200, {"login": VIEWER}
        if not path.startswith(prefix):
            self.unknown.append(f"{method} {path}")
            return 501, {"message": "unknown"}
        rest = path[len(prefix):]
        if m := re.fullmatch(r"/actions/runs/(\d+)", rest):
            run = self.runs.get(int(m[1]))
            return (200, self._run_json(run)) if run else (404, {"message": "Not Found"})
        if m := re.fullmatch(r"/actions/runs/(\d+)/jobs", rest):
            run = self.runs[int(m[1])]
            return 200, {"total_count": len(run.jobs), "jobs": [self._job_json(run, j, i)
                                                                for j, i in zip(run.jobs, run.job_ids)]}
        if (m := re.fullmatch(r"/actions/runs/(\d+)/rerun-failed-jobs", rest)) and method == "POST":
            self._rerun_failed(self.runs[int(m[1])])
            return 201, {}
        if m := re.fullmatch(r"/actions/workflows/(\d+)", rest):
            return 200, {"id": int(m[1]), "name": "CI", "path": ".github/workflows/ci.yml", "state": "active"}
        if m := re.fullmatch(r"/collaborators/([^/]+)/permission", rest):
            permission = self.permissions.get(m[1], "none")
            return 200, {"permission": permission, "user": {"login": m[1]}}
        self.unknown.append(f"{method} {path}")
        return 501, {"message": "unknown"}

    def _run_json(self, run: Run) -> dict[str, Any]:
        done = all(j.conclusion for j in run.jobs)
        failed = any(j.conclusion == "failure" for j in run.jobs)
        return {"id": run.id, "name": "CI", "display_title": "CI", "status": "completed" if done else "in_progress",
                "conclusion": ("failure" if failed else "success") if done else None,
                "event": "pull_request", "workflow_id": 1, "run_number": run.id, "run_attempt": run.attempt,
                "head_branch": "", "head_sha": run.head_sha, "created_at": WHEN, "updated_at": WHEN,
                # gh caches a run's log by id and start time: each attempt starts at its own second
                "run_started_at": f"2026-01-01T00:00:{run.attempt:02d}Z",
                "jobs_url": f"http://{API}/repos/{self.owner}/{self.name}/actions/runs/{run.id}/jobs",
                "html_url": f"https://{HOST}/{self.owner}/{self.name}/actions/runs/{run.id}",
                "head_commit": {"id": run.head_sha, "message": ""}, "head_repository": {"full_name": "x"}}

    def _job_json(self, run: Run, job: Job, job_id: int) -> dict[str, Any]:
        steps = [{"name": "Set up job", "status": "completed", "conclusion": "success", "number": 1},
                 {"name": job.failed_step, "status": "completed" if job.conclusion else "in_progress",
                  "conclusion": job.conclusion, "number": 2}]
        return {"id": job_id, "run_id": run.id, "name": job.name, "status": "completed" if job.conclusion else
                "in_progress", "conclusion": job.conclusion, "steps": steps, "started_at": WHEN,
                "completed_at": WHEN, "html_url": f"https://{HOST}/{self.owner}/{self.name}/actions/runs/{run.id}"
                                                  f"/job/{job_id}"}

    def _log_zip(self, run: Run) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for job in run.jobs:
                z.writestr(f"{job.name}/1_Set up job.txt", "set up\n")
                z.writestr(f"{job.name}/2_{job.failed_step}.txt", job.log or "ok\n")
        return buf.getvalue()

    # --- git --------------------------------------------------------------------------------

    def _git(self, handler: BaseHTTPRequestHandler, method: str, path: str, query: str, body: bytes) -> None:
        env = {"GIT_PROJECT_ROOT": str(self.root / "github"), "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path,
               "QUERY_STRING": query, "REQUEST_METHOD": method, "REMOTE_USER": "tilth-bot",
               "REMOTE_ADDR": "127.0.0.1", "CONTENT_TYPE": handler.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "PATH": "/usr/bin:/bin"}
        if handler.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = handler.headers["Content-Encoding"]
        if handler.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = handler.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        handler.send_response(status)
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    # --- the server -------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().strip(), 16)
                        if size == 0:
                            self.rfile.readline()
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _answer(self, status: int, payload: Any, content_type: str = "application/json") -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                body = self._body()
                op = ""
                if parts.hostname == HOST:
                    fake.requests.append((self.command, self.path, "git"))
                    fake._git(self, self.command, parts.path, parts.query, body)
                    return
                if parts.hostname != API:
                    fake.unknown.append(f"{self.command} {self.path}")
                    self._answer(502, {"message": "not github.localhost"})
                    return
                if parts.path == "/graphql":
                    given = json.loads(body or b"{}")
                    query = str(given.get("query", ""))
                    name = re.search(r"\b(?:query|mutation)\s+(\w+)", query)
                    op = name[1] if name else ""
                    fake.requests.append((self.command, self.path, op))
                    with fake.lock:
                        status, payload = fake._graphql(op, query, given.get("variables") or {})
                    self._answer(status, payload)
                    return
                fake.requests.append((self.command, self.path, ""))
                if m := re.fullmatch(rf"/repos/{fake.owner}/{fake.name}/actions/runs/(\d+)/logs", parts.path):
                    self._answer(200, fake._log_zip(fake.runs[int(m[1])]), "application/zip")
                    return
                with fake.lock:
                    status, payload = fake._rest(self.command, parts.path)
                self._answer(status, payload)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        return Handler
