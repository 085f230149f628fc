"""Staging keeps what makes the next stage cheap without changing what is staged: the index file
carries git's tree cache (so writing the tree hashes only changed directories), and an index an
agent rewrote behind tilth's back is still read before staging."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2

from tilth.git.gitops import stage_all, staged_diff
from tilth.git.tree_copies import staged_tree

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]


def root_tree_cached(index: Path) -> bool:
    """The index file's tree cache extension (`TREE`) holds a valid entry for the root: its entry
    count is not -1 (git's index-format: path NUL, entry count SP subtree count LF, then the id)."""
    data = index.read_bytes()
    at = data.find(b"TREE", 12)
    if at < 0:
        return False
    root = data[at + 8:]
    return root[:1] == b"\0" and not root[1:].startswith(b"-1 ")


def test_stage_keeps_the_tree_cache_and_sees_an_agents_own_index_writes(tmp_path: Path) -> None:
    subprocess.run([*GIT, "init", "-q", "-b", "main", str(tmp_path)], check=True)
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "f.txt").write_text(d)
    subprocess.run([*GIT, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "base"], cwd=tmp_path, check=True)
    repo = pygit2.Repository(str(tmp_path))

    (tmp_path / "a" / "new.txt").write_text("new")
    stage_all(repo)
    assert root_tree_cached(tmp_path / ".git" / "index")
    by_git = subprocess.run(["git", "write-tree"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert by_git.stdout.strip() == staged_tree(repo)  # the same tree git itself writes from the index

    (tmp_path / "b" / "agent.txt").write_text("agent")
    subprocess.run(["git", "add", "b/agent.txt"], cwd=tmp_path, check=True)
    subprocess.run(["git", "rm", "-q", "--cached", "a/f.txt"], cwd=tmp_path, check=True)
    (tmp_path / "a" / "f.txt").unlink()
    stage_all(repo)
    assert sorted(p.delta.new_file.path for p in staged_diff(repo) if p) == ["a/f.txt", "a/new.txt", "b/agent.txt"]
    assert "a/f.txt" not in repo.index
