"""Signed sessions (`[dispatch] secret_file`): an HMAC-SHA256 over each job's arguments and over each
snapshot of a session's files (with its branch tip), made by whoever holds the team's secret (the
submitting machine, the worker that runs the session) and checked by every worker before it uses
either. Without a secret nothing is signed and nothing is checked."""

from __future__ import annotations

import hashlib
import hmac
import stat

import orjson

from tilth.core.dispatching import Dispatch
from tilth.core.errors import BadInput

TRAILER = "Tilth-Signature"
MIN_SECRET = 32


def load_secret(dispatch: Dispatch) -> bytes | None:
    if dispatch.secret_file is None:
        return None
    path = dispatch.secret_file.expanduser()
    try:
        mode = path.stat().st_mode
        secret = path.read_bytes().strip()
    except OSError as exc:
        raise BadInput(f"[dispatch] secret_file {path} cannot be read ({exc.strerror}); create it with "
                       f"`openssl rand -hex 32 > {path}; chmod 600 {path}`") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise BadInput(f"[dispatch] secret_file {path} is readable by others; `chmod 600 {path}`")
    if len(secret) < MIN_SECRET:
        raise BadInput(f"[dispatch] secret_file {path} holds fewer than {MIN_SECRET} characters; "
                       f"`openssl rand -hex 32 > {path}` makes one")
    return secret


def _mac(secret: bytes, *parts: object) -> str:
    return hmac.new(secret, orjson.dumps(parts), hashlib.sha256).hexdigest()


def job_signature(secret: bytes, session_id: str, remote: str, resume: bool) -> str:
    return _mac(secret, "job", session_id, remote, resume)


def snapshot_signature(secret: bytes, session_id: str, branch_tip: str, files: dict[str, bytes]) -> str:
    digest = [(name, hashlib.sha256(data).hexdigest()) for name, data in sorted(files.items())]
    return _mac(secret, "snapshot", session_id, branch_tip, digest)


def matches(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


def signed_message(message: str, signature: str | None) -> str:
    return message if signature is None else f"{message}\n\n{TRAILER}: {signature}\n"


def signature_in(message: str) -> str | None:
    for line in reversed(message.splitlines()):
        if line.startswith(f"{TRAILER}: "):
            return line.split(": ", 1)[1].strip()
    return None
