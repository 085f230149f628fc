"""Per-task overhead of the *other* tilth (AlteredCraft's; PyPI `tilth` 0.2.0), for comparison.

It is installed into its own venv outside the repo, `~/.cache/tilth/rival-venv` (the
package name clashes with ours; it asks for Python 3.12 but runs on 3.11):

    python3.11 -m venv ~/.cache/tilth/rival-venv
    ~/.cache/tilth/rival-venv/bin/pip install --ignore-requires-python tilth==0.2.0

How it is driven: a feature directory `<repo>/.tilth/bench/` (overview.md plus one
`T-NNN-*.md` per task, each asking for one new file `out/T-NNN.txt`) is committed to the
repo copy, then `tilth run <repo>/.tilth/bench` runs every task unattended against the
zero-latency stub of `bench/rival_stub.py` (OpenAI Chat Completions; env
`TILTH_BASE_URL`, `TILTH_API_KEY`, `TILTH_WORKER_MODEL`, `TILTH_EVALUATOR_MODEL`, with
`TILTH_HOME` in the work dir). Per task it does: a worker call that writes the file, a
worker call with `submit_case`, an evaluator call with `submit_verdict` accept, then
`git add -A` + `git commit` in its session worktree.

Measurement (the same rule as ours in `bench/overhead.py`): each task's span runs from its
`context_reset` event (the task starting) to its `commit` event (the commit made, status
flipped and progress line written), and the result is the mean span of the tasks after
the first. Its events carry whole-second timestamps, so the run is launched through a
one-line shim that only widens `tilth.session._ts` to microseconds; nothing else is
patched. `RivalRun.cycle_ms` is the other reading, every millisecond between the second
task's start and the run's `stop` event divided by the tasks after the first, which also
counts what it does between tasks (it re-rolls summary.json from the whole events.jsonl).

`bench/overhead.py` runs it side by side with the floor and tilth (`make bench`); when the
install fails (no network) that column says so and the floor ratios stand alone.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bench.rival_stub import EVALUATOR_MODEL, WORKER_MODEL, RivalStub, task_content, task_file

VERSION = "0.2.0"
VENV = Path.home() / ".cache" / "tilth" / "rival-venv"
FEATURE = "bench"
GIT = ["git", "-c", "user.name=b", "-c", "user.email=b@l"]

# Run the rival's CLI with only its event timestamp widened to microseconds.
SHIM = """\
import sys, time
import tilth, tilth.session
if not tilth.__file__.startswith(sys.prefix):
    sys.exit(f"bench.rival: imported tilth from {tilth.__file__}, not the rival venv {sys.prefix}")
def _ts():
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".%06dZ" % int(now % 1 * 1e6)
tilth.session._ts = _ts
from tilth.cli import main
sys.argv = ["tilth", "run", sys.argv[1]]
sys.exit(main())
"""


class RivalError(RuntimeError):
    pass


@dataclass
class RivalRun:
    tasks: int
    spans: list[float]  # seconds, context_reset -> commit, one per task in order
    cycle_ms: float  # (stop - second task's start) / (tasks - 1), in ms
    wall_s: float  # the whole subprocess, process start and worktree creation included
    stub_cycle_ms: float | None  # the same as cycle_ms, from the stub's first-request times

    @property
    def ms_per_task(self) -> float:
        return statistics.mean(self.spans[1:]) * 1000


def _python() -> Path:
    return VENV / "bin" / "python"


def _installed() -> bool:
    if not _python().exists():
        return False
    probe = subprocess.run([str(_python()), "-I", "-c",
                            "import importlib.metadata as m; print(m.version('tilth'))"],
                           capture_output=True, text=True)
    return probe.returncode == 0 and probe.stdout.strip() == VERSION


def ensure_installed() -> str | None:
    """Install the rival into its venv unless it is there already; the reason when that fails."""
    if _installed():
        return None
    base = shutil.which("python3.11") or shutil.which("python3.12") or sys.executable
    try:
        if not _python().exists():
            VENV.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([base, "-m", "venv", str(VENV)], check=True, capture_output=True, text=True,
                           timeout=300)
        subprocess.run([str(_python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--ignore-requires-python", f"tilth=={VERSION}"],
                       check=True, capture_output=True, text=True, timeout=600)
    except subprocess.CalledProcessError as exc:
        lines = [ln for ln in (exc.stderr or exc.stdout or "").splitlines() if ln.strip()
                 and not ln.startswith("WARNING: Location")]
        return f"installing tilth=={VERSION} failed: {lines[-1] if lines else exc}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"installing tilth=={VERSION} failed: {exc}"
    return None if _installed() else f"tilth=={VERSION} is still missing from {VENV} after pip install"


def task_ids(tasks: int) -> list[str]:
    width = max(3, len(str(tasks)))
    return [f"T-{i:0{width}d}" for i in range(1, tasks + 1)]


def write_feature(repo: Path, tasks: int) -> Path:
    """Author `.tilth/bench/` (overview + one-file tasks) in `repo` and commit it."""
    feature = repo / ".tilth" / FEATURE
    feature.mkdir(parents=True)
    (feature / "overview.md").write_text(
        "# Bench\n\n## Goal\nEach task writes one small new file under out/.\n\n"
        "## Scope boundaries\n- In scope: the one file the task names.\n- Out of scope: everything else.\n")
    for tid in task_ids(tasks):
        path = task_file(tid)
        (feature / f"{tid}-write-file.md").write_text(
            f"---\nid: {tid}\ntitle: Write {path}\n---\n\n## Description\n"
            f"Create `{path}` containing the line `{task_content(tid).strip()}`.\n\n"
            f"## Acceptance criteria\n- {path} exists\n")
    subprocess.run([*GIT, "add", ".tilth"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "bench feature"], cwd=repo, check=True)
    return feature


def _events(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            event = json.loads(line)
            event["t"] = datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()
            out.append(event)
    return out


def _git(args: list[str], cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def verify(session: Path, repo: Path, ids: list[str], events: list[dict]) -> None:
    """Raise RivalError unless every task really ended accepted, with its file committed."""
    checkpoint = json.loads((session / "checkpoint.json").read_text())
    if checkpoint.get("status") != "all_done":
        raise RivalError(f"session status is {checkpoint.get('status')!r}, not 'all_done'")
    status = json.loads((session / "task-status.json").read_text())
    undone = [tid for tid in ids if status.get(tid) != "done"]
    if undone:
        raise RivalError(f"tasks not done in task-status.json: {undone[:5]}")
    stops = [e["payload"].get("reason") for e in events if e["type"] == "stop"]
    if stops != ["all_done"]:
        raise RivalError(f"stop events {stops}, expected ['all_done']")
    accepts = sum(e["type"] == "evaluator_verdict" and e["payload"].get("verdict") == "accept" for e in events)
    if accepts != len(ids):
        raise RivalError(f"{accepts} accept verdicts for {len(ids)} tasks")
    worktree = Path(checkpoint["workspace"])
    tracked = set(_git(["ls-tree", "-r", "--name-only", "HEAD", "out/"], worktree).split())
    for tid in ids:
        path = task_file(tid)
        if path not in tracked:
            raise RivalError(f"{path} is not committed on the session branch")
        if _git(["show", f"HEAD:{path}"], worktree) != task_content(tid):
            raise RivalError(f"{path} has the wrong content")
    base = _git(["rev-parse", "HEAD"], repo).strip()
    commits = int(_git(["rev-list", "--count", f"{base}..HEAD"], worktree))
    if commits != len(ids):
        raise RivalError(f"{commits} commits on the session branch for {len(ids)} tasks")
    if _git(["status", "--porcelain"], worktree).strip():
        raise RivalError("the session worktree is left dirty")


def run_rival(repo: Path, tasks: int, workdir: Path, timeout: float | None = None) -> RivalRun:
    """One unattended run of `tasks` one-file tasks in `repo`; raises RivalError on any shortfall."""
    if tasks < 2:
        raise RivalError("need at least 2 tasks (the first is not counted)")
    reason = ensure_installed()
    if reason:
        raise RivalError(reason)
    ids = task_ids(tasks)
    feature = write_feature(repo, tasks)
    home = workdir / "rival-home"
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "rival-run.log"
    timeout = timeout if timeout is not None else 120 + 15 * tasks
    with RivalStub() as stub:
        scrub = ("TILTH_", "OPENAI_", "PYTHON", "VIRTUAL_ENV", "GIT_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(scrub)}
        env.update({
            "TILTH_HOME": str(home), "TILTH_ENV_FILE": str(home / ".env"),
            "TILTH_BASE_URL": stub.base_url, "TILTH_API_KEY": "sk-bench",
            "TILTH_WORKER_MODEL": WORKER_MODEL, "TILTH_EVALUATOR_MODEL": EVALUATOR_MODEL,
            "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@l", "GIT_COMMITTER_NAME": "b",
            "GIT_COMMITTER_EMAIL": "b@l", "TERM": "dumb", "COLUMNS": "200",
        })
        began = time.perf_counter()
        try:
            with open(log, "w") as out:
                done = subprocess.run([str(_python()), "-I", "-c", SHIM, str(feature)], cwd=workdir, env=env,
                                      stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                      timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RivalError(f"the run did not finish within {timeout:.0f} s (log: {log})") from None
        wall = time.perf_counter() - began
        stamps = list(stub.log)
    if done.returncode != 0:
        tail = log.read_text().strip().splitlines()[-3:]
        raise RivalError(f"tilth run exited {done.returncode}: {' | '.join(tail)} (log: {log})")
    sessions = [p for p in (home / "sessions").iterdir() if p.is_dir()]
    if len(sessions) != 1:
        raise RivalError(f"expected one session under {home / 'sessions'}, found {len(sessions)}")
    events = _events(sessions[0] / "events.jsonl")
    verify(sessions[0], repo, ids, events)

    starts = {e["payload"]["task_id"]: e["t"] for e in events if e["type"] == "context_reset"}
    ends = {e["payload"]["task_id"]: e["t"] for e in events if e["type"] == "commit"}
    stop = next(e["t"] for e in events if e["type"] == "stop")
    spans = [ends[tid] - starts[tid] for tid in ids]
    first_request = {}
    for t, role, tid, _ in stamps:
        if role == "worker" and tid not in first_request:
            first_request[tid] = t
    stub_cycle = None
    if all(tid in first_request for tid in ids):
        stub_cycle = (first_request[ids[-1]] - first_request[ids[1]]) * 1000 / (tasks - 2) if tasks > 2 else None
    return RivalRun(tasks=tasks, spans=spans, cycle_ms=(stop - starts[ids[1]]) * 1000 / (tasks - 1),
                    wall_s=wall, stub_cycle_ms=stub_cycle)


def rival_ms_per_task(repo: Path, tasks: int, workdir: Path) -> float | None:
    """Wall ms per task of the rival on `repo` (a fresh git repo copy), or None with the reason
    on stderr. Measured from its event timestamps (widened to microseconds): the mean of the
    per-task spans `context_reset` -> `commit`, the first task excluded, as in ours."""
    try:
        return run_rival(repo, tasks, workdir).ms_per_task
    except (RivalError, OSError, subprocess.CalledProcessError) as exc:
        print(f"bench.rival: skipped: {exc}", file=sys.stderr)
        return None
