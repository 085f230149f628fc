"""`make demo`: build a throwaway repo from sessions.example/, run a session end to end,
and show what a reviewer gets: the branch log, progress.txt and the ledger."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pygit2

from tilth.git.gitops import signature

EXAMPLE = Path(__file__).resolve().parents[2] / "sessions.example"
SESSION_ID = "demo"


def make_repo(source: Path, target: Path) -> None:
    shutil.copytree(source, target)
    repo = pygit2.init_repository(str(target), initial_head="main")
    repo.index.add_all()
    repo.index.write()
    sig = signature(repo)
    repo.create_commit("HEAD", sig, sig, "Initial import of the demo project\n", repo.index.write_tree(), [])


def backend_args(example: Path) -> tuple[list[str], str]:
    if os.environ.get("TILTH_BASE_URL"):
        model = os.environ.get("TILTH_WORKER_MODEL", "(TILTH_WORKER_MODEL unset)")
        return [], f"Using the model {model} at {os.environ['TILTH_BASE_URL']} (from TILTH_BASE_URL)."
    notice = (
        "No model configured: using the SCRIPTED backend. It replays sessions.example/scenario.json\n"
        "for an offline demo and tests; no model is called and no work is really being judged."
    )
    return ["--backend", "scripted", "--scenario", str(example / "scenario.json")], notice


def show_branch(repo_path: Path, branch: str) -> None:
    repo = pygit2.Repository(str(repo_path))
    walker = repo.walk(repo.branches.local[branch].target)
    for commit in walker:
        trailers = ", ".join(f"{k}={v}" for k, v in commit.message_trailers.items())
        print(f"  {str(commit.id)[:7]} {commit.message.splitlines()[0]}" + (f"  [{trailers}]" if trailers else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tilth-demo")
    parser.add_argument("--dir", default=".demo", help="where the throwaway repo and TILTH_HOME go")
    parser.add_argument("--example", default=str(EXAMPLE))
    args = parser.parse_args(argv)
    example, work = Path(args.example).resolve(), Path(args.dir).resolve()

    shutil.rmtree(work, ignore_errors=True)
    repo, home = work / "repo", work / "home"
    make_repo(example / "project", repo)
    extra, notice = backend_args(example)
    print("=" * 72 + f"\n{notice}\n" + "=" * 72, flush=True)

    env = {**os.environ, "TILTH_HOME": str(home)}
    command = [sys.executable, "-m", "tilth", "start", "--repo", str(repo), "--prd", str(example / "prd.json"),
               "--id", SESSION_ID, "--foreground", *extra]
    code = subprocess.run(command, env=env).returncode

    session = home / "sessions" / SESSION_ID
    print(f"\nBranch session/{SESSION_ID} in {repo}:")
    show_branch(repo, f"session/{SESSION_ID}")
    print(f"\nprogress.txt ({session / 'progress.txt'}):")
    print("  " + (session / "progress.txt").read_text().replace("\n", "\n  ").rstrip())
    print(f"\nLedger (one JSON line per evaluator call): {session / 'ledger'}/")
    for ledger in sorted((session / "ledger").glob("*.jsonl")):
        print(f"  {ledger.name}: {len(ledger.read_text().splitlines())} entries")
    print(f"Events: {session / 'events.jsonl'}")
    print(f"\nTry: TILTH_HOME={home} {sys.executable} -m tilth status {SESSION_ID}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
