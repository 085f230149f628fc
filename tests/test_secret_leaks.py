"""Secrets a worker prints or writes reach neither the model, nor a file under TILTH_HOME, nor the
branch: tool results and prompts are redacted with detect-secrets' detectors before they are sent
and written, and a change that adds a secret is refused before any commit, its file redacted."""

from __future__ import annotations

import base64
import json
import os
import random
import string
import sys

import pytest

from conftest import git, task
from fake_openai import ACCEPT, SUBMIT, FakeOpenAI, call, reply

pytestmark = pytest.mark.slow

_rng = random.Random(27)
GITHUB_TOKEN = "ghp_" + "".join(_rng.choices(string.ascii_letters + string.digits, k=36))
AWS_KEY_ID = "AKIA" + "".join(_rng.choices(string.ascii_uppercase + string.digits, k=16))
AWS_SECRET = "".join(_rng.choices(string.ascii_letters + string.digits + "+/", k=40))
SECRETS = (GITHUB_TOKEN, AWS_KEY_ID, AWS_SECRET)


def decoded_by_shell(text: str) -> str:
    """A shell command that prints `text` without containing it (so neither the plan, the scenario
    nor a tool call's arguments carry the secret: only what the command prints does)."""
    return f"echo {base64.b64encode(text.encode()).decode()} | base64 -d"


def leaks_under(root) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path}: {secret[:8]}..." for secret in SECRETS if secret.encode() in data]
    return found


def test_secrets_a_worker_prints_reach_neither_the_model_nor_the_session_files(sandbox):
    printed = f"GITHUB_TOKEN={GITHUB_TOKEN}\nAWS_ACCESS_KEY_ID={AWS_KEY_ID}\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\n"
    with FakeOpenAI() as server:
        server.enqueue("worker", reply(tool_calls=[call("bash", command=decoded_by_shell(printed)),
                                                   call("write_file", path="done.txt", content="done\n")]),
                       reply(tool_calls=[call("submit_case", summary=f"Printed {GITHUB_TOKEN}", criteria=[])]))
        server.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
        env = {"TILTH_BASE_URL": server.base_url, "TILTH_WORKER_MODEL": "worker", "TILTH_EVALUATOR_MODEL": "evaluator",
               "TILTH_RETRY_BASE_DELAY": "0", "TILTH_SANDBOX": "off",
               "TILTH_CHECKS": decoded_by_shell(printed)}  # its output goes into the evaluator's prompt
        result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd",
                               str(sandbox.write_json("p.json", [task("T-1")])), "--id", "s1", "--foreground", env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        sent = [json.dumps(r["body"]) for r in server.requests if r["body"]]
    assert not [s for body in sent for s in SECRETS if s in body], "a secret reached the model"
    tool_result = next(m["content"] for body in sent for m in json.loads(body)["messages"] if m["role"] == "tool")
    assert tool_result.count("[redacted]") == 3 and "GITHUB_TOKEN=[redacted]" in tool_result, tool_result
    assert any("AWS_SECRET_ACCESS_KEY=[redacted]" in body for body in sent if '"evaluator"' in body), "checks shown"
    assert not leaks_under(sandbox.session_dir("s1")), leaks_under(sandbox.session_dir("s1"))
    assert SECRETS[0] not in result.stdout + result.stderr
    message = git(sandbox.repo, "log", "-1", "--format=%B", "session/s1")
    assert "Printed [redacted]" in message, "the case the worker wrote reached the commit message redacted"
    runs = list((sandbox.session_dir("s1") / "runs").rglob("stdout.log"))
    assert runs and "AWS_SECRET_ACCESS_KEY=[redacted]" in runs[0].read_text(), "the run log was written, redacted"


@pytest.mark.parametrize("attempts", [2, 1], ids=["accepted on the retry", "FAILED placeholder"])
def test_a_change_that_adds_a_secret_is_refused_and_never_committed(sandbox, attempts):
    credentials = f"[default]\naws_access_key_id = {AWS_KEY_ID}\naws_secret_access_key = {AWS_SECRET}\n"
    scenario = {"tasks": {"T-1": [{"write": {"app.py": "print('hi')\n"},
                                   "run": ["mkdir -p deploy && " + decoded_by_shell(credentials) + " > deploy/aws.ini"]},
                                  {}]}}
    env = {"TILTH_MAX_ITERATIONS_PER_TASK": str(attempts), "TILTH_SANDBOX": "off"}
    assert sandbox.start("s1", [task("T-1")], scenario, env=env).returncode == (0 if attempts == 2 else 1)
    first = sandbox.ledger("s1", "T-1")[0]["verdict"]
    assert first["verdict"] == "reject" and first["category"] == "secret_added"
    assert "deploy/aws.ini:2 (AWS Access Key)" in first["concern"], first["concern"]
    assert "deploy/aws.ini:3 (Secret Keyword)" in first["concern"], first["concern"]
    found = [e["data"]["found"] for e in sandbox.events("s1") if e["type"] == "secret_redacted"]
    assert found and found[0][0] == {"path": "deploy/aws.ini", "line": 2, "kind": "AWS Access Key"}
    if attempts == 2:
        prompts = [json.loads(line) for line in (sandbox.session_dir("s1") / "prompts.jsonl").read_text().splitlines()]
        retry = next(p["prompt"] for p in prompts if p["role"] == "worker" and p["iter"] == 2)
        assert "attempt 1: reject (secret_added)" in retry and "deploy/aws.ini:3 (Secret Keyword)" in retry
    logs = sandbox.tilth("logs", "s1").stdout
    assert "the change added secrets, replaced by [redacted] before any commit: deploy/aws.ini:2 (AWS Access Key)" in logs
    commits = sandbox.commits("s1")
    assert len(commits) == 1
    committed = git(sandbox.repo, "show", f"{commits[0]['sha']}:deploy/aws.ini")
    assert committed == "[default]\naws_access_key_id = [redacted]\naws_secret_access_key = [redacted]\n"
    history = git(sandbox.repo, "log", "-p", "--format=%B", "session/s1")
    assert not [s for s in SECRETS if s in history], "a secret is on the branch"
    assert not leaks_under(sandbox.home), leaks_under(sandbox.home)


def test_secrets_a_cli_agent_prints_stay_out_of_its_stream_log_and_the_evaluator(sandbox, fake, model_env):
    """A `command` worker (a real process) prints the secrets on stdout, as a JSON line too: its
    stream tee under `agents/`, the journal and the evaluator's prompt get them redacted."""
    agent = ("import base64, json, sys\nsys.stdin.read()\n"
             f"printed = base64.b64decode({base64.b64encode(b'GITHUB_TOKEN=' + GITHUB_TOKEN.encode()).decode()!r})"
             ".decode()\nprint(printed)\nprint(json.dumps({'type': 'note', 'text': printed}))\n"
             "open('done.txt', 'w').write('done\\n')\n"
             "print('```json')\nprint(json.dumps({'summary': printed, 'criteria': []}))\nprint('```')\n")
    (sandbox.repo / "agent.py").write_text(agent)
    git(sandbox.repo, "add", "-A")
    git(sandbox.repo, "commit", "-qm", "the agent")
    fake.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
    python = os.path.realpath(sys.executable)
    result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd",
                           str(sandbox.write_json("p.json", [task("T-1")])), "--id", "s1", "--foreground",
                           env={**model_env, "TILTH_WORKER_BACKEND": "command", "TILTH_SANDBOX": "off",
                                "TILTH_WORKER_COMMAND": f"{python} agent.py", "TILTH_SELF_IMPROVEMENT": "false",
                                "TILTH_PREFLIGHT": "false"})
    assert result.returncode == 0, result.stdout + result.stderr
    streams = list((sandbox.session_dir("s1") / "agents").glob("*.stdout"))
    assert streams and "GITHUB_TOKEN=[redacted]" in streams[0].read_text(), "the stream was teed, redacted"
    assert not leaks_under(sandbox.session_dir("s1")), leaks_under(sandbox.session_dir("s1"))
    sent = [json.dumps(r["body"]) for r in fake.requests if r["body"]]
    assert sent and not [body for body in sent if GITHUB_TOKEN in body], "the case reached the evaluator unredacted"
    assert GITHUB_TOKEN not in git(sandbox.repo, "log", "-p", "session/s1")


def test_a_secret_the_repository_already_had_is_not_refused_when_its_line_is_edited(sandbox):
    (sandbox.repo / "aws.ini").write_text(f"aws_secret_access_key = {AWS_SECRET}\n")
    git(sandbox.repo, "add", "-A")
    git(sandbox.repo, "commit", "-qm", "the user's own credentials file")
    scenario = {"tasks": {"T-1": [{"run": ["sed -i 's/$/  # rotated yearly/' aws.ini"]}]}}
    assert sandbox.start("s1", [task("T-1")], scenario, env={"TILTH_SANDBOX": "off"}).returncode == 0
    assert sandbox.ledger("s1", "T-1")[0]["verdict"]["verdict"] == "accept"
    assert not [e for e in sandbox.events("s1") if e["type"] == "secret_redacted"]
    assert git(sandbox.repo, "show", "session/s1:aws.ini") == f"aws_secret_access_key = {AWS_SECRET}  # rotated yearly\n"


def test_a_secret_in_a_file_name_or_encoded_never_reaches_the_branch_and_the_model_sees_what_is_committed(sandbox):
    """A GitHub token in a file's name, base64-encoded in one file and hex-encoded in another: the
    gate finds all three, renames the file to the redacted name `list_files` already showed the model,
    rewrites the blobs, rejects the attempt; the commit holds none of the three forms."""
    encoded = base64.b64encode(GITHUB_TOKEN.encode()).decode()
    hexed = GITHUB_TOKEN.encode().hex()
    make = (f'touch "notes-$(echo {encoded} | base64 -d).txt" && echo "config = \'{encoded}\'" > b64.txt && '
            f"echo 'key_hex = {hexed}' > hex.txt")
    with FakeOpenAI() as server:
        server.enqueue("worker", reply(tool_calls=[call("bash", command=make), call("list_files")]),
                       reply(tool_calls=[SUBMIT]),
                       reply(tool_calls=[call("list_files"), call("read_file", path="notes-[redacted].txt"),
                                         call("read_file", path="b64.txt")]),
                       reply(tool_calls=[SUBMIT]))
        server.enqueue("evaluator", reply(tool_calls=[ACCEPT]))
        env = {"TILTH_BASE_URL": server.base_url, "TILTH_WORKER_MODEL": "worker", "TILTH_EVALUATOR_MODEL": "evaluator",
               "TILTH_RETRY_BASE_DELAY": "0", "TILTH_SANDBOX": "off", "TILTH_PREFLIGHT": "false",
               "TILTH_SELF_IMPROVEMENT": "false"}
        result = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd",
                               str(sandbox.write_json("p.json", [task("T-1")])), "--id", "s1", "--foreground", env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        worker = [r["body"] for r in server.requests if r["body"] and r["body"]["model"] == "worker"]
    first = sandbox.ledger("s1", "T-1")[0]["verdict"]
    assert first["category"] == "secret_added", first
    for where in ("the file name notes-[redacted].txt (GitHub Token)", "b64.txt:1 (GitHub Token, base64-encoded)",
                  "hex.txt:1 (GitHub Token, hex-encoded)"):
        assert where in first["concern"], first["concern"]
    assert "notes-[redacted].txt (its name) (GitHub Token)" in sandbox.tilth("logs", "s1").stdout
    names = git(sandbox.repo, "ls-tree", "-r", "--name-only", "session/s1").split("\n")
    assert "notes-[redacted].txt" in names and "b64.txt" in names and "hex.txt" in names, names
    history = git(sandbox.repo, "log", "-p", "--format=%B", "session/s1") + "\n".join(names)
    assert not [form for form in (GITHUB_TOKEN, encoded, hexed) if form in history], history
    assert git(sandbox.repo, "show", "session/s1:b64.txt") == "config = '[redacted]'\n"
    assert git(sandbox.repo, "show", "session/s1:hex.txt") == "key_hex = [redacted]\n"
    shown = [[m["content"] for m in body["messages"] if m["role"] == "tool"] for body in (worker[1], worker[3])]
    listed_before, (listed_after, read_name, read_b64) = shown[0][1], shown[1]
    assert "notes-[redacted].txt" in listed_before.split("\n"), "the model was shown the redacted name"
    assert set(listed_after.split("\n")) <= set(names) and "notes-[redacted].txt" in listed_after.split("\n")
    assert read_name == "notes-[redacted].txt is empty", "the name it was shown is the file's real name"
    assert "config = '[redacted]'" in read_b64
    assert not [p for p in sandbox.home.rglob("*") if GITHUB_TOKEN in p.name]
    assert not leaks_under(sandbox.home), leaks_under(sandbox.home)


def test_a_secret_that_cannot_be_redacted_in_place_is_left_out_of_the_commit(sandbox):
    """A symlink whose target is a token (no file text to rewrite) and a file whose redacted name is
    taken: both are left out of the index, named in the rejection, kept in the worktree."""
    token = f"$({decoded_by_shell(GITHUB_TOKEN)})"
    make = [f'ln -s "{token}" link.txt', 'echo mine > "notes-[redacted].txt"', f'echo x > "notes-{token}.txt"']
    scenario = {"tasks": {"T-1": [{"write": {"app.py": "print('hi')\n"}, "run": make}]}}
    result = sandbox.start("s1", [task("T-1")], scenario, env={"TILTH_MAX_ITERATIONS_PER_TASK": "1",
                                                             "TILTH_SANDBOX": "off"})
    assert result.returncode == 1, result.stdout + result.stderr
    verdict = sandbox.ledger("s1", "T-1")[0]["verdict"]
    assert verdict["category"] == "secret_added" and "link.txt:1 (GitHub Token)" in verdict["concern"], verdict
    [redacted] = [e["data"] for e in sandbox.events("s1") if e["type"] == "secret_redacted"][:1]
    assert sorted(redacted["unchanged"]) == ["link.txt", "notes-[redacted].txt"], redacted
    names = git(sandbox.repo, "ls-tree", "-r", "--name-only", "session/s1").split("\n")
    assert "app.py" in names and "link.txt" not in names, names
    assert git(sandbox.repo, "show", "session/s1:notes-[redacted].txt") == "mine\n", "the taken name keeps its own"
    history = git(sandbox.repo, "log", "-p", "--format=%B", "session/s1")
    assert GITHUB_TOKEN not in history and GITHUB_TOKEN not in "\n".join(names)
    assert os.readlink(sandbox.worktree("s1") / "link.txt") == GITHUB_TOKEN, "the worktree keeps what was left out"
