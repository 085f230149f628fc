"""File tools confined to one worktree: read, write, edit, list and grep.

Every path goes through `Workspace.resolve`, which follows symlinks (os.path.realpath) before
deciding, so neither `..`, an absolute path nor a symlink can reach outside the worktree or
into git's metadata.

The file set for `list_files` and `grep` comes from one `git ls-files` subprocess: tracked,
deleted and untracked-not-ignored paths in a single pass, with .gitignore at every level and
.git/info/exclude applied by git itself. On a 20k-file repository building the set takes
~50-70 ms (the git call ~35-50 ms); pygit2 (index + `repo.status()`) took ~100-120 ms for the
same set, and pygit2 calls belong in `gitops.py`. Outside a git repository: `os.walk`.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from fnmatch import fnmatchcase
from pathlib import Path

from tilth.core.errors import BadInput, ToolError
from tilth.git import worktree_git

GIT_DIR = ".git"
MAX_READ_LINES = 2000
MAX_READ_CHARS = 100_000
MAX_LINE_CHARS = 2000
MAX_FILE_BYTES = 20_000_000
MAX_LIST = 1000
MAX_MATCHES = 200
MAX_MATCH_CHARS = 300
BINARY_SNIFF = 8192
GIT_LS = ["ls-files", "-z", "-t", "--stage", "--cached", "--deleted", "--others", "--exclude-standard"]
GITLINK_MODE = "160000"


class Workspace:
    def __init__(self, root: Path, read_only: bool = False, git_dir: Path | None = None):
        """`git_dir`: the worktree's recorded git dir, which listing names instead of trusting the
        worktree's own `.git` (None for a repository of the user's own, as `tilth prep` reads)."""
        self.root = Path(os.path.realpath(root))
        self.git_dir = git_dir
        self.read_only = read_only
        self._root = str(self.root)

    def resolve(self, path: str) -> Path:
        return Path(self._check(path)[0])

    def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        real, rel = self._check(path)
        start = 1 if offset is None else offset
        if start < 1 or (limit is not None and limit < 1):
            raise ToolError(f"offset={offset}, limit={limit} is invalid; offset is a 1-based line number "
                            "(1 = first line) and limit a number of lines, both at least 1")
        lines = _lines(_read(real, rel))
        if not lines:
            return f"{rel} is empty"
        if start > len(lines):
            raise ToolError(f"offset {start} is past the end of {rel}, which has {len(lines)} lines")
        end = min(len(lines), start - 1 + min(limit or MAX_READ_LINES, MAX_READ_LINES))
        rows, size = [], 0
        for number in range(start, end + 1):
            rows.append(f"{number:>4}\t{_clip(lines[number - 1], MAX_LINE_CHARS)}")
            size += len(rows[-1]) + 1
            if size > MAX_READ_CHARS:
                break
        last = start + len(rows) - 1
        if last < len(lines):
            rows.append(f"[showing lines {start}-{last} of {len(lines)}; continue with offset={last + 1}]")
        return "\n".join(rows)

    def write_file(self, path: str, content: str) -> str:
        self._refuse_if_read_only("write_file")
        real, rel = self._check(path)
        data = content.encode("utf-8")
        _store(real, rel, data)
        return f"wrote {len(data)} bytes to {rel}"

    def edit_file(self, path: str, old: str, new: str) -> str:
        self._refuse_if_read_only("edit_file")
        real, rel = self._check(path)
        if not old:
            raise ToolError("old text is empty; give the exact text to replace, or use write_file for a whole file")
        try:
            text = _read(real, rel).decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{rel} is not valid UTF-8 text; edit_file cannot change it safely") from None
        # Overlapping occurrences count too: replacing one of them would be a guess.
        count = len(re.findall(f"(?={re.escape(old)})", text))
        if count == 0:
            raise ToolError(f"old text not found in {rel}; read the file and copy the text exactly, "
                            "including indentation and line breaks")
        if count > 1:
            raise ToolError(f"old text occurs {count} times in {rel}; include more surrounding lines "
                            "so it matches exactly once")
        _store(real, rel, text.replace(old, new, 1).encode("utf-8"))
        old_lines, new_lines = old.count("\n") + 1, new.count("\n") + 1
        return f"edited {rel}: replaced {old_lines} line(s) with {new_lines} line(s)"

    def list_files(self, pattern: str | None = None) -> str:
        files = self._files()
        if pattern:
            files = [f for f in files if _glob_match(f, pattern)]
        if not files:
            return f"no files match {pattern!r}" if pattern else "the worktree has no files"
        listing = "\n".join(files[:MAX_LIST])
        if len(files) > MAX_LIST:
            listing += f"\n[... {len(files) - MAX_LIST} more files not shown; pass a narrower pattern]"
        return listing

    def grep(self, pattern: str, path: str | None = None) -> str:
        """Python regex, line by line. A file named explicitly is searched even if git ignores it."""
        try:
            regex = re.compile(pattern)
        except re.error as e:
            raise ToolError(f"invalid regular expression {pattern!r}: {e}; "
                            "escape special characters such as ( [ . * with a backslash") from None
        safe_dirs: dict[str, bool] = {}
        found: list[str] = []
        for rel in self._files_under(path):
            data = self._searchable(rel, safe_dirs)
            for number, line in enumerate(_lines(data) if data else [], 1):
                if regex.search(line):
                    found.append(f"{rel}:{number}: {_clip(line, MAX_MATCH_CHARS)}")
                    if len(found) == MAX_MATCHES + 1:
                        found[-1] = f"[stopped after {MAX_MATCHES} matches; narrow the pattern or pass a path]"
                        return "\n".join(found)
        where = f" under {path}" if path else ""
        return "\n".join(found) if found else f"no matches for {pattern!r}{where}"

    def _check(self, path: str) -> tuple[str, str]:
        """The real path and its worktree-relative form, or ToolError if it is not allowed."""
        if "\0" in path:
            raise ToolError(f"path {path!r} contains a NUL character; use a plain relative path")
        candidate = os.path.join(self._root, path)
        real = os.path.realpath(candidate)
        if not _inside(real, self._root):
            if _inside(os.path.normpath(candidate), self._root):
                raise ToolError(f"path {path!r} leads outside the worktree through a symlink; "
                                "only files inside the worktree can be used")
            raise ToolError(f"path {path!r} is outside the worktree; use a path relative to the worktree root")
        rel = self._rel(real)
        if GIT_DIR in rel.split(os.sep):
            raise ToolError(f"path {path!r} is inside git's metadata ({GIT_DIR}); the file tools do not "
                            "read or write it")
        return real, rel

    def _rel(self, real: str) -> str:
        return os.path.relpath(real, self._root)

    def _refuse_if_read_only(self, tool: str) -> None:
        if self.read_only:
            raise ToolError(f"{tool} is not available: this workspace is read-only (review only, no changes)")

    def _files(self) -> list[str]:
        found = _git_files(self._root, self.git_dir)
        return sorted(_walk_files(self._root) if found is None else found)

    def _files_under(self, path: str | None) -> list[str]:
        if path is None:
            return self._files()
        real, rel = self._check(path)
        if os.path.isfile(real):
            return [rel]
        if not os.path.isdir(real):
            raise ToolError(f"path {path!r} does not exist; use list_files to find the right path")
        prefix = "" if rel == "." else rel + "/"
        return [f for f in self._files() if f.startswith(prefix)]

    def _searchable(self, rel: str, safe_dirs: dict[str, bool]) -> bytes | None:
        """The file's bytes if it is confined, readable, not too large and not binary."""
        full = os.path.join(self._root, rel)
        parent = os.path.dirname(full)
        if parent not in safe_dirs:  # one realpath per directory keeps 20k files fast
            safe_dirs[parent] = self._allowed(os.path.realpath(parent))
        if not safe_dirs[parent] or (os.path.islink(full) and not self._allowed(os.path.realpath(full))):
            return None
        try:
            return _read(full, rel)
        except ToolError:
            return None

    def _allowed(self, real: str) -> bool:
        return _inside(real, self._root) and GIT_DIR not in self._rel(real).split(os.sep)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _read(real: str, rel: str) -> bytes:
    try:
        # O_NONBLOCK: a FIFO in place of a tracked file must not hang the call.
        with open(os.open(real, os.O_RDONLY | os.O_NONBLOCK), "rb", buffering=0) as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(f"{rel} is not a regular file; the file tools read regular files only")
            if info.st_size > MAX_FILE_BYTES:
                raise ToolError(f"{rel} is larger than {MAX_FILE_BYTES} bytes; use grep to find the part you need")
            data = f.read()
    except IsADirectoryError:
        raise ToolError(f"{rel} is a directory; use list_files to see the files in it") from None
    except FileNotFoundError:
        raise ToolError(f"file {rel!r} does not exist; use list_files to find the right path") from None
    except OSError as e:
        raise ToolError(f"could not read {rel}: {e.strerror}") from None
    if b"\0" in data[:BINARY_SNIFF]:
        raise ToolError(f"{rel} is a binary file; the file tools show text only")
    return data


def _lines(data: bytes) -> list[str]:
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _clip(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[:limit] + f" [... {len(line) - limit} characters cut]"


def _store(real: str, rel: str, data: bytes) -> None:
    try:
        os.makedirs(os.path.dirname(real), exist_ok=True)
        # O_NOFOLLOW: a symlink swapped in after the check cannot redirect the write.
        fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
        with open(fd, "wb") as f:
            f.write(data)
    except OSError as e:
        raise ToolError(f"could not write {rel}: {e.strerror}") from None


def _glob_match(rel: str, pattern: str) -> bool:
    pattern = pattern.removeprefix("./")
    # fnmatch's * already crosses "/", so "*.py" matches at any depth; "**/" may also match no directory.
    if fnmatchcase(rel, pattern) or fnmatchcase(rel, pattern.replace("**/", "")):
        return True
    return "/" not in pattern and fnmatchcase(posixpath.basename(rel), pattern)


def _git_files(root: str, git_dir: Path | None) -> list[str] | None:
    """Present files git would show (tracked + untracked-not-ignored), or None outside a repo."""
    try:
        proc = worktree_git.run(git_dir, Path(root), *GIT_LS, text=False, locale="C")
    except BadInput:
        return None
    if proc.returncode != 0:
        if b"not a git repository" in proc.stderr:
            return None
        raise ToolError(f"could not list files with git: {proc.stderr.decode(errors='replace').strip()}")
    present: set[str] = set()
    deleted: set[str] = set()
    for entry in os.fsdecode(proc.stdout).split("\0"):
        if entry.startswith("? "):
            present.add(entry[2:])
        elif entry and not entry[2:].startswith(GITLINK_MODE):  # skip submodules
            (deleted if entry[0] == "R" else present).add(entry.partition("\t")[2])
    # A trailing "/" is an untracked nested repository; its files are not ours to list.
    return [p for p in present - deleted if not p.endswith("/")]


def _walk_files(root: str) -> list[str]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != GIT_DIR]
        rel_dir = Path(dirpath).relative_to(root)
        files += [(rel_dir / name).as_posix() for name in filenames if name != GIT_DIR]
    return files
