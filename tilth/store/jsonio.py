"""Crash-safe file primitives: atomic whole-file writes and fsynced JSONL appends, and their readers."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import orjson

from tilth.core.errors import BadInput
from tilth.store.redaction import redact


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """A failed write names the file it was for (a failed write() or fsync() names none),
    so a full disk is reported with the path and its filesystem."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write via temp file + fsync + rename, so readers see the old or the new file, never half."""
    with naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(redact(data, rewritten=str(path)))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        fsync_dir(path.parent)


def sweep_temps(path: Path) -> list[str]:
    """Remove the temp files a killed `write_atomic` of `path` left beside it. Only for a file
    whose one writer is the caller (no live write of it can be in flight)."""
    removed = []
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        stale.unlink(missing_ok=True)
        removed.append(stale.name)
    return removed


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n")


def append_line(path: Path, line: bytes, sync: bool = True) -> None:
    """Append one line, flushed to the kernel in one write (a kill -9 of this process loses
    nothing), and with `sync` fsynced. An unsynced line reaches the disk with the next synced
    append to the file, so only a power loss can take it, and then only lines after the last
    synced one. A torn line (a full disk mid-write) is ended with a newline by the next
    append, so it stays a line of its own that readers skip."""
    with naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+b") as f:
            torn = f.tell() > 0 and f.seek(-1, os.SEEK_END) >= 0 and f.read(1) != b"\n"
            f.write((b"\n" if torn else b"") + redact(line).rstrip(b"\n") + b"\n")
            f.flush()
            if sync:
                os.fsync(f.fileno())


def append_jsonl(path: Path, obj: Any, sync: bool = True) -> None:
    append_line(path, orjson.dumps(obj), sync)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line that is a JSON object. Anything else (a torn append, wherever it sits; a
    garbage line) is skipped, and the lines after it are still read."""
    if not path.exists():
        return []
    rows = []
    for raw in path.read_bytes().splitlines():
        row = parse_object(raw)
        if row is not None:
            rows.append(row)
    return rows


def load_json(data: bytes, source: str, kind: type, shape: str, fix: str) -> Any:
    """A whole JSON file that must be one `kind` (list, dict): BadInput naming `source` otherwise,
    `fix` saying what to do about invalid JSON, `shape` what it must be."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{source}: not valid JSON ({exc}); {fix}") from None
    if not isinstance(raw, kind):
        raise BadInput(f"{source}: must be {shape}, got {type(raw).__name__}")
    return raw


def parse_object(raw: bytes) -> dict[str, Any] | None:
    if not raw.strip():
        return None
    try:
        row = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return row if isinstance(row, dict) else None
