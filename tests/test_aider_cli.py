"""aider's command line and output reading (`agents/backends/aider_cli.py`): the reader on aider's
own output lines, then the real aider (installed by `make agents`) in a real git repo against the
Chat Completions stub."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import fake_openai as fo
from cli_agents import agent_bin, missing
from fake_openai import FakeOpenAI
from tilth.agents.backends.aider_cli import AIDER_DEFAULT_ENV, AiderUsage, aider_argv, read_aider_output

BANNER = """Detected dumb terminal, disabling fancy input and pretty output.

Aider v0.86.2
Model: openai/stub-model with whole edit format
Git repo: .git with 2 files
Repo-map: disabled
Added notes.txt to the chat.

"""


# ---------------------------------------------------------------- the reader, on aider's lines

def test_reply_tokens_and_cost_are_read_from_the_last_exchange():
    stdout = BANNER + """First look.

Tokens: 900 sent, 10 received. Cost: $0.0020 message, $0.0020 session.

Model: this line is the reply's, not aider's
litellm.RateLimitError: a reply quoting an error is not one

notes.txt
```diff
+new line
```

Tokens: 12k sent, 1.5k cache write, 3.4k cache hit, 56 received.
Cost: $0.0300 message, $0.0320 session.
Applied edit to notes.txt
"""
    report = read_aider_output(stdout, "", 0)
    assert report.final_text == ("Model: this line is the reply's, not aider's\n"
                                 "litellm.RateLimitError: a reply quoting an error is not one\n\n"
                                 "notes.txt\n```diff\n+new line\n```")
    assert (report.prompt_tokens, report.completion_tokens, report.turns) == (12_900, 66, 2)
    assert report.cost_usd == 0.032 and report.extra == {"tokens_rounded": True}
    assert report.model == "openai/stub-model"
    assert not report.is_error and report.error is None and report.limit is None


def test_the_live_reader_counts_each_exchange_as_its_line_arrives():
    usage = AiderUsage()
    for line in BANNER.splitlines() + ["Working.", ""]:
        assert usage.feed({"text": line}) == []
    assert usage.report().prompt_tokens is None and usage.report().cost_usd is None
    usage.feed({"text": "Tokens: 1.2k sent, 300 received. Cost: $0.01 message, $0.01 session."})
    assert (usage.report().prompt_tokens, usage.report().completion_tokens, usage.report().cost_usd) == (1200, 300, 0.01)
    usage.feed({"text": "Tokens: 800 sent, 20 received."})
    usage.feed({"text": "Cost: $0.04 message, $0.05 session."})
    usage.feed({"text": "Cost: $9.00 message, $9.00 session."})  # the reply's, two lines on: not aider's
    report = usage.report()
    assert (report.prompt_tokens, report.completion_tokens, report.turns, report.cost_usd) == (2000, 320, 2, 0.05)
    assert report.model == "openai/stub-model" and usage.rounded


def test_an_api_error_after_the_last_reply_is_a_failure_even_with_exit_code_0():
    stdout = BANNER + """Done.

Tokens: 100 sent, 5 received.
Applied edit to notes.txt
litellm.InternalServerError: InternalServerError: OpenAIException - stub
500
The API provider's servers are down or overloaded.
Retrying in 0.2 seconds...
litellm.InternalServerError: InternalServerError: OpenAIException - last one
The API provider's servers are down or overloaded.

"""
    report = read_aider_output(stdout, "", 0)
    assert report.is_error and report.limit is None and report.final_text == "Done."
    assert report.error == ("litellm.InternalServerError: InternalServerError: OpenAIException - last one "
                            "The API provider's servers are down or overloaded.")
    assert (report.prompt_tokens, report.completion_tokens, report.cost_usd) == (100, 5, None)


def test_a_rate_limit_or_no_credit_as_the_final_error_is_a_limit():
    quota = BANNER + """litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your
current quota, please check your plan and billing details.
The API provider has rate limited you. Try again later or check your quotas.
"""
    report = read_aider_output(quota, "", 0)
    assert report.is_error and report.final_text is None and report.prompt_tokens is None
    assert report.limit is not None and "exceeded your current quota" in report.limit.message
    credit = BANNER + ('litellm.APIError: APIError: OpenAIException - {"code":402}\n'
                       "Insufficient credits with the API provider. Please add credits.\n")
    assert read_aider_output(credit, "", 0).limit is not None
    recovered = quota + "Retrying in 0.2 seconds...\nDone.\n\nTokens: 10 sent, 2 received.\n"
    report = read_aider_output(recovered, "", 0)
    assert not report.is_error and report.limit is None and report.final_text == "Done."


def test_no_reply_or_a_non_zero_exit_is_a_failure_with_the_last_line_said():
    assert read_aider_output(BANNER, "", 0).error == "aider got no reply from the model"
    unread = read_aider_output(BANNER + "/runs/1/prompt.txt: file not found error\n\n\nnotes.txt\n> ", "", 0)
    assert unread.is_error and unread.error == "aider got no reply from the model: /runs/1/prompt.txt: file not found error"
    report = read_aider_output("", "Traceback (most recent call last):\nValueError: bad\n", 1)
    assert report.is_error and report.error == "aider exited with 1: ValueError: bad"
    killed = read_aider_output(BANNER + "Done.\n\nTokens: 10 sent, 2 received.\n", "", 124)
    assert killed.is_error and killed.final_text == "Done." and killed.limit is None


def test_argv_puts_the_users_flags_between_the_defaults_and_tilths():
    argv = aider_argv("/bin/aider", "/runs/1/prompt.txt", ["--map-tokens", "1024", "--auto-commits", "x.py"], False)
    assert argv[0] == "/bin/aider" and argv[-2:] == ["--message-file", "/runs/1/prompt.txt"]
    assert argv.index("--map-tokens") < argv.index("1024") < argv.index("--no-auto-commits")
    assert argv.index("--auto-commits") < argv.index("--no-auto-commits") and "--chat-mode" not in argv
    assert aider_argv("/bin/aider", "p", [], True)[-4:-2] == ["--chat-mode", "ask"]


# ---------------------------------------------------------------- the real aider against the stub

MODEL = "stub-model"
ASKED = "Change notes.txt so it says 'new line', and create hello.txt saying hello.\n"
EDITS = ("I will update notes.txt and create hello.txt.\n\n"
         "notes.txt\n```\nnew line\n```\n\nhello.txt\n```\nhello\n```\n")


def aider() -> Path:
    path = agent_bin("aider")
    if shutil.which("timeout") is None or shutil.which("git") is None:
        missing("the real aider tests need `timeout` and `git` on PATH (coreutils, git)")
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def git_repo(path: Path) -> Path:
    """A repo with two committed files; `other.txt` left modified, as a worktree mid-task can be."""
    path.mkdir()
    git(path, "init", "-q")
    git(path, "config", "user.name", "t")
    git(path, "config", "user.email", "t@t")
    (path / "notes.txt").write_text("old line\n")
    (path / "other.txt").write_text("committed\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "init")
    (path / "other.txt").write_text("changed, not committed\n")
    return path


def setup(tmp_path: Path, server: FakeOpenAI, tag: str = "run") -> tuple[Path, Path, dict[str, str], list[str]]:
    """The repo, the prompt file, aider's environment and the user's arguments for one run."""
    run = tmp_path / tag
    run.mkdir()
    repo = git_repo(run / "repo")
    prompt = run / "prompt.txt"
    prompt.write_text(ASKED)
    # A price makes aider print its cost; without the model in its metadata aider would also
    # look the model up on GitHub.
    metadata = run / "metadata.json"
    metadata.write_text(json.dumps({f"openai/{MODEL}": {
        "max_input_tokens": 128000, "max_output_tokens": 4096, "input_cost_per_token": 2e-6,
        "output_cost_per_token": 1e-5, "litellm_provider": "openai", "mode": "chat"}}))
    # The OpenAI SDK's own two retries under each of aider's attempts, turned off.
    settings = run / "model-settings.yml"
    settings.write_text(f"- name: openai/{MODEL}\n  extra_params:\n    max_retries: 0\n")
    (run / "home").mkdir()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(run / "home"), "TERM": "dumb",
           "OPENAI_API_BASE": server.base_url, "OPENAI_API_KEY": "sk-stub", **AIDER_DEFAULT_ENV}
    extra = ["--model", f"openai/{MODEL}", "--model-metadata-file", str(metadata),
             "--model-settings-file", str(settings), "notes.txt"]
    return repo, prompt, env, extra


def run_aider(argv: list[str], repo: Path, env: dict[str, str], seconds: int = 90) -> tuple[int, str, str, float]:
    start = time.monotonic()
    proc = subprocess.run(["timeout", str(seconds), *argv], cwd=repo, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=seconds + 30)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start


@pytest.mark.cli_agents
def test_real_aider_edits_files_and_commits_nothing(tmp_path):
    binary = aider()
    with FakeOpenAI() as server:
        server.enqueue(MODEL, fo.reply(EDITS, usage={"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290}))
        repo, prompt, env, extra = setup(tmp_path, server)
        rc, stdout, stderr, _ = run_aider(aider_argv(str(binary), str(prompt), extra, read_only=False), repo, env)
        posts = server.posts()
    assert rc == 0, stdout[-2000:] + stderr[-2000:]
    assert (repo / "notes.txt").read_text() == "new line\n" and (repo / "hello.txt").read_text() == "hello\n"
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"
    # With --no-git aider neither stages nor commits; nothing else is in the worktree.
    assert sorted(git(repo, "status", "--porcelain", "--ignored").splitlines()) == [
        " M notes.txt", " M other.txt", "?? hello.txt"]
    report = read_aider_output(stdout, stderr, rc)
    assert not report.is_error and report.error is None and report.limit is None, stdout
    assert report.final_text.startswith("I will update notes.txt and create hello.txt.")
    assert "+new line" in report.final_text and "hello.txt" in report.final_text
    assert (report.prompt_tokens, report.completion_tokens, report.turns) == (1200, 56, 1)
    assert report.cost_usd == pytest.approx(0.0030) and report.model == f"openai/{MODEL}"
    assert len(posts) == 1 and posts[0]["headers"]["authorization"] == "Bearer sk-stub"
    body = posts[0]["body"]
    assert body["model"] == MODEL and not body.get("stream")
    assert body["messages"][-1]["role"] == "user" and ASKED.strip() in body["messages"][-1]["content"]
    assert "old line" in json.dumps(body["messages"])  # notes.txt was added to the chat


@pytest.mark.cli_agents
def test_real_aider_read_only_edits_nothing(tmp_path):
    binary = aider()
    with FakeOpenAI() as server:
        server.enqueue(MODEL, fo.reply(EDITS, usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}))
        repo, prompt, env, extra = setup(tmp_path, server)
        rc, stdout, stderr, _ = run_aider(aider_argv(str(binary), str(prompt), extra, read_only=True), repo, env)
        posts = server.posts()
    assert rc == 0, stdout[-2000:] + stderr[-2000:]
    assert "with ask edit format" in stdout and len(posts) == 1
    assert (repo / "notes.txt").read_text() == "old line\n" and not (repo / "hello.txt").exists()
    assert git(repo, "status", "--porcelain", "--ignored").splitlines() == [" M other.txt"]
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"
    report = read_aider_output(stdout, stderr, rc)
    assert report.final_text == EDITS.strip() and not report.is_error
    assert (report.prompt_tokens, report.completion_tokens) == (100, 20)


@pytest.mark.cli_agents
def test_real_aider_gives_up_on_a_failing_api_within_its_retry_budget_and_exits_0(tmp_path):
    """A 500 and a quota 429 each: aider retries about 64 s (its fixed budget), then prints the
    error and exits 0. Both run at once."""
    binary = aider()
    quota = {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                       "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}
    faults = {"500": fo.fault(500, "stub 500"), "429": fo.fault(429, quota)}

    def one(tag: str) -> tuple[Path, int, str, str, float, int]:
        with FakeOpenAI() as server:
            server.enqueue(MODEL, *[faults[tag]] * 20)
            repo, prompt, env, extra = setup(tmp_path, server, tag)
            rc, stdout, stderr, seconds = run_aider(aider_argv(str(binary), str(prompt), extra, read_only=False),
                                                    repo, env, seconds=150)
            return repo, rc, stdout, stderr, seconds, len(server.posts())

    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(faults, pool.map(one, faults)))
    for tag, (repo, rc, stdout, stderr, seconds, posts) in results.items():
        assert rc == 0, (tag, stdout[-2000:], stderr[-2000:])
        assert posts == 9 and 60 < seconds < 140, (tag, posts, seconds)
        assert stdout.count("Retrying in") == 8
        assert (repo / "notes.txt").read_text() == "old line\n"
        report = read_aider_output(stdout, stderr, rc)
        assert report.is_error and report.final_text is None and report.prompt_tokens is None
    failed = read_aider_output(results["500"][2], results["500"][3], 0)
    assert failed.error.startswith("litellm.InternalServerError: ") and "stub 500" in failed.error
    assert failed.limit is None
    limited = read_aider_output(results["429"][2], results["429"][3], 0)
    assert limited.error.startswith("litellm.RateLimitError: ") and limited.limit is not None
    assert "exceeded your current quota" in limited.limit.message
