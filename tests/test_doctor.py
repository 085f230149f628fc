"""`tilth doctor`: a session's files cross-checked against its branch, and `--fix` repairing what
git decides. Real repos, real `tilth` processes, the scripted backend."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess

import pytest

from conftest import git, task, wait_for_pause

REJECT = {"verdict": "reject", "category": "weak_test", "concern": "no test covers it", "next_step": "add a test"}
WRITES = {"tasks": {"T-1": [{"write": {"one.py": "one = 1\n"}}], "T-2": [{"write": {"two.py": "two = 2\n"}}],
                    "T-3": [{"write": {"three.py": "three = 3\n"}}]}}


def done_session(sandbox, session_id="s1", tasks=("T-1", "T-2", "T-3")):
    result = sandbox.start(session_id, [task(t) for t in tasks], WRITES)
    assert result.returncode == 0, result.stdout + result.stderr
    return sandbox.commits(session_id)


def doctor(sandbox, *args):
    return sandbox.tilth("doctor", *args)


def lines(result, level=None):
    """The report's lines as (session, level, text)."""
    found = []
    for line in result.stdout.splitlines():
        sid, rest = line.split("  ", 1)
        rest = rest.lstrip()
        for name in ("needs a person", "repaired", "problem", "running", "ok"):
            if rest.startswith(name):
                found.append((sid, name, rest[len(name):].strip()))
                break
        else:
            raise AssertionError(f"not a finding line: {line!r}")
    return [f for f in found if level is None or f[1] == level]


def snapshot(sandbox, session_id):
    """Every file of the session dir, for `nothing was written` (but session.lock: taking the lock to
    repair writes the holder's pid into it)."""
    root = sandbox.session_dir(session_id)
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "session.lock"}


@pytest.mark.slow
def test_a_healthy_session_is_all_ok_and_exits_0(sandbox):
    done_session(sandbox)
    result = doctor(sandbox, "s1")
    assert result.returncode == 0, result.stdout + result.stderr
    found = lines(result)
    assert found and all(level == "ok" for _, level, _ in found)
    texts = [text for _, _, text in found]
    assert "prd.json statuses match the branch (3 task(s) with a commit)" in texts
    assert "progress.txt has one line per task outcome on the branch (3)" in texts
    assert "events.jsonl and summary.json parse" in texts
    assert any(t.startswith(f"the worktree {sandbox.worktree('s1')} is registered and on session/s1") for t in texts)

    fixed = doctor(sandbox, "s1", "--fix")
    assert fixed.returncode == 0 and not lines(fixed, "repaired")
    as_json = json.loads(doctor(sandbox, "s1", "--json").stdout)
    assert {f["level"] for f in as_json} == {"ok"} and {f["session"] for f in as_json} == {"s1"}


@pytest.mark.slow
def test_a_status_that_disagrees_with_the_branch_is_corrected(sandbox):
    commits = done_session(sandbox)
    plan = sandbox.plan("s1")
    plan[1]["status"] = "pending"
    (sandbox.session_dir("s1") / "prd.json").write_text(json.dumps(plan, indent=2))
    before = snapshot(sandbox, "s1")

    result = doctor(sandbox, "s1")
    assert result.returncode == 1
    sha = commits[1]["sha"][:7]
    assert ("s1", "problem", f"T-2: prd.json says pending, the branch has its commit {sha}: --fix sets done") \
        in lines(result)
    assert snapshot(sandbox, "s1") == before, "without --fix nothing is written"

    fixed = doctor(sandbox, "s1", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert ("s1", "repaired", f"T-2: prd.json said pending, the branch has its commit {sha} -> done") in lines(fixed)
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "done", "T-3": "done"}
    assert any(e["type"] == "status_reconciled" and e["data"]["changes"] == {"T-2": "done"}
               for e in sandbox.events("s1"))
    assert doctor(sandbox, "s1").returncode == 0


@pytest.mark.slow
def test_a_missing_progress_line_is_written_from_the_commit(sandbox):
    env = {"TILTH_MAX_ITERATIONS_PER_TASK": "1"}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], {"tasks": {"T-1": [{"verdict": REJECT}]}}, env=env)
    assert result.returncode == 1
    commits = sandbox.commits("s1")
    assert [(c["task"], c["outcome"]) for c in commits] == [("T-2", ""), ("T-1", "failed")]
    progress = sandbox.session_dir("s1") / "progress.txt"
    kept = progress.read_text().splitlines()
    progress.write_text(kept[1] + "\n")  # T-1's FAILED placeholder line lost

    result = doctor(sandbox, "s1")
    assert result.returncode == 1
    sha = commits[1]["sha"][:7]
    first = git(sandbox.repo, "log", "-1", "--format=%(trailers:key=Tilth-Origin,valueonly)", sha).strip()[:7]
    assert first and first != sha, "re-applied above T-2's commit, it names the placeholder as first made"
    assert ("s1", "problem", f"T-1: progress.txt has no line for its FAILED placeholder {sha}: --fix writes it from "
                             "the commit's trailers") in lines(result)

    fixed = doctor(sandbox, "s1", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert lines(fixed, "repaired") == [("s1", "repaired", f"T-1: progress.txt line for {first} "
                                                           "(failed:iterations_exhausted) written from the commit's "
                                                           "trailers")]
    rows = sandbox.progress("s1")
    assert [(r[1], r[2], r[4]) for r in rows] == [("T-2", "done", f"commit={commits[0]['sha'][:7]}"),
                                                  ("T-1", "failed:iterations_exhausted", f"commit={first}")]
    assert doctor(sandbox, "s1").returncode == 0, "the restored line is the one the next check looks for"
    assert sandbox.statuses("s1") == {"T-1": "failed", "T-2": "done"}, "--fix never unwinds or requeues a failure"
    assert len(sandbox.commits("s1")) == 2


@pytest.mark.slow
def test_a_torn_journal_line_is_moved_aside_and_the_summary_rebuilt(sandbox):
    done_session(sandbox)
    events = sandbox.session_dir("s1") / "events.jsonl"
    raw = events.read_bytes().split(b"\n")
    torn = b'{"ts": "2026-11-24T02:00:00.000Z", "type": "verd\xc3'
    events.write_bytes(b"\n".join(raw[:5] + [torn] + raw[5:]))
    summary = sandbox.session_dir("s1") / "summary.json"
    summary.write_text("{not json")

    result = doctor(sandbox, "s1")
    assert result.returncode == 1
    assert ("s1", "problem", "events.jsonl has 1 torn line(s) (line 6): --fix moves them to events.jsonl.torn and "
                             "rebuilds summary.json") in lines(result)

    fixed = doctor(sandbox, "s1", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert (sandbox.session_dir("s1") / "events.jsonl.torn").read_bytes() == torn + b"\n", "kept byte for byte"
    journal = events.read_bytes()
    assert journal.split(b"\n")[:-1][:len(raw) - 1] == raw[:-1], "every whole line kept, in order"
    assert all(json.loads(line) for line in journal.splitlines())
    saved = json.loads(summary.read_text())
    assert saved["log_offset"] == len(journal)
    status = json.loads(sandbox.tilth("status", "s1", "--json").stdout)
    assert status["state"] == "done"
    assert doctor(sandbox, "s1").returncode == 0


@pytest.mark.slow
def test_a_dead_runner_is_recorded_crashed_and_a_live_one_is_only_checked(sandbox):
    plan = sandbox.write_json("prd.json", [task("T-1"), task("T-2"), task("T-3")])
    scenario = sandbox.write_json("scenario.json", WRITES)
    child = sandbox.spawn("start", "--repo", str(sandbox.repo), "--prd", str(plan), "--id", "s1", "--backend",
                          "scripted", "--scenario", str(scenario), "--foreground",
                          env={"TILTH_TEST_PAUSE_AT": "worker@T-2"})
    try:
        wait_for_pause(child, "worker")
        before = snapshot(sandbox, "s1")
        live = doctor(sandbox, "s1", "--fix")
        assert live.returncode == 0, live.stdout
        assert lines(live, "running") == [("s1", "running", f"running: pid {child.pid} (run) holds session.lock; only "
                                                            "checked, fixes need it stopped: tilth stop s1")]
        assert snapshot(sandbox, "s1") == before, "nothing is repaired under a live runner"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert json.loads((sandbox.session_dir("s1") / "session.json").read_text())["state"] == "running"

    index_lock = sandbox.repo / ".git" / "worktrees" / "tilth-s1" / "index.lock"
    index_lock.write_text("")  # as a git write killed with its runner leaves it

    result = doctor(sandbox, "s1")
    assert result.returncode == 1
    problems = [text for _, _, text in lines(result, "problem")]
    assert f"stale git lock file(s) a killed writer left: {index_lock}: --fix removes them" in problems
    assert any(t.startswith(f"session.json says running but no process holds session.lock (pid {child.pid}: ")
               and t.endswith("): its runner died: --fix records it crashed") for t in problems)
    assert any(t.startswith("T-2: prd.json says in_progress but no runner works on it") for t in problems)

    fixed = doctor(sandbox, "s1", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    session = json.loads((sandbox.session_dir("s1") / "session.json").read_text())
    assert session["state"] == "crashed" and session["pid"] is None
    assert not index_lock.exists()
    assert sandbox.statuses("s1") == {"T-1": "done", "T-2": "pending", "T-3": "pending"}
    assert json.loads(sandbox.tilth("status", "s1", "--json").stdout)["state"] == "crashed"

    resumed = sandbox.tilth("resume", "s1", "--foreground")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [c["task"] for c in sandbox.commits("s1")] == ["T-1", "T-2", "T-3"]


@pytest.mark.slow
def test_a_deleted_worktree_is_recreated_from_the_branch(sandbox):
    commits = done_session(sandbox)
    worktree = sandbox.worktree("s1")
    shutil.rmtree(worktree)

    result = doctor(sandbox, "s1")
    assert result.returncode == 1
    assert ("s1", "problem", f"the worktree {worktree} is gone: --fix checks it out again from session/s1 "
                             f"({commits[-1]['sha'][:7]})") in lines(result)

    fixed = doctor(sandbox, "s1", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert (worktree / "three.py").read_text() == "three = 3\n" and (worktree / "one.py").read_text() == "one = 1\n"
    assert git(worktree, "symbolic-ref", "HEAD").strip() == "refs/heads/session/s1"
    assert git(worktree, "rev-parse", "HEAD").strip() == commits[-1]["sha"]
    assert git(worktree, "status", "--porcelain") == ""
    listed = git(sandbox.repo, "worktree", "list", "--porcelain")
    assert f"worktree {worktree}\nHEAD {commits[-1]['sha']}\nbranch refs/heads/session/s1" in listed
    assert "prunable" not in listed
    assert doctor(sandbox, "s1").returncode == 0


@pytest.mark.slow
def test_a_branch_moved_by_hand_needs_a_person_and_is_not_fixed(sandbox):
    commits = done_session(sandbox)
    # `git branch -f` refuses a branch a worktree has checked out; this is the same move.
    git(sandbox.repo, "update-ref", "refs/heads/session/s1", commits[0]["sha"])
    before = snapshot(sandbox, "s1")

    result = doctor(sandbox, "s1")
    assert result.returncode == 1
    moved = [text for _, _, text in lines(result, "needs a person") if "moved by hand" in text]
    prefix = (f"session/s1 was moved by hand: it is at {commits[0]['sha'][:7]} and no longer contains "
              f"{commits[-1]['sha'][:7]}, tilth's last task commit (its commit event): run ")
    assert len(moved) == 1 and moved[0].startswith(prefix)
    command = moved[0][len(prefix):]
    # The advice never trusts the worktree's own git config or .git file.
    admin = sandbox.repo / ".git" / "worktrees" / "tilth-s1"
    assert command.startswith(f"git --git-dir {admin} --work-tree {sandbox.worktree('s1')} ")
    assert "-c core.fsmonitor=false -c core.hooksPath=/dev/null" in command
    assert command.endswith(f" reset --keep {commits[-1]['sha']}")

    fixed = doctor(sandbox, "s1", "--fix")
    assert fixed.returncode == 1
    assert not lines(fixed, "repaired")
    assert snapshot(sandbox, "s1") == before, "statuses and progress stay as they were"
    assert git(sandbox.repo, "rev-parse", "session/s1").strip() == commits[0]["sha"]

    subprocess.run(command.split(), check=True, capture_output=True)  # the command it names puts it back
    assert doctor(sandbox, "s1").returncode == 0


@pytest.mark.slow
def test_all_checks_every_session(sandbox):
    done_session(sandbox, "s1", ("T-1",))
    done_session(sandbox, "s2", ("T-1", "T-2"))
    (sandbox.session_dir("s2") / "progress.txt").write_text("")

    result = doctor(sandbox, "--all")
    assert result.returncode == 1
    assert {sid for sid, _, _ in lines(result)} == {"s1", "s2"}
    assert {sid for sid, level, _ in lines(result) if level == "problem"} == {"s2"}
    fixed = doctor(sandbox, "--all", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert len(lines(fixed, "repaired")) == 2
    assert doctor(sandbox, "--all").returncode == 0


def test_bad_input_is_one_line_exit_2_and_writes_nothing(sandbox):
    done_session(sandbox, "s1", ("T-1",))
    before = snapshot(sandbox, "s1")
    for args, words in [(("nope",), "no session 'nope'"), (("../s1",), "invalid session id"),
                        (("s1", "--all"), "not both")]:
        result = doctor(sandbox, *args, "--fix")
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr
    assert snapshot(sandbox, "s1") == before
    assert not (sandbox.home / "sessions" / "nope").exists()


@pytest.mark.slow
def test_a_repeated_progress_line_is_moved_aside_and_a_lost_verdict_needs_a_person(sandbox):
    commits = done_session(sandbox, "s1", ("T-1", "T-2"))
    progress = sandbox.session_dir("s1") / "progress.txt"
    first = progress.read_text().splitlines()[0]
    with progress.open("a") as f:
        f.write(first + "\n")
    (sandbox.session_dir("s1") / "ledger" / "T-2.jsonl").unlink()

    result = doctor(sandbox, "s1")
    assert result.returncode == 1
    sha1, sha2 = commits[0]["sha"][:7], commits[1]["sha"][:7]
    assert ("s1", "problem", f"progress.txt has 2 lines for commit {sha1}: --fix moves the repeats to "
                             "progress.txt.duplicates") in lines(result)
    lost = [text for _, _, text in lines(result, "needs a person")]
    assert len(lost) == 1 and lost[0].startswith("T-2: ") and f"no entry for iteration 1, which its commit {sha2}" \
        in lost[0]

    fixed = doctor(sandbox, "s1", "--fix")
    assert fixed.returncode == 1, "a lost verdict is left for a person"
    assert [text for _, _, text in lines(fixed, "repaired")] == [
        f"progress.txt: 1 repeated line(s) for {sha1} moved to progress.txt.duplicates"]
    assert (sandbox.session_dir("s1") / "progress.txt.duplicates").read_text() == first + "\n"
    assert [row[1] for row in sandbox.progress("s1")] == ["T-1", "T-2"]
    assert len(lines(fixed, "needs a person")) == 1


@pytest.mark.slow
def test_a_parked_task_is_parked_in_the_plan_and_in_progress(sandbox):
    ask = {"verdict": "needs_human", "category": "unclear", "concern": "two APIs", "question": "Which API?"}
    result = sandbox.start("s1", [task("T-1"), task("T-2")], {"tasks": {"T-1": [{"write": {"q.py": "1\n"},
                                                                                  "verdict": ask}]}})
    commits = sandbox.commits("s1")
    assert [(c["task"], c["outcome"]) for c in commits] == [("T-2", ""), ("T-1", "parked")], result.stdout
    assert doctor(sandbox, "s1").returncode == 0, "a parked task is no problem"
    plan = sandbox.plan("s1")
    plan[0]["status"] = "done"
    (sandbox.session_dir("s1") / "prd.json").write_text(json.dumps(plan, indent=2))
    progress = sandbox.session_dir("s1") / "progress.txt"
    progress.write_text(progress.read_text().splitlines()[1] + "\n")

    sha = commits[1]["sha"][:7]
    first = git(sandbox.repo, "log", "-1", "--format=%(trailers:key=Tilth-Origin,valueonly)", sha).strip()[:7]
    fixed = doctor(sandbox, "s1", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert [text for _, _, text in lines(fixed, "repaired")] == [
        f"T-1: prd.json said done, the branch has its PARKED placeholder {sha} -> parked",
        f"T-1: progress.txt line for {first} (parked) written from the commit's trailers"]
    assert sandbox.statuses("s1") == {"T-1": "parked", "T-2": "done"}
    assert [(row[1], row[2]) for row in sandbox.progress("s1")] == [("T-2", "done"), ("T-1", "parked")]
