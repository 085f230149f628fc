"""`tilth --help`, `--version` and `tilth status` on a home without sessions start cheap:
building the argparse tree imports no library a command uses only when it runs (pydantic,
pygit2, the openai SDK, rich, watchfiles, apscheduler), and an empty `status` never loads the
session models. The commands that only look at sessions (`tilth status`, `status <id>`,
`--json`, `tilth logs <id> -n N`) read them without pydantic (`store/session_peek.py`,
`store/prd_peek.py`, the roll-up's own reader). A heavy import creeping back into a command
module's top, or onto a read path, fails here; the wall time itself is measured by
`python -m bench.cold_start` and `python -m bench.status_scale`, not asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from json import dumps, loads
from pathlib import Path

import pytest

from conftest import make_repo, task

HEAVY = ("pydantic", "pydantic_core", "pygit2", "openai", "httpx", "rich", "watchfiles", "apscheduler", "detect_secrets",
         "requests", "genai_prices", "tilth.store.session", "tilth.core.config")
"""Never imported by the commands below."""

PARSER_ONLY = HEAVY + ("orjson", "importlib.metadata")
"""Also not imported when the command is answered by argparse alone (`status` may read
daemon.lock with orjson; `--version` asks importlib.metadata)."""


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILTH_")}
    env["TILTH_HOME"] = str(home)
    return env


def imported(home: Path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `python -X importtime -m tilth ARGS` (the real entry point) and return the modules it imported."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "tilth", *args], env=env_for(home),
                            capture_output=True, text=True, timeout=60)
    modules = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
               if line.startswith("import time:") and "|" in line}
    assert modules, result.stderr  # -X importtime said nothing: the check would see nothing either
    return result, modules


def heavy(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(f"{n}.") for n in names))


@pytest.mark.parametrize("args", [["--help"], ["logs", "-h"], ["daemon", "-h"], ["start", "-h"]],
                         ids=lambda a: " ".join(a))
def test_help_imports_no_command_library(tmp_path: Path, args: list[str]) -> None:
    result, modules = imported(tmp_path / "home", *args)
    assert result.returncode == 0, result.stderr
    assert "usage: tilth" in result.stdout
    assert not heavy(modules, PARSER_ONLY), f"`tilth {' '.join(args)}` imports {heavy(modules, PARSER_ONLY)}"


def test_version_imports_no_command_library(tmp_path: Path) -> None:
    result, modules = imported(tmp_path / "home", "--version")
    assert result.returncode == 0 and result.stdout.startswith("tilth "), result.stderr
    assert not heavy(modules, HEAVY), heavy(modules, HEAVY)


@pytest.mark.parametrize("layout", ["no home", "no sessions dir", "empty sessions dir", "only a creation"])
@pytest.mark.parametrize("json", [False, True], ids=["table", "json"])
def test_status_without_sessions_skips_the_session_models(tmp_path: Path, layout: str, json: bool) -> None:
    home = tmp_path / "home"
    if layout != "no home":
        home.mkdir()
    if layout in ("empty sessions dir", "only a creation"):
        (home / "sessions").mkdir()
    if layout == "only a creation":  # a dot-dir under sessions/ is never a session
        (home / "sessions" / ".creating-s1").mkdir()
    result, modules = imported(home, "status", *(["--json"] if json else []))
    assert result.returncode == 0, result.stderr
    assert not heavy(modules, HEAVY), heavy(modules, HEAVY)

    # The short cut says exactly what the full view says about no sessions.
    from tilth.cli.main import supervisor_line
    from tilth.views.status import render_table

    expected = "[]" if json else render_table([], supervisor_line(home, []))
    assert result.stdout == f"{expected}\n"


def test_the_check_sees_a_heavy_import(tmp_path: Path) -> None:
    """`tilth config` needs the settings model: the same parse must find pydantic there."""
    result, modules = imported(tmp_path / "home", "config")
    assert result.returncode == 0, result.stderr
    assert {"pydantic", "tilth.core.config"} <= set(heavy(modules, HEAVY))


READ_ONLY = HEAVY + ("tilth.store.prd", "tilth.daemon.queue")
"""Not imported by the commands that only look at existing sessions."""


@pytest.fixture(scope="module")
def home_with_sessions(tmp_path_factory) -> Path:
    """Two sessions run to the end with the scripted backend, a third crashed and due for an
    auto-resume (as the supervisor leaves one), so every line of the views is drawn."""
    root = tmp_path_factory.mktemp("sessions")
    home, repo = root / "home", make_repo(root / "repo")
    plan, scenario = root / "prd.json", root / "scenario.json"
    plan.write_text(dumps([task("T-1"), task("T-2")]))
    scenario.write_text(dumps({"tasks": {"T-1": [{"write": {"a.txt": "1\n"}}],
                                               "T-2": [{"write": {"b.txt": "2\n"}}]}}))
    env = {**env_for(home), "TILTH_SANDBOX": "off"}
    for sid in ("s1", "s2", "s3"):
        done = subprocess.run([sys.executable, "-m", "tilth", "start", "--repo", str(repo), "--prd", str(plan),
                               "--id", sid, "--backend", "scripted", "--scenario", str(scenario), "--foreground"],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    from tilth.store.home import session_paths
    from tilth.store.session import SessionState, load_session, save_session

    paths = session_paths("s3", home)
    record = load_session(paths)
    record.state, record.supervised, record.auto_resumes = SessionState.crashed, True, 1
    record.auto_resume_at, record.reason = "2099-01-01T12:00:03.000Z", "runner gone: killed"
    save_session(paths, record)
    return home


@pytest.mark.parametrize("args", [["status", "s1"], ["status", "s3"], ["status", "s1", "--json"], ["status"],
                                  ["status", "--json"], ["logs", "s1", "-n", "5"], ["logs", "-n", "5"],
                                  ["logs", "s3", "-n", "50", "--all"]], ids=lambda a: " ".join(a))
@pytest.mark.slow
def test_commands_that_only_look_read_sessions_without_pydantic(home_with_sessions: Path, args: list[str]) -> None:
    result, modules = imported(home_with_sessions, *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    assert not heavy(modules, READ_ONLY), f"`tilth {' '.join(args)}` imports {heavy(modules, READ_ONLY)}"


RUN_NEVER = ("genai_prices", "requests", "urllib3", "charset_normalizer", "openai.types.responses.response",
             "openai.types.eval_create_params", "rich", "watchfiles", "apscheduler", "starlette", "uvicorn",
             "apprise", "rq", "redis")
"""Never imported by a foreground session on the `openai` backend (bench/overhead.py's session
peak RSS): genai-prices answers in a child process (`agents/price_library.py`), detect-secrets'
`requests` stays a stand-in (`core/deferred.py`), the SDK's type packages load per name asked
for (`agents/backends/openai_sdk.py`), and nothing of the dashboard, supervisor or dispatch."""


def test_the_run_path_imports_only_what_it_uses() -> None:
    """The fast tier's check: the run loop's modules, one secret scan and the SDK's client with its
    chat resource, in a fresh interpreter (a price asked for: the session test below)."""
    code = ("import sys, tilth.run.session_run, tilth.run.create\n"
            "from tilth.store.secret_scan import find_secrets\n"
            "assert find_secrets('token = ghp_' + 'a1B2c3D4e5' * 4)\n"
            "from tilth.agents.backends.chat import sdk_client\n"
            "assert sdk_client('http://127.0.0.1:9/v1', 'sk-test', 5.0).chat.completions\n"
            "print('\\n'.join(sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    modules = set(done.stdout.split()) - {"requests"}  # the stand-in is in sys.modules; what it would load is not
    assert {"openai", "openai.resources.chat.completions.completions", "detect_secrets", "pygit2"} <= modules
    assert not heavy(modules, RUN_NEVER), heavy(modules, RUN_NEVER)


@pytest.mark.slow
def test_a_run_imports_only_what_it_uses(tmp_path: Path) -> None:
    from fake_openai import FakeOpenAI, call, reply

    def model(body: dict) -> dict:
        if body.get("model") == "evaluator":
            return reply(tool_calls=[call("submit_verdict", verdict="accept", category="none", concern="",
                                          evidence=["a.txt"], next_step="")])
        if not body.get("tools"):
            return reply("NONE")
        if not any(m.get("role") == "tool" for m in body["messages"]):
            return reply(tool_calls=[call("write_file", path="a.txt", content="1\n")])
        return reply(tool_calls=[call("submit_case", summary="wrote a.txt",
                                      criteria=[{"criterion": "T-1", "evidence": "a.txt"}])])

    repo, plan = make_repo(tmp_path / "repo"), tmp_path / "prd.json"
    plan.write_text(dumps([task("T-1")]))
    with FakeOpenAI() as server:
        server.set_handler(model)
        env = {**env_for(tmp_path / "home"), "TILTH_SANDBOX": "off", "TILTH_PREFLIGHT": "false",
               "TILTH_BASE_URL": server.base_url, "TILTH_API_KEY": "sk-test", "TILTH_WORKER_MODEL": "gpt-4o-mini",
               "TILTH_EVALUATOR_MODEL": "evaluator", "TILTH_FINAL_REVIEW": "false"}
        result = subprocess.run([sys.executable, "-X", "importtime", "-m", "tilth", "start", "--repo", str(repo),
                                 "--prd", str(plan), "--id", "s1", "--foreground"],
                                env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    modules = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()
               if line.startswith("import time:") and "|" in line}
    assert {"openai", "openai.resources.chat.completions.completions", "detect_secrets", "pygit2"} <= modules
    assert not heavy(modules, RUN_NEVER), heavy(modules, RUN_NEVER)
    events = [loads(line) for line in (tmp_path / "home" / "sessions" / "s1" / "events.jsonl").read_text().splitlines()]
    priced = [e["data"] for e in events if e["type"] == "model_call" and e["data"].get("model") == "gpt-4o-mini"]
    assert priced and all(d["cost_source"] == "price_table" for d in priced), priced  # the child's answer


def test_deferred_module_runs_its_body_on_first_use() -> None:
    """`core/deferred.py` in a fresh interpreter: `import requests` binds the stand-in without urllib3;
    reading an attribute runs the real module, and the annotation-only placeholder gives way to the real class."""
    code = ("import sys; from tilth.core.deferred import defer; defer('requests', annotation_only=('Response',)); "
            "import requests; assert 'urllib3' not in sys.modules, 'loaded on import'; "
            "assert requests.Response.__module__ == 'requests'; assert 'urllib3' not in sys.modules; "
            "assert requests.codes.ok == 200 and 'urllib3' in sys.modules; "
            "assert requests.Response.__module__ == 'requests.models'; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
