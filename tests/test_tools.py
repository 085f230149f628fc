"""The worker's tools: confinement, file edits, listing/grep over git's file set, run_bash."""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path

import pytest

from tilth.agents.tools.fs import Workspace
from tilth.agents.tools.shell import run_bash
from tilth.core.errors import ToolError

SECRET = "TOP SECRET\n"


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                         check=True, capture_output=True, text=True)
    return out.stdout


def write(root: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)


def commit_all(repo: Path) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    write(tmp_path / "outside", {"secret.txt": SECRET})
    return tmp_path / "outside"


@pytest.fixture
def repo(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "wt"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, {
        "README.md": "# sample\n",
        "src/app.py": "import os\n\ndef main():\n    return 1\n",
        "src/deep/util.py": "def helper():\n    return 2\n",
        "gone.txt": "tracked, then deleted\n",
        ".gitignore": "*.log\nbuild/\n",
        "docs/.gitignore": "draft.md\n",
    })
    commit_all(root)
    write(root, {"new.txt": "untracked main\n", "debug.log": "main ignored\n", "build/out.py": "def main(): pass\n",
                 "docs/draft.md": "main draft\n", "docs/guide.md": "guide\n", "local.tmp": "main excluded\n"})
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("*.tmp\n")
    (root / "gone.txt").unlink()
    return root


def operations(ws: Workspace):
    return {
        "read": lambda p: ws.read_file(p),
        "write": lambda p: ws.write_file(p, "pwned\n"),
        "edit": lambda p: ws.edit_file(p, "TOP", "PWNED"),
        "grep": lambda p: ws.grep("SECRET", p),
    }


@pytest.mark.parametrize("op", ["read", "write", "edit", "grep"])
@pytest.mark.parametrize("path", ["../outside/secret.txt", "src/../../outside/secret.txt", "/etc/passwd", "ABS"])
def test_paths_outside_the_worktree_are_refused(repo: Path, outside: Path, op: str, path: str):
    path = str(outside / "secret.txt") if path == "ABS" else path
    with pytest.raises(ToolError, match="outside the worktree"):
        operations(Workspace(repo))[op](path)
    assert (outside / "secret.txt").read_text() == SECRET


@pytest.mark.parametrize("op", ["read", "write", "edit", "grep"])
def test_a_symlinked_file_pointing_outside_is_refused(repo: Path, outside: Path, op: str):
    (repo / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(ToolError, match="outside the worktree through a symlink"):
        operations(Workspace(repo))[op]("link.txt")
    assert (outside / "secret.txt").read_text() == SECRET


@pytest.mark.parametrize("op", ["read", "write", "edit", "grep"])
def test_a_symlinked_directory_pointing_outside_is_refused(repo: Path, outside: Path, op: str):
    (repo / "ext").symlink_to(outside)
    with pytest.raises(ToolError, match="outside the worktree through a symlink"):
        operations(Workspace(repo))[op]("ext/secret.txt")
    with pytest.raises(ToolError, match="outside the worktree"):
        Workspace(repo).write_file("ext/planted.txt", "x")
    assert (outside / "secret.txt").read_text() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_writing_through_a_dangling_symlink_does_not_create_the_outside_file(repo: Path, outside: Path):
    (repo / "dangling").symlink_to(outside / "planted.txt")
    with pytest.raises(ToolError, match="through a symlink"):
        Workspace(repo).write_file("dangling", "x")
    assert not (outside / "planted.txt").exists()


def test_grep_over_the_tree_skips_symlinks_that_lead_outside(repo: Path, outside: Path):
    (repo / "link.txt").symlink_to(outside / "secret.txt")
    (repo / "ext").symlink_to(outside)
    (repo / "inner.txt").symlink_to(repo / "README.md")
    ws = Workspace(repo)
    assert ws.grep("SECRET") == "no matches for 'SECRET'"
    assert ws.grep("sample") == "README.md:1: # sample\ninner.txt:1: # sample"


@pytest.mark.parametrize("path", [".git/config", "src/../.git/HEAD", ".git", "gitlink"])
def test_git_metadata_is_refused(repo: Path, path: str):
    (repo / "gitlink").symlink_to(repo / ".git" / "config")
    ws = Workspace(repo)
    before = (repo / ".git" / "config").read_text()
    for op in operations(ws).values():
        with pytest.raises(ToolError, match=r"git's metadata \(\.git\)"):
            op(path)
    assert (repo / ".git" / "config").read_text() == before


def test_an_absolute_path_inside_the_worktree_is_allowed(repo: Path):
    ws = Workspace(repo)
    assert ws.resolve(str(repo / "src" / "app.py")) == repo.resolve() / "src" / "app.py"
    assert ws.read_file(str(repo / "README.md")) == "   1\t# sample"


def test_list_pattern_cannot_reach_outside(repo: Path, outside: Path):
    ws = Workspace(repo)
    for pattern in ["../*", "../outside/*", str(outside / "*"), "/etc/*"]:
        assert ws.list_files(pattern) == f"no files match {pattern!r}"


def test_read_only_workspace_refuses_changes_but_reads(repo: Path):
    ws = Workspace(repo, read_only=True)
    with pytest.raises(ToolError, match="write_file is not available: this workspace is read-only"):
        ws.write_file("README.md", "changed\n")
    with pytest.raises(ToolError, match="edit_file is not available"):
        ws.edit_file("README.md", "sample", "changed")
    assert (repo / "README.md").read_text() == "# sample\n"
    assert ws.read_file("README.md") == "   1\t# sample"


def test_write_file_creates_parent_directories(repo: Path):
    ws = Workspace(repo)
    assert ws.write_file("pkg/sub/mod.py", "x = 1\n") == "wrote 6 bytes to pkg/sub/mod.py"
    assert (repo / "pkg" / "sub" / "mod.py").read_text() == "x = 1\n"
    with pytest.raises(ToolError, match="could not write src: Is a directory"):
        ws.write_file("src", "x")


def test_edit_file_requires_exactly_one_occurrence(repo: Path):
    ws = Workspace(repo)
    with pytest.raises(ToolError, match="old text not found in src/app.py"):
        ws.edit_file("src/app.py", "missing", "x")
    write(repo, {"twice.py": "x = 1\nx = 1\n"})
    with pytest.raises(ToolError, match="occurs 2 times in twice.py; include more surrounding lines"):
        ws.edit_file("twice.py", "x = 1", "x = 2")
    assert (repo / "twice.py").read_text() == "x = 1\nx = 1\n"
    assert ws.edit_file("src/app.py", "return 1", "return 10\n    # done") == \
        "edited src/app.py: replaced 1 line(s) with 2 line(s)"
    assert (repo / "src/app.py").read_text() == "import os\n\ndef main():\n    return 10\n    # done\n"
    with pytest.raises(ToolError, match="does not exist"):
        ws.edit_file("nope.py", "a", "b")


def test_read_file_numbers_lines_and_honours_offset_and_limit(repo: Path):
    write(repo, {"lines.txt": "".join(f"line {n}\n" for n in range(1, 11))})
    ws = Workspace(repo)
    assert ws.read_file("src/app.py") == "   1\timport os\n   2\t\n   3\tdef main():\n   4\t    return 1"
    assert ws.read_file("lines.txt", offset=3, limit=2) == \
        "   3\tline 3\n   4\tline 4\n[showing lines 3-4 of 10; continue with offset=5]"
    assert ws.read_file("lines.txt", offset=9) == "   9\tline 9\n  10\tline 10"
    with pytest.raises(ToolError, match="offset 11 is past the end of lines.txt, which has 10 lines"):
        ws.read_file("lines.txt", offset=11)
    with pytest.raises(ToolError, match="1-based"):
        ws.read_file("lines.txt", offset=0)


def test_read_file_caps_long_files_and_refuses_binary_and_missing(repo: Path):
    write(repo, {"long.txt": "".join(f"{n}\n" for n in range(1, 2501))})
    (repo / "blob.bin").write_bytes(b"\x89PNG\0\0\x01")
    ws = Workspace(repo)
    out = ws.read_file("long.txt").splitlines()
    assert len(out) == 2001 and out[1999] == "2000\t2000"
    assert out[-1] == "[showing lines 1-2000 of 2500; continue with offset=2001]"
    with pytest.raises(ToolError, match="blob.bin is a binary file"):
        ws.read_file("blob.bin")
    with pytest.raises(ToolError, match="file 'nope.txt' does not exist; use list_files"):
        ws.read_file("nope.txt")
    with pytest.raises(ToolError, match="src is a directory"):
        ws.read_file("src")


def test_list_files_uses_gits_view_of_the_worktree(repo: Path):
    assert Workspace(repo).list_files().splitlines() == [
        ".gitignore", "README.md", "docs/.gitignore", "docs/guide.md", "new.txt", "src/app.py", "src/deep/util.py"]


def test_list_files_patterns(repo: Path):
    ws = Workspace(repo)
    assert ws.list_files("*.py").splitlines() == ["src/app.py", "src/deep/util.py"]
    assert ws.list_files("src/**/*.py").splitlines() == ["src/app.py", "src/deep/util.py"]
    assert ws.list_files("**/*.md").splitlines() == ["README.md", "docs/guide.md"]
    assert ws.list_files("util.py") == "src/deep/util.py"
    assert ws.list_files("*.rs") == "no files match '*.rs'"


def test_linked_worktree(repo: Path, tmp_path: Path):
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(linked))
    assert (linked / ".git").is_file()
    write(linked, {"extra.py": "print('main')\n", "trace.log": "main\n", "docs/draft.md": "main\n"})
    ws = Workspace(linked)
    assert ws.list_files().splitlines() == [
        ".gitignore", "README.md", "docs/.gitignore", "extra.py", "gone.txt", "src/app.py", "src/deep/util.py"]
    assert ws.grep("main").splitlines() == ["extra.py:1: print('main')", "src/app.py:3: def main():"]
    with pytest.raises(ToolError, match="git's metadata"):
        ws.read_file(".git")
    with pytest.raises(ToolError, match="outside the worktree"):
        ws.read_file("../wt/new.txt")


def test_a_directory_that_is_not_a_repository_is_walked(tmp_path: Path):
    root = tmp_path / "plain"
    write(root, {"a.txt": "main\n", "sub/b.log": "main\n", ".git/junk": "main\n"})
    ws = Workspace(root)
    assert ws.list_files().splitlines() == ["a.txt", "sub/b.log"]
    assert ws.grep("main").splitlines() == ["a.txt:1: main", "sub/b.log:1: main"]


def test_grep_searches_gits_file_set(repo: Path):
    (repo / "blob.bin").write_bytes(b"main\0binary")
    ws = Workspace(repo)
    assert ws.grep(r"def \w+\(").splitlines() == ["src/app.py:3: def main():", "src/deep/util.py:1: def helper():"]
    assert ws.grep("main").splitlines() == ["new.txt:1: untracked main", "src/app.py:3: def main():"]
    assert ws.grep("return", "src/deep") == "src/deep/util.py:2:     return 2"
    assert ws.grep("main", "debug.log") == "debug.log:1: main ignored"
    assert ws.grep("nothing here", "src") == "no matches for 'nothing here' under src"
    with pytest.raises(ToolError, match=r"invalid regular expression 'def \(': .*escape special characters"):
        ws.grep("def (")
    with pytest.raises(ToolError, match="does not exist"):
        ws.grep("x", "nope")


def test_grep_caps_matches(repo: Path):
    write(repo, {"many.txt": "hit\n" * 250})
    out = Workspace(repo).grep("hit", "many.txt").splitlines()
    assert len(out) == 201 and out[199] == "many.txt:200: hit"
    assert out[-1] == "[stopped after 200 matches; narrow the pattern or pass a path]"


@pytest.mark.slow
def test_twenty_thousand_files(tmp_path: Path):
    root = tmp_path / "big"
    for d in range(40):
        (root / f"d{d:02d}").mkdir(parents=True)
    for n in range(20_000):
        with open(root / f"d{n // 500:02d}" / f"f{n:05d}.txt", "w") as f:
            f.write(f"value {n}\n")
    write(root, {".gitignore": "*.log\n"})
    git(root, "init", "-q")
    commit_all(root)
    write(root, {"d03/late.txt": "value 1234\n", "d03/noise.log": "value 1234\n"})
    (root / "d01" / "f00600.txt").unlink()
    ws = Workspace(root)
    listing = ws.list_files().splitlines()
    assert listing[:2] == [".gitignore", "d00/f00000.txt"] and len(listing) == 1001
    assert listing[-1] == "[... 19001 more files not shown; pass a narrower pattern]"
    d01 = ws.list_files("d01/*").splitlines()
    assert len(d01) == 499 and "d01/f00600.txt" not in d01
    assert ws.list_files("*/late.txt") == "d03/late.txt"
    assert ws.grep(r"^value 1234$").splitlines() == ["d02/f01234.txt:1: value 1234", "d03/late.txt:1: value 1234"]
    assert ws.grep(r"value 600$") == "no matches for 'value 600$'"


def wait_dead(pid: int) -> None:
    """Block (bounded) until `pid` has exited; a zombie left for its new parent counts as dead."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        assert select.select([fd], [], [], 10)[0], f"process {pid} is still running"
    finally:
        os.close(fd)
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return
    assert state in ("Z", "X"), f"process {pid} is in state {state}"


def test_bash_shows_stdout_then_stderr_and_exit_code(tmp_path: Path):
    assert run_bash("echo err >&2; echo out; exit 3", tmp_path) == "out\n[stderr]\nerr\n[exit code 3]"
    assert run_bash("echo err >&2", tmp_path) == "[stderr]\nerr\n[exit code 0]"
    assert run_bash("printf out; printf err >&2", tmp_path) == "out\n[stderr]\nerr\n[exit code 0]"
    assert run_bash("pwd; cat", tmp_path) == f"{tmp_path}\n[exit code 0]"
    assert run_bash("true", tmp_path) == "[exit code 0]"
    assert run_bash("echo $X", tmp_path, env={"X": "set", "PATH": os.environ["PATH"]}) == "set\n[exit code 0]"


def test_bash_timeout_kills_the_whole_process_group(tmp_path: Path):
    out = run_bash("sleep 300 & echo $!; sleep 300", tmp_path, timeout=0.5)
    pid_line, footer = out.splitlines()
    assert footer.startswith("[timed out after 0.5 s;")
    wait_dead(int(pid_line))


def test_bash_returns_promptly_with_a_background_child_and_kills_it(tmp_path: Path):
    started = time.monotonic()
    out = run_bash("sleep 300 & echo $!; echo hi", tmp_path)
    assert time.monotonic() - started < 10
    pid_line, hi, footer = out.splitlines()
    assert (hi, footer) == ("hi", "[exit code 0]")
    wait_dead(int(pid_line))


def test_bash_caps_output_keeping_head_and_tail(tmp_path: Path):
    out = run_bash("seq 1 10000", tmp_path, max_output=100)
    head, cut, tail = out.split("\n[", 1)[0], out.split("[... ")[1].split(" characters")[0], out.split("cut ...]\n")[1]
    full = "".join(f"{n}\n" for n in range(1, 10001))
    assert head == full[:50] and int(cut) == len(full) - 100
    assert tail == full[-50:] + "[exit code 0]"


def test_bash_in_a_missing_directory_is_a_tool_error(tmp_path: Path):
    with pytest.raises(ToolError, match="could not start bash in .*missing: No such file or directory"):
        run_bash("true", tmp_path / "missing")
