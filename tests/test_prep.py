"""`tilth prep`: the planning interview against the local Chat Completions server. The model
reads files, asks questions (answered from a file, by nobody, or typed on a real pseudo-terminal),
submits a plan; prep writes prd.json (valid as `tilth start` wants it), seed-meta.json and
interview.md, refuses a plan whose tasks lack acceptance criteria, and `tilth start` carries
seed-meta.json into the session, whose workers then see the `seed` channel."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

from conftest import make_repo
from fake_openai import call, reply
from tilth.agents.backends.interview import NO_ANSWER
from tilth.store.prd import parse_plan
from tilth.store.prompts import prompt_of

FILES = {"README.md": "# greeter\nSays hello.\n", "app.py": "def greet():\n    print('hello')\n"}
Q1 = "Which output format do you want?"
Q2 = "Should the old --plain flag keep working?"
TASKS = [
    {"id": "T-001", "title": "Add a --json flag", "description": "In app.py, print the greeting as JSON.",
     "acceptance_criteria": ["`python app.py --json` prints {\"greeting\": \"hello\"}"]},
    {"id": "T-002", "title": "Document the flag", "description": "Describe --json in README.md.",
     "acceptance_criteria": ["README.md has a section `## --json` with an example"]},
]
SUBMIT = call("submit_plan", tasks=TASKS, tldr="Add a --json output mode to the greeter and document it.",
              scope_notes=["Only the greet command changes"], blockers=["Nobody owns the CI config"],
              open_questions=["Should errors be JSON too?"])


def script(fake, model: str = "worker", submit=SUBMIT) -> None:
    """Two file reads, two questions, a plan."""
    fake.enqueue(model,
                 reply("Let me look around.", [call("read_file", path="README.md")]),
                 reply(tool_calls=[call("read_file", path="app.py")]),
                 reply(tool_calls=[call("ask_user", question=Q1)]),
                 reply(tool_calls=[call("ask_user", question=Q2)]),
                 reply(tool_calls=[submit]))


def tool_results(fake) -> list[str]:
    """The tool results the model was sent, in order (the last request carries them all)."""
    messages = fake.posts("/v1/chat/completions")[-1]["body"]["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"]


def prep(sandbox, env, *args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tilth", "prep", "--repo", str(sandbox.repo), *args],
                          env={**sandbox.env, **env}, capture_output=True, text=True, timeout=60,
                          cwd=sandbox.root, stdin=subprocess.DEVNULL, **kwargs)


def project(sandbox):
    sandbox.repo = make_repo(sandbox.root / "greeter", FILES)
    return sandbox.root / "plan"


@pytest.mark.slow
def test_answers_file_reaches_the_model_and_the_outputs_are_complete(sandbox, fake, model_env):
    out = project(sandbox)
    answers = sandbox.root / "answers.json"
    answers.write_text(json.dumps(["JSON objects, one per line", "yes, keep --plain"]))
    script(fake)
    result = prep(sandbox, model_env, "--out", str(out), "--answers", str(answers), "add JSON output")
    assert result.returncode == 0, result.stderr
    results = tool_results(fake)
    assert "print('hello')" in results[1] and "Says hello." in results[0]
    assert results[2:4] == ["JSON objects, one per line", "yes, keep --plain"]
    assert f"Question 1: {Q1}" in result.stdout and "answer> yes, keep --plain" in result.stdout
    waits = [line for line in result.stdout.splitlines() if line.startswith("  (waiting on worker, call ")]
    assert waits == [f"  (waiting on worker, call {n} ...)" for n in range(1, 6)], "a sign of life per model call"

    plan = parse_plan((out / "prd.json").read_bytes(), "prd.json")
    assert [t.id for t in plan] == ["T-001", "T-002"] and all(t.status == "pending" for t in plan)
    meta = json.loads((out / "seed-meta.json").read_text())
    for key in ("interviewer_model", "started_at", "ended_at", "tokens", "tldr", "open_questions", "blockers",
                "scope_notes"):
        assert key in meta, key
    assert meta["interviewer_model"] == "worker" and meta["tokens"] == 5 * 15 and meta["started_at"] <= meta["ended_at"]
    assert meta["tldr"].startswith("Add a --json") and meta["open_questions"] == ["Should errors be JSON too?"]
    assert meta["blockers"] == ["Nobody owns the CI config"] and meta["scope_notes"] == ["Only the greet command changes"]
    assert meta["questions"] == 2 and meta["answered_by"] == "answers file"
    record = (out / "interview.md").read_text()
    assert f"### Q1. {Q1}\n\n> JSON objects, one per line" in record
    assert f"### Q2. {Q2}\n\n> yes, keep --plain" in record
    assert "### T-001: Add a --json flag" in record and "## Open questions" in record
    # the model got the goal, the file list and only the read-only tools plus the two of prep
    first = fake.posts("/v1/chat/completions")[0]["body"]
    assert "add JSON output" in first["messages"][1]["content"] and "app.py" in first["messages"][1]["content"]
    assert {t["function"]["name"] for t in first["tools"]} == {"read_file", "list_files", "grep", "ask_user",
                                                               "submit_plan"}
    assert (sandbox.repo / "app.py").read_text() == FILES["app.py"]


@pytest.mark.slow
def test_answers_by_question_and_a_dedicated_prep_model(sandbox, fake, model_env):
    out = project(sandbox)
    answers = sandbox.root / "answers.json"
    answers.write_text(json.dumps({Q2: "no, drop it", Q1.upper(): "lines"}))  # by question, not order
    script(fake, model="planner")
    result = prep(sandbox, {**model_env, "TILTH_PREP_MODEL": "planner"}, "--out", str(out), "--answers",
                  str(answers), "add JSON output")
    assert result.returncode == 0, result.stderr
    assert tool_results(fake)[2:4] == ["lines", "no, drop it"]
    assert json.loads((out / "seed-meta.json").read_text())["interviewer_model"] == "planner"


@pytest.mark.slow
def test_no_questions_records_them_as_open_questions(sandbox, fake, model_env):
    out = project(sandbox)
    script(fake)
    result = prep(sandbox, model_env, "--out", str(out), "--no-questions", "add JSON output")
    assert result.returncode == 0, result.stderr
    assert tool_results(fake)[2:4] == [NO_ANSWER, NO_ANSWER]
    meta = json.loads((out / "seed-meta.json").read_text())
    assert meta["open_questions"] == ["Should errors be JSON too?", Q1, Q2] and meta["answered_by"] == "nobody"
    assert f"### Q1. {Q1}\n\n*{NO_ANSWER}*" in (out / "interview.md").read_text()


@pytest.mark.slow
def test_stdin_not_a_terminal_without_answers_is_no_questions(sandbox, fake, model_env):
    out = project(sandbox)
    script(fake)
    result = prep(sandbox, model_env, "--out", str(out), "add JSON output")
    assert result.returncode == 0, result.stderr
    assert "stdin is not a terminal and no --answers was given" in result.stderr
    assert tool_results(fake)[2:4] == [NO_ANSWER, NO_ANSWER]


def read_until(fd: int, text: str, seen: bytearray, times: int = 1, timeout: float = 30) -> None:
    """Read the pseudo-terminal until `text` has appeared `times` times in all that was read (no sleeps)."""
    deadline = time.monotonic() + timeout
    while seen.count(text.encode()) < times:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise AssertionError(f"{text!r} never appeared; read so far: {seen.decode(errors='replace')!r}")
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            chunk = b""
        if not chunk:
            raise AssertionError(f"the terminal closed before {text!r}; read: {seen.decode(errors='replace')!r}")
        seen += chunk


@pytest.mark.slow
def test_interactive_answers_typed_on_a_terminal(sandbox, fake, model_env):
    out = project(sandbox)
    script(fake)
    leader, follower = os.openpty()
    child = subprocess.Popen([sys.executable, "-m", "tilth", "prep", "--repo", str(sandbox.repo), "--out", str(out),
                              "add JSON output"], env={**sandbox.env, **model_env}, cwd=sandbox.root,
                             stdin=follower, stdout=follower, stderr=follower, start_new_session=True)
    os.close(follower)
    seen = bytearray()
    try:
        read_until(leader, f"Question 1: {Q1}", seen)
        read_until(leader, "answer> ", seen)
        os.write(leader, b"typed: JSON lines\n")
        read_until(leader, f"Question 2: {Q2}", seen)
        read_until(leader, "answer> ", seen, times=2)
        os.write(leader, b"typed: keep it\n")
        read_until(leader, "next: tilth start", seen)
        assert child.wait(timeout=30) == 0, seen.decode(errors="replace")
    finally:
        child.kill()
        child.wait()
        os.close(leader)
    assert tool_results(fake)[2:4] == ["typed: JSON lines", "typed: keep it"]
    meta = json.loads((out / "seed-meta.json").read_text())
    assert meta["answered_by"] == "terminal" and meta["open_questions"] == ["Should errors be JSON too?"]
    assert f"### Q2. {Q2}\n\n> typed: keep it" in (out / "interview.md").read_text()


@pytest.mark.slow
def test_a_task_without_acceptance_criteria_is_refused_by_name(sandbox, fake, model_env):
    out = project(sandbox)
    bad = [TASKS[0], {"id": "T-002", "title": "Polish", "description": "Make it nicer.", "acceptance_criteria": []},
           {"id": "T-003", "title": "Tidy", "description": "Clean up."}]
    submit = call("submit_plan", tasks=bad, tldr="Vague.")
    fake.enqueue("worker", reply(tool_calls=[submit]), reply(tool_calls=[submit]), reply(tool_calls=[submit]))
    result = prep(sandbox, model_env, "--out", str(out), "--no-questions", "polish it")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "without acceptance criteria" in lines[0], result.stderr
    assert "T-002 (Polish)" in lines[0] and "T-003 (Tidy)" in lines[0] and "T-001" not in lines[0]
    refusal = tool_results(fake)[0]
    assert refusal.startswith("error: ") and "T-002 (Polish), T-003 (Tidy)" in refusal
    assert not (out / "prd.json").exists() and not (out / "seed-meta.json").exists()
    assert "No plan was written" in (out / "interview.md").read_text()


@pytest.mark.slow
def test_a_refused_plan_can_be_fixed_by_the_model(sandbox, fake, model_env):
    out = project(sandbox)
    bad = call("submit_plan", tasks=[{"id": "T-001", "title": "Polish", "description": "x"}], tldr="Vague.")
    fake.enqueue("worker", reply(tool_calls=[bad]), reply(tool_calls=[SUBMIT]))
    result = prep(sandbox, model_env, "--out", str(out), "--no-questions", "polish it")
    assert result.returncode == 0, result.stderr
    assert "T-001 (Polish)" in tool_results(fake)[0]
    assert len(parse_plan((out / "prd.json").read_bytes(), "prd.json")) == 2


@pytest.mark.slow
def test_a_model_that_never_submits_is_a_clear_error(sandbox, fake, model_env):
    out = project(sandbox)
    fake.enqueue("worker", reply(tool_calls=[call("list_files")]), reply("I am thinking."))
    result = prep(sandbox, model_env, "--out", str(out), "--max-steps", "2", "--no-questions", "do things")
    assert result.returncode == 3, result.stderr
    assert result.stderr.splitlines() == ["  (list_files)", "tilth: the model (worker) made 2 calls without "
                                          "submitting an acceptable plan; no plan was written (raise "
                                                  "--max-steps, or try a stronger model with TILTH_PREP_MODEL)"]
    assert not (out / "prd.json").exists()


@pytest.mark.slow
def test_a_failing_endpoint_is_one_line_and_no_plan(sandbox, fake, model_env):
    from fake_openai import fault

    out = project(sandbox)
    fake.enqueue("worker", fault(400, "model not found"))
    result = prep(sandbox, model_env, "--out", str(out), "--no-questions", "do things")
    assert result.returncode == 3, result.stderr
    assert result.stderr.splitlines() == [result.stderr.strip()] and "run `tilth prep` again" in result.stderr
    assert not (out / "prd.json").exists() and "No plan was written" in (out / "interview.md").read_text()


@pytest.mark.slow
def test_prep_without_a_model_or_with_a_used_out_dir_is_refused(sandbox, fake, model_env):
    out = project(sandbox)
    no_model = prep(sandbox, {}, "--out", str(out), "goal")
    assert no_model.returncode == 2 and "tilth prep needs a model" in no_model.stderr
    out.mkdir()
    (out / "prd.json").write_text("[]")
    used = prep(sandbox, model_env, "--out", str(out), "goal")
    assert used.returncode == 2 and "already holds a prd.json" in used.stderr
    assert not fake.posts("/v1/chat/completions")


SCENARIO = {"default": [{"write": {"{task}.txt": "done\n"}}]}


def memory_loads(sandbox, session_id):
    return [e["data"] for e in sandbox.events(session_id) if e["type"] == "memory_load" and e["data"]["role"] == "worker"]


def worker_prompts(sandbox, session_id):
    return [prompt_of(e["data"], sandbox.session_dir(session_id)) for e in sandbox.events(session_id)
            if e["type"] == "prompt_assembled" and e["data"]["role"] == "worker"]


@pytest.mark.slow
def test_start_carries_the_seed_into_every_worker_prompt(sandbox, fake, model_env):
    out = project(sandbox)
    answers = sandbox.root / "answers.txt"
    answers.write_text("JSON lines\n\nkeep it\n")
    script(fake)
    assert prep(sandbox, model_env, "--out", str(out), "--answers", str(answers), "add JSON output").returncode == 0
    scenario = sandbox.write_json("scenario.json", SCENARIO)

    seeded = sandbox.tilth("start", "--repo", str(sandbox.repo), "--seed", str(out), "--id", "seeded",
                           "--backend", "scripted", "--scenario", str(scenario), "--foreground")
    assert seeded.returncode == 0, seeded.stderr
    assert (sandbox.session_dir("seeded") / "seed-meta.json").read_bytes() == (out / "seed-meta.json").read_bytes()
    assert sandbox.statuses("seeded") == {"T-001": "done", "T-002": "done"}
    seed_loads = [d for d in memory_loads(sandbox, "seeded") if d["channel"] == "seed"]
    assert len(seed_loads) == 2 and all(d["present"] and not d["truncated"] for d in seed_loads)
    for prompt in worker_prompts(sandbox, "seeded"):
        assert "In short: Add a --json output mode to the greeter and document it." in prompt
        assert "Scope notes:\n- Only the greet command changes" in prompt
        assert "Blockers:\n- Nobody owns the CI config" in prompt and "- Should errors be JSON too?" in prompt
        assert "interviewer" not in prompt and "JSON lines" not in prompt  # bookkeeping and answers stay out
        assert prompt.index("Background from the interview") < prompt.index("The whole plan") < \
            prompt.index("Recent outcomes")

    # --prd alone takes the seed-meta.json beside it; a tight budget cuts the channel visibly
    beside = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(out / "prd.json"), "--id", "beside",
                           "--backend", "scripted", "--scenario", str(scenario), "--foreground",
                           env={"TILTH_SEED_CHARS": "120"})
    assert beside.returncode == 0, beside.stderr
    assert (sandbox.session_dir("beside") / "seed-meta.json").exists()
    assert all(d["truncated"] for d in memory_loads(sandbox, "beside") if d["channel"] == "seed")
    assert all("[... seed truncated:" in p for p in worker_prompts(sandbox, "beside"))

    folder = sandbox.tilth("start", "--repo", str(sandbox.repo), "--prd", str(out), "--id", "folder", "--backend",
                           "scripted", "--scenario", str(scenario), "--foreground")
    assert folder.returncode == 0, folder.stderr
    assert "seed" in {d["channel"] for d in memory_loads(sandbox, "folder")}

    plain = sandbox.start("plain", json.loads((out / "prd.json").read_text()), SCENARIO)
    assert plain.returncode == 0, plain.stderr
    assert not (sandbox.session_dir("plain") / "seed-meta.json").exists()
    assert "seed" not in {d["channel"] for d in memory_loads(sandbox, "plain")}
    assert not any("Background from the interview" in p for p in worker_prompts(sandbox, "plain"))


@pytest.mark.slow
def test_a_bad_or_missing_seed_is_refused_before_anything_is_created(sandbox):
    project(sandbox)
    plan = sandbox.root / "p"
    plan.mkdir()
    (plan / "prd.json").write_text(json.dumps(TASKS))
    base = ["start", "--repo", str(sandbox.repo), "--id", "s1", "--backend", "scripted", "--foreground"]
    missing = sandbox.tilth(*base, "--seed", str(plan))
    assert missing.returncode == 2 and "holds no seed-meta.json" in missing.stderr
    (plan / "seed-meta.json").write_text(json.dumps({"tldr": "no model named"}))
    bad = sandbox.tilth(*base, "--prd", str(plan / "prd.json"))
    assert bad.returncode == 2 and "seed-meta.json: field interviewer_model" in bad.stderr, bad.stderr
    neither = sandbox.tilth(*base)
    assert neither.returncode == 2 and "pass --prd a prd.json, or --seed" in neither.stderr
    assert not sandbox.session_dir("s1").exists()


@pytest.mark.slow
def test_vague_criteria_are_sent_back_once_then_kept_if_the_model_insists(sandbox, fake, model_env):
    out = project(sandbox)
    vague = call("submit_plan", tasks=[{"id": "T-001", "title": "Polish", "description": "Tidy app.py.",
                                        "acceptance_criteria": ["The code is good"]}], tldr="Polish app.py.")
    fake.enqueue("worker", reply(tool_calls=[vague]), reply(tool_calls=[vague]))
    result = prep(sandbox, model_env, "--out", str(out), "--no-questions", "polish it")
    assert result.returncode == 0, result.stderr
    sent_back = tool_results(fake)[0]
    assert sent_back.startswith("not yet accepted, the plan has warnings:") and "T-001: criterion 1 is vague" in sent_back
    assert parse_plan((out / "prd.json").read_bytes(), "prd.json")[0].acceptance_criteria == ["The code is good"]


@pytest.mark.slow
def test_the_interview_asks_for_verify_commands_and_keeps_the_ones_proposed(sandbox, fake, model_env):
    out = project(sandbox)
    proved = {"text": "`python app.py --json` prints JSON", "verify": "python app.py --json | grep -q greeting"}
    tasks = [{**TASKS[0], "acceptance_criteria": [proved, {"text": "no command given", "verify": " "}]}]
    script(fake, submit=call("submit_plan", tasks=tasks, tldr="Add --json."))
    result = prep(sandbox, model_env, "--out", str(out), "--no-questions", "add JSON output")
    assert result.returncode == 0, result.stderr
    first = fake.posts("/v1/chat/completions")[0]["body"]
    assert '"verify"' in first["messages"][0]["content"]
    schema = next(t for t in first["tools"] if t["function"]["name"] == "submit_plan")["function"]["parameters"]
    assert schema["properties"]["tasks"]["items"]["properties"]["acceptance_criteria"]["items"]["anyOf"][1][
        "required"] == ["text", "verify"]
    plan = parse_plan((out / "prd.json").read_bytes(), "prd.json")
    assert [(c.text, c.verify) for c in plan[0].criteria] == [
        (proved["text"], proved["verify"]), ("no command given", None)]
    assert "- `python app.py --json` prints JSON (verify: `python app.py --json | grep -q greeting`)" in \
        (out / "interview.md").read_text()


def test_a_wait_on_a_terminal_shows_a_spinner_that_leaves_nothing_behind():
    import io
    import threading

    from tilth.cli.liveness import CLEAR, waiting

    class Terminal(io.StringIO):
        def __init__(self):
            super().__init__()
            self.frames = 0
            self.spun = threading.Event()

        def isatty(self):
            return True

        def write(self, text):
            self.frames += text.startswith("\r") and text != CLEAR
            if self.frames >= 2:
                self.spun.set()
            return super().write(text)

    terminal, lines = Terminal(), io.StringIO()
    with waiting("waiting on worker, call 1", line_to=lines, terminal=terminal):
        assert terminal.spun.wait(10), terminal.getvalue()
    shown = terminal.getvalue()
    assert shown.startswith("\r| waiting on worker, call 1 0s\r/ waiting on worker, call 1 ") and shown.endswith(CLEAR)
    assert lines.getvalue() == "", "no line on a terminal: the spinner says it"

    piped = io.StringIO()
    with waiting("waiting on worker, call 2", line_to=lines, terminal=piped):
        pass
    assert (piped.getvalue(), lines.getvalue()) == ("", "  (waiting on worker, call 2 ...)\n")
