"""Secrets hidden in base64 or hex: the plausible blobs of a text decoded, and the secrets a scanner
finds in what they decode to, placed back on the blob (the commit gate's `redaction.secrets_in(...,
encoded=True)`).

Bounded so it stays cheap on ordinary code: a blob is one unbroken run of its alphabet, at least
`MIN_BYTES` decoded and at most `MAX_CHARS` long (a longer run is taken in pieces of that size),
and only what decodes to mostly printable text (`PRINTABLE`) is scanned, every blob of a text in one
scan. One level only: base64 of base64, gzip, encryption, a blob split across lines or quotes, and
other encodings (`\\x67`, `%67`, rot13) are not decoded (docs/security.md says so).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Callable

MIN_BYTES = 16
"""Shorter blobs cannot hold a key worth finding (an AWS key id is 20 bytes, a GitHub token 40)."""
MAX_CHARS = 4096
PRINTABLE = 0.9
"""The share of decoded bytes that must be printable ASCII (or tab, newline): a hash, an image or
an identifier decodes to bytes that are not."""
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{%d,%d}={0,2}" % (MIN_BYTES * 4 // 3, MAX_CHARS))
_HEX = re.compile(r"[0-9A-Fa-f]{%d,%d}" % (MIN_BYTES * 2, MAX_CHARS))
_TEXT = bytes(range(0x20, 0x7F)) + b"\t\n\r"


@dataclass(frozen=True)
class Blob:
    start: int
    end: int
    encoding: str
    """`base64` or `hex`."""
    decoded: str


def blobs(text: str) -> list[Blob]:
    """The base64 and hex runs of `text` that decode to mostly printable text."""
    found: list[Blob] = []
    for match in _BASE64.finditer(text):  # every hex run lies in one of these: one pass over the text
        run, hexed = match.group(), False
        for part in _HEX.finditer(run):
            hexed = hexed or part.span() == (0, len(run))  # all hex: never read as base64 too
            if (decoded := _from_hex(part.group())) is not None:
                found.append(Blob(match.start() + part.start(), match.start() + part.end(), "hex", decoded))
        if not hexed and (decoded := _from_base64(run)) is not None:
            found.append(Blob(match.start(), match.end(), "base64", decoded))
    return found


def encoded_findings(text: str, scan: Callable[[str], list[tuple[int, int, str]]]) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each blob of `text` whose decoded text `scan` finds a secret in: the
    whole blob, its kind `<what scan said>, <encoding>-encoded`."""
    found = blobs(text)
    if not found:
        return []
    joined, starts, at = [], [], 0
    for blob in found:
        starts.append(at)
        joined.append(blob.decoded)
        at += len(blob.decoded) + 1
    spans: dict[int, str] = {}
    for start, _end, kind in scan("\n".join(joined)):
        index = max(i for i, s in enumerate(starts) if s <= start)
        spans.setdefault(index, f"{kind}, {found[index].encoding}-encoded")
    return [(found[i].start, found[i].end, kind) for i, kind in sorted(spans.items())]


def _printable(data: bytes) -> str | None:
    if len(data) < MIN_BYTES or len(data.translate(None, _TEXT)) > (1 - PRINTABLE) * len(data):
        return None
    return data.decode("latin-1")


def _from_hex(run: str) -> str | None:
    for shift in (0, 1):  # a run glued to a hex-looking prefix or suffix
        part = run[shift:]
        part = part[:len(part) // 2 * 2]
        try:
            decoded = _printable(bytes.fromhex(part))
        except ValueError:
            continue
        if decoded is not None:
            return decoded
    return None


def _from_base64(run: str) -> str | None:
    body = run.rstrip("=")
    if ("-" in body or "_" in body) and ("+" in body or "/" in body):
        return None  # neither alphabet
    alphabet = b"-_" if "-" in body or "_" in body else None
    for shift in range(4):  # a run glued to an identifier before it (`KEY_<blob>`)
        part = body[shift:]
        part = part[:len(part) - len(part) % 4 if len(part) % 4 == 1 else len(part)]
        try:
            data = base64.b64decode(part + "=" * (-len(part) % 4), altchars=alphabet, validate=True)
        except (binascii.Error, ValueError):
            continue
        if (decoded := _printable(data)) is not None:
            return decoded
    return None
