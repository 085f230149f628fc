"""Crash-safe file primitives: atomic whole-file writes and fsynced JSONL appends."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

from tilth.store.redaction import redact


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write via temp file + fsync + rename, so readers see the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(redact(data))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n")


def append_line(path: Path, line: bytes) -> None:
    """Append one line and fsync; a torn last line (kill -9 mid-write) is skipped by readers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        torn = f.tell() > 0 and f.seek(-1, os.SEEK_END) >= 0 and f.read(1) != b"\n"
        f.write((b"\n" if torn else b"") + redact(line).rstrip(b"\n") + b"\n")
        f.flush()
        os.fsync(f.fileno())


def append_jsonl(path: Path, obj: Any) -> None:
    append_line(path, orjson.dumps(obj))


def read_jsonl(path: Path) -> list[Any]:
    """Every complete JSON line; an unparseable line (a torn final append) is dropped."""
    if not path.exists():
        return []
    rows = []
    for raw in path.read_bytes().splitlines():
        if not raw.strip():
            continue
        try:
            rows.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            continue
    return rows
