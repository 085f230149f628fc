"""Secrets never reach disk: every write through jsonio passes through `redact`.

Keys are registered once per process (from the resolved settings), and so are the
configured patterns; both are replaced wherever they appear in a state file, a journal line
or a progress line, and in every line tilth prints (`redact_text`), since a supervised
session's output is itself a file (`run.log`).
"""

from __future__ import annotations

import re

MARK = b"[redacted]"
_secrets: set[bytes] = set()
_patterns: list[re.Pattern[bytes]] = []


def register_secret(value: str | None) -> None:
    if value and len(value) >= 6 and value != "not-needed":
        _secrets.add(value.encode())


def register_patterns(patterns: list[str]) -> None:
    for pattern in patterns:
        compiled = re.compile(pattern.encode())
        if compiled not in _patterns:
            _patterns.append(compiled)


def redact(data: bytes) -> bytes:
    for secret in _secrets:
        if secret in data:
            data = data.replace(secret, MARK)
    for pattern in _patterns:
        data = pattern.sub(MARK, data)
    return data


def redact_text(text: str) -> str:
    return redact(text.encode("utf-8", errors="surrogateescape")).decode("utf-8", errors="surrogateescape")
