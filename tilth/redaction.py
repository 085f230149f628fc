"""Secrets never reach disk: every write through jsonio passes through `redact`.

Keys are registered once per process (from the resolved settings) and replaced wherever
they appear in a state file, a journal line or a progress line.
"""

from __future__ import annotations

MARK = b"[redacted]"
_secrets: set[bytes] = set()


def register_secret(value: str | None) -> None:
    if value and len(value) >= 6 and value != "not-needed":
        _secrets.add(value.encode())


def redact(data: bytes) -> bytes:
    for secret in _secrets:
        if secret in data:
            data = data.replace(secret, MARK)
    return data
