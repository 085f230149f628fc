"""Shared test helpers: real git repos in tmp dirs and real `tilth` subprocesses."""

from __future__ import annotations

import json
import os
import tempfile
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

GIT_ID = ["-c", "user.name=Test User", "-c", "user.email=test@example.com"]

NEEDS = {"cluster": "redis", "llama_server": "llama", "browser": "browser", "anthropic": "cli_agents",
         "responses": "cli_agents"}
"""A fixture that starts an outside tool, and the marker (pyproject.toml) a test using it must carry."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make check` selects its tests by marker: a test that starts redis, llama.cpp, chromium or a
    CLI agent without its marker would slip into the fast tier."""
    for item in items:
        for fixture, marker in NEEDS.items():
            if fixture in getattr(item, "fixturenames", ()) and item.get_closest_marker(marker) is None:
                raise pytest.UsageError(f"{item.nodeid} uses the `{fixture}` fixture: mark it @pytest.mark.{marker}")


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *GIT_ID, *args], cwd=repo, check=True, capture_output=True, text=True)
    return out.stdout


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, content in (files or {"README.md": "# sample\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(content)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def task(task_id: str, title: str | None = None, **extra) -> dict:
    return {
        "id": task_id,
        "title": title or f"Task {task_id}",
        "description": f"Do {task_id}.",
        "acceptance_criteria": [f"{task_id} is done"],
        "status": "pending",
        **extra,
    }


@dataclass
class Sandbox:
    root: Path
    repo: Path
    home: Path
    env: dict[str, str] = field(default_factory=dict)

    def write_json(self, name: str, obj: object) -> Path:
        path = self.root / name
        path.write_text(json.dumps(obj, indent=2))
        return path

    def tilth(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tilth", *args], env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=timeout, cwd=self.root)

    def start(self, session_id: str, plan: list[dict], scenario: dict | None = None, *extra: str,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        args = ["start", "--repo", str(self.repo), "--prd", str(self.write_json(f"{session_id}-prd.json", plan)),
                "--id", session_id, "--backend", "scripted", "--foreground", *extra]
        if scenario is not None:
            args += ["--scenario", str(self.write_json(f"{session_id}-scenario.json", scenario))]
        return self.tilth(*args, env=env)

    def spawn(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "tilth", *args], env={**self.env, **(env or {})},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=self.root)

    def session_dir(self, session_id: str) -> Path:
        return self.home / "sessions" / session_id

    def worktree(self, session_id: str) -> Path:
        return self.home / "worktrees" / session_id

    def plan(self, session_id: str) -> list[dict]:
        return json.loads((self.session_dir(session_id) / "prd.json").read_text())

    def statuses(self, session_id: str) -> dict[str, str]:
        return {t["id"]: t["status"] for t in self.plan(session_id)}

    def progress(self, session_id: str) -> list[list[str]]:
        text = (self.session_dir(session_id) / "progress.txt").read_text()
        return [line.split("\t") for line in text.splitlines()]

    def ledger(self, session_id: str, task_id: str) -> list[dict]:
        path = self.session_dir(session_id) / "ledger" / f"{task_id}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def events(self, session_id: str) -> list[dict]:
        path = self.session_dir(session_id) / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def commits(self, session_id: str) -> list[dict]:
        """Commits on session/<id> since main, oldest first, read with the git CLI."""
        fmt = "%H%x1f%s%x1f%(trailers:key=Tilth-Task,valueonly,separator=)%x1f" \
              "%(trailers:key=Tilth-Outcome,valueonly,separator=)%x1f%(trailers:key=Tilth-Iterations,valueonly,separator=)%x1e"
        out = git(self.repo, "log", "--reverse", f"--format={fmt}", f"main..session/{session_id}")
        rows = []
        for record in out.split("\x1e"):
            if record.strip():
                sha, subject, task_id, outcome, iters = record.strip("\n").split("\x1f")
                rows.append({"sha": sha, "subject": subject, "task": task_id.strip(),
                             "outcome": outcome.strip(), "iterations": iters.strip()})
        return rows


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    """A repository and a TILTH_HOME; no process of it outlives the test (a `tilth answer` to a
    waiting session, say, hands it to a supervisor that would otherwise run on)."""
    from supervised import kill_tree, processes_with_env

    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    # TILTH_TEST_FAULTS=1 arms the pause points (core/faults.py) a test names with TILTH_TEST_PAUSE_AT.
    env.update({"TILTH_HOME": str(home), "PYTHONUNBUFFERED": "1", "TILTH_TEST_FAULTS": "1"})
    yield Sandbox(tmp_path, repo, home, env)
    for pid in processes_with_env(f"TILTH_HOME={home}"):
        kill_tree(pid)


def run_killing(sandbox: Sandbox, args: list[str], delay: float, env: dict[str, str] | None = None) -> int | None:
    """Run `tilth *args`; SIGKILL its whole process group after `delay` s. None when killed."""
    proc = subprocess.Popen([sys.executable, "-m", "tilth", *args], env={**sandbox.env, **(env or {})},
                            cwd=sandbox.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        return proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def wait_for_pause(proc: subprocess.Popen, point: str, timeout: float = 30) -> None:
    """Block on the child's stderr until it reports reaching the named checkpoint."""
    selector = selectors.DefaultSelector()
    selector.register(proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        if not selector.select(timeout=deadline - time.monotonic()):
            break
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if f"paused at {point}" in line:
            return
    proc.kill()
    raise AssertionError(f"child never paused at {point}; stderr: {''.join(seen)!r}")


MODEL_KEY = "sk-test-secret-0123456789"


@pytest.fixture
def fake():
    """A local server speaking the Chat Completions wire format (tests/fake_openai.py)."""
    from fake_openai import FakeOpenAI

    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def model_env(fake):
    """The environment that points tilth's `openai` backend at `fake`."""
    return {"TILTH_BASE_URL": fake.base_url, "TILTH_API_KEY": MODEL_KEY, "TILTH_WORKER_MODEL": "worker",
            "TILTH_EVALUATOR_MODEL": "evaluator", "TILTH_RETRY_BASE_DELAY": "0"}


@pytest.fixture
def daemon(sandbox):
    """A sandbox whose sessions a real supervisor runs (tests/supervised.py); nothing outlives the test."""
    from supervised import Daemon

    helper = Daemon(sandbox)
    try:
        yield helper
    finally:
        helper.cleanup()


def finished_before(sandbox: Sandbox, session_id: str, code: int | None) -> bool:
    """A resume refused (exit 2) because the session is done: the kill came after the run had recorded
    it done, so there is nothing left to resume (a finished session never runs again)."""
    if code != 2:
        return False
    record = json.loads((sandbox.session_dir(session_id) / "session.json").read_text())
    return record.get("state") == "done"


def path_without_gh() -> str:
    """PATH without gh; a directory holding gh among other tools (Debian's /usr/bin) is replaced by
    one of links to its other tools."""
    dirs, kept = os.environ.get("PATH", "").split(os.pathsep), []
    for d in dirs:
        if d and (Path(d) / "gh").exists():
            shadow = Path(tempfile.mkdtemp(prefix="tilth-no-gh-"))
            for tool in Path(d).iterdir():
                if tool.name != "gh":
                    (shadow / tool.name).symlink_to(tool)
            d = str(shadow)
        kept.append(d)
    return os.pathsep.join(d for d in kept if d)
