"""What a new user meets first: an accepted attempt that changed nothing, the reason a session
stopped, and a start that fails fast when the model endpoint cannot be used."""

from __future__ import annotations

import json
import socket

import pytest

from conftest import git, task
from fake_openai import FakeOpenAI, fault, reply

from tilth.cli.review import pr_body
from tilth.store.home import session_paths
from tilth.views.tally import tally

EMPTY_ACCEPT = {"tasks": {"T-1": [{"case": {"summary": "Nothing to do."}}]}}


@pytest.mark.slow
def test_accepted_empty_diff_is_rejected_as_no_change(sandbox):
    result = sandbox.start("s1", [task("T-1")], EMPTY_ACCEPT, env={"TILTH_MAX_ITERATIONS_PER_TASK": "2"})
    assert result.returncode == 1, result.stderr

    verdicts = [e["verdict"] for e in sandbox.ledger("s1", "T-1")]
    assert [(v["verdict"], v["category"]) for v in verdicts] == [("reject", "no_change")] * 2
    assert "the diff is empty" in verdicts[0]["concern"]
    assert [(c["task"], c["outcome"]) for c in sandbox.commits("s1")] == [("T-1", "failed")]
    assert sandbox.statuses("s1") == {"T-1": "failed"}
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    assert "no_change" in report


def test_allow_empty_task_is_done_with_an_empty_commit_and_only_that_one(sandbox):
    scenario = {"tasks": {t: EMPTY_ACCEPT["tasks"]["T-1"] for t in ("T-1", "T-2")}}
    env = {"TILTH_MAX_ITERATIONS_PER_TASK": "1"}
    result = sandbox.start("s1", [task("T-1", allow_empty=True), task("T-2")], scenario, env=env)
    assert result.returncode == 1, result.stderr

    assert [v["verdict"]["verdict"] for v in sandbox.ledger("s1", "T-1")] == ["accept"]
    assert [v["verdict"]["category"] for v in sandbox.ledger("s1", "T-2")] == ["no_change"]
    commits = sandbox.commits("s1")
    assert [(c["task"], c["outcome"]) for c in commits] == [("T-1", ""), ("T-2", "failed")]
    assert git(sandbox.repo, "show", "--name-only", "--format=", commits[0]["sha"]).strip() == ""
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "failed"}
    assert json.loads((sandbox.session_dir("s1") / "prd.json").read_text())[0]["allow_empty"] is True


@pytest.mark.slow
def test_a_stopped_session_says_why_in_status_report_and_pr_body(sandbox):
    with FakeOpenAI() as fake:
        fake.enqueue("worker", *[fault(500, "upstream exploded")] * 2)
        env = {"TILTH_BASE_URL": fake.base_url, "TILTH_API_KEY": "sk-test-0123456789", "TILTH_WORKER_MODEL": "worker",
               "TILTH_MAX_RETRIES": "1", "TILTH_RETRY_BASE_DELAY": "0"}
        prd = sandbox.write_json("prd.json", [task("T-1")])
        result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1", "--foreground",
                               env=env)
    assert result.returncode == 3, result.stderr

    record = json.loads((sandbox.session_dir("s1") / "session.json").read_text())
    assert record["state"] == "stopped"
    assert "worker model (worker) call failed after 2 attempt(s)" in record["reason"]
    summary = json.loads(sandbox.tilth("status", "--json").stdout)[0]
    assert summary["state"] == "stopped" and summary["reason"] == record["reason"]
    assert "upstream exploded" in summary["reason"]
    one = sandbox.tilth("status", "s1").stdout
    assert f"reason   {record['reason']}" in one.splitlines()
    report = (sandbox.session_dir("s1") / "report.md").read_text()
    assert report.splitlines()[0] == f"Session s1: stopped ({record['reason']})"
    body = pr_body(tally(session_paths("s1", sandbox.home)))
    assert "**Session s1: stopped (the worker model (worker) call failed" in body


@pytest.mark.slow
def test_a_run_clears_the_reason_of_the_last_stop(sandbox):
    with FakeOpenAI() as fake:
        fake.enqueue("worker", fault(500), fault(500), reply(tool_calls=[
            ("write_file", json.dumps({"path": "hello.py", "content": "print(1)\\n"})),
            ("submit_case", json.dumps({"summary": "Wrote hello.py.",
                                        "criteria": [{"criterion": "T-1 is done", "evidence": "hello.py"}]}))]))
        fake.enqueue("evaluator", reply(tool_calls=[("submit_verdict", json.dumps(
            {"verdict": "accept", "category": "none", "concern": "", "evidence": [], "next_step": ""}))]))
        env = {"TILTH_BASE_URL": fake.base_url, "TILTH_API_KEY": "sk-test-0123456789", "TILTH_WORKER_MODEL": "worker",
               "TILTH_EVALUATOR_MODEL": "evaluator", "TILTH_MAX_RETRIES": "1", "TILTH_RETRY_BASE_DELAY": "0"}
        prd = sandbox.write_json("prd.json", [task("T-1")])
        first = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1", "--foreground",
                              env=env)
        assert first.returncode == 3, first.stderr
        assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["reason"]
        again = sandbox.tilth("resume", "s1", "--foreground", env=env)
    assert again.returncode == 0, again.stderr
    record = json.loads((sandbox.session_dir("s1") / "session.json").read_text())
    assert record["state"] == "done" and record["reason"] is None
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["reason"] is None


def start_openai(sandbox, env: dict[str, str]):
    prd = sandbox.write_json("prd.json", [task("T-1")])
    return sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s1", "--foreground",
                         env=env)


def model_env(url: str, **extra: str) -> dict[str, str]:
    return {"TILTH_BASE_URL": url, "TILTH_API_KEY": "sk-test-0123456789", "TILTH_WORKER_MODEL": "worker",
            "TILTH_MAX_RETRIES": "0", "TILTH_RETRY_BASE_DELAY": "0", **extra}


def assert_nothing_created(sandbox) -> None:
    sessions = sandbox.home / "sessions"
    assert not sessions.exists() or [p.name for p in sessions.iterdir()] == []
    assert git(sandbox.repo, "branch", "--list", "session/s1") == ""
    assert len(git(sandbox.repo, "worktree", "list").splitlines()) == 1
    assert not sandbox.worktree("s1").exists()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_preflight_refuses_an_unreachable_endpoint_and_creates_nothing(sandbox):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    result = start_openai(sandbox, model_env(url))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"the worker and evaluator endpoint is unreachable at {url}" in lines[0], lines
    assert "TILTH_PREFLIGHT=false" in lines[0]
    assert_nothing_created(sandbox)


@pytest.mark.slow
def test_preflight_refuses_a_rejected_key_and_creates_nothing(sandbox):
    with FakeOpenAI(models=["worker"], api_key="sk-the-right-one-0000") as fake:
        result = start_openai(sandbox, model_env(fake.base_url))
        assert [r["path"] for r in fake.requests] == ["/v1/models"]
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "rejected the key (401: Incorrect API key provided.)" in lines[0], lines
    assert f"preflight: asking {fake.base_url} for the model list (up to 10s;" in result.stdout, "a sign of life"
    assert "sk-test-0123456789" not in result.stderr
    assert_nothing_created(sandbox)


@pytest.mark.slow
def test_preflight_refuses_an_unknown_model_and_names_the_known_ones(sandbox):
    with FakeOpenAI(models=["worker", "gpt-small"]) as fake:
        result = start_openai(sandbox, model_env(fake.base_url, TILTH_EVALUATOR_MODEL="no-such-model"))
        assert [r["path"] for r in fake.requests] == ["/v1/models", "/v1/models/no-such-model"]
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "the evaluator model 'no-such-model' is not found at" in lines[0]
    assert "(it offers: gpt-small, worker)" in lines[0] and "TILTH_EVALUATOR_MODEL" in lines[0]
    assert_nothing_created(sandbox)


@pytest.mark.slow
def test_preflight_passes_a_server_without_a_model_route_and_can_be_switched_off(sandbox):
    with FakeOpenAI() as fake:  # lists only scripted models and has no /v1/models/<id>: no proof either way
        fake.enqueue("worker", fault(500, "boom", headers={"x-should-retry": "false"}))
        result = start_openai(sandbox, model_env(fake.base_url, TILTH_WORKER_MODEL="unlisted"))
        assert [r["path"] for r in fake.requests][:2] == ["/v1/models", "/v1/models/unlisted"]
    assert result.returncode == 3 and sandbox.session_dir("s1").exists(), result.stderr
    # ... but the list it did give lacks the model, and start says so
    assert (f"preflight: the worker and evaluator model 'unlisted' is not in the model list at {fake.base_url} (it offers: worker)"
            in result.stderr and "check TILTH_WORKER_MODEL if its calls fail" in result.stderr), result.stderr

    url = f"http://127.0.0.1:{closed_port()}/v1"
    prd = sandbox.write_json("prd2.json", [task("T-1")])
    off = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(prd), "--id", "s2", "--foreground",
                        env=model_env(url, TILTH_PREFLIGHT="false"))
    assert off.returncode == 3, off.stderr
    assert "preflight" not in off.stderr and "call failed after 1 attempt(s)" in off.stderr
    assert sandbox.session_dir("s2").exists()


@pytest.mark.parametrize("target", ["venv", "install"])
def test_make_says_what_it_installs_before_pip_goes_quiet(tmp_path, target):
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    venv = tmp_path / "venv"
    goal = [f"VENV={venv}", f"{venv}/.installed"] if target == "venv" else \
        [f"INSTALL_VENV={venv}", f"BINDIR={tmp_path / 'bin'}", "install"]
    planned = subprocess.run(["make", "--dry-run", "-C", str(root), *goal], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    first_pip = next(i for i, line in enumerate(planned) if "pip install" in line)
    said = [line for line in planned[:first_pip] if line.startswith("echo ") and "make: installing tilth" in line]
    assert said and str(venv) in said[0], planned
